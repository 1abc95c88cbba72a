"""``show``: benchmark tables reach a pipe as written, not wrapped at 80 columns."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from rich.table import Table
from fleetmind.cli.common import show
line = "mode [llm] " + "x" * 150
show({}, as_json=False, table=lambda _r: line)
t = Table("a" * 60, "b" * 60, "c" * 60)
t.add_row("1", "2", "3")
show({}, as_json=False, table=lambda _r: t)
"""


def test_tables_are_not_wrapped_or_read_as_markup_when_piped() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    lines = out.splitlines()
    # The text table: one line, its brackets kept.
    assert lines[0] == "mode [llm] " + "x" * 150
    # The Rich table: every header whole on one line.
    header = next(ln for ln in lines if "a" * 60 in ln)
    assert "b" * 60 in header
    assert "c" * 60 in header


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    out = subprocess.run(
        [sys.executable, "-m", "fleetmind.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.strip() == f"fleetmind {version('fleetmind')}"
