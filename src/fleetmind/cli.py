"""The ``fleetmind`` command line.

Every command prints one clear line for bad input (file, field, what was expected) and exits with
a non-zero code; ``--debug`` shows the traceback instead. Exit codes: 0 success, 1 a run failed
its own checks, 2 bad input or configuration.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from fleetmind.errors import FleetmindError

app = typer.Typer(
    name="fleetmind",
    help="Run a warehouse robot fleet with a planner, an executor and a shield.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
bench_app = typer.Typer(
    help="The project's own benchmarks, as a table or JSON.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")

console = Console()
err_console = Console(stderr=True)
_state: dict[str, bool] = {"debug": False}

EXIT_BAD_INPUT = 2


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
) -> None:
    """fleetmind: planner (LLM or solver), executor (RL or shortest path), shield (rules)."""
    _state["debug"] = debug
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@app.command()
def demo(
    map_name: Annotated[
        str, typer.Option("--map", help="Preset name, map file, or rware layout.")
    ] = "warehouse-small",
    robots: Annotated[int, typer.Option(help="Number of robots.")] = 8,
    steps: Annotated[int, typer.Option(help="Ticks to simulate.")] = 300,
    seed: Annotated[int, typer.Option(help="Root seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the KPIs as JSON.")] = False,
) -> None:
    """The main job on embedded defaults: run the fleet and print its KPIs.

    Until the dispatch tier lands this runs the simulator with FIFO order assignment and the
    shortest-path executor (no shield), and says so.
    """
    from fleetmind.dispatch.executors import ShortestPathExecutor
    from fleetmind.envs.warehouse import resolve_map
    from fleetmind.sim.orders import OrderConfig
    from fleetmind.sim.warehouse import Warehouse, WarehouseConfig

    grid = resolve_map(map_name)
    cfg = WarehouseConfig(n_robots=robots, max_steps=steps, orders=OrderConfig(rate=robots / 40))
    world = Warehouse(grid, cfg, seed=seed)
    executor = ShortestPathExecutor(grid)
    what = (
        f"simulator on {grid.name} with {robots} robots for {steps} ticks: FIFO nearest-robot "
        "assignment + shortest-path executor (no shield, no LLM yet)"
    )
    if not as_json:
        console.print(f"[bold]fleetmind demo[/bold]: {what}")
    lat = []
    for _ in range(steps):
        t0 = time.perf_counter()
        ranking = executor.rank(world.pos, world.goal, world.has_task)
        world.step(ranking[:, 0])
        lat.append((time.perf_counter() - t0) * 1e3)
    m = world.metrics()
    m["step_latency_ms"] = {f"p{q}": float(np.percentile(lat, q)) for q in (50, 95, 99)}
    m["ran"] = what
    if as_json:
        _print_json(m)
        return
    table = Table(title="KPIs")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in (
        "tasks_completed",
        "throughput",
        "on_time_rate",
        "priority_weighted_throughput",
        "collision_attempts",
        "wall_bumps",
    ):
        value = m[key]
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    table.add_row("constraint_violations", json.dumps(m["constraint_violations"]))
    table.add_row(
        "step_latency_ms p50/p95/p99", "/".join(f"{v:.2f}" for v in m["step_latency_ms"].values())
    )
    console.print(table)


@bench_app.command("sim")
def bench_sim(
    quick: Annotated[bool, typer.Option(help="Short timing windows (a smoke run).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Simulator speed: env and agent steps/s, single and vector env, against rware."""
    from fleetmind.bench import sim as bench

    result = bench.run(quick=quick)
    if as_json:
        _print_json(result)
    else:
        console.print(bench.format_table(result))


@bench_app.command("llm")
def bench_llm(
    quick: Annotated[bool, typer.Option(help="Fewer prompts and calls (a smoke run).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """LLM runtime: overhead per call, embedded tokens/s, valid-JSON rate."""
    from fleetmind.llm import bench

    result = bench.run(quick=quick)
    if as_json:
        _print_json(result)
    else:
        console.print_json(data=result)


def main() -> None:
    """Entry point of the ``fleetmind`` command: one-line errors unless ``--debug``."""
    try:
        app()
    except FleetmindError as exc:
        if _state["debug"]:
            raise
        err_console.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        raise SystemExit(EXIT_BAD_INPUT) from None


if __name__ == "__main__":
    main()
