"""`fleetmind run`'s summary table shows the run's own faults and how its incidents ended."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from fleetmind.cli import app


def test_a_fault_run_lists_its_faults_and_incidents(tmp_path: Path) -> None:
    args = ["run", "--robots", "4", "--steps", "80", "--out", str(tmp_path / "r")]
    res = CliRunner().invoke(app, [*args, "--fault", "breakdown:1@30+10"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "breakdown:1@30+10" in res.output
    assert "incidents resolved/total" in res.output
    plain = CliRunner().invoke(
        app, ["run", "--robots", "4", "--steps", "40", "--out", str(tmp_path / "p")],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert "faults injected" in plain.output
    assert "none" in plain.output
