"""The ``fleetmind`` command line."""

from __future__ import annotations


def main() -> None:
    """Entry point of the ``fleetmind`` command."""
    raise SystemExit("fleetmind: the command line is being built")
