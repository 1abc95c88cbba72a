"""``fleetmind rllib train``: RLlib's multi-agent PPO on the warehouse (needs the ``ray`` extra)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fleetmind.cli.common import RayAddress, console, print_json, sub_app

rllib_app = sub_app(
    "rllib", "RLlib trains fleetmind: multi-agent PPO on the PettingZoo env (the ray extra)."
)


@rllib_app.command("train")
def rllib_train(
    map_name: Annotated[str, typer.Option("--map", help="Map preset or .map file.")] = (
        "warehouse-tiny"
    ),
    robots: Annotated[int, typer.Option(help="Robots (agents), one shared policy.")] = 2,
    iterations: Annotated[int, typer.Option(help="algo.train() calls.")] = 5,
    env_runners: Annotated[int, typer.Option(help="RLlib env runner actors.")] = 1,
    max_steps: Annotated[int, typer.Option(help="Episode length in ticks.")] = 500,
    seed: Annotated[int, typer.Option(help="Root seed.")] = 0,
    ray_address: RayAddress = None,
    out: Annotated[Path, typer.Option(help="Run folder: module/ and rllib.json.")] = Path(
        "runs/rllib"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Train RLlib PPO on ``make_parallel``; the saved module runs as a fleetmind executor."""
    from fleetmind.scale.rllib import train_rllib

    run = train_rllib(
        map_name,
        robots,
        iterations=iterations,
        out_dir=out,
        seed=seed,
        num_env_runners=env_runners,
        address=ray_address,
        max_steps=max_steps,
    )
    if as_json:
        print_json(
            {
                "out_dir": str(run.out_dir),
                "module_dir": str(run.module_dir),
                "iterations": run.iterations,
            }
        )
        return
    for row in run.iterations:
        console.print(json.dumps(row), markup=False)
    console.print(f"module: {run.module_dir}")
