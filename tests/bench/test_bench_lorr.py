"""fleetmind lorr run and bench lorr: the run folder, the metrics, the score lines."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from fleetmind.bench import lorr as bench
from fleetmind.bench import lorr2024
from fleetmind.cli import app
from fleetmind.errors import ConfigError
from fleetmind.sim import lorr


def test_run_instance_writes_the_run_folder_and_validates(tmp_path: Path) -> None:
    m = bench.run_instance("2023/warehouse_small_10", steps=60, out=tmp_path, time_limit=None)
    assert m["steps"] == 60
    assert m["robots"] == 10
    assert m["collisions"] == 0
    assert m["lorr"]["validated"]
    assert m["tasks_completed"] == sum(m["per_agent_reward"].values()) > 0
    for name in ("metrics.json", "lorr_output.json", "config.json", "calls.jsonl"):
        assert (tmp_path / name).is_file()
    output = json.loads((tmp_path / "lorr_output.json").read_text())
    assert output["numTaskFinished"] == m["tasks_completed"]
    inst = lorr.read_instance(bench.resolve("2023/warehouse_small_10"))
    assert lorr.validate(output, inst, time_limit=None).ok
    rows = pq.read_table(tmp_path / "episode.parquet").to_pydict()
    assert len(rows["tick"]) == 60 * 10
    assert rows["orientation"][:10] == [0] * 10  # everyone starts facing east
    assert set(rows["action"]) <= set("FRCWT")


def test_bench_rows_score_against_the_best_known(monkeypatch) -> None:
    monkeypatch.setitem(bench.BEST_KNOWN, "2023/warehouse_small_10", {"tasks": 400, "steps": 30})
    result = lorr2024.run(instances=["2023/warehouse_small_10"], lever_sets=["plain"], curves=False)
    (row,) = result["rows"]
    assert row["steps"] == 30  # the best-known result's length by default
    assert row["fraction_of_best"] == row["finished"] / 400
    assert row["conflicts"] == 0
    assert f"of best-known 400 = {row['finished'] / 400:.1%}" in bench.format_row(row)
    short = lorr2024.run(
        instances=["2023/warehouse_small_10"], lever_sets=["plain"], steps=5, curves=False
    )
    assert "(other length)" in bench.format_row(short["rows"][0])


def test_cli_lorr_run_prints_the_score_and_refuses_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["lorr", "run", "2023/warehouse_small_10", "--steps", "40", "--out", str(tmp_path), "-q"],
    )
    assert res.exit_code == 0, res.output
    assert "10 robots, 40 steps" in res.output
    assert "0 conflicts (validated: True)" in res.output
    res = runner.invoke(app, ["lorr", "run", "2023/warehouse_small_10", "--levers", "magic"])
    assert res.exit_code != 0


def test_cli_lorr_validate_passes_our_file_and_names_an_altered_action(tmp_path: Path) -> None:
    runner = CliRunner()
    run = ["lorr", "run", "2023/warehouse_small_10", "--steps", "40", "--out", str(tmp_path), "-q"]
    assert runner.invoke(app, run).exit_code == 0
    output = tmp_path / "lorr_output.json"
    check = ["lorr", "validate", str(output), "--instance", "2023/warehouse_small_10"]
    res = runner.invoke(app, check)
    assert res.exit_code == 0, res.output
    assert "agrees with the rules" in res.output
    data = json.loads(output.read_text())
    path = data["actualPaths"][3].split(",")
    path[12] = "R" if path[12] != "R" else "C"
    data["actualPaths"][3] = ",".join(path)
    output.write_text(lorr.dumps(data))
    res = runner.invoke(app, [*check, "--json"])
    assert res.exit_code == 1
    problems = json.loads(res.output)["problems"]
    assert problems[0].startswith("robot 3, timestep 13 (action 12): actualPaths has")
    res = runner.invoke(app, ["lorr", "validate", str(tmp_path / "none.json"), "--instance", "x"])
    assert res.exit_code != 0


def test_bench_quick_keeps_run_folders_that_validate_and_resume(tmp_path: Path) -> None:
    first = lorr2024.run(quick=True, out=tmp_path)
    rows = first["rows"] + first["curves"]
    assert first["reused"] == 0
    assert len(first["rows"]) >= 1
    assert len(first["curves"]) == 2
    for r in rows:
        assert r["validates"], r["validation_problems"]
        assert r["conflicts"] == 0
        folder = Path(r["folder"])
        assert folder.parent.parent.parent == tmp_path
        # the lorr validate code on the file itself, as a user would run it
        inst, check = bench.validate_file(folder / "lorr_output.json", r["instance"])
        assert check.ok
        assert check.finished == r["finished"] > 0
        assert inst.team_size == r["robots"]
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["tasks_completed"] == r["finished"]
        marker = folder / lorr2024.ROW_FILE
        assert marker.stat().st_mtime_ns >= max(f.stat().st_mtime_ns for f in folder.iterdir())
    kit = lorr2024.kit_defaults()
    if ("2024/random_32_32_20_100", 300) in kit:  # the shared start-kit outputs are here
        (rand,) = [r for r in first["rows"] if r["instance"] == "2024/random_32_32_20_100"]
        assert rand["kit_default"] == kit[("2024/random_32_32_20_100", 300)] == 523
        assert "(start-kit default: 523," in bench.format_row(rand)

    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    res = CliRunner().invoke(app, ["bench", "lorr", "--quick", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    second = json.loads(res.output[res.output.index("{") :])
    assert second["reused"] == len(rows)  # nothing ran again
    assert second["rows"] + second["curves"] == rows
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == stamps

    # other settings in the same folder: the run is redone and its row says so
    small = Path(first["curves"][0]["folder"])
    again, reused = lorr2024.bench_run(
        "2023/warehouse_small_10", small, steps=50, time_limit=1.0, levers="highway"
    )
    assert not reused
    assert again["steps"] == 50
    assert again["validates"]
    saved = json.loads((small / lorr2024.ROW_FILE).read_text())
    assert saved["settings"]["steps"] == 50
    assert saved["row"] == again


def test_bench_lorr_refuses_a_file_as_out(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    res = CliRunner().invoke(app, ["bench", "lorr", "--quick", "--out", str(tmp_path / "f")])
    assert res.exit_code != 0
    # fleetmind's entry point prints a ConfigError as its one line
    assert isinstance(res.exception, ConfigError)
    assert str(res.exception).endswith("/f: a file, not a folder")
