"""``fleetmind serve``: the dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetmind.cli.common import (
    app,
    console,
)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    root: Annotated[
        Path, typer.Option(help="Folder of run and comparison folders to serve (nothing outside).")
    ] = Path("runs"),
    live: Annotated[
        bool, typer.Option("--live/--no-live", help="Run a live simulation on the page.")
    ] = True,
    map_name: Annotated[
        str | None, typer.Option("--map", help="Live map. [default: warehouse-small]")
    ] = None,
    robots: Annotated[int | None, typer.Option(help="Live robots. [default: 8]")] = None,
    steps: Annotated[
        int | None, typer.Option(help="Ticks of a live episode. [default: 1000]")
    ] = None,
    planner: Annotated[str | None, typer.Option(help="Live planner. [default: assignment]")] = None,
    executor: Annotated[
        str | None, typer.Option(help="Live executor. [default: shortest-path]")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Live root seed. [default: 0]")] = None,
    speed: Annotated[float, typer.Option(help="Live ticks per second at start.")] = 10.0,
    record: Annotated[
        bool,
        typer.Option(
            "--record/--no-record",
            help="Record live episodes as run folders under ROOT/live/ (off: nothing is written).",
        ),
    ] = False,
    config: Annotated[
        Path | None, typer.Option(help="YAML run config for the live view; flags override it.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="FLEETMIND_DASHBOARD_TOKEN",
            help="Token the live controls need (off loopback one is generated when not given).",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(help="Another Host header value to accept (a DNS name of this machine)."),
    ] = None,
) -> None:
    """Serve the dashboard: live view, replays of run folders under --root, comparisons."""
    from fleetmind.eval.runner import load_config
    from fleetmind.web.server import access
    from fleetmind.web.server import serve as run_server

    live_cfg = None
    if live:
        live_cfg = load_config(
            config,
            {
                "map": map_name,
                "robots": robots,
                "steps": steps if steps is not None or config is not None else 1000,
                "planner": planner,
                "executor": executor,
                "seed": seed,
            },
        )
    grant = access(host, token=token, allowed_hosts=allowed_host or ())
    console.print(f"fleetmind dashboard: {grant.url(host, port)}  (root {root}; Ctrl+C stops)")
    if grant.generated:
        console.print(f"live controls token (generated): {grant.token}")
    run_server(
        root, host=host, port=port, live=live_cfg, record_live=record, speed=speed, grant=grant
    )
