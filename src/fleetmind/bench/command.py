"""The ``fleetmind`` command as users run it, in a subprocess.

The benchmarks that judge its answers (``bench faults`` and its dashboard part) start it here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FLEETMIND = (sys.executable, "-m", "fleetmind.cli")
"""The ``fleetmind`` command, in a subprocess of this interpreter."""


def cli(
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
