"""The CLI's --backend ray gives the same comparison as local for the same seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetmind.cli import app

pytest.importorskip("ray")


def test_compare_on_ray_matches_local(tmp_path: Path) -> None:
    runner = CliRunner()
    tables = {}
    for backend in ("local", "ray"):
        out = tmp_path / backend
        result = runner.invoke(
            app,
            [
                "compare",
                "--strategies",
                "classical,greedy",
                "--steps",
                "40",
                "--robots",
                "4",
                "--seeds",
                "2",
                "--backend",
                backend,
                "--out",
                str(out),
                "--json",
                "--no-report",
            ],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        tables[backend] = json.loads((out / "comparison.json").read_text())["table"]
    for name in ("classical", "greedy"):
        for key in ("throughput", "on_time_rate", "collisions", "shield_interventions"):
            assert tables["ray"][name][key] == tables["local"][name][key]


def test_replay_on_ray_matches_local(tmp_path: Path) -> None:
    runner = CliRunner()
    run = tmp_path / "run"
    ok = runner.invoke(app, ["run", "--steps", "60", "--robots", "4", "--out", str(run), "--json"])
    assert ok.exit_code == 0, ok.output
    outs = {}
    for backend in ("local", "ray"):
        res = runner.invoke(
            app,
            [
                "replay",
                str(run),
                "--planner",
                "greedy",
                "--horizon",
                "10",
                "--backend",
                backend,
                "--json",
            ],
            catch_exceptions=False,
        )
        assert res.exit_code == 0, res.output
        outs[backend] = json.loads(res.output)
    for key in ("decisions", "gain_total", "agreement_mean"):
        assert (
            outs["ray"]["decisions"]["summary"][key] == outs["local"]["decisions"]["summary"][key]
        )
    assert (
        outs["ray"]["rl"]["pooled"]["transitions"] == outs["local"]["rl"]["pooled"]["transitions"]
    )
