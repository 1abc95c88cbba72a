"""Conformance with the peers' own suites, on every env face and several maps.

PettingZoo: ``api_test`` on the AEC conversion, ``parallel_api_test``, ``parallel_seed_test``.
Gymnasium: ``check_env`` (multi-robot faces through a joint view, below), warnings as failures.
And a direct check that every observation of a seeded random rollout lies in its declared space:
``parallel_api_test`` never looks at bounds, which is how ``Box(-1, 1)`` with heuristic values
of 2 once passed it.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from pettingzoo import ParallelEnv
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test
from pettingzoo.utils.conversions import parallel_to_aec

from fleetmind.envs import make_gridworld, make_parallel, make_race, make_vector
from fleetmind.sim import observe

LORR_SMALL = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lorr" / "maps"
LORR_SMALL = LORR_SMALL / "warehouse_small.map"
requires_lorr = pytest.mark.skipif(not LORR_SMALL.exists(), reason="needs the shared LoRR maps")
requires_rware = pytest.mark.skipif(
    importlib.util.find_spec("rware") is None, reason="needs the rware extra"
)

# (map, robots): three presets and a real LoRR map (every target far from the border walls).
MAPS = [
    pytest.param("warehouse-tiny", 4, id="tiny"),
    pytest.param("warehouse-small", 8, id="small"),
    pytest.param("warehouse-medium", 12, id="medium"),
    pytest.param(str(LORR_SMALL), 16, id="lorr-small", marks=requires_lorr),
]
OBS_KINDS = [
    pytest.param({"obs": "local"}, id="local"),
    pytest.param({"obs": "local", "heuristic": False}, id="local-noheur"),
    pytest.param({"obs": "tabular"}, id="tabular"),
]
ROLLOUT_STEPS = 300


class JointGym(gym.Env[dict[str, Any], dict[str, Any]]):
    """A ParallelEnv seen as one Gymnasium env, so that ``check_env`` can inspect it.

    Observation and action spaces are ``Dict`` over the agents; the reward is the team sum; the
    episode ends when every agent is terminated (or truncated). Nothing else is added, so what
    ``check_env`` finds wrong is the wrapped env's.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, env: ParallelEnv[str, Any, Any]) -> None:
        self.env = env
        agents = list(env.possible_agents)
        self.observation_space = spaces.Dict({a: env.observation_space(a) for a in agents})
        self.action_space = spaces.Dict({a: env.action_space(a) for a in agents})

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, {"agents": infos}

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(action)
        return (
            obs,
            float(sum(rewards.values())),
            all(terms.values()),
            all(truncs.values()) and not all(terms.values()),
            {"agents": infos},
        )


# Warnings of the peers' suites that say nothing wrong about our envs, each for a reason:
# Discrete observations are numpy int64 scalars, as Gymnasium's Discrete.sample() returns them;
# PettingZoo's api_test wants ndarrays there (it checks Discrete faces fully otherwise).
NOT_AN_ARRAY = "Observation is not a NumPy array"
# rware declares its observations Box(-inf, inf); that is rware's space, which the adapter keeps.
INFINITE = ".*observation space (minimum|maximum) value is -?infinity|Agent's (minimum|maximum) obs"


@contextmanager
def strictly(*allow: str) -> Iterator[None]:
    """Every warning inside is a failure, but those matching an ``allow`` regex."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for message in allow:
            warnings.filterwarnings("ignore", message=message)
        yield


def strict_check_env(env: gym.Env[Any, Any], *allow: str) -> None:
    """Gymnasium's ``check_env`` with every warning a failure (but ``allow``)."""
    with strictly(*allow):
        check_env(env, skip_render_check=True)


def assert_in_space(space: spaces.Space[Any], obs: Any, where: str) -> None:
    """``obs in space``, and on failure say which features leave a Box and by how much."""
    if obs in space:
        return
    if isinstance(space, spaces.Box):
        x = np.asarray(obs)
        bad = np.flatnonzero((x < space.low) | (x > space.high))
        detail = {int(i): float(x.flat[i]) for i in bad[:10]}
        pytest.fail(f"{where}: observation outside {space}; features {detail}")
    pytest.fail(f"{where}: observation {obs!r} outside {space}")


