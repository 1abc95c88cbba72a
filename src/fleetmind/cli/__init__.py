"""The ``fleetmind`` command line, one module per command group.

Every command prints one clear line for bad input (file, field, what was expected) and exits with
a non-zero code; ``--debug`` shows the traceback instead. Exit codes: 0 success, 1 a run failed
its own checks, 2 bad input or configuration.

Modules: :mod:`~fleetmind.cli.common` (the app, shared options and printing),
:mod:`~fleetmind.cli.run` (run, demo, compare, replay, report), :mod:`~fleetmind.cli.train`
(train, doctor), :mod:`~fleetmind.cli.bench` (every benchmark), :mod:`~fleetmind.cli.notes`,
:mod:`~fleetmind.cli.lorr`, :mod:`~fleetmind.cli.serve`.
"""

from __future__ import annotations

import sys

# Importing the command modules registers their commands on ``app``, in help order.
from fleetmind.cli import bench, lorr, nav, notes, rllib, run, serve, train  # noqa: F401
from fleetmind.cli.common import EXIT_BAD_INPUT, app, kpi_table, state
from fleetmind.errors import FleetmindError

__all__ = ["app", "kpi_table", "main"]


def main() -> None:
    """Entry point of the ``fleetmind`` command: one-line errors unless ``--debug``."""
    try:
        app()
    except FleetmindError as exc:
        if state["debug"]:
            raise
        # One line, never wrapped: scripts and people grep for it.
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(EXIT_BAD_INPUT) from None
