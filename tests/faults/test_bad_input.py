"""Bad input: one line naming the flag or file, exit 2, never a traceback (issue 12's cases)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import fleetmind, one_line_error

RUN = ("run", "--robots", "3", "--steps", "20", "--json")


def _files(tmp: Path) -> None:
    (tmp / "latin1.jsonl").write_bytes(b'{"tick": 0, "note": "caf\xe9"}\n')
    (tmp / "latin1.yaml").write_bytes(b'steps: 5\nmap: "caf\xe9"\n')
    (tmp / "latin1-calls.jsonl").write_bytes(b'{"request_hash": "\xff"}\n')
    (tmp / "replay.yaml").write_text(f"planner: llm\nreplay_calls: {tmp / 'latin1-calls.jsonl'}\n")


# (case, arguments after `fleetmind run ...`, what the line must name)
CASES = [
    ("negative seed", ["--seed", "-1"], "seed"),
    ("non-UTF-8 task file", ["--tasks", "{tmp}/latin1.jsonl"], "latin1.jsonl"),
    ("non-UTF-8 YAML", ["--config", "{tmp}/latin1.yaml"], "latin1.yaml"),
    ("non-UTF-8 calls file", ["--config", "{tmp}/replay.yaml"], "latin1-calls.jsonl"),
    ("overflowing fault", ["--fault", "breakdown:robot_1@10+99999999999999999999"], "--fault"),
    ("overflowing start", ["--fault", "llm-outage@99999999999999999999+1"], "--fault"),
    ("unknown fault robot", ["--fault", "breakdown:robot_99@10+5"], "--fault"),
    ("endless task file", ["--tasks", "/dev/zero"], "/dev/zero"),
    ("task file is a folder", ["--tasks", "{tmp}"], "task file"),
    ("missing task file", ["--tasks", "{tmp}/nope.jsonl"], "nope.jsonl"),
    ("missing model file", ["--planner", "llm", "--llm-gguf", "{tmp}/no.gguf"], "--llm-gguf"),
]


@pytest.mark.parametrize(("case", "args", "named"), CASES, ids=[c[0] for c in CASES])
def test_run_refuses_bad_input_in_one_line(
    tmp_path: Path, case: str, args: list[str], named: str
) -> None:
    _files(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in args]
    line = one_line_error(fleetmind(*RUN, "--out", tmp_path / "out", *argv, timeout=60))
    assert named in line, (case, line)
    assert not (tmp_path / "out").exists(), case  # refused before the folder was touched


@pytest.mark.parametrize("command", [("demo",), ("compare", "--strategies", "classical")])
def test_demo_and_compare_refuse_a_negative_seed(tmp_path: Path, command: tuple[str, ...]) -> None:
    line = one_line_error(fleetmind(*command, "--seed", "-1", "--out", tmp_path / "o"))
    assert "seed" in line


def test_a_huge_surge_is_cut_and_the_cut_recorded(tmp_path: Path) -> None:
    from fleetmind.eval.store import load_events

    proc = fleetmind(*RUN, "--out", tmp_path / "s", "--fault", "surge@5:100000000")
    assert proc.returncode == 0, proc.stderr
    assert "cut" in proc.stderr  # said once, as a warning
    start = next(e for e in load_events(tmp_path / "s") if e["kind"] == "fault_start")
    assert start["cut"] == 100000000 - 1000


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rec") / "run"
    proc = fleetmind("run", "--robots", "3", "--steps", "60", "--json", "--out", folder)
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("parquet", "part-00000.parquet"),
        ("calls", "calls.jsonl"),
        ("metrics", "metrics.json"),
        ("events", "events.parquet"),
    ],
)
@pytest.mark.parametrize("command", ["report", "replay"])
def test_report_and_replay_of_a_damaged_folder_say_which_file(
    recorded: Path, tmp_path: Path, damage: str, named: str, command: str
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(recorded, folder)
    if damage == "parquet":
        (folder / "episode.parquet" / "part-00000.parquet").write_bytes(b"PAR1 not really")
    elif damage == "calls":
        (folder / "calls.jsonl").write_bytes(b'{"call_id": 0, "x": "\xff\xfe"}\n')
    elif damage == "metrics":
        (folder / "metrics.json").write_bytes(b"\xff{")
    else:
        next((folder / "events.parquet").glob("part-*.parquet")).write_bytes(b"\x00" * 64)
    if command == "replay" and damage in ("calls", "metrics"):
        pytest.skip("the decision replay of a run without an LLM reads neither file")
    line = one_line_error(fleetmind(command, folder, timeout=120))
    assert named in line


# ---------------------------------------------------------------------- accepted silently before
WALLED = "#######\n#x#..S#\n###.R.#\n#R....#\n#######\n"  # the only pickup is walled in
TASKS = '{"tick": 0, "pickup": [1, 1], "station": [1, 3]%s}\n'


def _silent(tmp: Path) -> None:
    (tmp / "walled.txt").write_text(WALLED)
    (tmp / "caps.jsonl").write_text(TASKS % ', "capability": "frozen"')
    note = ', "constraints": [{"kind": "only_robot", "robot": "robot_9", "tick": null}]'
    (tmp / "ghost.jsonl").write_text("# a comment\n" + TASKS % note)


SILENT = [
    ("unreachable pickup", ["--map", "{tmp}/walled.txt"], "no station can be reached"),
    (
        "capability no robot has",
        ["--tasks", "{tmp}/caps.jsonl"],
        "caps.jsonl:1: field 'capability'",
    ),
    (
        "note names a robot not in the fleet",
        ["--tasks", "{tmp}/ghost.jsonl"],
        "ghost.jsonl:2: field 'constraints[0].robot'",
    ),
]


@pytest.mark.parametrize(("case", "args", "named"), SILENT, ids=[c[0] for c in SILENT])
def test_inputs_once_accepted_silently_are_refused(
    tmp_path: Path, case: str, args: list[str], named: str
) -> None:
    _silent(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in args]
    line = one_line_error(fleetmind(*RUN, "--out", tmp_path / "out", *argv, timeout=60))
    assert named in line, (case, line)
    assert not (tmp_path / "out").exists(), case


def test_a_fleet_without_a_capability_is_warned(tmp_path: Path) -> None:
    from .conftest import metrics

    proc = fleetmind("run", "--robots", "2", "--steps", "10", "--json", "--out", tmp_path / "o")
    assert proc.returncode == 0, proc.stderr
    (warning,) = metrics(tmp_path / "o")["warnings"]
    assert "no robot has 'cold', 'heavy'" in warning