# ---------------------------------------------------------------- declared bounds


@pytest.mark.parametrize("radius", [1, 2, 3])
@pytest.mark.parametrize("heuristic", [False, True])
def test_local_bounds_cover_every_feature_and_keep_the_trained_layout(
    radius: int, heuristic: bool
) -> None:
    low, high = observe.local_bounds(radius, heuristic=heuristic)
    assert low.shape == high.shape == (observe.local_size(radius, heuristic=heuristic),)
    assert low.dtype == high.dtype == np.float32
    window = observe.N_LOCAL_CHANNELS * (2 * radius + 1) ** 2
    assert (low[:window] == 0).all()
    assert (high[:window] == 1).all()
    assert low[window : window + 6].tolist() == [0, 0, -1, -1, -1, -1]
    if heuristic:
        # The blocked value 2 is what the shipped nav policy was trained on: bounds, not features.
        assert low[-5:].tolist() == [-1] * 5
        assert high[-5:].tolist() == [2] * 5


def test_blocked_heuristic_value_is_two_and_inside_the_space() -> None:
    env = make_parallel("warehouse-tiny", 4, seed=0)
    obs, _ = env.reset()
    heur = np.stack([o[-observe.N_HEURISTIC :] for o in obs.values()])
    assert (heur == 2.0).any(), "no robot starts next to a wall: the check below proves nothing"
    for agent, o in obs.items():
        assert_in_space(env.observation_space(agent), o, agent)


# ---------------------------------------------------------------- PettingZoo suites


@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize(("map_spec", "robots"), MAPS)
def test_warehouse_aec_conversion_passes_api_test(
    map_spec: str, robots: int, kind: dict[str, Any]
) -> None:
    env = make_parallel(map_spec, robots, seed=0, max_steps=60, **kind)
    with strictly(NOT_AN_ARRAY):
        api_test(parallel_to_aec(env), num_cycles=60)


@pytest.mark.parametrize(("map_spec", "robots"), MAPS)
def test_warehouse_passes_parallel_api_test(map_spec: str, robots: int) -> None:
    with strictly():
        parallel_api_test(make_parallel(map_spec, robots, seed=0, max_steps=60), num_cycles=60)


@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize(("map_spec", "robots"), MAPS)
def test_warehouse_passes_parallel_seed_test(
    map_spec: str, robots: int, kind: dict[str, Any]
) -> None:
    with strictly():
        parallel_seed_test(lambda: make_parallel(map_spec, robots, max_steps=60, **kind), 60)


@pytest.mark.parametrize("mode", ["shared", "individual"])
def test_race_passes_the_pettingzoo_suites(mode: Any) -> None:
    with strictly(NOT_AN_ARRAY):
        api_test(parallel_to_aec(make_race(seed=0, reward_mode=mode)), num_cycles=200)
        parallel_api_test(make_race(seed=0, reward_mode=mode), num_cycles=200)
        parallel_seed_test(lambda: make_race(reward_mode=mode), 200)


@requires_rware
def test_rware_adapter_passes_the_pettingzoo_suites() -> None:
    from fleetmind.envs.rware import make_rware

    with strictly(INFINITE):
        api_test(parallel_to_aec(make_rware("rware-tiny-2ag-v2", seed=0, max_steps=60)), 60)
        parallel_api_test(make_rware("rware-small-4ag-v2", seed=0, max_steps=60), 60)
        parallel_seed_test(lambda: make_rware("rware-small-4ag-v2", max_steps=60), 60)


# ---------------------------------------------------------------- Gymnasium check_env


def test_gridworld_passes_check_env() -> None:
    strict_check_env(make_gridworld(seed=0))


@pytest.mark.parametrize("mode", ["shared", "individual"])
def test_race_passes_check_env(mode: Any) -> None:
    strict_check_env(JointGym(make_race(seed=0, reward_mode=mode)))


