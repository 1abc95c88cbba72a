"""`fleetmind notes calibrate` refuses held-out sets; `notes eval --limit` scores a prefix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FLEETMIND = [sys.executable, "-m", "fleetmind.cli"]
NOTES = Path(__file__).resolve().parents[1] / "data" / "notes"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEETMIND, *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_calibrate_refuses_a_held_out_set_in_one_line() -> None:
    proc = _run("notes", "calibrate", str(NOTES / "dev.jsonl"), str(NOTES / "holdout5.jsonl"))
    assert proc.returncode == 2
    assert "holdout5.jsonl: a held-out set" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_limit_scores_the_first_notes_and_counts_no_questions_for_rules() -> None:
    proc = _run("notes", "eval", str(NOTES / "dev.jsonl"), "--limit", "7", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["limit"] == 7
    (rules,) = out["readers"]
    assert rules["notes"] == 7
    assert rules["questions"] == {
        "asked": 0,
        "answered": 0,
        "abstained": 0,
        "timed_out": 0,
        "added": 0,
    }
