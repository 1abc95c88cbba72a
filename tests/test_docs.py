"""Every command in the docs parses against the real CLI, and the tour runs (mirrored small)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from fleetmind.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "README.zh-CN.md", *sorted((ROOT / "docs").glob("*.md"))]


def _doc_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
            for line in block.splitlines():
                line = line.split("  #")[0].strip()
                if line.startswith("fleetmind "):
                    found.append((doc.name, line))
    return found


def _parse(args: list[str]) -> None:
    """Parse (not run) a command line with click: unknown commands or options raise."""
    cmd: click.Command = get_command(app)
    ctx = cmd.make_context("fleetmind", list(args), resilient_parsing=False)
    while isinstance(cmd, click.Group):
        rest = [*ctx.protected_args, *ctx.args]
        name, sub, sub_args = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"no command {name!r}"
        ctx = sub.make_context(name, sub_args, parent=ctx)
        cmd = sub


COMMANDS = _doc_commands()


def test_docs_show_commands() -> None:
    assert len(COMMANDS) >= 15
    assert {line.split()[1] for _, line in COMMANDS} >= {
        "run",
        "compare",
        "report",
        "replay",
        "train",
        "doctor",
        "serve",
        "bench",
        "demo",
    }


@pytest.mark.parametrize(("doc", "line"), COMMANDS)
def test_doc_command_parses(doc: str, line: str) -> None:
    args = shlex.split(line)[1:]
    # Values that only exist on the reader's machine are fine to parse as given.
    _parse(args)


def test_the_tour_runs_mirrored_small(tmp_path: Path) -> None:
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    rl = tmp_path / "rl"
    ok(
        "run",
        "--map",
        "warehouse-small",
        "--robots",
        "4",
        "--steps",
        "60",
        "--executor",
        "rl",
        "--out",
        str(rl),
        "--json",
    )
    faults = tmp_path / "faults"
    ok(
        "run",
        "--steps",
        "80",
        "--fault",
        "breakdown:robot_2@20+10",
        "--fault",
        "surge@30:5",
        "--planner-mode",
        "sync",
        "--out",
        str(faults),
        "--json",
    )
    cmp = tmp_path / "cmp"
    ok(
        "compare",
        "--map",
        "warehouse-small",
        "--robots",
        "4",
        "--steps",
        "40",
        "--strategies",
        "classical,classical:noshield",
        "--seeds",
        "1",
        "--out",
        str(cmp),
        "--json",
    )
    ok("report", str(cmp))
    ok("replay", str(faults), "--planner", "greedy", "--horizon", "10", "--json")
    iql = tmp_path / "iql"
    ok(
        "train",
        "--map",
        "warehouse-tiny",
        "--robots",
        "2",
        "--algo",
        "iql",
        "--reward-mode",
        "difference",
        "--steps",
        "2000",
        "--out",
        str(iql),
        "--json",
    )
    ok("doctor", str(iql))
    metrics = json.loads((rl / "metrics.json").read_text())
    assert metrics["collisions"] == 0
    assert (cmp / "comparison.json").exists()


def test_bad_input_is_one_line_and_exit_2() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "fleetmind.cli", "run", "--map", "no-such-map"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "no-such-map" in out.stderr


def test_every_strategy_name_is_in_the_help_and_the_readme() -> None:
    from fleetmind.eval.strategies import STRATEGIES

    result = CliRunner().invoke(app, ["compare", "--help"], terminal_width=400)
    assert result.exit_code == 0
    helptext = " ".join(result.output.split())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in STRATEGIES:
        assert f"{name}," in helptext or f"{name} (" in helptext, name
        assert f"| `{name}` |" in readme, name


def _named(name: str, text: str) -> bool:
    """Whether ``name`` stands alone in ``text`` (``rl`` is not found inside ``rl-guided``)."""
    return re.search(rf"(?<![\w+-]){re.escape(name)}(?![\w+-])", text) is not None


def _help(*args: str) -> str:
    # Wide enough that no name is broken at its hyphen; box borders (if any) go, words stay.
    result = CliRunner().invoke(
        app, [*args, "--help"], env={"COLUMNS": "400"}, terminal_width=400, max_content_width=400
    )
    assert result.exit_code == 0, result.output
    return " ".join(result.output.replace("│", " ").split())


def _readme_list(option: str) -> set[str]:
    """The names README gives after ``(`--option`: ...)``, exactly."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(rf"\(`{re.escape(option)}`: (.*?)\)", readme)
    assert found is not None, option
    return set(re.findall(r"`([^`]+)`", found.group(1)))


def test_every_executor_planner_and_reader_name_is_in_the_help_and_the_readme() -> None:
    from typing import get_args

    from fleetmind.dispatch.notes.readers import READERS
    from fleetmind.eval.runner import ExecutorName, PlannerName

    executors, planners = get_args(ExecutorName), get_args(PlannerName)
    run_help = _help("run")
    # The option's own help, so a name quoted elsewhere on the page does not count.
    executor_help = run_help.split("--executor", 1)[1].split(" --", 1)[0]
    planner_help = run_help.split("--planner ", 1)[1].split(" --", 1)[0]
    reader_help = run_help.split("--note-reader", 1)[1].split(" --", 1)[0]
    for name in executors:
        assert _named(name, executor_help), f"run --help: executor {name}"
    for name in planners:
        assert _named(name, planner_help), f"run --help: planner {name}"
        assert _named(name, _help("replay").split("--planner", 1)[1].split(" --", 1)[0]), name
    for name in READERS:
        assert _named(name, reader_help), f"run --help: reader {name}"
        for command in (("notes", "read"), ("notes", "eval")):
            text = _help(*command).split("--reader", 1)[1].split(" --", 1)[0]
            assert _named(name, text), f"{' '.join(command)} --help: reader {name}"
    # README names exactly the executors and readers the code accepts, no more, no fewer.
    assert _readme_list("--executor") == set(executors)
    assert _readme_list("--reader") == set(READERS)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in planners:
        assert f"`{name}`" in readme, f"README: planner {name}"


def test_a_default_written_in_the_help_text_is_shown() -> None:
    """``[default: ...]`` in an option's help is text, not a markup tag that vanishes."""
    assert "[default: robots/40]" in _help("run")
    assert "[default: 0,1,2]" in _help("bench", "marl")
