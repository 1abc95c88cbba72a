"""fleetmind bench faults: the judge of a refusal, and the quick corpus as a user runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleetmind.bench import faults as bench


def test_a_refusal_is_judged_by_its_line_its_exit_and_its_traceback(tmp_path: Path) -> None:
    proc = bench.cli("run", "--seed", "-1", "--steps", "5", cwd=tmp_path)
    assert bench.refusal_problems(proc, "seed") == []
    assert bench.refusal_problems(proc, "--tasks") != []  # names the wrong flag
    crashed = subprocess.CompletedProcess(
        [], 1, "", "Traceback (most recent call last):\nValueError: x\n"
    )
    assert bench.refusal_problems(crashed) == ["exit 1", "a traceback", "0 error lines"]


@pytest.mark.slow
def test_the_quick_corpus_meets_every_target() -> None:
    proc = bench.cli("bench", "faults", "--quick", "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    for family in ("bad_inputs", "run_folder", "kill", "dashboard"):
        assert result[family]["cases"] >= 1
        assert result[family]["clean"] == result[family]["cases"], result[family]
    assert result["dashboard"]["leaked"] == 0
    (row,) = result["hostile"]
    assert set(row["cases"]) == {"prose", "hang"}
    assert all(c["delivered_vs_solver"] >= 0.9 for c in row["cases"].values())
    assert row["cases"]["hang"]["calls_abandoned"] >= 1  # the hung call, counted at the end
    assert result["targets_met"]
    rows = bench.table_rows(result)
    assert [r[0] for r in rows][:2] == ["bad inputs", "run folders"]
    assert all(r[-1] == "met" for r in rows)
