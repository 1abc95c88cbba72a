"""Train learners and diagnose their curves (``train``, ``doctor``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fleetmind.cli.common import (
    TRAIN_OUT,
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
    robots: Annotated[int, typer.Option(help="Number of robots (agents).")] = 2,
    algo: Annotated[
        str, typer.Option(help="q, iql, ctde, ippo, mappo, iql-dqn, vdn or qmix.")
    ] = "iql",
    reward_mode: Annotated[
        str, typer.Option(help="individual, shared, mixed(W) or difference.")
    ] = "individual",
    steps: Annotated[int, typer.Option(help="Environment steps to train.")] = 100_000,
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
    num_envs: Annotated[int, typer.Option(help="Batched worlds (neural algorithms).")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Train a learner; writes the policy, config, per-agent curves (CSV, PNG) and metrics."""
    from fleetmind.rl.train import train as run_train

    if seeds > 1 or backend != "local":
        _train_many(
            map_name,
            robots,
            algo,
            reward_mode=reward_mode,
            steps=steps,
            seed=seed,
            seeds=seeds,
            out=out,
            backend=backend,
            address=ray_address,
            num_envs=num_envs,
            as_json=as_json,
        )
        return
    result = run_train(
        map_name,
        robots,
        algo,
        reward_mode=reward_mode,
        steps=steps,
        seed=seed,
        out_dir=out,
        resume=resume,
        backend=backend,
        checkpoint_every=checkpoint_every,
        num_envs=num_envs,
        progress=not as_json,
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
    for finding in m.get("diagnostics", []):
        console.print(f"[yellow]doctor[/yellow] {finding['kind']}: {finding['message']}")


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
) -> None:
    """Several seeds as jobs on the local or Ray backend; a per-seed summary table."""
    from fleetmind.scale.backend import check_backend
    from fleetmind.scale.jobs import run_jobs, train_job

    check_backend(backend, address)
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
        )
        for s in range(seed, seed + seeds)
    ]
    runs = run_jobs(jobs, backend=backend, address=address, workers=min(2, len(jobs)))
    rows = {
        f"seed-{s}": {"throughput": r.metrics.get("throughput"), "out_dir": str(r.out_dir)}
        for s, r in zip(range(seed, seed + seeds), runs, strict=True)
    }
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"train {algo} x {seeds} seeds ({backend})")
    table.add_column("seed")
    table.add_column("throughput", justify="right")
    table.add_column("run folder")
    for name, row in rows.items():
        table.add_row(name, f"{row['throughput'] or 0.0:.4f}", row["out_dir"])
    console.print(table)


@app.command()
def doctor(
    run_dir: Annotated[Path, typer.Argument(help="A training run folder (with curves.csv).")],
    solo: Annotated[
        Path | None,
        typer.Option(help="A run folder of the same agents trained alone (for non-stationarity)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
) -> None:
    """Diagnose a training log: non-stationarity, free-riding, reward scale (FIELD-NOTES §5)."""
    from fleetmind.rl.diagnostics import diagnose

    curves = _read_curves(run_dir)
    solo_curves = _read_curves(solo) if solo is not None else None
    # Episode returns sum many steps, so they say nothing about the per-step reward scale;
    # the scale check runs only on per-step peaks, which `train` logs as `<agent>_peak`.
    peaks = _read_curves(run_dir, suffix="_peak", required=False)
    findings = diagnose(curves, solo=solo_curves, step_rewards=peaks or {a: [0.0] for a in curves})
    rows = [
        {"kind": f.kind, "agents": list(f.agents), "evidence": f.evidence, "message": f.message}
        for f in findings
    ]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("doctor: no finding (per-agent curves look healthy)")
    for r in rows:
        console.print(f"[yellow]{r['kind']}[/yellow] ({', '.join(r['agents'])}): {r['message']}")


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
