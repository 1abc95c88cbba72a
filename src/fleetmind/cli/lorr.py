"""``fleetmind lorr ...``: League of Robot Runners instances under their rules."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from fleetmind.cli.common import JsonFlag, console, err_console, print_json, sub_app

lorr_app = sub_app("lorr", "League of Robot Runners: their instances, their rules, their score.")


@lorr_app.command("run")
def lorr_run(
    instance: Annotated[
        str, typer.Argument(help="Instance .json, or a name such as 2024/warehouse_large_5000.")
    ],
    steps: Annotated[
        int | None, typer.Option(help="Steps. [default: the best-known result's, else 5000]")
    ] = None,
    time_limit: Annotated[
        float, typer.Option(help="Seconds per step; over-running makes the robots wait (0: none).")
    ] = 1.0,
    out: Annotated[Path | None, typer.Option(help="Run folder to write.")] = None,
    levers: Annotated[
        str | None, typer.Option(help="Planner lever set (fleetmind.bench.lorr.LEVER_SETS).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the planner's tie-breaks.")] = 0,
    team_size: Annotated[int | None, typer.Option(help="Robots to use.")] = None,
    episode: Annotated[bool, typer.Option(help="Write episode.parquet/.")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the LoRR planner on one instance; print tasks finished, planning time, conflicts."""
    from fleetmind.bench import lorr as bench
    from fleetmind.errors import ConfigError

    name = levers or bench.DEFAULT_LEVERS
    if name not in bench.LEVER_SETS:
        raise ConfigError(f"--levers: unknown {name!r} (known: {', '.join(bench.LEVER_SETS)})")
    start = time.perf_counter()

    def progress(step: int, finished: int) -> None:
        if not quiet and step % 500 == 0:
            err_console.print(
                f"step {step}: {finished:,} finished ({time.perf_counter() - start:.0f} s)"
            )

    m = bench.run_instance(
        instance,
        steps=steps,
        time_limit=time_limit or None,
        out=out,
        levers=bench.LEVER_SETS[name],
        seed=seed,
        team_size=team_size,
        episode=episode,
        progress=progress,
    )
    if as_json:
        print_json({k: v for k, v in m.items() if k != "per_agent_reward"})
    else:
        console.print(bench.format_row(bench.row(m, levers=name)), soft_wrap=True, markup=False)
        if out is not None:
            console.print(f"run folder: {out} (lorr_output.json in the start kit's layout)")
    if m["collisions"] or not m["lorr"]["validated"]:
        raise typer.Exit(1)