@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize(("map_spec", "robots"), MAPS)
def test_warehouse_passes_check_env(map_spec: str, robots: int, kind: dict[str, Any]) -> None:
    strict_check_env(JointGym(make_parallel(map_spec, robots, seed=0, max_steps=60, **kind)))


@requires_rware
@pytest.mark.parametrize("env_id", ["rware-tiny-2ag-v2", "rware-small-4ag-v2"])
def test_rware_passes_check_env(env_id: str) -> None:
    from fleetmind.envs.rware import make_rware

    # The adapter is our face; rware's own env is not (its legacy seed() method draws a warning).
    strict_check_env(JointGym(make_rware(env_id, seed=0, max_steps=60)), INFINITE)


# ---------------------------------------------------------------- every observation in its space


def rollout_parallel(
    env: ParallelEnv[str, Any, Any], steps: int, *, seed: int, state: bool = False
) -> int:
    """Seeded random actions for ``steps`` ticks (resetting at episode end); observations seen."""
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    obs, _ = env.reset(seed=seed)
    seen = 0
    for t in range(steps):
        for agent, o in obs.items():
            assert_in_space(env.observation_space(agent), o, f"tick {t}, {agent}")
            seen += 1
        if state:
            assert_in_space(env.state_space, env.state(), f"tick {t}, state()")
        if not env.agents:
            obs, _ = env.reset()
            continue
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    return seen


@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize(("map_spec", "robots"), MAPS)
def test_warehouse_random_rollout_stays_in_its_spaces(
    map_spec: str, robots: int, kind: dict[str, Any]
) -> None:
    env = make_parallel(map_spec, robots, seed=3, max_steps=120, order_rate=0.5, **kind)
    seen = rollout_parallel(env, ROLLOUT_STEPS, seed=3, state=kind["obs"] == "local")
    assert seen >= ROLLOUT_STEPS * robots


def test_race_and_gridworld_random_rollouts_stay_in_their_spaces() -> None:
    assert rollout_parallel(make_race(seed=1), ROLLOUT_STEPS, seed=1) >= ROLLOUT_STEPS
    env = make_gridworld(seed=1)
    env.action_space.seed(1)
    obs, _ = env.reset(seed=1)
    for t in range(ROLLOUT_STEPS):
        assert_in_space(env.observation_space, obs, f"tick {t}")
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            obs, _ = env.reset()


@requires_rware
def test_rware_random_rollout_stays_in_its_spaces() -> None:
    from fleetmind.envs.rware import make_rware

    env = make_rware("rware-small-4ag-v2", seed=2, max_steps=100)
    assert rollout_parallel(env, ROLLOUT_STEPS, seed=2) >= ROLLOUT_STEPS * 4


@pytest.mark.parametrize("heuristic", [True, False])
@pytest.mark.parametrize(("map_spec", "robots"), MAPS)
def test_vector_random_rollout_stays_in_its_space(
    map_spec: str, robots: int, heuristic: bool
) -> None:
    env = make_vector(map_spec, robots, 2, seed=4, max_steps=100, heuristic=heuristic)
    space = env.single_observation_space
    assert space.shape == (env.obs_size,)
    assert env.single_action_space == spaces.Discrete(env.n_actions)
    rng = np.random.default_rng(4)
    obs, _ = env.reset()
    batches: list[np.ndarray] = []
    for _ in range(ROLLOUT_STEPS):
        batches.append(obs)
        obs, _, _, trunc, info = env.step(rng.integers(0, env.n_actions, (2, robots)))
        if trunc.any():
            batches.append(info["final_obs"])
    flat = np.concatenate(batches).reshape(-1, env.obs_size)
    assert flat.dtype == space.dtype
    assert len(flat) >= ROLLOUT_STEPS * 2 * robots
    outside = np.flatnonzero(~((flat >= space.low) & (flat <= space.high)).all(axis=1))
    if len(outside):
        assert_in_space(space, flat[outside[0]], f"vector observation row {outside[0]}")
