"""Executors rank all 5 actions: shortest path, the RL policy, and its fallback orders."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.dispatch.executors import (
    RLExecutor,
    ShortestPathExecutor,
    ShortestPathRandomExecutor,
)
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
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
        assert int(oracle.to(tuple(goal[i]))[best]) < int(oracle.to(tuple(goal[i]))[tuple(pos[i])])


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


# ---------------------------------------------------------------- shortest path, random ties


def _diagonal_scene(grid, n=40, seed=1):
    """Robots whose target is off both axes, so two moves get closer and tie."""
    pos, goal, active = _scene(grid, n=n, seed=seed)
    oracle = DistanceOracle(grid)
    dist = ShortestPathExecutor(grid, oracle).distances(pos, goal)
    here = np.array([int(oracle.to(tuple(g))[tuple(p)]) for p, g in zip(pos, goal, strict=True)])
    ties = active & ((dist[:, 1:] == (here - 1)[:, None]).sum(axis=1) >= 2)
    assert ties.sum() >= 5, "too few tied robots for the checks below"
    return pos, goal, active, ties


def test_random_ties_rank_by_true_distance_and_idle_robots_wait(grid) -> None:
    pos, goal, active = _scene(grid)
    ex = ShortestPathRandomExecutor(grid, seed=0)
    ranking = ex.rank(pos, goal, active)
    assert ex.name == "shortest-path-random"
    assert (np.sort(ranking, axis=1) == np.arange(5)).all()
    assert ranking[0, 0] == WAIT  # idle robot
    dist = ex.distances(pos, goal)
    ranked = np.take_along_axis(dist, ranking, axis=1)
    # Same order of distances as the fixed-order baseline: only ties may be permuted.
    fixed = np.take_along_axis(dist, ShortestPathExecutor(grid).rank(pos, goal, active), axis=1)
    assert (ranked[active] == fixed[active]).all()
    assert (np.diff(ranked[active], axis=1) >= 0).all()


def test_random_ties_go_both_ways_where_the_fixed_order_never_does(grid) -> None:
    pos, goal, active, ties = _diagonal_scene(grid)
    fixed = ShortestPathExecutor(grid).rank(pos, goal, active)
    ex = ShortestPathRandomExecutor(grid, seed=0)
    firsts = np.stack([ex.rank(pos, goal, active)[:, 0] for _ in range(20)])  # (20, N)
    # Fixed order: one first move per robot, always. Random ties: both closer moves lead.
    assert (firsts[:, ties] != fixed[ties, 0]).any(axis=0).all()
    assert (firsts[:, ~ties & active] == fixed[~ties & active, 0]).all()


def test_random_ties_same_seed_same_rankings(grid) -> None:
    pos, goal, active, _ = _diagonal_scene(grid)

    def run(seed):
        ex = ShortestPathRandomExecutor(grid, seed=seed)
        return np.stack([ex.rank(pos, goal, active) for _ in range(10)])

    assert (run(7) == run(7)).all()
    assert (run(7) != run(8)).any()
    gen = ShortestPathRandomExecutor(grid, seed=np.random.default_rng(7))
    assert (np.stack([gen.rank(pos, goal, active) for _ in range(10)]) == run(7)).all()


def test_random_ties_registered_and_a_seeded_run_replays(grid) -> None:
    from fleetmind.dispatch.control import ControlLoop, LoopConfig
    from fleetmind.dispatch.planners import AssignmentPlanner
    from fleetmind.eval.runner import RunConfig, make_executor

    from .conftest import make_world

    assert isinstance(
        make_executor(RunConfig(executor="shortest-path-random"), grid, None),
        ShortestPathRandomExecutor,
    )
    results = []
    for _ in range(2):
        loop = ControlLoop(
            make_world(grid, n=16, steps=150, rate=0.5, seed=2),
            AssignmentPlanner(grid),
            ShortestPathRandomExecutor(grid, seed=2),
            config=LoopConfig(planner_mode="sync", snapshot_text=False),
        )
        m = loop.run(150)
        results.append((m["tasks_completed"], m["shield_interventions"], m["collisions"]))
    assert results[0] == results[1]
    assert results[0][0] > 0
    assert results[0][2] == 0


ROOM = "\n".join(["x....", ".....", ".....", ".....", "....S"])


@pytest.mark.parametrize("name", ["rl", "rl-guided", "shortest-path"])
def test_a_closed_cell_is_a_wall_to_the_policy_and_its_distances(name) -> None:
    # (2, 2) to (0, 2): the straight way up column 2 is closed at (1, 2).
    from fleetmind.dispatch.executors import GuidedRLExecutor
    from fleetmind.sim.grid import UP
    from fleetmind.sim.maps import parse_text_map

    room = parse_text_map(ROOM, source="room")
    make = {"rl": RLExecutor, "rl-guided": GuidedRLExecutor, "shortest-path": ShortestPathExecutor}
    ex = make[name](room)
    pos, goal, active = np.array([[2, 2]], np.int32), np.array([[0, 2]], np.int32), np.ones(1, bool)
    assert ex.oracle.lookup([2], [12])[0] == 2  # two moves before the cell closes
    ex.reroute([(1, 2)])
    # The distances the executor (and the loop, which shares them) reads go round the cell.
    assert ex.oracle.lookup([2], [12])[0] == 4
    assert ex.oracle.lookup([2], [7])[0] >= UNREACHABLE
    observer = getattr(ex, "observer", None)
    if observer is not None:
        assert observer.oracle is ex.oracle
        obs = observer(pos[None], goal[None], np.zeros((1, 1), bool), active[None])[0, 0]
        k = 2 * observer.radius + 1
        walls = obs[: k * k].reshape(k, k)
        assert walls[observer.radius - 1, observer.radius] == 1.0  # the closed cell above
    # Moving into the closed cell is the last resort of the fallback order.
    ranking = ex.rank(pos, goal, active)[0]
    assert ranking[0] != UP
    assert ranking[-1] == UP
    # Reopened: the straight way is back.
    ex.reroute([])
    assert ex.oracle.lookup([2], [12])[0] == 2


@pytest.mark.parametrize("executor", ["shortest-path", "learned-guidance", "rl"])
def test_a_run_with_repaired_maps_is_the_run_with_maps_searched_again(
    monkeypatch, executor
) -> None:
    # Breakdowns and a closed aisle reroute the fleet several times; repairing the held maps
    # in place must give the very run that searching every map again gives.
    from fleetmind.eval.runner import RunConfig, execute

    cfg = RunConfig(
        map="warehouse-small",
        robots=20,
        steps=250,
        seed=3,
        executor=executor,
        planner="assignment",
        faults=["breakdown:busy@40+60", "breakdown:busy@70+30", "block:busy@90+80"],
    )
    repaired = execute(cfg, None)
    kept = DistanceOracle.rerouted
    calls = []

    def searched_again(self, grid, *, weights=None):
        calls.append(self.kept)
        return DistanceOracle(grid, max_cached=self.max_cached, weights=weights)

    monkeypatch.setattr(DistanceOracle, "rerouted", searched_again)
    again = execute(cfg, None)
    monkeypatch.setattr(DistanceOracle, "rerouted", kept)
    assert calls  # the run did reroute
    for key in ("tasks_completed", "collisions", "shield_interventions", "conflicts_commanded"):
        assert repaired[key] == again[key], key
