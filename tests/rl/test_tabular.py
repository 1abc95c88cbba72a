"""Tabular Q (§3.1), independent Q-learners and CTDE on the race (§3.2), the §3.3 rules."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from fleetmind.envs.gridworld import make_gridworld
from fleetmind.envs.race import make_race
from fleetmind.errors import ConfigError
from fleetmind.rl.ctde import ctde_q
from fleetmind.rl.hyper import resolve
from fleetmind.rl.tabular import (
    Q_SCHEDULE,
    epsilon_schedule,
    independent_q,
    q_learning,
    resolve_schedule,
    rollout,
)

# Optimal value of the start cell: 5 steps at -0.01, then +1 on the 6th, discounted by 0.95.
OPTIMAL_START_VALUE = sum(-0.01 * 0.95**k for k in range(5)) + 0.95**5


# ---------------------------------------------------------------- §3.1


def test_schedule_overrides_replace_only_their_fields_and_bad_ones_are_named() -> None:
    sched, eps = resolve_schedule(Q_SCHEDULE, {"episodes": 3, "eps_decay": 0.5})
    assert sched == {**Q_SCHEDULE, "episodes": 3, "eps_decay": 0.5}
    np.testing.assert_allclose(eps, [0.9, 0.45, 0.225])
    assert Q_SCHEDULE["episodes"] == 3000  # the defaults are not touched
    with pytest.raises(ConfigError, match="eps_min must be between 0 and 1"):
        resolve_schedule(Q_SCHEDULE, {"eps_min": 2.0})


def test_q_learning_note_settings_give_the_optimal_six_step_path() -> None:
    result = q_learning(make_gridworld())
    path = result.greedy_path()
    assert result.reached_goal
    assert path[0] == 0
    assert path[-1] == 15
    assert len(path) - 1 == 6
    # every step moves one cell right or down
    assert all(b - a in (1, 4) for a, b in itertools.pairwise(path))
    assert result.start_value == pytest.approx(OPTIMAL_START_VALUE, abs=2e-3)
    assert result.q.shape == (16, 4)
    assert result.returns.shape == (3000,)
    # the last 100 episodes run close to optimal (epsilon is at its 0.02 floor by then)
    assert result.lengths[-100:].mean() < 7.0


def test_q_learning_table_prints_every_state() -> None:
    text = q_learning(make_gridworld(), episodes=300).format_table()
    lines = text.splitlines()
    assert len(lines) == 17
    assert lines[0].split()[:6] == ["state", "cell", "up", "down", "left", "right"]
    assert "(3, 3)" in lines[16]


def test_q_learning_is_deterministic_per_seed() -> None:
    a = q_learning(make_gridworld(), episodes=400, seed=5)
    b = q_learning(make_gridworld(), episodes=400, seed=5)
    c = q_learning(make_gridworld(), episodes=400, seed=6)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert not np.array_equal(a.q, c.q)


def test_q_learning_too_few_episodes_does_not_reach_optimum() -> None:
    # the learner is not hard-wired: 5 episodes leave the start value far from the optimum
    result = q_learning(make_gridworld(), episodes=5)
    assert result.start_value < OPTIMAL_START_VALUE - 0.3


@pytest.mark.parametrize(
    ("field", "value"), [("alpha", 0.0), ("gamma", 1.5), ("episodes", 0), ("eps_decay", 0.0)]
)
def test_q_learning_rejects_bad_hyperparameters(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        q_learning(make_gridworld(), **{field: value})


def test_epsilon_schedule() -> None:
    eps = epsilon_schedule(1000, 0.9, 0.99, 0.02)
    assert eps[0] == 0.9
    assert eps[1] == pytest.approx(0.891)
    assert eps[-1] == 0.02


# ---------------------------------------------------------------- §3.2 independent learners


def _lopsided(wins: dict[str, int]) -> float:
    return max(wins.values()) / max(sum(wins.values()), 1)


def test_iql_short_run_shows_lopsided_split() -> None:
    result = independent_q(make_race(), episodes=6000, seed=0)
    wins = result.wins(1000)
    assert sum(wins.values()) >= 990  # nearly every late episode has a winner
    assert _lopsided(wins) >= 0.9
    assert set(result.q) == {"robot_0", "robot_1"}
    assert result.q["robot_0"].shape == (256, 4)
    # per-agent curves are recorded, not only the total
    assert result.returns["robot_0"].shape == (6000,)
    assert result.action_entropy["robot_1"].shape == (6000,)
    assert result.reward_peak["robot_0"].max() == 1.0


@pytest.mark.parametrize("mode", ["shared", "individual"])
def test_iql_full_reproduction(mode: str) -> None:
    result = independent_q(make_race(reward_mode=mode), seed=0)  # the note's 30000 episodes
    wins = result.wins(1000)
    assert _lopsided(wins) >= 0.9, wins  # the note measured 958 and 941 of 1000
    final = rollout(make_race(reward_mode=mode), result)
    assert final.terminated
    assert final.steps == 6
    assert final.collisions == 0


def test_iql_is_deterministic_per_seed() -> None:
    a = independent_q(make_race(), episodes=500, seed=3)
    b = independent_q(make_race(), episodes=500, seed=3)
    for agent in ("robot_0", "robot_1"):
        np.testing.assert_array_equal(a.q[agent], b.q[agent])
    np.testing.assert_array_equal(a.winners, b.winners)


class _CoordinationGame:
    """A one-step two-agent matrix game with Box observations: reward 1 if both pick action 1."""

    metadata: dict[str, Any] = {"name": "coordination"}  # noqa: RUF012
    possible_agents = ["a", "b"]  # noqa: RUF012

    def __init__(self) -> None:
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(1,))

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, dtype=np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[Any, ...]:
        r = 1.0 if actions["a"] == actions["b"] == 1 else 0.0
        obs = {a: np.zeros(1, dtype=np.float32) for a in self.agents}
        done = dict.fromkeys(self.agents, True)
        self.agents = []
        return obs, dict.fromkeys(obs, r), done, dict.fromkeys(obs, False), {a: {} for a in obs}


def test_iql_drives_other_parallel_envs_through_obs_to_state() -> None:
    env = _CoordinationGame()
    with pytest.raises(ConfigError, match="Discrete"):
        independent_q(env, episodes=10)
    with pytest.raises(ConfigError, match="n_states"):
        independent_q(env, episodes=10, obs_to_state=lambda agent, obs: 0)
    result = independent_q(
        env, episodes=400, alpha=0.2, eps_start=1.0, obs_to_state=lambda agent, obs: 0, n_states=1
    )
    assert result.q["a"].shape == (1, 2)
    assert result.act({"a": np.zeros(1), "b": np.zeros(1)}) == {"a": 1, "b": 1}
    assert result.wins() == {"a": 0, "b": 0}  # the game reports no winner


# ---------------------------------------------------------------- CTDE


@pytest.mark.parametrize("method", ["joint", "vdn"])
@pytest.mark.parametrize("mode", ["shared", "individual"])
def test_ctde_learns_the_race(method: str, mode: str) -> None:
    result = ctde_q(make_race(reward_mode=mode), method=method, episodes=2000, seed=0)  # type: ignore[arg-type]
    final = rollout(make_race(reward_mode=mode), result)
    assert final.terminated
    assert final.steps == 6
    assert final.collisions == 0
    assert final.winner in ("robot_0", "robot_1")
    assert np.mean(list(final.returns.values())) == pytest.approx(
        0.95 if mode == "shared" else 0.45
    )
    if method == "joint":
        assert result.q_joint.shape == (256, 16)
    else:
        assert result.q["robot_0"].shape == (256, 4)


def test_ctde_is_deterministic_and_validates() -> None:
    a = ctde_q(make_race(), episodes=300, seed=1)
    b = ctde_q(make_race(), episodes=300, seed=1)
    np.testing.assert_array_equal(a.q_joint, b.q_joint)
    with pytest.raises(ConfigError, match="method"):
        ctde_q(make_race(), method="qmix", episodes=10)  # type: ignore[arg-type]


def test_ctde_execution_is_decentralised_for_joint_q() -> None:
    result = ctde_q(make_race(), episodes=1500, seed=2)
    joint = result.joint_action(0)
    # each agent, given only its own observation of the joint state, picks its component
    assert result.act({"robot_0": np.int64(0)}) == {"robot_0": joint["robot_0"]}
    assert result.act({"robot_1": np.int64(0)}) == {"robot_1": joint["robot_1"]}


# ---------------------------------------------------------------- §3.3 rules


def test_hyper_rules() -> None:
    single = resolve(horizon=30, n_learners=1, shared_reward=False)
    assert (single.alpha, single.gamma, single.reward_scale) == (0.1, 0.95, 1.0)
    team = resolve(horizon=500, n_learners=4, shared_reward=True)
    assert (team.alpha, team.gamma) == (0.05, 0.99)
    own = resolve(horizon=99, n_learners=4, shared_reward=False)
    assert (own.alpha, own.gamma) == (0.1, 0.95)
    scaled = resolve(horizon=100, n_learners=1, shared_reward=False, reward_bound=20.0)
    assert scaled.gamma == 0.99
    assert scaled.reward_scale == 0.05
    np.testing.assert_allclose(scaled.normalise([20.0, -40.0, 2.0]), [1.0, -1.0, 0.1])


def test_hyper_overrides_and_record() -> None:
    h = resolve(horizon=30, n_learners=2, shared_reward=True, alpha=0.3, gamma=0.9, reward_scale=2)
    assert (h.alpha, h.gamma, h.reward_scale) == (0.3, 0.9, 2.0)
    d = json.loads(json.dumps(h.to_dict()))
    assert d["sources"] == {"gamma": "override", "alpha": "override", "reward_scale": "override"}
    assert (
        "halved"
        in resolve(horizon=30, n_learners=2, shared_reward=True).to_dict()["sources"]["alpha"]
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"horizon": 0}, "horizon"),
        ({"n_learners": 0}, "n_learners"),
        ({"alpha": 0.0}, "alpha"),
        ({"gamma": -0.1}, "gamma"),
        ({"reward_scale": -1.0}, "reward_scale"),
        ({"reward_bound": float("nan")}, "reward_bound"),
    ],
)
def test_hyper_rejects_bad_values(kwargs: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"horizon": 30, "n_learners": 1, "shared_reward": False} | kwargs
    with pytest.raises(ConfigError, match=field):
        resolve(**args)


# ---------------------------------------------------------------- Q(lambda) on the warehouse


def test_trace_update_spreads_the_step_over_recent_pairs_and_cuts_on_exploration() -> None:
    from fleetmind.rl.tabular import _trace_update

    table = [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    trace: dict[tuple[int, int], float] = {}
    _trace_update(table, trace, (0, 1), 0.0, 0.5, cut=False)
    _trace_update(table, trace, (1, 0), 0.0, 0.5, cut=False)
    _trace_update(table, trace, (2, 1), 1.0, 0.5, cut=False)
    # The last pair takes the whole step, one back half, two back a quarter.
    assert table == [[0.0, 0.25], [0.5, 0.0], [0.0, 1.0]]
    _trace_update(table, trace, (0, 0), 1.0, 0.5, cut=True)
    assert table[0][0] == 1.0
    assert table[2][1] == 1.0  # the earlier pairs were cut: no share of this step
    assert trace == {(0, 0): 0.5}


def test_lambda_zero_is_the_one_step_learner() -> None:
    a = independent_q(make_race(), seed=5, episodes=300)
    b = independent_q(make_race(), seed=5, episodes=300, lam=0.0)
    for agent in a.q:
        assert np.array_equal(a.q[agent], b.q[agent])


def test_default_warehouse_iql_delivers_half_of_shortest_path(tmp_path: Any) -> None:
    """`fleetmind train` defaults on warehouse-tiny against shortest-path robots (issue 46).

    Seed 11 is the README tour's (141 against 197 today); with one-step updates on direction
    signs the same run delivered 38. Over seeds the figure varies widely (docs/rl.md gives the
    bench's five), so this guards the learner, not the mean.
    """
    from typer.testing import CliRunner

    from fleetmind.cli import app

    out = tmp_path / "iql"
    args = ["train", "--map", "warehouse-tiny", "--robots", "2", "--algo", "iql", "--seed", "11"]
    res = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["vs_shortest_path"] >= 0.5, metrics["vs_shortest_path"]
    config = json.loads((out / "config.json").read_text())
    assert config["resolved"]["lam"] == 0.9
