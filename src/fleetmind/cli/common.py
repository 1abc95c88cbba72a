"""What every command shares: the Typer app, the consoles, shared options, printing helpers."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from rich.progress import Progress

app = typer.Typer(
    name="fleetmind",
    help="Run a warehouse robot fleet with a planner, an executor and a shield.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Help text is plain: with rich markup on, an option's literal "[default: ...]" was read as
    # a markup tag and vanished from --help.
    rich_markup_mode=None,
)
console = Console()
err_console = Console(stderr=True)
state: dict[str, bool] = {"debug": False}

EXIT_BAD_INPUT = 2
WIDE = 200
"""Columns of a Rich table printed to a pipe or a file."""

# Options several commands share, declared once.
LLMBaseUrl = Annotated[
    str | None, typer.Option(help="OpenAI-compatible base URL (default: the embedded model).")
]
LLMModel = Annotated[str | None, typer.Option(help="Model name to request.")]
LLMApiKey = Annotated[str | None, typer.Option(help="API key (never recorded).")]
RayAddress = Annotated[
    str | None, typer.Option(help="Ray cluster address (default: start a local Ray).")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
MapName = Annotated[str, typer.Option("--map", help="Preset, map file or rware layout.")]
Robots = Annotated[int, typer.Option(help="Number of robots.")]
OrderRate = Annotated[
    float | None, typer.Option(help="Orders per tick (Poisson). [default: robots/40]")
]
LLMGguf = Annotated[
    str | None,
    typer.Option(help="GGUF model file for the embedded server (default: SmolLM2-135M)."),
]
DEMO_OUT = Path("runs/demo")
TRAIN_OUT = Path("runs/train")


def _version(value: bool) -> None:
    """``--version``: print the installed version and stop."""
    if value:
        from fleetmind import __version__

        console.print(f"fleetmind {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_version
        ),
    ] = False,
) -> None:
    """fleetmind: planner (LLM or solver), executor (RL or shortest path), shield (rules)."""
    state["debug"] = debug
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (for scripts)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def show(result: Any, *, as_json: bool, table: Any = None) -> None:
    """Print a benchmark result: JSON for scripts, else its Rich table (or pretty JSON)."""
    if as_json:
        print_json(result)
    elif table is not None:
        rendered = table(result)
        if isinstance(rendered, str):
            # Our own text tables: printed as written (Rich would wrap them at 80 columns when
            # piped, and read their brackets as markup).
            console.print(rendered, markup=False, highlight=False, soft_wrap=True)
        elif console.is_terminal:
            console.print(rendered)
        else:
            # Piped or redirected: a Rich table as wide as it needs, not squeezed into 80.
            Console(width=WIDE).print(rendered)
    else:
        console.print_json(data=result, default=str)


def sub_app(name: str, help: str) -> typer.Typer:
    """A command group ``fleetmind NAME ...`` (its help shown when called bare)."""
    group = typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(group, name=name)
    return group


def progress_bar(unit: str, *, disable: bool = False) -> Progress:
    """A transient Rich bar on stderr: ``done/total UNIT`` and the time remaining."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} " + unit),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=disable,
    )


def progress_run(
    cfg: Any,
    out: Path | None,
    *,
    label: str,
    quiet: bool,
    client: Any = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run one strategy with a Rich progress bar (ETA) unless quiet."""
    from fleetmind.eval.runner import execute

    if quiet:
        return execute(cfg, out, client=client, overwrite=overwrite)
    with progress_bar("ticks") as bar:
        task = bar.add_task(label, total=cfg.steps)
        return execute(
            cfg,
            out,
            progress=lambda k: bar.update(task, completed=k),
            client=client,
            overwrite=overwrite,
        )


KPI_ROWS = (
    ("tasks_completed", "tasks completed"),
    ("throughput", "throughput (tasks/tick)"),
    ("on_time_rate", "on-time rate"),
    ("priority_weighted_throughput", "priority-weighted throughput"),
    ("constraint_violations", "constraint violations (structured/text)"),
    ("orders_stranded", "orders stranded (undelivered, past due)"),
    ("notes_needs_review", "notes sent to review"),
    ("note_reader", "note questions asked/answered/abstained/late"),
    ("note_reader_added", "note constraints the model added"),
    ("collisions", "collisions executed"),
    ("shield_interventions", "shield interventions"),
    ("step_latency_ms", "step latency p50/p99 ms"),
    ("planner_calls", "planner calls"),
    ("llm_tokens", "LLM tokens (prompt+completion)"),
    ("planner_fallbacks", "planner fallbacks"),
    ("faults", "faults injected"),
    ("incidents", "incidents resolved/total (recovery p50 ticks)"),
)


def _kpi(m: dict[str, Any], key: str) -> str:
    if key not in m and key not in ("llm_tokens", "note_reader_added"):
        return "-"
    if key == "constraint_violations":
        v = m[key]
        return f"{v['structured']}/{v['text_only']}"
    if key in ("note_reader", "note_reader_added"):
        # Written only by a run whose notes the rules+llm reader read.
        q = m.get("note_reader")
        if q is None:
            return "-"
        if key == "note_reader_added":
            return str(q["added"])
        return f"{q['asked']}/{q['answered']}/{q['abstained']}/{q['timed_out']}"
    if key == "step_latency_ms":
        return f"{m[key]['p50']:.2f}/{m[key]['p99']:.2f}"
    if key == "llm_tokens":
        return str(m["llm_tokens_prompt"] + m["llm_tokens_completion"])
    if key == "faults":
        # The run's own faults, as given (a fault run's summary used to leave them out).
        return ", ".join(str(f.get("spec", f.get("kind", "?"))) for f in m[key]) or "none"
    if key == "incidents":
        inc = m[key]
        total = int(inc.get("total", 0))
        if not total:
            return "0"
        resolved = total - int(inc.get("unresolved", 0))
        p50 = (m.get("incident_recovery_ticks") or {}).get("p50")
        return f"{resolved}/{total}" + (f" ({p50:g})" if p50 is not None else "")
    value = m[key]
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def kpi_table(results: dict[str, dict[str, Any]], title: str = "KPIs") -> Table:
    """A Rich table of the headline KPIs, one column per run."""
    table = Table(title=title)
    table.add_column("metric")
    for name in results:
        table.add_column(name, justify="right")
    for key, label in KPI_ROWS:
        table.add_row(label, *(_kpi(m, key) for m in results.values()))
    return table


def ray_runner(address: str | None, max_retries: int, workers: int) -> Any:
    """A ``run_many`` for :func:`fleetmind.eval.compare.compare` on Ray."""
    from fleetmind.scale.backend import check_backend
    from fleetmind.scale.jobs import dispatch_job, run_jobs

    check_backend("ray", address)

    def run_many(pairs: list[tuple[Any, Path]]) -> list[dict[str, Any]]:
        jobs = [dispatch_job(cfg, path) for cfg, path in pairs]
        results: list[dict[str, Any]] = run_jobs(
            jobs, backend="ray", address=address, max_retries=max_retries, workers=workers
        )
        return results

    return run_many
