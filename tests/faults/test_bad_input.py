"""Bad input: one line naming the flag or file, exit 2, never a traceback (issue 12's cases).

The cases are those of ``fleetmind bench faults`` (:mod:`fleetmind.bench.faults`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleetmind.bench.faults import (
    BAD_INPUTS,
    DAMAGE_COMMANDS,
    DAMAGES,
    RUN_ARGS,
    SEED_COMMANDS,
    SILENT_INPUTS,
    damage,
    damage_skipped,
    write_bad_files,
)

from .conftest import fleetmind, one_line_error

CASES = BAD_INPUTS


@pytest.mark.parametrize(("case", "args", "named"), CASES, ids=[c[0] for c in CASES])
def test_run_refuses_bad_input_in_one_line(
    tmp_path: Path, case: str, args: tuple[str, ...], named: str
) -> None:
    write_bad_files(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in args]
    line = one_line_error(fleetmind(*RUN_ARGS, "--out", tmp_path / "out", *argv, timeout=60))
    assert named in line, (case, line)
    assert not (tmp_path / "out").exists(), case  # refused before the folder was touched


@pytest.mark.parametrize("command", SEED_COMMANDS)
def test_demo_and_compare_refuse_a_negative_seed(tmp_path: Path, command: tuple[str, ...]) -> None:
    line = one_line_error(fleetmind(*command, "--seed", "-1", "--out", tmp_path / "o"))
    assert "seed" in line


def test_a_huge_surge_is_cut_and_the_cut_recorded(tmp_path: Path) -> None:
    from fleetmind.eval.store import load_events

    proc = fleetmind(*RUN_ARGS, "--out", tmp_path / "s", "--fault", "surge@5:100000000")
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


@pytest.mark.parametrize(("kind", "named"), DAMAGES)
@pytest.mark.parametrize("command", DAMAGE_COMMANDS)
def test_report_and_replay_of_a_damaged_folder_say_which_file(
    recorded: Path, tmp_path: Path, kind: str, named: str, command: str
) -> None:
    if damage_skipped(command, kind):
        pytest.skip("the decision replay of a run without an LLM reads neither file")
    folder = tmp_path / "copy"
    shutil.copytree(recorded, folder)
    damage(folder, kind)
    line = one_line_error(fleetmind(command, folder, timeout=120))
    assert named in line


# ---------------------------------------------------------------------- accepted silently before
SILENT = SILENT_INPUTS


@pytest.mark.parametrize(("case", "args", "named"), SILENT, ids=[c[0] for c in SILENT])
def test_inputs_once_accepted_silently_are_refused(
    tmp_path: Path, case: str, args: tuple[str, ...], named: str
) -> None:
    write_bad_files(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in args]
    line = one_line_error(fleetmind(*RUN_ARGS, "--out", tmp_path / "out", *argv, timeout=60))
    assert named in line, (case, line)
    assert not (tmp_path / "out").exists(), case


def test_a_fleet_without_a_capability_is_warned(tmp_path: Path) -> None:
    from .conftest import metrics

    proc = fleetmind("run", "--robots", "2", "--steps", "10", "--json", "--out", tmp_path / "o")
    assert proc.returncode == 0, proc.stderr
    (warning,) = metrics(tmp_path / "o")["warnings"]
    assert "no robot has 'cold', 'heavy'" in warning
