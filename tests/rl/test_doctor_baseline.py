"""`fleetmind doctor` sets a policy against the baseline its run measured, on any run folder."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fleetmind.cli import app
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.rl.diagnostics import baseline_findings


def test_a_warehouse_policy_under_half_of_shortest_path_is_flagged() -> None:
    weak = baseline_findings({"tasks_completed": 0, "shortest_path_tasks_completed": 48})
    assert [f.kind for f in weak] == ["below_baseline"]
    assert "learned nothing" in weak[0].message
    assert (
        "is weak"
        in baseline_findings({"tasks_completed": 20, "shortest_path_tasks_completed": 73})[
            0
        ].message
    )
    assert baseline_findings({"tasks_completed": 38, "shortest_path_tasks_completed": 73}) == []


def test_an_rware_policy_no_better_than_random_is_flagged() -> None:
    flat = {"deliveries_per_episode": 0.02, "random_deliveries_per_episode": 0.03}
    assert [f.kind for f in baseline_findings(flat)] == ["below_baseline"]
    good = {"deliveries_per_episode": 15.3, "random_deliveries_per_episode": 0.03}
    assert baseline_findings(good) == []


def test_doctor_flags_a_train_run_that_learned_nothing(tmp_path: Path) -> None:
    out = tmp_path / "iql"
    args = ["train", "--map", "warehouse-tiny", "--robots", "2", "--algo", "iql"]
    res = CliRunner().invoke(app, [*args, "--steps", "1000", "--seed", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["doctor", str(out), "--json"])
    assert res.exit_code == 0, res.output
    kinds = [r["kind"] for r in json.loads(res.output)]
    assert "below_baseline" in kinds


def test_doctor_reads_the_folders_fleetmind_run_writes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    execute(RunConfig(robots=4, steps=60), run)
    res = CliRunner().invoke(app, ["doctor", str(run)])
    assert res.exit_code == 0, res.output
    assert "LLM drift" in res.output


def test_report_names_a_training_folder_and_points_to_doctor(tmp_path: Path) -> None:
    (tmp_path / "curves.csv").write_text("episode,robot_0\n0,1.0\n")
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code != 0
    said = res.output + str(res.exception)  # the CLI's entry point prints a ConfigError as one line
    assert "a training run" in said
    assert "fleetmind doctor" in said
