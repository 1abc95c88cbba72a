"""Train learners and diagnose their curves (``train``, ``doctor``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fleetmind.cli.common import (
    TRAIN_OUT,
    LLMApiKey,
    LLMBaseUrl,
    LLMModel,
    RayAddress,
    app,
    console,
    print_json,
)


@app.command()
def train(
    map_name: Annotated[
        str, typer.Option("--map", help="Preset, map file, rware layout, or an rware env id.")
    ] = "warehouse-tiny",
    robots: Annotated[
        int | None,
        typer.Option(
            help="Number of robots (agents). [default: the fleet an rware id names, else 2]"
        ),
    ] = None,
    algo: Annotated[
        str, typer.Option(help="q, iql, ctde, ippo, mappo, iql-dqn, vdn, qmix, maddpg or mat.")
    ] = "iql",
    reward_mode: Annotated[
        str, typer.Option(help="individual, shared, mixed(W) or difference.")
    ] = "individual",
    steps: Annotated[
        int | None,
        typer.Option(
            help="Environment steps to train (default 100,000; unbounded with --minutes; "
            "rware ids with neither: --minutes 15)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Root seed.")] = 0,
    out: Annotated[Path, typer.Option(help="Run folder to write.")] = TRAIN_OUT,
    resume: Annotated[
        bool, typer.Option(help="Continue from the last checkpoint in --out.")
    ] = False,
    backend: Annotated[
        str, typer.Option(help="local or ray (each seed a Ray task; see --seeds).")
    ] = "local",
    seeds: Annotated[int, typer.Option(help="Train seeds seed..seed+K-1, each in OUT/seed-S.")] = 1,
    ray_address: RayAddress = None,
    checkpoint_every: Annotated[int, typer.Option(help="Updates between checkpoints.")] = 10,
    num_envs: Annotated[
        int | None,
        typer.Option(
            help="Batched worlds (neural). [default: rware ids 256 on-policy, 32 replay; 8]"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
    reward: Annotated[
        str,
        typer.Option(
            help="env, or an LLM score mixed in: llm[:every=K,weight=W,alone,samples=N,"
            "temperature=T] (docs/reward.md)."
        ),
    ] = "env",
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    minutes: Annotated[
        float | None,
        typer.Option(help="Neural: train for this many minutes (evaluations excluded)."),
    ] = None,
    eval_every: Annotated[
        float | None,
        typer.Option(
            help="rware ids: minutes between evaluations on the real rware (eval_curve). "
            "[default: a fifth of --minutes]"
        ),
    ] = None,
    eval_episodes: Annotated[
        int | None,
        typer.Option(help="Evaluation episodes (rware ids: 20 of 500 steps; warehouse: 8)."),
    ] = None,
    shaping: Annotated[
        float, typer.Option(help="rware ids: weight of the twin's dense guide (docs/rware.md).")
    ] = 0.0,
    threads: Annotated[int | None, typer.Option(help="torch threads (neural).")] = None,
) -> None:
    """Train a learner; writes the policy, config, per-agent curves (CSV, PNG) and metrics."""
    from fleetmind.errors import ConfigError
    from fleetmind.rl.reward import RewardSpec
    from fleetmind.rl.train import (
        DEFAULT_STEPS,
        RWARE_MINUTES,
        RWARE_WORLDS,
        WAREHOUSE_EVAL_EPISODES,
        rware_robots,
    )
    from fleetmind.rl.train import train as run_train

    fleet = rware_robots(map_name)
    if fleet is not None:
        # An rware id names its fleet; the recipe's worlds and budget are the task's own.
        if robots is not None and robots != fleet:
            raise ConfigError(f"robots: {map_name} has {fleet} robots, got --robots {robots}")
        robots = fleet
        if steps is None and minutes is None:
            minutes = RWARE_MINUTES
            console.print(f"train: {map_name}: no --steps or --minutes, training {minutes:g} min")
        if minutes is not None and eval_every is None:
            eval_every = minutes / 5
        if num_envs is None:
            num_envs = RWARE_WORLDS.get(algo, 8)
    robots = 2 if robots is None else robots
    num_envs = 8 if num_envs is None else num_envs
    if steps is None:
        steps = 10**12 if minutes is not None else DEFAULT_STEPS
    if eval_episodes is None:
        eval_episodes = 20 if fleet is not None else WAREHOUSE_EVAL_EPISODES
    timing = {
        "time_limit_s": minutes * 60 if minutes is not None else None,
        "eval_every_s": eval_every * 60 if eval_every is not None else None,
        "eval_episodes": eval_episodes,
        "shaping": shaping,
        "threads": threads,
    }
    spec = RewardSpec.parse(reward)
    if spec.scored and (seeds > 1 or backend != "local"):
        raise ConfigError(
            "reward: an LLM reward trains one seed on the local backend; drop --seeds/--backend"
        )
    if backend != "local" and (minutes or eval_every or shaping):
        raise ConfigError("minutes/eval_every/shaping: local backend only; drop --backend")
    # One seed's run, the same whether it runs here or as one of several jobs.
    run_args: dict[str, Any] = {
        "reward_mode": reward_mode,
        "steps": steps,
        "seed": seed,
        "num_envs": num_envs,
    }
    if seeds > 1 or backend != "local":
        _train_many(
            map_name,
            robots,
            algo,
            seeds=seeds,
            out=out,
            backend=backend,
            address=ray_address,
            as_json=as_json,
            timing=timing,
            **run_args,
        )
        return
    with _scorer(spec, out, resume=resume, seed=seed, base_url=llm_base_url,
                 model=llm_model, api_key=llm_api_key) as scorer:  # fmt: skip
        result = run_train(
            map_name,
            robots,
            algo,
            out_dir=out,
            resume=resume,
            backend=backend,
            checkpoint_every=checkpoint_every,
            progress=not as_json,
            **run_args,
            reward=spec,
            scorer=scorer,
            **timing,  # type: ignore[arg-type]
        )
    if as_json:
        print_json(result.metrics)
        return
    m = result.metrics
    table = Table(title=f"train {algo} on {map_name} ({robots} robots)")
    table.add_column("agent")
    table.add_column("deliveries", justify="right")
    table.add_column("reward", justify="right")
    for agent, d in m.get("per_agent_deliveries", {}).items():
        table.add_row(agent, str(d), f"{m.get('per_agent_reward', {}).get(agent, 0.0):.3f}")
    console.print(table)
    console.print(f"throughput {m.get('throughput', 0.0):.4f}; run folder: {result.out_dir}")
    if "deliveries_per_episode" in m:
        console.print(
            f"real rware, {m['eval_episodes']} episodes: {m['deliveries_per_episode']:.2f} "
            f"deliveries per episode (policy sampling), greedy "
            f"{m['greedy_deliveries_per_episode']:.2f}, random "
            f"{m['random_deliveries_per_episode']:.3f}; curve in eval_curve.csv / .png"
        )
    if "shortest_path_tasks_completed" in m:
        console.print(
            f"shortest-path robots, same episodes, ticks and exploration: "
            f"{m['shortest_path_tasks_completed']} deliveries ({m['eval_policy']}: "
            f"{m['tasks_completed']}, greedy {m['greedy_tasks_completed']})"
        )
    if "llm_reward" in m:
        lr = m["llm_reward"]
        console.print(
            f"llm reward ({lr['spec']}): {lr['scored_ticks']} scores, {lr['calls']} model calls, "
            f"{lr['cache_hits']} cache hits, {lr['parse_fallbacks']} parse and "
            f"{lr['variance_fallbacks']} variance fallbacks; calls in {result.out_dir}/calls.jsonl"
        )
    for finding in m.get("diagnostics", []):
        console.print(f"[yellow]doctor[/yellow] {finding['kind']}: {finding['message']}")


@contextlib.contextmanager
def _scorer(
    spec: Any,
    out: Path,
    *,
    resume: bool,
    seed: int,
    base_url: str | None,
    model: str | None,
    api_key: str | None,
) -> Iterator[Any]:
    """The LLM scorer of a scored ``--reward`` (None for ``env``), recorded to OUT/calls.jsonl."""
    if not spec.scored:
        yield None
        return
    from fleetmind.llm.reward import recorded_reward, reward_backend
    from fleetmind.rl.reward import GOAL

    calls = out / "calls.jsonl"
    if not resume:
        calls.unlink(missing_ok=True)  # a fresh run's recording holds its own calls only
    with (
        reward_backend(base_url=base_url, model=model, api_key=api_key, seed=seed) as (
            client,
            secrets,
        ),
        recorded_reward(
            client,
            calls,
            goal=GOAL,
            secrets=secrets,
            seed=seed,
            samples=spec.samples,
            temperature=spec.temperature,
        ) as scorer,
    ):
        yield scorer


def _train_many(
    map_name: str,
    robots: int,
    algo: str,
    *,
    reward_mode: str,
    steps: int,
    seed: int,
    seeds: int,
    out: Path,
    backend: str,
    address: str | None,
    num_envs: int,
    as_json: bool,
    timing: dict[str, Any],
) -> None:
    """Several seeds as jobs on the local or Ray backend; a per-seed summary table.

    Locally two processes run at once (one per core), one torch thread each.
    """
    from fleetmind.scale.backend import check_backend
    from fleetmind.scale.jobs import run_jobs, train_job

    check_backend(backend, address)
    timed = {k: v for k, v in timing.items() if v is not None and k != "threads"}
    jobs = [
        train_job(
            out / f"seed-{s}",
            map=map_name,
            robots=robots,
            algo=algo,
            reward_mode=reward_mode,
            steps=steps,
            seed=s,
            num_envs=num_envs,
            threads=timing.get("threads") or 1,
            **timed,
        )
        for s in range(seed, seed + seeds)
    ]
    runs = run_jobs(jobs, backend=backend, address=address, workers=min(2, len(jobs)))
    rows = {
        f"seed-{s}": {
            "throughput": r.metrics.get("throughput"),
            "deliveries_per_episode": r.metrics.get("deliveries_per_episode"),
            "greedy_deliveries_per_episode": r.metrics.get("greedy_deliveries_per_episode"),
            "agent_steps_per_s": r.metrics.get("samples_per_s", 0.0) * robots,
            "out_dir": str(r.out_dir),
        }
        for s, r in zip(range(seed, seed + seeds), runs, strict=True)
    }
    if as_json:
        print_json(rows)
        return
    rware = any(row["deliveries_per_episode"] is not None for row in rows.values())
    table = Table(title=f"train {algo} x {seeds} seeds ({backend})")
    table.add_column("seed")
    if rware:
        table.add_column("real rware deliveries/episode (sampled / greedy)", justify="right")
    else:
        table.add_column("throughput", justify="right")
    table.add_column("agent-steps/s", justify="right")
    table.add_column("run folder")
    for name, row in rows.items():
        figure = (
            f"{row['deliveries_per_episode']:.2f} / {row['greedy_deliveries_per_episode']:.2f}"
            if rware
            else f"{row['throughput'] or 0.0:.4f}"
        )
        table.add_row(name, figure, f"{row['agent_steps_per_s']:,.0f}", row["out_dir"])
    console.print(table)
    if len(runs) > 1:
        mean = sum(row["agent_steps_per_s"] for row in rows.values()) / len(rows)
        console.print(
            f"training throughput: {mean:,.0f} agent-steps/s a process, two processes at once "
            f"(about {2 * mean:,.0f} over both cores)"
        )


@app.command()
def doctor(
    run_dir: Annotated[Path, typer.Argument(help="A training run folder (with curves.csv).")],
    solo: Annotated[
        Path | None,
        typer.Option(help="A run folder of the same agents trained alone (for non-stationarity)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
) -> None:
    """Diagnose a run: non-stationarity, free-riding, reward scale and drift (§5), baseline.

    A `fleetmind train` folder (curves.csv) gets the §5 checks on its per-agent curves and its
    policy set against the baseline its evaluation measured; a `fleetmind run` folder gets the
    report's findings (reward curves from its episode log, LLM drift).
    """
    import json

    from fleetmind.rl.diagnostics import baseline_findings, diagnose

    if not (run_dir / "curves.csv").exists() and (run_dir / "episode.parquet").is_dir():
        from fleetmind.eval.report import run_findings

        lines = run_findings(run_dir)
        if as_json:
            print_json([{"message": line} for line in lines])
            return
        for line in lines:
            console.print(f"doctor: {line}")
        return
    curves = _read_curves(run_dir)
    solo_curves = _read_curves(solo) if solo is not None else None
    # Episode returns sum many steps, so they say nothing about the per-step reward scale;
    # the scale check runs only on per-step peaks, which `train` logs as `<agent>_peak`.
    peaks = _read_curves(run_dir, suffix="_peak", required=False)
    # A run trained on an LLM score logs the score and environment parts (§5.4 drift check).
    llm_parts = _read_curves(run_dir, suffix="_llm", required=False)
    env_parts = _read_curves(run_dir, suffix="_env", required=False)
    findings = diagnose(
        curves,
        solo=solo_curves,
        step_rewards=peaks or {a: [0.0] for a in curves},
        llm_rewards=llm_parts or None,
        env_rewards=env_parts or None,
        scorer=_scorer_counters(run_dir),
    )
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        try:
            findings += baseline_findings(json.loads(metrics_file.read_text()))
        except ValueError:
            console.print(f"doctor: {metrics_file}: not valid JSON, no baseline check")
    rows = [
        {"kind": f.kind, "agents": list(f.agents), "evidence": f.evidence, "message": f.message}
        for f in findings
    ]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print(
            "doctor: no finding (per-agent curves healthy, policy at or above its baseline)"
        )
    for r in rows:
        console.print(f"[yellow]{r['kind']}[/yellow] ({', '.join(r['agents'])}): {r['message']}")


def _scorer_counters(run_dir: Path) -> dict[str, Any] | None:
    """The ``llm_reward`` counters of a run folder's ``metrics.json`` (None when absent)."""
    import json

    from fleetmind.errors import ConfigError, read_input

    path = run_dir / "metrics.json"
    if not path.is_file():
        return None
    try:
        metrics = json.loads(read_input(path, what="metrics"))
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    counters = metrics.get("llm_reward") if isinstance(metrics, dict) else None
    if counters is not None and not isinstance(counters, dict):
        raise ConfigError(f"{path}: field 'llm_reward' is not an object")
    return counters


def _read_curves(
    run_dir: Path, *, suffix: str = "_return", required: bool = True
) -> dict[str, list[float]]:
    """Per-agent curves (columns ``<agent><suffix>``) from a run folder's ``curves.csv``."""
    import csv

    from fleetmind.errors import ConfigError

    path = run_dir / "curves.csv"
    if not path.is_file():
        raise ConfigError(f"{path}: no curves.csv (expected a `fleetmind train` run folder)")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ConfigError(f"{path}: no episodes recorded")
    agents = [k.removesuffix(suffix) for k in rows[0] if k.endswith(suffix)]
    if not agents and required:
        raise ConfigError(f"{path}: no '<agent>{suffix}' columns")
    try:
        return {a: [float(r[f"{a}{suffix}"]) for r in rows] for a in agents}
    except ValueError as exc:
        raise ConfigError(f"{path}: a return is not a number ({exc})") from None
