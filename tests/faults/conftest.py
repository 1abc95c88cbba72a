"""Helpers of the fault corpus: the ``fleetmind`` command as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

FLEETMIND = [sys.executable, "-m", "fleetmind.cli"]


def fleetmind(
    *args: str | Path, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``fleetmind ARGS`` in a subprocess; never raises on a non-zero exit."""
    return subprocess.run(
        [*FLEETMIND, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The error line of a refused command; fails unless it is one line, exit 2, no traceback."""
    err = proc.stderr.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def metrics(folder: Path) -> dict[str, Any]:
    """A run folder's metrics.json."""
    data: dict[str, Any] = json.loads((folder / "metrics.json").read_text())
    return data


def fake_server_module() -> Any:
    """The scripted OpenAI-compatible server's module, wherever it lives now."""
    try:
        from fleetmind.testing import fake_server
    except ImportError:  # before the move to fleetmind.testing
        from fleetmind.llm import fake_server  # type: ignore[no-redef]
    return fake_server
