"""``fleetmind nav ...``: train and evaluate the navigation policy the RL executor runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from fleetmind.cli.common import console, err_console, print_json, sub_app

nav_app = sub_app(
    "nav", "The RL executor's navigation policy: train one, or score one against shortest paths."
)

MapOption = Annotated[str, typer.Option("--map", help="Map preset or .map file.")]
RobotsOption = Annotated[int, typer.Option(help="Robots per world.")]


@nav_app.command("train")
def nav_train(
    out: Annotated[Path, typer.Option(help="Where to save the policy (.pt beside a .json).")],
    map_name: MapOption = "warehouse-small",
    robots: RobotsOption = 4,
    algo: Annotated[str, typer.Option(help="ippo, mappo or maddpg (small fleets).")] = "ippo",
    steps: Annotated[int, typer.Option(help="Environment steps (all worlds).")] = 600_000,
    seed: Annotated[int, typer.Option(help="Seed of the run.")] = 0,
    num_envs: Annotated[int, typer.Option(help="Worlds stepped together.")] = 16,
    ent_coef: Annotated[float | None, typer.Option(help="Entropy bonus at the start.")] = None,
    ent_coef_final: Annotated[
        float | None, typer.Option(help="Entropy bonus at the end (linear anneal).")
    ] = None,
    fallback: Annotated[
        bool,
        typer.Option(help="Failed moves fall back down a heuristic ranking, as dispatch runs it."),
    ] = False,
    override_penalty: Annotated[
        float, typer.Option(help="Reward for a sampled move the fallback overrode (<= 0).")
    ] = 0.0,
    progress: Annotated[
        float, typer.Option(help="Reward per cell gained toward the target.")
    ] = 0.0,
    init: Annotated[Path | None, typer.Option(help="Start from this policy (fine-tune).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Train a navigation policy with IPPO, MAPPO or MADDPG; save it with its evaluation."""
    import torch

    from fleetmind.errors import ConfigError
    from fleetmind.rl.nav import (
        NAV_ENT_COEF,
        NAV_ENT_COEF_FINAL,
        NavPolicy,
        evaluate,
        shortest_path_actions,
    )
    from fleetmind.rl.nav_train import train_nav
    from fleetmind.rl.neural.base import Event
    from fleetmind.rl.neural.ppo import PPOConfig

    if algo not in ("ippo", "mappo", "maddpg"):
        raise ConfigError(f"--algo: expected ippo, mappo or maddpg, got {algo!r}")
    if algo == "maddpg" and (ent_coef is not None or ent_coef_final is not None):
        raise ConfigError("--ent-coef/--ent-coef-final: PPO only (ippo, mappo), not maddpg")
    torch.set_num_threads(1)
    t0 = time.perf_counter()

    def report(event: Event) -> None:
        if not as_json and event.kind == "update" and int(event.scalars["train/updates"]) % 20 == 0:
            err_console.print(f"step {event.step}: {event.scalars}", markup=False)

    policy, _ = train_nav(
        map_name,
        robots,
        algo=algo,  # type: ignore[arg-type]
        steps=steps,
        seed=seed,
        num_envs=num_envs,
        config=None
        if algo == "maddpg"
        else PPOConfig(
            agent_id=False,
            hidden=(128, 128),
            ent_coef=NAV_ENT_COEF if ent_coef is None else ent_coef,
            ent_coef_final=NAV_ENT_COEF_FINAL if ent_coef_final is None else ent_coef_final,
        ),
        callbacks=[report],
        fallback=fallback,
        override_penalty=override_penalty,
        progress=progress,
        init=NavPolicy.load(init) if init else None,
    )
    policy.metadata["eval"] = evaluate(policy.act, map_name, robots)
    policy.metadata["eval_baseline"] = evaluate(shortest_path_actions, map_name, robots)
    policy.save(out)
    result = {"out": str(out), "seconds": round(time.perf_counter() - t0, 1), **policy.metadata}
    if as_json:
        print_json(result)
    else:
        console.print(
            f"saved {out}: policy {result['eval']}, shortest path {result['eval_baseline']}"
        )


@nav_app.command("eval")
def nav_eval(
    policy_path: Annotated[Path, typer.Argument(help="A saved policy (.pt).")],
    map_name: MapOption = "warehouse-small",
    robots: RobotsOption = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Deliveries and collision attempts per robot per tick: the policy vs shortest paths."""
    from fleetmind.rl.nav import NavPolicy, evaluate, shortest_path_actions

    policy = NavPolicy.load(policy_path)
    result = {
        "policy": evaluate(policy.act, map_name, robots),
        "shortest_path": evaluate(shortest_path_actions, map_name, robots),
    }
    if as_json:
        print_json(result)
    else:
        console.print(f"policy: {result['policy']}")
        console.print(f"shortest path: {result['shortest_path']}")
