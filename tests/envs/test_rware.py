from __future__ import annotations

import importlib.util
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from fleetmind.envs import make_parallel
from fleetmind.envs.rware import RwareParallelEnv, grid_from_rware, layout_from_rware, make_rware
from fleetmind.errors import ConfigError
from fleetmind.testing import NondeterminismError, check_determinism

# fleetmind.envs.rware imports rware only inside make_rware, so this module imports without it.
requires_rware = pytest.mark.skipif(
    importlib.util.find_spec("rware") is None, reason="needs the rware extra"
)


@requires_rware
def test_parallel_api() -> None:
    env = make_rware("rware-tiny-2ag-v2", seed=0, max_steps=60)
    parallel_api_test(env, num_cycles=100)


@requires_rware
def test_agents_spaces_and_step_types() -> None:
    env = make_rware("rware-small-4ag-v2", seed=3)
    assert env.possible_agents == ["robot_0", "robot_1", "robot_2", "robot_3"]
    obs, infos = env.reset()
    assert set(obs) == set(infos) == set(env.possible_agents)
    for agent in env.possible_agents:
        assert env.action_space(agent).n == 5
        assert obs[agent].dtype == np.float32
        assert env.observation_space(agent).contains(obs[agent])
    obs, rewards, terms, truncs, infos = env.step(dict.fromkeys(env.agents, 1))
    assert all(isinstance(r, float) for r in rewards.values())
    assert not any(terms.values())
    assert not any(truncs.values())
    assert infos == {a: {} for a in env.possible_agents}


@requires_rware
def test_time_limit_is_truncation_not_termination() -> None:
    env = make_rware("rware-tiny-2ag-v2", seed=0, max_steps=7)
    env.reset()
    for tick in range(7):
        _, _, terms, truncs, _ = env.step(dict.fromkeys(env.agents, 0))
        assert not any(terms.values())
        assert all(truncs.values()) == (tick == 6)
        assert any(truncs.values()) == (tick == 6)
    assert env.agents == []
    with pytest.raises(ConfigError, match="reset"):
        env.step({})
    env.reset()
    assert env.agents == env.possible_agents


@requires_rware
def test_inactivity_limit_is_truncation() -> None:
    env = make_rware("rware-tiny-2ag-v2", seed=0, max_steps=None, max_inactivity_steps=5)
    env.reset()
    truncated_at = None
    for tick in range(5):
        _, _, terms, truncs, _ = env.step(dict.fromkeys(env.agents, 0))  # no-ops deliver nothing
        assert not any(terms.values())
        if all(truncs.values()):
            truncated_at = tick
    assert truncated_at == 4


@requires_rware
def test_rewards_are_per_agent() -> None:
    # Robot 0 carries a requested shelf onto a goal; only robot 0 is rewarded.
    env = make_rware("rware-tiny-2ag-v2", seed=0)
    env.reset()
    w = env.rware
    goal_x, goal_y = w.goals[0]
    robot = w.agents[0]
    shelf = w.request_queue[0]
    other = w.agents[1]
    other.x, other.y = 0, 0
    robot.x, robot.y = goal_x, goal_y - 1
    from rware.warehouse import Direction

    robot.dir = Direction.DOWN
    shelf.x, shelf.y = robot.x, robot.y
    robot.carrying_shelf = shelf
    w._recalc_grid()
    _, rewards, _, _, _ = env.step({"robot_0": 1, "robot_1": 0})  # forward onto the goal
    assert rewards == {"robot_0": 1.0, "robot_1": 0.0}


@requires_rware
def test_bad_actions_raise_config_error() -> None:
    env = make_rware(seed=0)
    env.reset()
    with pytest.raises(ConfigError, match="robot_9"):
        env.step({"robot_9": 0})
    with pytest.raises(ConfigError, match=r"actions\['robot_0'\]"):
        env.step({"robot_0": 7})


@requires_rware
def test_unknown_env_id_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="rware-huge-2ag-v2"):
        make_rware("rware-huge-2ag-v2")


@requires_rware
def test_whole_episode_determinism() -> None:
    compared = check_determinism(
        lambda: make_rware("rware-small-4ag-v2", max_steps=120), steps=1000, seed=7
    )
    assert compared == 120  # stopped at the time limit, the whole episode


@requires_rware
def test_constructor_seed_seeds_the_first_reset() -> None:
    a, b = make_rware(seed=5), make_rware(seed=5)
    obs_a, _ = a.reset()
    obs_b, _ = b.reset()
    assert all(np.array_equal(obs_a[k], obs_b[k]) for k in obs_a)
    c = make_rware(seed=6)
    obs_c, _ = c.reset()
    assert not all(np.array_equal(obs_a[k], obs_c[k]) for k in obs_a)


class _Unseeded(RwareParallelEnv):
    """Ignores the reset seed: a deliberately broken env the checker must catch."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return super().reset(seed=None, options=options)


@requires_rware
def test_determinism_checker_catches_an_unseeded_adapter() -> None:
    def build() -> RwareParallelEnv:
        inner = make_rware("rware-small-4ag-v2", max_steps=50)
        return _Unseeded(inner.env, env_id=inner.env_id)

    with pytest.raises(NondeterminismError):
        check_determinism(build, steps=50, seed=7)


@requires_rware
@pytest.mark.parametrize("env_id", ["rware-tiny-2ag-v2", "rware-large-19ag-v2"])
def test_grid_from_rware_matches_the_layout(env_id: str) -> None:
    env = make_rware(env_id)
    w = env.rware
    grid = grid_from_rware(env)
    assert grid.name == env_id
    assert grid.shape == tuple(w.grid_size)
    assert not grid.blocked.any()
    assert np.array_equal(grid.pickups, w.highways == 0)
    assert sorted(grid.station_cells()) == sorted((int(y), int(x)) for x, y in w.goals)
    # The same map from the gymnasium env and from the raw Warehouse.
    assert np.array_equal(grid_from_rware(env.env).pickups, grid.pickups)
    assert np.array_equal(grid_from_rware(w).stations, grid.stations)


@requires_rware
def test_layout_round_trips_through_rware() -> None:
    text = layout_from_rware(make_rware("rware-medium-4ag-v2"))
    again = make_rware("rware-medium-4ag-v2", layout=text)
    assert layout_from_rware(again) == text


@requires_rware
def test_fleetmind_runs_on_an_rware_layout() -> None:
    grid = grid_from_rware(make_rware("rware-tiny-2ag-v2"))
    env = make_parallel(grid, 2, seed=0)
    env.reset()
    env.step({"robot_0": 1, "robot_1": 2})


def test_grid_from_rware_rejects_other_envs() -> None:
    with pytest.raises(ConfigError, match="expected an rware env"):
        grid_from_rware(object())


def test_missing_rware_gives_install_hint() -> None:
    # A fresh interpreter where `import rware` fails; importing fleetmind.envs must still work.
    code = (
        "import sys; sys.modules['rware'] = None\n"
        "import fleetmind.envs, fleetmind.envs.rware as r\n"
        "from fleetmind.errors import ConfigError\n"
        "try:\n"
        "    r.make_rware()\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install fleetmind[rware]" in out.stdout
