"""Executors rank all 5 actions: shortest path, the RL policy, and its fallback orders."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.dispatch.executors import RLExecutor, ShortestPathExecutor
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import DELTAS, WAIT
from fleetmind.sim.maps import load_map
from fleetmind.sim.observe import N_HEURISTIC


@pytest.fixture(scope="module")
def grid():
    return load_map("warehouse-small")


def _scene(grid, n=12, seed=0):
    rng = np.random.default_rng(seed)
    free = np.argwhere(~grid.blocked)
    pos = free[rng.choice(len(free), n, replace=False)].astype(np.int32)
    goal = np.array(grid.pickup_cells(), dtype=np.int32)[rng.integers(0, 100, n)]
    active = np.ones(n, dtype=bool)
    active[0] = False
    return pos, goal, active


def test_shortest_path_ranks_by_true_distance(grid) -> None:
    pos, goal, active = _scene(grid)
    ranking = ShortestPathExecutor(grid).rank(pos, goal, active)
    oracle = DistanceOracle(grid)
    assert ranking[0, 0] == WAIT  # idle robot
    for i in np.flatnonzero(active):
        best = tuple(pos[i] + DELTAS[ranking[i, 0]])
        assert oracle.between(best, tuple(goal[i])) < oracle.between(tuple(pos[i]), tuple(goal[i]))


@pytest.mark.parametrize("fallback", ["heuristic", "policy"])
def test_rl_ranks_are_permutations_led_by_the_policy(grid, fallback) -> None:
    pos, goal, active = _scene(grid)
    ex = RLExecutor(grid, fallback=fallback)
    ranking = ex.rank(pos, goal, active, np.zeros(len(pos), dtype=bool))
    assert (np.sort(ranking, axis=1) == np.arange(5)).all()
    obs = ex.observer(pos[None], goal[None], np.zeros((1, len(pos)), bool), active[None])[0]
    logits = ex.logits(obs[active])
    assert (ranking[active, 0] == np.argmax(logits, axis=1)).all()
    if fallback == "heuristic":
        heur = obs[active][:, -N_HEURISTIC:]
        rest = np.take_along_axis(heur, ranking[active, 1:], axis=1)
        assert (np.diff(rest, axis=1) >= 0).all()  # closer moves before farther, walls last
