"""``fleetmind bench reward`` (FIELD-NOTES §6) on a scripted scorer: shape, parts, the table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetmind.bench import reward as bench
from fleetmind.cli import app
from fleetmind.errors import ConfigError
from fleetmind.testing.fake_server import FakeChatServer


def test_quick_run_on_a_scripted_scorer(tmp_path: Path) -> None:
    with FakeChatServer(['{"score": 1}']) as srv:
        result = bench.run(quick=True, steps=800, out_dir=tmp_path, base_url=srv.base_url)
    assert set(result["runs"]) == set(bench.ARMS)
    env_run, mixed, alone = (result["runs"][arm][0] for arm in ("env", "llm-mixed", "llm-alone"))
    assert env_run["llm_calls"] == 0
    assert mixed["llm_calls"] == 3 * mixed["llm_evaluations"] > 0
    # One cache for the whole experiment: the alone arm meets situations mixed already scored.
    assert alone["llm_cache_hits"] > 0
    assert alone["llm_scored_ticks"] == 16  # 800 ticks / 50
    assert alone["llm_evaluations"] + alone["llm_cache_hits"] == 16
    assert mixed["llm_tokens"] > 0
    # The scorer always says 1: alone, every robot earns weight 1 at ticks 50, 100, 150, 200.
    with (tmp_path / "llm-alone" / "seed-0" / "curves.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    assert all(float(r["robot_0_llm"]) == 4.0 for r in rows)
    assert all(float(r["robot_0_return"]) == pytest.approx(4.0) for r in rows)
    # The environment arm's run folder has no recording; the scored ones do, one line per call.
    assert not (tmp_path / "env" / "seed-0" / "calls.jsonl").exists()
    calls = (tmp_path / "llm-mixed" / "seed-0" / "calls.jsonl").read_text().splitlines()
    assert len(calls) == mixed["llm_calls"]
    assert result["shortest_path"]["deliveries_per_tick"] > 0
    table = bench.format_table(result)
    assert "| env |" in table
    assert "| llm:every=50,weight=0.5 |" in table
    assert "| llm:every=50,weight=1,alone |" in table
    assert "| shortest path (no learning) |" in table


def test_bad_sizes_are_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="steps: at least 800"):
        bench.run(steps=100, out_dir=tmp_path)
    with pytest.raises(ConfigError, match="reward: every must be at least 1"):
        bench.run(every=0, out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_json(tmp_path: Path) -> None:
    with FakeChatServer(['{"score": 0}']) as srv:
        result = CliRunner().invoke(
            app,
            ["bench", "reward", "--quick", "--steps", "800", "--every", "100", "--out",
             str(tmp_path), "--llm-base-url", srv.base_url, "--json"],
            catch_exceptions=False,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["config"]["specs"]["llm-mixed"] == "llm:every=100,weight=0.5"
    assert data["summary"]["llm-mixed"]["llm_calls"]["mean"] > 0


def test_control_arms_score_blind_to_the_state(tmp_path: Path) -> None:
    from fleetmind.llm.reward import ControlScorer

    const = ControlScorer([1.0, 0.0, 0.0, 1.0], mode="constant")
    assert {const.evaluate(f"state {i}") for i in range(5)} == {0.5}
    draws = ControlScorer([1.0, -1.0], mode="random", seed=3)
    got = [draws.evaluate("same state") for _ in range(40)]
    assert set(got) == {1.0, -1.0}  # the state never changes; the score does
    again = ControlScorer([1.0, -1.0], mode="random", seed=3)
    assert [again.evaluate("other") for _ in range(40)] == got  # seeded
    with pytest.raises(ValueError, match="needs the LLM arm's scores"):
        ControlScorer([], mode="constant")
    # In the bench: a scorer that always says 1 makes the constant control say 1 too, and the
    # controls make no model call.
    with FakeChatServer(['{"score": 1}']) as srv:
        result = bench.run(quick=True, steps=800, out_dir=tmp_path, base_url=srv.base_url)
    for control in bench.CONTROLS:
        run = result["runs"][control][0]
        assert run["llm_calls"] == 0
        assert run["score_mean"] == pytest.approx(1.0)
    assert set(result["versus_controls"]) == set(bench.CONTROLS)
    cell = result["versus_controls"]["const-alone"]["late_deliveries_per_tick"]
    assert cell["differs"] is None  # one seed: no interval
    assert "llm-alone - const-alone:" in bench.format_table(result)
