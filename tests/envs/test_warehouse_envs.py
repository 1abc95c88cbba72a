"""The standard env faces of the warehouse, the determinism checker, and the real LoRR maps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import parallel_api_test

from fleetmind.envs import make_parallel, make_vector
from fleetmind.sim import observe
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import DELTAS
from fleetmind.testing import NondeterminismError, check_determinism

LORR = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lorr" / "maps"


@pytest.mark.parametrize("obs", ["local", "tabular"])
def test_parallel_env_passes_pettingzoo_api_test(obs: str) -> None:
    parallel_api_test(
        make_parallel("warehouse-tiny", 3, seed=0, max_steps=40, obs=obs), num_cycles=50
    )


def test_time_limit_is_truncation_not_termination() -> None:
    env = make_parallel("warehouse-tiny", 2, max_steps=5)
    env.reset(seed=0)
    for _ in range(5):
        _, _, term, trunc, _ = env.step(dict.fromkeys(env.agents, 0))
    assert not any(term.values())
    assert all(trunc.values())
    assert env.agents == []


def test_state_space_matches_state() -> None:
    env = make_parallel("warehouse-small", 4, seed=1)
    env.reset()
    assert env.state().shape == env.state_space.shape


@pytest.mark.parametrize(
    "factory",
    [
        lambda: make_parallel("warehouse-tiny", 4, max_steps=120, order_rate=0.3),
        lambda: make_parallel("warehouse-tiny", 3, max_steps=60, reward_mode="difference"),
        lambda: make_vector("warehouse-small", 6, 4, max_steps=30),
    ],
)
def test_whole_episodes_are_deterministic(factory) -> None:
    assert check_determinism(factory, steps=150) > 25


class _LeakyEnv:
    """A ParallelEnv-shaped env that draws from an unseeded generator mid-episode."""

    def __init__(self) -> None:
        self.possible_agents = ["robot_0"]
        self.agents = list(self.possible_agents)
        self.t = 0
        self._noise = np.random.default_rng()  # deliberately unseeded

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(5)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {"robot_0": 0}, {"robot_0": {}}

    def step(self, actions):
        self.t += 1
        # Identical for the first 10 steps, then random: a one-step seed test would miss it.
        obs = 0 if self.t < 10 else int(self._noise.integers(1 << 30))
        return (
            {"robot_0": obs},
            {"robot_0": 0.0},
            {"robot_0": False},
            {"robot_0": False},
            {"robot_0": {}},
        )


def test_checker_catches_a_nondeterministic_env() -> None:
    with pytest.raises(NondeterminismError, match="step 9: observation"):
        check_determinism(_LeakyEnv, steps=50)


def test_vector_env_shapes_and_autoreset() -> None:
    env = make_vector("warehouse-small", 5, 3, max_steps=4, seed=2)
    obs, _ = env.reset()
    assert obs.shape == (3, 5, observe.local_size(2, heuristic=True))
    for _ in range(4):
        obs, rew, term, trunc, info = env.step(np.zeros((3, 5), dtype=int))
    assert rew.shape == (3, 5)
    assert trunc.all()
    assert not term.any()
    assert (env.sim.tick == 0).all()
    assert env.global_state().shape[0] == 3
    # The last observation before the reset comes back for bootstrapping truncated episodes.
    assert info["final_obs"].shape == obs.shape
    assert not np.array_equal(info["final_obs"], obs)
    assert info["final_state"].shape[0] == 3


def test_vector_and_single_env_share_dynamics() -> None:
    # One world of the vector env and the single env follow the same rules: robots conserved
    # and deliveries happen under a shortest-path-ish greedy policy.
    env = make_vector("warehouse-tiny", 2, 2, seed=0, max_steps=400)
    env.reset()
    grid = env.grid
    oracle = DistanceOracle(grid)
    delivered = 0
    for _ in range(300):
        s = env.sim
        acts = np.zeros((2, 2), dtype=int)
        for b in range(2):
            for i in range(2):
                dmap = oracle.to(tuple(s.goal[b, i]))
                cand = [
                    (
                        dmap[tuple(s.pos[b, i] + DELTAS[a])]
                        if grid.is_free(tuple(s.pos[b, i] + DELTAS[a]))
                        else 1 << 30,
                        a,
                    )
                    for a in range(5)
                ]
                acts[b, i] = min(cand)[1]
        _, _, _, _, info = env.step(acts)
        delivered += int(info["delivered"].sum())
        for b in range(2):
            assert len({tuple(p) for p in s.pos[b].tolist()}) == 2
    assert delivered > 0


@pytest.mark.parametrize(
    "name", ["warehouse_small.map", "warehouse_large.map", "sortation_large.map"]
)
def test_real_lorr_maps_load_and_run(name: str) -> None:
    path = LORR / name
    if not path.exists():
        pytest.skip(f"League of Robot Runners maps not found at {LORR} (shared/ folder absent)")
    env = make_parallel(str(path), 50, seed=0, max_steps=20)
    env.reset()
    for _ in range(20):
        env.step(dict.fromkeys(env.agents, 2))
    assert len({tuple(p) for p in env.world.pos.tolist()}) == 50


def test_heuristic_values_point_along_shortest_paths() -> None:
    env = make_vector("warehouse-small", 6, 2, seed=4)
    obs, _ = env.reset()
    heur = obs[..., -5:]
    oracle = DistanceOracle(env.grid)
    s = env.sim
    for b in range(2):
        for i in range(6):
            here = int(oracle.to(tuple(s.goal[b, i]))[tuple(s.pos[b, i])])
            for a in range(1, 5):
                nxt = tuple(s.pos[b, i] + DELTAS[a])
                if not env.grid.is_free(nxt):
                    assert heur[b, i, a] == 2.0
                else:
                    assert heur[b, i, a] == np.sign(int(oracle.to(tuple(s.goal[b, i]))[nxt]) - here)
            assert heur[b, i, 0] == 0.0


def _bfs(blocked: np.ndarray, target: tuple[int, int]) -> np.ndarray:
    """Moves from every cell to ``target`` by breadth-first search (-1: no path)."""
    h, w = blocked.shape
    dist = np.full((h, w), -1)
    dist[target] = 0
    frontier = [target]
    while frontier:
        nxt = []
        for r, c in frontier:
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                rr, cc = r + dr, c + dc
                if 0 <= rr < h and 0 <= cc < w and not blocked[rr, cc] and dist[rr, cc] < 0:
                    dist[rr, cc] = dist[r, c] + 1
                    nxt.append((rr, cc))
        frontier = nxt
    return dist


def test_tabular_code_is_distance_closer_moves_neighbours_and_load() -> None:
    """Each robot's code, rebuilt by hand from a breadth-first search over the map."""
    env = make_parallel("warehouse-small", 6, seed=4, obs="tabular", max_steps=200)
    obs, _ = env.reset(seed=4)
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(60):
        w = env.world
        blocked = env.grid.blocked
        h, wd = blocked.shape
        cells = {tuple(p) for p in w.pos.tolist()}
        for i, agent in enumerate(env.agents):
            r, c = (int(x) for x in w.pos[i])
            if w.has_task[i]:
                dist = _bfs(blocked, (int(w.goal[i][0]), int(w.goal[i][1])))
                here = dist[r, c]
                closer = 0
                for bit, (dr, dc) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
                    rr, cc = r + dr, c + dc
                    inside = 0 <= rr < h and 0 <= cc < wd and not blocked[rr, cc]
                    if inside and 0 <= dist[rr, cc] < here:
                        closer |= 1 << bit
                distance = min(int(here), 15)
            else:
                closer = distance = 0
            robots = 0
            for bit, (dr, dc) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
                robots |= int((r + dr, c + dc) in cells) << bit
            expected = ((distance * 16 + closer) * 16 + robots) * 2 + int(w.carrying[i])
            assert int(obs[agent]) == expected, (agent, r, c)
            assert 0 <= expected < observe.N_TABULAR_STATES
            checked += 1
        obs, *_ = env.step({a: int(rng.integers(5)) for a in env.agents})
    assert checked == 360


def test_tabular_obs_needs_the_heuristic() -> None:
    from fleetmind.errors import ConfigError

    with pytest.raises(ConfigError, match="heuristic"):
        make_parallel("warehouse-tiny", 2, obs="tabular", heuristic=False)
