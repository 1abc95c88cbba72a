"""LLM-scored rewards in training: the spec, the state text, the wrapper, train and the CLI."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from fleetmind.cli import app
from fleetmind.envs import make_parallel, make_vector
from fleetmind.errors import ConfigError
from fleetmind.llm.embedded import EmbeddedServer
from fleetmind.llm.reward import LLMReward, parse_score, recorded_reward
from fleetmind.rl.diagnostics import diagnose
from fleetmind.rl.reward import (
    GOAL,
    RewardSpec,
    ScoredParallelEnv,
    ScoredVectorEnv,
    describe,
    transition,
)
from fleetmind.rl.train import train
from fleetmind.sim.distances import DistanceOracle
from fleetmind.testing.fake_server import FakeChatServer

# --------------------------------------------------------------------------- the spec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("env", RewardSpec()),
        (" llm ", RewardSpec(source="llm")),
        ("llm:every=25", RewardSpec(source="llm", every=25)),
        (
            "llm:weight=1, every=7,alone",
            RewardSpec(source="llm", every=7, weight=1.0, alone=True),
        ),
        ("llm:samples=5,temperature=0", RewardSpec(source="llm", samples=5, temperature=0.0)),
    ],
)
def test_spec_parses(text: str, expected: RewardSpec) -> None:
    assert RewardSpec.parse(text) == expected
    assert RewardSpec.parse(str(expected)) == expected  # str() is a valid spec of itself


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "expected 'env', 'llm'"),
        ("environment", "expected 'env', 'llm'"),
        ("env:every=3", "expected 'env', 'llm'"),
        ("llm:", "nothing after 'llm:'"),
        ("llm:every=0", "every must be at least 1, got 0"),
        ("llm:every=2.5", "every must be a whole number"),
        ("llm:every=", "'every' needs a value"),
        ("llm:every", "'every' needs a value"),
        ("llm:weight=0", "weight must be above 0 and at most 10.0"),
        ("llm:weight=nan", "weight must be above 0 and at most 10.0"),
        ("llm:weight=-1", "weight must be above 0 and at most 10.0"),
        ("llm:weight=big", "weight must be a number"),
        ("llm:alone=yes", "'alone' is a flag"),
        ("llm:every=3,every=4", "'every' given twice"),
        ("llm:every=3,,alone", "an empty item"),
        ("llm:evry=3", "unknown key 'evry'"),
        ("llm:samples=10", "samples must be between 1 and 9, got 10"),
        ("llm:temperature=3", "temperature must be between 0 and 2, got 3"),
    ],
)
def test_bad_spec_is_one_clear_error(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        RewardSpec.parse(text)
    message = str(info.value)
    assert message.startswith("reward: ")
    assert words in message
    assert "\n" not in message


def test_bad_spec_on_the_command_line_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fleetmind.cli", "train", "--reward", "llm:every=0",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: reward: every must be at least 1, got 0 in 'llm:every=0'"
    ]
    assert not (tmp_path / "run").exists()  # refused before anything ran


# --------------------------------------------------------------------------- the state text


def test_describe_reads_loads_goals_and_deliveries_without_tick_or_cells() -> None:
    env = make_parallel("warehouse-tiny", 2, obs="tabular", seed=0)
    env.reset(seed=0)
    oracle = DistanceOracle(env.grid)
    w = env.world
    text = describe(w.pos, w.goal, w.carrying, w.has_task, oracle=oracle, delivered=2)
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[-1] == "deliveries since the last score: 2"
    for i, line in enumerate(lines[:2]):
        steps = int(oracle.to(tuple(w.goal[i]))[tuple(w.pos[i])])
        assert line.startswith(f"robot_{i}: ")
        assert ("carrying a load" in line) == bool(w.carrying[i])
        band = "at" if steps == 0 else "1-2" if steps <= 2 else "3-5" if steps <= 5 else "6 or more"
        assert band in line
    # No cells and no clock: the same situation reads the same, so the cache can answer.
    assert "(" not in text
    assert "tick" not in text
    carrying = np.array([True, False])
    busy = describe(w.pos, w.goal, carrying, np.array([True, False]), oracle=oracle, delivered=0)
    assert "robot_0: carrying a load" in busy
    assert "robot_1: idle, no task" in busy


def test_the_scorer_is_shown_the_state_before_and_after_the_stretch_it_scores() -> None:
    """Issue 47: the anchors score a change, so the prompt carries both ends of the stretch."""
    from fleetmind.rl.nav import shortest_path_actions

    # Seed 2: the shortest-path robots keep delivering (no shield, so other seeds jam).
    vec = make_vector("warehouse-tiny", 2, 1, seed=2, max_steps=500)
    oracle = DistanceOracle(vec.grid)
    with FakeChatServer(['{"score": 1}']) as srv:
        env = ScoredVectorEnv(
            vec,
            RewardSpec.parse("llm:every=20,weight=1"),
            LLMReward(srv.client(), goal=GOAL, samples=1, cache=_NoCache()),
        )
        obs, _ = env.reset(seed=2)
        states, deliveries = {}, 0
        for tick in range(1, 61):
            obs, _r, _te, _tr, info = env.step(shortest_path_actions(obs))
            deliveries += int(info["delivered"].sum()) if tick > 40 else 0
            s = env.sim
            states[tick] = describe(
                s.pos[0], s.goal[0], s.carrying[0], s.has_task[0], oracle=oracle
            )
        prompts = [r.messages[-1]["content"] for r in srv.requests]
    assert len(prompts) == 3  # ticks 20, 40, 60
    assert states[40] != states[60]  # the robots moved: the two ends differ
    before, after = prompts[2].split("After:\n")
    assert "Before (20 ticks ago):\n" + states[40] in before
    assert states[60] not in before
    assert after == f"{states[60]}\nDeliveries in between: {deliveries}"
    assert prompts[1].split("After:\n")[0].endswith(states[20] + "\n")
    assert "state before" in srv.requests[0].messages[0]["content"]


# --------------------------------------------------------------------------- the wrapper


class _NoCache(dict[str, float]):
    """A cache that keeps nothing, so a frozen state is asked again every time."""

    def __setitem__(self, key: str, value: float) -> None:
        pass


WAIT = {"robot_0": 0, "robot_1": 0}


def _frozen_env(spec: str, scorer: Any) -> ScoredParallelEnv:
    """Two robots that only wait: the state text never changes, the env reward is -0.01."""
    env = ScoredParallelEnv(
        make_parallel("warehouse-tiny", 2, obs="tabular", seed=3, max_steps=50),
        RewardSpec.parse(spec),
        scorer,
    )
    env.reset(seed=3)
    return env


def test_misbehaving_model_never_gives_nan_and_falls_back_to_the_last_value(
    tmp_path: Path,
) -> None:
    script = [
        "I think the robots are doing well.", "Hard to say.", "Looks fine to me!",  # prose
        "NaN", "nan", '{"score": NaN}',  # not a number
        "7", '{"score": 1}', "1",  # out of range: clamped to 1
        "I'd say", "so-so", "1",  # one answer of three parses: too few
        "1", "-1", "1",  # samples disagree: variance 8/9 > 0.25
        '{"score": -1}', "-1", "-1",  # a good score again
    ]  # fmt: skip
    calls = tmp_path / "calls.jsonl"
    with (
        FakeChatServer(script) as srv,
        recorded_reward(
            srv.client(max_retries=0), calls, goal=GOAL, seed=3, cache=_NoCache()
        ) as scorer,
    ):
        env = _frozen_env("llm:every=1,weight=0.5", scorer)
        rewards = [env.step(WAIT)[1] for _ in range(6)]
    score_part = [r["robot_0"] + 0.01 for r in rewards]
    assert score_part == pytest.approx([0.0, 0.0, 0.5, 0.5, 0.5, -0.5], abs=1e-6)
    assert all(r["robot_0"] == r["robot_1"] for r in rewards)  # a team judgement
    assert not any(math.isnan(v) for r in rewards for v in r.values())
    summary = env.scoring.summary()
    assert summary["calls"] == 18
    assert summary["parse_fallbacks"] == 3
    assert summary["variance_fallbacks"] == 1
    assert summary["fallback_ticks"] == 4
    assert summary["scored_ticks"] == 6
    assert summary["completion_tokens"] > 0
    assert len(srv.requests) == 18
    assert all(0.0 < r.body["temperature"] <= 0.7 for r in srv.requests)
    records = [json.loads(line) for line in calls.read_text().splitlines()]
    assert len(records) == 18
    assert {r["context"]["caller"] for r in records} == {"rl.reward"}
    assert [r["context"]["tick"] for r in records[::3]] == [1, 2, 3, 4, 5, 6]
    assert records[6]["parsed"] == 7.0  # what the model said, before the clamp


class _Scripted:
    """A scorer answering from a list (None: refused), counting what it was asked."""

    def __init__(self, values: list[float | None]) -> None:
        self.values = list(values)
        self.texts: list[str] = []

    def evaluate(self, state_text: str, *, tick: int | None = None) -> float | None:
        self.texts.append(state_text)
        return self.values.pop(0)

    def summary(self) -> dict[str, Any]:
        return {"calls": len(self.texts)}


def test_score_every_k_ticks_mixed_or_alone() -> None:
    scorer = _Scripted([1.0, 5.0, -1.0])
    env = _frozen_env("llm:every=3,weight=0.2", scorer)
    mixed = [env.step(WAIT)[1]["robot_0"] for _ in range(9)]
    # Ticks 3, 6 and 9 are scored; 5.0 from a scorer is clamped to 1.
    expected = [-0.01, -0.01, 0.19, -0.01, -0.01, 0.19, -0.01, -0.01, -0.21]
    assert mixed == pytest.approx(expected, abs=1e-6)
    alone = _frozen_env("llm:every=2,weight=2,alone", _Scripted([0.5, math.nan]))
    got = [alone.step(WAIT)[1]["robot_1"] for _ in range(4)]
    assert got == pytest.approx([0.0, 1.0, 0.0, 1.0], abs=1e-6)  # NaN: the last value (0.5) again
    assert alone.scoring.summary()["fallback_ticks"] == 1


def test_episode_parts_add_up_to_what_the_learner_saw() -> None:
    scorer = _Scripted([1.0] * 100)
    env = _frozen_env("llm:every=10,weight=0.5", scorer)
    for _ in range(2):
        env.reset(seed=3)
        total = dict.fromkeys(WAIT, 0.0)
        while env.agents:
            for a, r in env.step(WAIT)[1].items():
                total[a] += r
        assert total["robot_0"] == pytest.approx(
            env.scoring.env_returns["robot_0"][-1] + env.scoring.llm_returns["robot_0"][-1]
        )
    assert env.scoring.llm_returns["robot_0"] == pytest.approx([2.5, 2.5])  # 5 scores x 0.5
    assert env.scoring.env_returns["robot_0"] == pytest.approx([-0.5, -0.5])


def test_vector_env_scores_each_world_and_waits_out_a_reset() -> None:
    env = ScoredVectorEnv(
        make_vector("warehouse-tiny", 2, 3, seed=0, max_steps=4),
        RewardSpec.parse("llm:every=2,weight=1"),
        _Scripted([0.5] * 100),
    )
    env.reset(seed=0)
    rows = []
    for _ in range(6):
        _obs, rewards, _term, _trunc, _info = env.step(np.zeros((3, 2), dtype=np.int64))
        assert rewards.shape == (3, 2)
        assert rewards.dtype == np.float32
        rows.append((rewards[:, 0] + 0.01).round(6).tolist())
    # Scores are due at ticks 2 and 4; tick 4 ends (and resets) every world, so that score waits
    # for tick 5, when the state is the new episode's own.
    assert rows == [[0.0] * 3, [0.5] * 3, [0.0] * 3, [0.0] * 3, [0.5] * 3, [0.0] * 3]
    assert env.scoring.summary()["scored_ticks"] == 6  # 3 worlds x 2
    assert env.scoring.llm_returns["robot_0"] == pytest.approx([0.5] * 3)  # the first episodes
    assert env.num_envs == 3  # everything else is the wrapped env's


# --------------------------------------------------------------------------- train and doctor


def test_train_writes_llm_reward_and_score_parts(tmp_path: Path) -> None:
    scorer = _Scripted([1.0, -1.0] * 200)
    run = train(
        "warehouse-tiny", 2, "iql", steps=2000, max_steps=100, out_dir=tmp_path,
        reward="llm:every=10,weight=0.5", scorer=scorer, progress=False, eval_ticks=50,
    )  # fmt: skip
    assert run.metrics["llm_reward"]["scored_ticks"] == 200  # 2000 ticks / 10
    assert run.metrics["llm_reward"]["calls"] == 200
    assert run.config["reward"] == "llm:every=10,weight=0.5,samples=3,temperature=0.5"
    with (tmp_path / "curves.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 20
    assert {"robot_0_env", "robot_0_llm", "robot_1_env", "robot_1_llm"} <= set(rows[0])
    # Scores alternate +1/-1, ten per 100-tick episode: each episode's score part is 0.
    assert all(float(r["robot_0_llm"]) == pytest.approx(0.0) for r in rows)
    # The env part is the env reward alone: a tabular run with --reward env gives the same.
    plain = train(
        "warehouse-tiny", 2, "iql", steps=2000, max_steps=100, out_dir=tmp_path / "env",
        progress=False, eval_ticks=50,
    )  # fmt: skip
    assert "llm_reward" not in plain.metrics
    with (tmp_path / "env" / "curves.csv").open() as fh:
        plain_rows = list(csv.DictReader(fh))
    assert sum(int(r["robot_0_deliveries"]) for r in plain_rows) >= 0
    assert "robot_0_llm" not in plain_rows[0]


def test_train_refuses_a_scored_reward_without_a_warehouse() -> None:
    with pytest.raises(ConfigError, match="needs a fleetmind warehouse map"):
        train("race-4x4", 2, "iql", steps=100, reward="llm", scorer=_Scripted([]))
    with pytest.raises(ConfigError, match="needs a scorer"):
        train("warehouse-tiny", 2, "iql", steps=100, reward="llm")


def _quarters_curves(n: int, score: tuple[float, float], env: tuple[float, float]) -> Any:
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 1.0, n)
    return (
        {"robot_0": score[0] + (score[1] - score[0]) * t + rng.normal(0, 0.05, n)},
        {"robot_0": env[0] + (env[1] - env[0]) * t + rng.normal(0, 0.05, n)},
    )


def test_drift_finding_when_the_policy_pleases_the_scorer() -> None:
    llm, env = _quarters_curves(80, score=(0.0, 2.0), env=(1.0, 0.5))
    total = {"robot_0": llm["robot_0"] + env["robot_0"]}
    found = diagnose(total, step_rewards={"robot_0": [0.5]}, llm_rewards=llm, env_rewards=env)
    assert [f.kind for f in found] == ["reward_drift"]
    assert "please the scorer" in found[0].message
    # Both parts rising is learning the task, not drift.
    llm, env = _quarters_curves(80, score=(0.0, 2.0), env=(0.0, 2.0))
    assert diagnose(total, step_rewards={"robot_0": [0.5]}, llm_rewards=llm, env_rewards=env) == []


def test_drift_finding_when_the_scorer_contradicts_itself() -> None:
    curves = {"robot_0": [0.0] * 10}
    steady = {"evaluations": 50, "variance_fallbacks": 2, "variance_mean": 0.02}
    assert diagnose(curves, scorer=steady) == []
    jumpy = {"evaluations": 50, "variance_fallbacks": 15, "variance_mean": 0.05}
    found = diagnose(curves, scorer=jumpy)
    assert [(f.kind, f.agents) for f in found] == [("reward_drift", ("scorer",))]
    assert found[0].evidence["variance_fallback_rate"] == pytest.approx(0.3)
    noisy = {"evaluations": 50, "variance_fallbacks": 0, "variance_mean": 0.12}
    assert [f.kind for f in diagnose(curves, scorer=noisy)] == ["reward_drift"]
    # A handful of evaluations (the rest answered by a cache) says nothing about the scorer.
    few = {"evaluations": 3, "variance_fallbacks": 3, "variance_mean": 0.9}
    assert diagnose(curves, scorer=few) == []


@pytest.fixture
def fake_scorer_url() -> Iterator[str]:
    """A scripted server that always answers score 1 (the CLI's --llm-base-url)."""
    with FakeChatServer(['{"score": 1}']) as srv:
        yield srv.base_url


def test_cli_train_reward_llm_writes_llm_reward_and_doctor_reads_it(
    tmp_path: Path, fake_scorer_url: str
) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["train", "--algo", "iql", "--steps", "1500", "--reward", "llm:every=25,weight=0.3",
         "--llm-base-url", fake_scorer_url, "--out", str(out), "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    lr = metrics["llm_reward"]
    assert set(lr) >= {"calls", "cache_hits", "parse_fallbacks", "variance_fallbacks"}
    assert lr["scored_ticks"] == 60
    assert lr["calls"] == 3 * lr["evaluations"]
    assert lr["evaluations"] + lr["cache_hits"] == 60
    assert lr["parse_fallbacks"] == lr["variance_fallbacks"] == 0
    calls = (out / "calls.jsonl").read_text().splitlines()
    assert len(calls) == lr["calls"]
    doctor = CliRunner().invoke(app, ["doctor", str(out), "--json"], catch_exceptions=False)
    assert doctor.exit_code == 0, doctor.output
    assert all(f["kind"] != "reward_drift" for f in json.loads(doctor.output))


def test_doctor_finds_drift_in_a_run_folder(tmp_path: Path) -> None:
    llm, env = _quarters_curves(60, score=(0.0, 3.0), env=(0.0, -0.5))
    with (tmp_path / "curves.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["episode", "robot_0_return", "robot_0_llm", "robot_0_env"])
        for i in range(60):
            e, s = env["robot_0"][i], llm["robot_0"][i]
            w.writerow([i, e + s, s, e])
    (tmp_path / "metrics.json").write_text(
        json.dumps({"llm_reward": {"evaluations": 12, "variance_fallbacks": 5}})
    )
    result = CliRunner().invoke(app, ["doctor", str(tmp_path), "--json"], catch_exceptions=False)
    kinds = [(f["kind"], f["agents"]) for f in json.loads(result.output)]
    assert ("reward_drift", ["robot_0"]) in kinds
    assert ("reward_drift", ["scorer"]) in kinds


# --------------------------------------------------------------------------- the real model


@pytest.mark.llm
def test_embedded_model_samples_can_differ_and_train_records_them(
    embedded_server: EmbeddedServer, tmp_path: Path
) -> None:
    client = embedded_server.client()
    probe = LLMReward(client, goal=GOAL)
    texts = [
        transition(
            "robot_0: no load, 1-2 steps from its pickup\n"
            "robot_1: carrying a load, 6 or more steps from its station",
            "robot_0: carrying a load, 3-5 steps from its station\n"
            "robot_1: no load, 1-2 steps from its pickup",
            ticks=50,
            delivered=d,
        )
        for d in range(3)
    ]

    def answers(text: str, temperature: float, n: int) -> list[float | None]:
        return [
            parse_score(
                client.chat(
                    probe.prompt(text),
                    temperature=temperature,
                    max_tokens=12,
                    json_schema=probe.schema(),
                ).text
            )
            for _ in range(n)
        ]

    # At temperature 0 a local model repeats itself: three samples would be one.
    assert len(set(answers(texts[0], 0.0, 4))) == 1
    # At the scorer's temperature the samples of some state differ.
    assert any(len(set(answers(t, probe.temperature, 6))) > 1 for t in texts)
    with recorded_reward(client, tmp_path / "calls.jsonl", goal=GOAL, seed=0) as scorer:
        run = train(
            "warehouse-tiny", 2, "iql", steps=400, max_steps=100, out_dir=tmp_path,
            reward="llm:every=50", scorer=scorer, progress=False, eval_ticks=20,
        )  # fmt: skip
    lr = run.metrics["llm_reward"]
    assert lr["scored_ticks"] == 8
    assert lr["calls"] == 3 * lr["evaluations"] > 0
    assert -1.0 <= lr["score_mean"] <= 1.0
    records = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert len(records) == lr["calls"]
    assert all(r["error"] is None and r["params"]["temperature"] == 0.5 for r in records)
    assert all(r["parsed"] in (-1.0, 0.0, 1.0) for r in records)  # the schema's levels
