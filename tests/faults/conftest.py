"""Helpers of the fault corpus: the ``fleetmind`` command as a user runs it.

The command, the judges and the case lists live in :mod:`fleetmind.bench.faults` (what
``fleetmind bench faults`` runs); these wrap them as assertions.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from fleetmind.bench.command import FLEETMIND, cli
from fleetmind.bench.faults import error_lines, refusal_problems

__all__ = ["FLEETMIND", "fleetmind", "metrics", "one_line_error"]

fleetmind = cli


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The error line of a refused command; fails unless it is one line, exit 2, no traceback."""
    assert refusal_problems(proc) == [], proc.stderr[-2000:]
    return error_lines(proc)[0]


def metrics(folder: Path) -> dict[str, Any]:
    """A run folder's metrics.json."""
    data: dict[str, Any] = json.loads((folder / "metrics.json").read_text())
    return data
