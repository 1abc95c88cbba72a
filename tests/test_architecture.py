"""docs/architecture.md stays a true map: every path it names exists, every package is on it."""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from fleetmind.cli import app

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "fleetmind"
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _named_paths() -> set[str]:
    """Paths in backticks: from the repository root, or ``pkg/module.py`` under src/fleetmind."""
    found = set()
    for token in re.findall(r"`([^`\s]+)`", PAGE):
        if token.startswith(("src/", "tests/", "benchmarks/", "docs/")):
            found.add(token)
        elif re.fullmatch(r"[a-z0-9_]+/([a-z0-9_]+/)*([a-z0-9_]+\.py)?", token):
            found.add(f"src/fleetmind/{token}")
    return found


def test_every_path_named_exists() -> None:
    paths = _named_paths()
    assert len(paths) > 40
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []


def test_every_package_and_benchmark_is_named() -> None:
    paths = _named_paths()
    packages = {f"src/fleetmind/{p.name}/" for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert packages - paths == set()
    benches = {f"src/fleetmind/bench/{p.name}" for p in (SRC / "bench").glob("[!_]*.py")}
    assert benches - paths == set()


def test_every_bench_command_is_in_the_table() -> None:
    group = get_command(app).commands["bench"]  # type: ignore[attr-defined]
    listed = set(re.findall(r"^\| `bench ([a-z-]+)` \|", PAGE, flags=re.M))
    assert listed == set(group.commands)


def test_every_field_notes_section_has_a_row() -> None:
    for section in ("§2", "§3.1", "§3.2", "§3.3", "§4.1", "§4.2", "§4.3"):
        assert f"| {section} " in PAGE, section
    for section in ("§5.1", "§5.2", "§5.3", "§5.4", "§5.5", "§6"):
        assert f"| {section} " in PAGE, section
