"""The §3.1 gridworld and the §3.2 race: API checkers and the spec's dynamics."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test

from fleetmind.envs.gridworld import GridworldEnv, make_gridworld, move
from fleetmind.envs.race import make_race, race_rewards
from fleetmind.errors import ConfigError

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3


# ---------------------------------------------------------------- gridworld


def test_gridworld_passes_gymnasium_checker() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning is a failure
        check_env(make_gridworld(seed=0), skip_render_check=True)


def test_gridworld_spaces_and_start() -> None:
    env = make_gridworld(seed=1)
    assert env.observation_space.n == 16
    assert env.action_space.n == 4
    obs, info = env.reset(seed=3)
    assert int(obs) == 0
    assert info["cell"] == (0, 0)


@pytest.mark.parametrize(
    ("state", "action", "expected"),
    [
        (0, UP, 0),  # clipped at the top border
        (0, LEFT, 0),  # clipped at the left border
        (0, RIGHT, 1),
        (0, DOWN, 4),
        (5, UP, 1),
        (5, LEFT, 4),
        (15, DOWN, 15),
        (15, RIGHT, 15),
        (3, RIGHT, 3),
        (12, DOWN, 12),
    ],
)
def test_gridworld_moves_are_clipped(state: int, action: int, expected: int) -> None:
    assert move(state, action) == expected


def test_gridworld_rewards_and_termination_on_shortest_path() -> None:
    env = make_gridworld()
    env.reset(seed=0)
    rewards = []
    for a in (RIGHT, RIGHT, RIGHT, DOWN, DOWN):
        obs, r, term, trunc, _ = env.step(a)
        rewards.append(r)
        assert not term
        assert not trunc
    obs, r, term, trunc, info = env.step(DOWN)
    assert int(obs) == 15
    assert info["cell"] == (3, 3)
    assert r == 1.0
    assert term
    assert not trunc
    assert rewards == [-0.01] * 5


def test_gridworld_time_limit_truncates_never_terminates() -> None:
    env = GridworldEnv(max_steps=7)
    env.reset(seed=0)
    for i in range(7):
        _, r, term, trunc, _ = env.step(UP)  # stays on cell 0
        assert r == -0.01
        assert not term
        assert trunc == (i == 6)


def test_gridworld_bad_input_raises() -> None:
    env = make_gridworld()
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="action"):
        env.step(4)
    with pytest.raises(ConfigError, match="max_steps"):
        GridworldEnv(max_steps=0)


def test_gridworld_ansi_render() -> None:
    env = make_gridworld(render_mode="ansi")
    env.reset(seed=0)
    assert env.render() == "R . . .\n. . . .\n. . . .\n. . . G\n"


# ---------------------------------------------------------------- race


@pytest.mark.parametrize("mode", ["shared", "individual"])
def test_race_passes_pettingzoo_api_test(mode: str) -> None:
    parallel_api_test(make_race(seed=0, reward_mode=mode), num_cycles=300)  # type: ignore[arg-type]


def test_race_joint_observation() -> None:
    env = make_race(seed=0)
    obs, infos = env.reset(seed=0)
    assert env.observation_space("robot_0").n == 256
    assert env.action_space("robot_1").n == 4
    assert obs == {"robot_0": 0, "robot_1": 0}
    assert infos["robot_0"]["winner"] is None
    obs, *_ = env.step({"robot_0": RIGHT, "robot_1": DOWN})
    # robot_0 on 1, robot_1 on 4: joint state 1 * 16 + 4
    assert obs == {"robot_0": 20, "robot_1": 20}
    assert env.state() == 20


def test_race_collision_when_both_stay_on_start() -> None:
    env = make_race(seed=0)
    env.reset(seed=0)
    obs, rew, term, trunc, infos = env.step({"robot_0": UP, "robot_1": LEFT})
    assert rew == {"robot_0": -0.5, "robot_1": -0.5}
    assert infos["robot_0"]["collision"]
    assert obs["robot_0"] == 0  # both are on cell 0
    assert not any(term.values())
    assert not any(trunc.values())


def test_race_swap_is_not_a_collision() -> None:
    env = make_race(seed=0)
    env.reset(seed=0)
    env.step({"robot_0": RIGHT, "robot_1": UP})  # robot_0 on 1, robot_1 on 0
    _, rew, *_ = env.step({"robot_0": LEFT, "robot_1": RIGHT})  # they swap
    assert rew == {"robot_0": -0.01, "robot_1": -0.01}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("shared", {"robot_0": 1.0, "robot_1": 1.0}),
        ("individual", {"robot_0": 0.0, "robot_1": 1.0}),
    ],
)
def test_race_winner_and_rewards(mode: str, expected: dict[str, float]) -> None:
    env = make_race(seed=0, reward_mode=mode)  # type: ignore[arg-type]
    env.reset(seed=0)
    env.step({"robot_0": UP, "robot_1": RIGHT})
    for a in (RIGHT, RIGHT, DOWN, DOWN):
        _, rew, term, _, infos = env.step({"robot_0": UP, "robot_1": a})
        assert not any(term.values())
        assert rew["robot_1"] == -0.01
    _, rew, term, trunc, infos = env.step({"robot_0": UP, "robot_1": DOWN})
    assert rew == expected
    assert all(term.values())
    assert not any(trunc.values())
    assert infos["robot_0"]["winner"] == "robot_1"
    assert env.agents == []
    with pytest.raises(ConfigError, match="reset"):
        env.step({"robot_0": UP, "robot_1": UP})


def test_race_both_on_goal_is_a_collision_that_ends_the_episode() -> None:
    assert race_rewards(15, 15) == (-0.5, -0.5, True, -1)
    assert race_rewards(15, 15, reward_mode="individual") == (-0.5, -0.5, True, -1)
    assert race_rewards(15, 3) == (1.0, 1.0, True, 0)
    assert race_rewards(3, 15, reward_mode="individual") == (0.0, 1.0, True, 1)
    assert race_rewards(3, 4) == (-0.01, -0.01, False, -1)


def test_race_time_limit_truncates() -> None:
    env = make_race(seed=0, max_steps=3)
    env.reset(seed=0)
    for i in range(3):
        _, _, term, trunc, _ = env.step({"robot_0": RIGHT, "robot_1": DOWN})
        assert not any(term.values())
        assert all(trunc.values()) == (i == 2)
    assert env.agents == []


def test_race_bad_input_raises() -> None:
    with pytest.raises(ConfigError, match="reward_mode"):
        make_race(reward_mode="team")  # type: ignore[arg-type]
    env = make_race()
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="robot_1"):
        env.step({"robot_0": UP})
    with pytest.raises(ConfigError, match="robot_0"):
        env.step({"robot_0": np.int64(9), "robot_1": UP})


def test_race_ansi_render() -> None:
    env = make_race(render_mode="ansi")
    env.reset(seed=0)
    env.step({"robot_0": RIGHT, "robot_1": DOWN})
    assert env.render() == ". 0 . .\n1 . . .\n. . . .\n. . . G\n"
