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
