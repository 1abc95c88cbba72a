"""``fleetmind nav ...``: train and evaluate the navigation policy the RL executor runs."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

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


@nav_app.command("learn")
def nav_learn(
    out: Annotated[Path, typer.Option(help="Where to save the guided policy (.pt beside .json).")],
    maps: Annotated[
        str, typer.Option("--maps", help="Comma-separated maps, taken in turn.")
    ] = "benchmarks/data/lorr/maps/warehouse_small.map",
    robots: Annotated[
        str, typer.Option(help="Comma-separated fleet sizes, taken in turn (sparse to jammed).")
    ] = "100,200,300",
    episodes: Annotated[int, typer.Option(min=1, help="Runs to learn from.")] = 24,
    steps: Annotated[int, typer.Option(min=2, help="Ticks of each run.")] = 750,
    every: Annotated[int, typer.Option(min=1, help="Ticks per PPO update.")] = 250,
    seed: Annotated[int, typer.Option(help="Seed of the first run (then +1 a run).")] = 100,
    lr: Annotated[float, typer.Option(min=0, help="Adam step size.")] = 3e-4,
    init: Annotated[
        Path | None, typer.Option(help="Start from this guided policy (default: fresh).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every run as JSON.")] = False,
) -> None:
    """Train the rl-guided executor in the control loop, shield on, as dispatch runs it.

    Each run is ``fleetmind run --executor rl-guided --learn-every EVERY`` (assignment planner,
    no rollback guard: runs of different sizes are not comparable), the policy carried from run
    to run; bench seeds (0-2) are never among the training seeds by default.
    """
    from fleetmind.errors import ConfigError
    from fleetmind.eval.runner import RunConfig, execute
    from fleetmind.rl.nav_guided import GuidedPolicy

    map_list = [m for m in maps.split(",") if m]
    try:
        sizes = [int(r) for r in robots.split(",") if r]
    except ValueError:
        raise ConfigError(f"--robots: expected comma-separated integers, got {robots!r}") from None
    if not map_list or not sizes:
        raise ConfigError("--maps and --robots: expected at least one value each")
    t0 = time.perf_counter()
    policy: Path | None = init
    log = []
    for ep in range(episodes):
        cfg = RunConfig(
            map=map_list[(ep // len(sizes)) % len(map_list)],
            robots=sizes[ep % len(sizes)],
            steps=steps,
            seed=seed + ep,
            executor="rl-guided",
            learn_every=every,
            learn_guard=None,
            learn_lr=lr,
            fresh_policy=policy is None,
            policy=str(policy) if policy is not None else None,
            save_policy=str(out),
        )
        m = execute(cfg, None)
        policy = out
        row = {
            "run": ep,
            "map": Path(cfg.map).name,
            "robots": cfg.robots,
            "seed": cfg.seed,
            "tasks": m["tasks_completed"],
            "collisions": m["collisions"],
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        log.append(row)
        if as_json:
            print_json(row)
        else:
            err_console.print(
                f"run {ep + 1}/{episodes}: {row['map']} {row['robots']} robots, "
                f"{row['tasks']} tasks ({row['wall_s']} s)"
            )
    learned = GuidedPolicy.load(out)
    learned.metadata["train"] = {
        "maps": map_list,
        "robots": sizes,
        "episodes": episodes,
        "steps": steps,
        "every": every,
        "seed": seed,
        "lr": lr,
        "init": str(init) if init else None,
        "wall_s": round(time.perf_counter() - t0, 1),
        "runs": log,
    }
    learned.save(out)
    if not as_json:
        console.print(f"saved {out} after {episodes} runs")


def _cases(text: str) -> tuple[tuple[str, int], ...]:
    """``--cases``: comma-separated ``MAP:ROBOTS`` pairs."""
    from fleetmind.errors import ConfigError

    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, n = part.rpartition(":")
        if not sep or not name or not n.strip().isdigit():
            raise ConfigError(f"--cases: expected MAP:ROBOTS, got {part!r}")
        out.append((name, int(n)))
    if not out:
        raise ConfigError("--cases: expected at least one MAP:ROBOTS")
    return tuple(out)


def _ints(flag: str, text: str) -> tuple[int, ...]:
    """Comma-separated integers or ``a-b`` ranges (inclusive) of a flag."""
    from fleetmind.errors import ConfigError

    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            out += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    except ValueError:
        raise ConfigError(
            f"{flag}: expected integers or ranges like 100-111, got {text!r}"
        ) from None
    if not out:
        raise ConfigError(f"{flag}: expected at least one value")
    return tuple(out)


@nav_app.command("guide")
def nav_guide(
    out: Annotated[Path, typer.Option(help="Where to write the guide model (.json).")],
    maps: Annotated[
        str, typer.Option("--maps", help="Comma-separated training maps.")
    ] = "benchmarks/data/lorr/maps/warehouse_small.map",
    robots: Annotated[str, typer.Option(help="Comma-separated fleet sizes.")] = "100,200",
    cases: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated MAP:ROBOTS training cases, each map at its own fleet size "
            "(instead of every --maps at every --robots)."
        ),
    ] = None,
    generations: Annotated[int, typer.Option(min=1, help="CMA-ES generations.")] = 20,
    popsize: Annotated[
        int, typer.Option(min=0, help="Candidates a generation (0: CMA-ES's default).")
    ] = 0,
    seeds: Annotated[
        str, typer.Option(help="Training seed pool (never the bench's 0-2).")
    ] = "100-111",
    seeds_per_gen: Annotated[
        int, typer.Option(min=1, help="Seeds every candidate of a generation runs.")
    ] = 3,
    validate: Annotated[
        str, typer.Option(help="Seeds of the final choice (mean or best candidate).")
    ] = "200-203",
    steps: Annotated[int, typer.Option(min=1, help="Ticks of each run.")] = 300,
    sigma: Annotated[float, typer.Option(help="Initial CMA-ES step size.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the search's samples.")] = 0,
    init: Annotated[
        str | None,
        typer.Option(
            help="Start from this guide model file, or 'lanes' for the hand-set lane prior "
            "(default: the neutral model, guidance itself)."
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Processes a generation's runs share (same result).")
    ] = 1,
    fitness: Annotated[
        str,
        typer.Option(
            help="ratio: mean over cases of tasks over guidance's; rank: mean over cases of a "
            "candidate's rank in its generation (every case weighs alike; keeps the mean)."
        ),
    ] = "ratio",
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated parameters to search (names as in the model's vector, e.g. "
            "wait,traffic_stayer); the others keep --init's values."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every generation as JSON.")
    ] = False,
) -> None:
    """Learn the learned-guidance executor's cost map by CMA-ES on fleet throughput.

    Every candidate runs ``fleetmind run --executor learned-guidance`` (assignment planner,
    shield on) on each case (map and fleet size) and seed of its generation; its fitness is its
    tasks over the guidance executor's on the same runs. docs/executors.md gives the command
    that wrote the shipped ``src/fleetmind/data/guide.json``.
    """
    from fleetmind.eval.guide_train import GuideSearch, cases_of, search
    from fleetmind.rl.guide import GuideModel

    cfg = GuideSearch(
        cases=_cases(cases)
        if cases is not None
        else cases_of((m for m in maps.split(",") if m), _ints("--robots", robots)),
        seeds=_ints("--seeds", seeds),
        seeds_per_gen=seeds_per_gen,
        validate=_ints("--validate", validate),
        steps=steps,
        generations=generations,
        popsize=popsize,
        sigma=sigma,
        seed=seed,
        workers=workers,
        fitness=fitness,
        only=tuple(n.strip() for n in (only or "").split(",") if n.strip()),
    )

    def report(row: dict[str, Any]) -> None:
        if as_json:
            print_json(row)
        elif "generation" in row:
            err_console.print(
                f"generation {row['generation'] + 1}/{generations}: best {row['best']}, "
                f"mean {row['mean']} x guidance ({row['runs']} runs, {row['wall_s']} s)"
            )
        else:
            err_console.print(f"validation: {row['validation']}, kept the {row['chosen']}")

    start = None
    if init == "lanes":
        start = GuideModel.lanes()
    elif init:
        start = GuideModel.load(init)
    note = {"init": init or "neutral", "command": "fleetmind " + " ".join(sys.argv[1:])}
    model = search(cfg, init=start, out=out, progress=report, note=note)
    if not as_json:
        console.print(f"saved {out}: {model.metadata['validation'][model.metadata['chosen']]}")
