"""Diagnostics: each finding fires on curves built to show it, and none fires on clean curves."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from fleetmind.envs.race import make_race
from fleetmind.errors import ConfigError
from fleetmind.rl.diagnostics import Thresholds, diagnose, oscillation
from fleetmind.rl.tabular import independent_q

N = 2000
T = np.arange(N, dtype=np.float64)


def _learning(
    rng: np.random.Generator, top: float = 0.9, noise: float = 0.2
) -> NDArray[np.float64]:
    """A clean learning curve: saturating rise plus episode noise, returns within [-1, 1]."""
    return np.clip(top * (1.0 - np.exp(-T / 300.0)) + rng.normal(0.0, noise, N), -1.0, 1.0)


def _entropy(rng: np.random.Generator, end: float) -> NDArray[np.float64]:
    return end + (1.386 - end) * np.exp(-T / 400.0) + rng.normal(0.0, 0.05, N)


def _kinds(findings: list[object]) -> list[tuple[str, tuple[str, ...]]]:
    return [(f.kind, f.agents) for f in findings]  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(20))
def test_clean_curves_give_no_finding(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rewards = {"robot_0": _learning(rng), "robot_1": _learning(rng, top=0.7)}
    findings = diagnose(
        rewards,
        solo={"robot_0": _learning(rng), "robot_1": _learning(rng)},
        entropy={"robot_0": _entropy(rng, 0.6), "robot_1": _entropy(rng, 0.5)},
    )
    assert findings == []


def test_non_stationarity_fires_when_unstable_together_but_stable_alone() -> None:
    rng = np.random.default_rng(0)
    swing = 0.3 * np.sin(2 * np.pi * T / 150.0)  # the agents take turns dominating
    rewards = {
        "robot_0": np.clip(_learning(rng, top=0.5) + swing, -1, 1),
        "robot_1": np.clip(_learning(rng, top=0.5) - swing, -1, 1),
    }
    solo = {"robot_0": _learning(rng), "robot_1": _learning(rng)}
    findings = diagnose(rewards, solo=solo)
    assert _kinds(findings) == [
        ("non_stationarity", ("robot_0",)),
        ("non_stationarity", ("robot_1",)),
    ]
    f = findings[0]
    assert f.evidence["ratio"] >= 3.0
    assert f.evidence["solo_ratio"] < 3.0
    assert f.evidence["reversals"] >= 4
    assert "CTDE" in f.message or "ctde" in f.message
    assert "stable" in f.message


def test_non_stationarity_not_blamed_when_unstable_alone_too() -> None:
    rng = np.random.default_rng(1)
    swing = 0.3 * np.sin(2 * np.pi * T / 150.0)
    rewards = {
        "robot_0": np.clip(_learning(rng, top=0.5) + swing, -1, 1),
        "robot_1": _learning(rng),
    }
    solo = {"robot_0": np.clip(_learning(rng, top=0.5) + swing, -1, 1), "robot_1": _learning(rng)}
    assert diagnose(rewards, solo=solo) == []
    # without solo curves the oscillation is still reported, saying it is unconfirmed
    (f,) = diagnose(rewards)
    assert f.kind == "non_stationarity"
    assert "No solo curve" in f.message


def test_oscillation_statistics() -> None:
    rng = np.random.default_rng(2)
    noise = rng.normal(0.0, 1.0, 4000)
    quiet = oscillation(noise, 50)
    assert quiet.ratio < 2.0
    loud = oscillation(noise + 1.0 * np.sin(np.arange(4000) / 40.0), 50)
    assert loud.ratio > 4.0
    assert loud.reversals >= 10
    assert oscillation(np.full(100, 0.5), 10).ratio == 0.0


def test_free_riding_by_own_reward_collapse() -> None:
    rng = np.random.default_rng(3)
    worker = 0.1 + 1.5 * (1.0 - np.exp(-T / 300.0)) + rng.normal(0.0, 0.2, N)
    rider = 0.5 * np.exp(-T / 300.0) + rng.normal(0.0, 0.2, N)
    findings = diagnose(
        {"robot_0": worker, "robot_1": rider},
        step_rewards={"robot_0": np.array([1.0, -0.01]), "robot_1": np.array([1.0, -0.01])},
    )
    assert _kinds(findings) == [("free_riding", ("robot_1",))]
    ev = findings[0].evidence
    assert ev["team_late"] > ev["team_early"]
    assert ev["own_late"] < ev["own_early"]
    assert ev["own_drop_se"] > 3.0
    assert "free rider" in findings[0].message


def test_free_riding_by_entropy_collapse() -> None:
    rng = np.random.default_rng(4)
    rewards = {"robot_0": _learning(rng), "robot_1": _learning(rng, top=0.6)}
    entropy = {"robot_0": _entropy(rng, 0.7), "robot_1": _entropy(rng, 0.02)}
    team = (rewards["robot_0"] + rewards["robot_1"]) / 2
    findings = diagnose(rewards, entropy=entropy, team=team)
    assert _kinds(findings) == [("free_riding", ("robot_1",))]
    ev = findings[0].evidence
    assert ev["entropy_late"] < 0.1
    assert ev["others_entropy_late"] > 0.6
    # the same entropies with a flat team curve: no free-riding
    flat = np.clip(rng.normal(0.5, 0.2, N), -1, 1)
    assert diagnose(rewards, entropy=entropy, team=flat) == []


def test_reward_scale_fires_outside_unit_range() -> None:
    rng = np.random.default_rng(5)
    rewards = {"robot_0": _learning(rng), "robot_1": _learning(rng)}
    steps = {"robot_0": np.array([0.1, -0.01, 5.0]), "robot_1": np.array([0.5, -0.5])}
    (f,) = diagnose(rewards, step_rewards=steps)
    assert f.kind == "reward_scale"
    assert f.agents == ("robot_0",)
    assert f.evidence["max_abs/robot_0"] == 5.0
    assert f.evidence["suggested_scale"] == pytest.approx(0.2)
    # the curves themselves are checked when no step rewards are given
    (g,) = diagnose({"robot_0": np.array([0.2, -3.0, 0.4])})
    assert g.kind == "reward_scale"
    assert "per-episode" in g.message
    assert diagnose({"robot_0": np.array([0.2, -1.0, 0.4])}) == []


def test_thresholds_are_knobs() -> None:
    steps = {"robot_0": np.array([1.5])}
    rewards = {"robot_0": np.zeros(3)}
    assert diagnose(rewards, step_rewards=steps, thresholds=Thresholds(bound=2.0)) == []


def test_bad_curves_raise() -> None:
    with pytest.raises(ConfigError, match=r"rewards\['robot_1'\]\[2\]"):
        diagnose({"robot_0": np.zeros(4), "robot_1": np.array([0.0, 1.0, np.nan, 0.0])})
    with pytest.raises(ConfigError, match="differ in length"):
        diagnose({"robot_0": np.zeros(4), "robot_1": np.zeros(5)})
    with pytest.raises(ConfigError, match="1-D"):
        diagnose({"robot_0": np.zeros((2, 2))})
    with pytest.raises(ConfigError, match="team"):
        diagnose({"robot_0": np.zeros(4)}, team=np.zeros(3))


def test_diagnose_reads_a_real_iql_run() -> None:
    # individual rewards: the loser's own reward falls while the team's rises (§3.2 note: in a race
    # one winner is the team optimum, so this describes the yielding agent); step rewards in range
    result = independent_q(make_race(reward_mode="individual"), episodes=6000, seed=0)
    findings = diagnose(
        result.returns,
        entropy=result.action_entropy,
        team=result.team_returns,
        step_rewards=result.reward_peak,
    )
    wins = result.wins(1000)
    loser = min(wins, key=lambda a: wins[a])
    assert _kinds(findings) == [("free_riding", (loser,))]
