"""League of Robot Runners: runs on their instances, their rules and their score.

- :func:`run_instance` is ``fleetmind lorr run``: one instance, the planner of
  :mod:`fleetmind.dispatch.lorr`, the run folder (``metrics.json``, ``lorr_output.json`` in the
  start kit's output layout, ``episode.parquet/``, ``calls.jsonl``, ``config.json``) and the
  independent validation of the output file (:func:`fleetmind.sim.lorr.validate`).
- ``fleetmind bench lorr`` (2024 rules and the 2023 curves) is
  :func:`fleetmind.bench.lorr2024.run`; :func:`row` and :func:`format_row` are its table lines
  (and ``lorr run``'s); :func:`validate_file` is ``fleetmind lorr validate``.
- :func:`run_2026_bench` is ``fleetmind bench lorr --rules 2026``.

Timing is wall clock on the machine at hand (the LoRR rule is a per-step limit of 1 s): a run
with a limit is not bit-for-bit repeatable, a run with ``time_limit=None`` is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fleetmind.dispatch.lorr import Levers, PibtPlanner
from fleetmind.dispatch.lorr2026 import LearnedExecutor, RuleExecutor, StagedPlanner
from fleetmind.errors import ConfigError
from fleetmind.eval.compare import mean_interval
from fleetmind.rl import lorr_executor
from fleetmind.sim import lorr
from fleetmind.sim.lorr.world2026 import output2026, simulate2026

DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "lorr"
"""The instances shipped in the repository (``benchmarks/data/lorr/README.md``)."""

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "lorr"
"""The shared LoRR data (``../shared/data/lorr``: 2026 problems, real start-kit outputs)."""

BEST_KNOWN: dict[str, dict[str, int]] = {
    "2024/warehouse_large_5000": {"tasks": 94232, "steps": 5000},
    "2024/sortation_large_2000": {"tasks": 15508, "steps": 2000},
}
"""Best-known results of the 2024 Test Round evaluation instances (tasks finished, steps)."""

DEFAULT_STEPS = 5000
"""The start kit's default ``--simulationTime``."""

LEVER_SETS: dict[str, Levers] = {
    "plain": Levers(),
    "highway": Levers(highway=2),
    "highway+task-length": Levers(highway=2, task_length=True),
    "highway+trade": Levers(highway=2, reassign=200),
    "highway+unstick": Levers(highway=2, unstick=50),
    "highway+unstick-10": Levers(highway=2, unstick=10),
    "highway+cycles": Levers(highway=2, break_cycles=True),
    "highway+unstick-10+cycles": Levers(highway=2, unstick=10, break_cycles=True),
}
"""Named planner settings (see :class:`~fleetmind.dispatch.lorr.Levers`): ``plain`` is greedy
nearest-first-errand assignment + PIBT with rotations; each other set adds levers to
``highway`` (crisscross lane costs of weight 2): ``unstick`` (a robot that has not moved for
50 steps, or 10, ranks first, stuck robots in a random order), ``cycles`` (no ring of robots
moves together: 2026)."""

DEFAULT_LEVERS = "highway"
"""The lever set ``fleetmind lorr run`` and the 2023 curves use unless told otherwise (2024).
``highway+unstick`` ends the jam on open random maps (``random_32_32_20_100``: 2,060 tasks in
1,000 steps against 818) but finished 3.1% fewer on ``warehouse_large_5000`` at first contact:
a lever goes on by default only where it wins."""

DEFAULT_LEVERS_2026 = "highway+unstick-10"
"""The lever set of 2026 runs unless told otherwise (a planner step there is a plan step;
``cycles`` is left off: on generated problems it won with delays off and lost with them on)."""


def resolve(spec: str | Path) -> Path:
    """An instance path from a path or a short name (``2024/warehouse_large_5000``)."""
    path = Path(spec)
    if path.suffix == ".json" and path.exists():
        return path
    parts = str(spec).removesuffix(".json").split("/")
    if len(parts) == 2:
        for root in (DATA, SHARED):  # the repository's copies first
            candidate = root / parts[0] / "warehouse.domain" / f"{parts[1]}.json"
            if candidate.exists():
                return candidate
            for other in sorted((root / parts[0]).glob(f"*.domain/{parts[1]}.json")):
                return other  # 2026 problems live in maze/room/random domains too
    if path.exists():
        return path
    raise ConfigError(
        f"{spec}: no such instance file (give a path, or a name such as "
        f"2024/warehouse_large_5000 under {DATA} or {SHARED})"
    )


def validate_file(
    output: Path, instance: str | Path, *, time_limit: float | None = 1.0
) -> tuple[lorr.Instance, lorr.Validation]:
    """Replay a start-kit output file under the LoRR rules (``fleetmind lorr validate``).

    Args:
        output: the output file (the kit's or fleetmind's).
        instance: the instance it was run on (a path or a short name); read with the file's
            ``teamSize`` (the kit reads the first ``teamSize`` agents).
        time_limit: the run's seconds per step, to check ``plannerTimes`` (``None``: skip).

    Returns:
        The instance as replayed and the validator's verdict.

    Raises:
        ConfigError: the file or the instance is missing or malformed (named).
    """
    data = lorr.referee.load(output)
    team = data.get("teamSize")
    if not isinstance(team, int) or isinstance(team, bool):
        raise ConfigError(f"{output}: field 'teamSize' missing or not an integer")
    inst = lorr.read_instance(resolve(instance), team_size=team)
    return inst, lorr.validate(data, inst, time_limit=time_limit, source=str(output))


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    ms = np.asarray(values, dtype=np.float64) * 1e3
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(ms.max())}


def _per_robot(result: lorr.RunResult) -> dict[str, int]:
    """Tasks (2024) or errands (2023) finished by each robot."""
    inst = result.instance
    counts = np.zeros(inst.team_size, dtype=np.int64)
    if inst.edition == "2023":  # one list per robot of [task, timestep, what]
        for robot, events in enumerate(result.record.events):
            counts[robot] = sum(e[2] == "finished" for e in events)
    else:  # [timestep, robot, task, errands reached]
        for _, robot, task, reached in result.record.events:
            if reached == inst.task_len[task % len(inst.tasks)]:
                counts[robot] += 1
    return {f"robot_{i}": int(c) for i, c in enumerate(counts)}


def metrics(
    result: lorr.RunResult,
    check: lorr.Validation,
    *,
    levers: Levers,
    planner_stats: dict[str, float],
    wall_s: float,
) -> dict[str, Any]:
    """The DESIGN.md run metrics, plus a ``lorr`` block (score, rules, validation)."""
    inst = result.instance
    rec = result.record
    refused = len(rec.errors)  # the kit logs one error per refused joint action
    best = BEST_KNOWN.get(inst.name)
    planning = _percentiles(rec.planner_times)
    lorr_block: dict[str, Any] = {
        "instance": inst.name,
        "path": str(inst.path),
        "edition": inst.edition,
        "team_size": inst.team_size,
        "unit": "tasks" if inst.edition == "2024" else "errands",
        "time_limit_s": result.time_limit,
        "timeouts": result.timeouts,
        "refused_plans": refused,
        "schedule_errors": len(rec.schedule_errors),
        "validated": check.ok,
        "validation": {
            "executed_conflicts": check.executed_conflicts,
            "finished": check.finished,
            "errors": len(check.errors),
            "schedule_errors": len(check.schedule_errors),
            "timeouts": check.timeouts,
            "problems": list(check.problems[:20]),
        },
        "planning_ms": planning,
        "preprocess_s": result.preprocess_s,
        "wall_s": wall_s,
        "levers": dataclasses.asdict(levers),
        "planner": planner_stats,
    }
    if best is not None:
        lorr_block["best_known"] = best
        if result.steps == best["steps"]:
            lorr_block["fraction_of_best"] = result.finished / best["tasks"]
    return {
        "steps": result.steps,
        "robots": inst.team_size,
        "tasks_completed": result.finished,
        "throughput": result.throughput,
        "on_time_rate": None,
        "priority_weighted_throughput": result.throughput,
        "constraint_violations": {"structured": 0, "text_only": 0},
        "notes_needs_review": 0,
        "orders_stranded": 0,
        "collisions": check.executed_conflicts,
        "shield_interventions": 0,
        "planner_calls": len(rec.planner_times),
        "planner_failures": refused,
        "planner_fallbacks": 0,
        "llm_tokens_prompt": 0,
        "llm_tokens_completion": 0,
        "step_latency_ms": planning,
        "planner_latency_ms": planning,
        "per_agent_reward": _per_robot(result),
        "lorr": lorr_block,
    }


def write_episode(result: lorr.RunResult, folder: Path, *, chunk: int = 250) -> None:
    """``folder/part-00000.parquet``: one row per robot per step (state before the action)."""
    folder.mkdir(parents=True, exist_ok=True)
    inst = result.instance
    n = inst.team_size
    loc = inst.starts.copy()
    ori = np.zeros(n, dtype=np.int64)
    schema = pa.schema(
        [
            ("tick", pa.int32()),
            ("robot", pa.int32()),
            ("row", pa.int16()),
            ("col", pa.int16()),
            ("orientation", pa.int8()),
            ("action", pa.string()),
        ]
    )
    letters = np.array(list(lorr.ACTION_CHARS))
    with pq.ParquetWriter(folder / "part-00000.parquet", schema) as writer:
        for t0 in range(0, result.steps, chunk):
            ticks: list[np.ndarray] = []
            locs: list[np.ndarray] = []
            oris: list[np.ndarray] = []
            acts = result.record.actions[t0 : min(result.steps, t0 + chunk)]
            for a in acts:
                ticks.append(np.full(n, t0 + len(ticks), dtype=np.int32))
                locs.append(loc)
                oris.append(ori)
                move = np.where(a == lorr.TIMEOUT, lorr.WAIT, a).astype(np.int64)
                loc, ori, _, _ = lorr.next_state(loc, ori, move, inst.width)
            flat = np.concatenate(locs)
            table = pa.table(
                {
                    "tick": np.concatenate(ticks),
                    "robot": np.tile(np.arange(n, dtype=np.int32), len(acts)),
                    "row": (flat // inst.width).astype(np.int16),
                    "col": (flat % inst.width).astype(np.int16),
                    "orientation": np.concatenate(oris).astype(np.int8),
                    "action": letters[acts.ravel()],
                },
                schema=schema,
            )
            writer.write_table(table)


def run_instance(
    instance: str | Path,
    *,
    steps: int | None = None,
    time_limit: float | None = 1.0,
    out: Path | None = None,
    levers: Levers | None = None,
    seed: int = 0,
    team_size: int | None = None,
    episode: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the planner on one instance under the LoRR rules; validate; write the run folder.

    Args:
        instance: a path or a short name (``2024/sortation_large_2000``).
        steps: steps to run (default: the best-known result's steps, else 5,000).
        time_limit: seconds per step (LoRR: 1 s); ``None`` for an unlimited, repeatable run.
        out: the run folder (none written if ``None``).
        levers: planner levers (default: :data:`LEVER_SETS` [:data:`DEFAULT_LEVERS`]).
        seed: seed of the planner's tie-breaks.
        team_size: robots to use (default the instance's).
        episode: write ``episode.parquet/`` (one row per robot per step).
        progress: called with ``(step, finished)`` after each executed plan.

    Returns:
        :func:`metrics` of the run.
    """
    path = resolve(instance)
    inst = lorr.read_instance(path, team_size=team_size)
    best = BEST_KNOWN.get(inst.name)
    steps = steps or (best["steps"] if best else DEFAULT_STEPS)
    levers = levers or LEVER_SETS[DEFAULT_LEVERS]
    planner = PibtPlanner(levers, seed=seed)
    t0 = time.perf_counter()
    result = lorr.simulate(inst, planner, steps=steps, time_limit=time_limit, progress=progress)
    wall = time.perf_counter() - t0
    output = lorr.result_json(result)
    check = lorr.validate(output, inst, time_limit=time_limit)
    stats = dict(planner.stats)
    out_metrics = metrics(result, check, levers=levers, planner_stats=stats, wall_s=wall)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "lorr_output.json").write_text(lorr.dumps(output))
        config = {
            "instance": str(path),
            "steps": steps,
            "time_limit": time_limit,
            "seed": seed,
            "team_size": inst.team_size,
            "levers": dataclasses.asdict(levers),
        }
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (out / "calls.jsonl").write_text("")
        if episode:
            write_episode(result, out / "episode.parquet")
        (out / "metrics.json").write_text(json.dumps(out_metrics, indent=2) + "\n")
    return out_metrics


EXECUTORS = ("rules", "early", "learned")
"""2026 executors: the rule executor (the start kit default's rule), ``early`` (the same, plus
GO early behind a leader leaving the same way: the simple rule the learned policy can reach),
and ``learned`` (the trained GO/STOP policy of
:class:`~fleetmind.dispatch.lorr2026.LearnedExecutor`)."""


def executor_2026(name: str, weights: Path | None = None, *, hold: bool = False) -> RuleExecutor:
    """The executor called ``name`` (:data:`EXECUTORS`); ``weights`` for ``learned``.

    ``hold``: see :class:`~fleetmind.dispatch.lorr2026.RuleExecutor`.
    """
    if name == "rules":
        return RuleExecutor(hold=hold)
    if name == "early":
        return LearnedExecutor(lorr_executor.LinearPolicy(lorr_executor.EARLY), hold=hold)
    if name == "learned":
        policy = lorr_executor.load(weights or lorr_executor.WEIGHTS)[0]
        return LearnedExecutor(policy, hold=hold)
    raise ConfigError(f"--executor: unknown {name!r} (known: {', '.join(EXECUTORS)})")


def run_2026(
    instance: str | Path,
    *,
    executor: str = "rules",
    weights: Path | None = None,
    ticks: int = 1000,
    comm_ticks: int = 10,
    delays: bool = True,
    delay_seed: int | None = None,
    levers: Levers | None = None,
    seed: int = 0,
    hold: bool = True,
    out: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Play a LoRR 2026 problem: the staged LoRR planner and an executor; validate.

    Args:
        instance: a 2026 problem (path or short name).
        executor: a name of :data:`EXECUTORS`.
        weights: the learned executor's weights file (default: the shipped one).
        ticks: ticks to simulate.
        comm_ticks: ticks between planner communications.
        delays: draw the problem's delays (seeded numpy draws, not the kit's).
        delay_seed: overrides ``delayConfig.seed``.
        levers: planner levers (default: :data:`LEVER_SETS` [:data:`DEFAULT_LEVERS_2026`]).
        seed: seed of the planner's tie-breaks.
        hold: the executor stages every plan and the planner plans waits for the robots with
            a backlog (``False``: one robot's backlog skips the whole fleet's plan).
        out: folder for ``lorr_output.json`` (the kit's 2026 layout), ``metrics.json`` and
            ``config.json`` (none written if ``None``).
        progress: called with ``(tick, finished)`` at each communication.

    Returns:
        Tasks finished, moves the action model refused, executor and planner time, and the
        validator's verdict on the output file.
    """
    path = resolve(instance)
    inst = lorr.read_instance(path)
    levers = levers or LEVER_SETS[DEFAULT_LEVERS_2026]
    ex = executor_2026(executor, weights, hold=hold)
    planner = StagedPlanner(
        PibtPlanner(levers, seed=seed), comm_ticks=comm_ticks, executor=ex if hold else None
    )
    t0 = time.perf_counter()
    run = simulate2026(
        inst, planner, ex, ticks=ticks, comm_ticks=comm_ticks, delays=delays,
        delay_seed=delay_seed, progress=progress,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    output = output2026(run)
    check = lorr.validate(output, inst, time_limit=None)
    m: dict[str, Any] = {
        "instance": inst.name,
        "rules": "2026",
        "executor": executor,
        "robots": inst.team_size,
        "ticks": ticks,
        "comm_ticks": comm_ticks,
        "plan_steps": planner.steps,
        "delays": delays,
        "delay_seed": delay_seed
        if delay_seed is not None
        else (inst.delay.seed if inst.delay else 0),
        "delayed_robot_ticks": check.delayed,
        "finished": run.finished,
        "refused_by_action_model": len(run.refused),
        "plans_not_staged": getattr(ex, "skipped", 0),
        "hold": hold,
        "levers": dataclasses.asdict(levers),
        "early_go": getattr(ex, "early_go", 0),
        "executor_ms": _percentiles(run.executor_times),
        "planner_ms": _percentiles(run.planner_times),
        "wall_s": wall,
        "validated": check.ok,
        "collisions": check.executed_conflicts,
        "problems": list(check.problems[:5]),
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "lorr_output.json").write_text(lorr.dumps(output))
        config = {
            "instance": str(path), "executor": executor, "weights": str(weights or ""),
            "ticks": ticks, "comm_ticks": comm_ticks, "delays": delays,
            "delay_seed": delay_seed, "seed": seed, "levers": dataclasses.asdict(levers),
            "hold": hold,
        }  # fmt: skip
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (out / "metrics.json").write_text(json.dumps(m, indent=2) + "\n")
    return m


def row(m: dict[str, Any], *, levers: str) -> dict[str, Any]:
    """The benchmark row of a run's :func:`metrics`."""
    block = m["lorr"]
    best = block.get("best_known")
    return {
        "instance": block["instance"],
        "levers": levers,
        "robots": m["robots"],
        "steps": m["steps"],
        "finished": m["tasks_completed"],
        "unit": block["unit"],
        "throughput": m["throughput"],
        "best_known": best["tasks"] if best else None,
        "fraction_of_best": block.get("fraction_of_best"),
        "planning_p50_ms": block["planning_ms"]["p50"],
        "planning_p99_ms": block["planning_ms"]["p99"],
        "planning_max_ms": block["planning_ms"]["max"],
        "timeouts": block["timeouts"],
        "conflicts": m["collisions"],
        "validated": block["validated"],
        "wall_s": block["wall_s"],
    }


def format_row(r: dict[str, Any]) -> str:
    """One result line: finished, best known, start-kit default, planning time, conflicts.

    Benchmark rows also say whether their output file validates.
    """
    best = ""
    if r["best_known"] is not None:
        frac = r["fraction_of_best"]
        share = f" = {frac:.1%}" if frac is not None else " (other length)"
        best = f" of best-known {r['best_known']:,}{share}"
    kit = r.get("kit_default")
    if kit is not None:
        best += f" (start-kit default: {kit:,}, {r['finished'] / kit:.2f}x)"
    validates = ""
    if "validates" in r:
        validates = (
            "; output file validates"
            if r["validates"]
            else ("; output file DOES NOT VALIDATE: " + "; ".join(r["validation_problems"]))
        )
    return (
        f"{r['instance']} [{r['levers']}] {r['robots']} robots, {r['steps']} steps: "
        f"{r['finished']:,} {r['unit']}{best}, {r['throughput']:.2f}/step; planning p50 "
        f"{r['planning_p50_ms']:.0f} ms, p99 {r['planning_p99_ms']:.0f} ms, max "
        f"{r['planning_max_ms']:.0f} ms; {r['timeouts']} timed-out steps; "
        f"{r['conflicts']} conflicts (validated: {r['validated']}){validates}"
    )


HORIZON_2026: dict[str, int] = {
    "maze-example_40": 1000,
    "warehouse_small_200": 1000,
    "random_32_32_20_100": 10000,
    "warehouse_large_5000": 500,
}
"""Ticks of each 2026 problem: the makespan of the start kit's output for it; problems without
one (``room-example_150``, ``random-example_400``) play :data:`DEFAULT_TICKS_2026`."""

DEFAULT_TICKS_2026 = 1000
"""Ticks of a 2026 problem with no start-kit output to take a horizon from."""

DELAY_SEEDS = (0, 1, 2)
"""Delay seeds of every delays-on cell of ``bench lorr --rules 2026``."""


def kit_outputs(data: Path = SHARED) -> dict[str, list[dict[str, Any]]]:
    """Real 2026 start-kit outputs by problem stem (``outputs/pairs.json``; none if absent)."""
    path = data / "outputs" / "pairs.json"
    if not path.exists():
        return {}
    pairs = json.loads(path.read_text())
    out: dict[str, list[dict[str, Any]]] = {}
    for p in pairs:
        if p["edition"] == "2026":
            out.setdefault(Path(p["input"]).stem, []).append(p)
    return out


def run_2026_bench(
    *,
    data: Path = SHARED,
    problems: Sequence[str] | None = None,
    executors: Sequence[str] = EXECUTORS,
    seeds: Sequence[int] = DELAY_SEEDS,
    steps: int | None = None,
    weights: Path | None = None,
    levers: str = DEFAULT_LEVERS_2026,
    hold: bool = True,
    out: Path | None = None,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``fleetmind bench lorr --rules 2026``: every 2026 problem, each executor, delays on/off.

    Each problem plays its :data:`HORIZON_2026` (or ``steps`` when given, a cap) with delays
    off and with delays on for each of ``seeds``; a row per problem and executor. With ``out``
    every run keeps ``out/<problem>/<executor>/<off|seed-k>/`` (the run's files and, last,
    :data:`RUN_FILE_2026` with its :func:`settings_2026`); a rerun with the same settings reads
    the finished runs back, other settings run again (resumable).

    Args:
        data: the shared LoRR folder (``2026/``, ``outputs/pairs.json``).
        problems: problem stems (default: every ``2026/*/*.json``).
        executors: names of :data:`EXECUTORS`.
        seeds: delay seeds.
        steps: a cap on every problem's ticks.
        weights: the learned executor's weights (default: the shipped file).
        levers: the planner's lever set (a name of :data:`LEVER_SETS`).
        hold: as for :func:`run_2026`.
        out: the run folders (none kept if ``None``).
        quick: ``maze-example_40`` only, 200 ticks, delay seeds 0 and 1 (a smoke run).
        progress: called with a line of text as each run ends.
    """
    found = {p.stem: p for p in sorted((data / "2026").glob("*.domain/*.json"))}
    if not found:
        raise ConfigError(f"{data / '2026'}: no 2026 problems (*.domain/*.json)")
    if quick:
        problems, steps, seeds = ("maze-example_40",), 200, tuple(seeds)[:2]
    names = list(problems) if problems else sorted(found, key=lambda s: _robots(found[s]))
    unknown = [p for p in names if p not in found]
    if unknown:
        raise ConfigError(f"--problems: unknown {unknown[0]!r} (known: {', '.join(found)})")
    if levers not in LEVER_SETS:
        raise ConfigError(f"--levers: unknown {levers!r} (known: {', '.join(LEVER_SETS)})")
    for e in executors:
        if e not in EXECUTORS:
            raise ConfigError(f"--executors: unknown {e!r} (known: {', '.join(EXECUTORS)})")
    kits = kit_outputs(data)
    rows = []
    for name in names:
        ticks = HORIZON_2026.get(name, DEFAULT_TICKS_2026)
        if steps is not None:
            ticks = min(ticks, steps)
        for executor in executors:
            runs = {}
            for cell, seed in [("off", None), *((f"seed-{s}", s) for s in seeds)]:
                folder = out / name / executor / cell if out is not None else None
                settings = settings_2026(
                    found[name], executor=executor, weights=weights, ticks=ticks,
                    delays=seed is not None, delay_seed=seed, levers=LEVER_SETS[levers],
                    hold=hold,
                )  # fmt: skip
                m = _finished_2026(folder, settings) if folder is not None else None
                if m is None:
                    m = run_2026(
                        found[name], executor=executor, weights=weights, ticks=ticks,
                        delays=seed is not None, delay_seed=seed, levers=LEVER_SETS[levers],
                        hold=hold, out=folder,
                    )  # fmt: skip
                    if folder is not None:
                        # Written last: a folder without it (or with other settings) reruns.
                        marker = {"settings": settings, "metrics": m}
                        (folder / RUN_FILE_2026).write_text(json.dumps(marker, indent=2) + "\n")
                runs[cell] = m
                if progress is not None:
                    progress(
                        f"{name} [{executor}] {cell}: {m['finished']} tasks in {ticks} ticks "
                        f"({m['wall_s']:.0f} s)"
                    )
            rows.append(_row_2026(name, executor, ticks, runs, kits.get(name, [])))
    return {
        "rules": "2026", "seeds": list(seeds), "rows": rows, "steps_cap": steps,
        "levers": levers, "hold": hold,
    }  # fmt: skip


RUN_FILE_2026 = "row.json"
"""The file a finished 2026 benchmark run writes last: its settings and its metrics."""


def settings_2026(
    instance: Path,
    *,
    executor: str,
    weights: Path | None,
    ticks: int,
    delays: bool,
    delay_seed: int | None,
    comm_ticks: int = 10,
    levers: Levers | None = None,
    seed: int = 0,
    hold: bool = True,
) -> dict[str, Any]:
    """Everything a 2026 benchmark run's result depends on, as plain JSON values.

    The learned executor's weights count by content (a retrained file reruns), the planner's
    levers by value (a new default reruns).
    """
    weights_file = None
    if executor == "learned":
        path = weights or lorr_executor.WEIGHTS
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        weights_file = {"path": str(path), "sha256": digest}
    levers = levers or LEVER_SETS[DEFAULT_LEVERS_2026]
    settings = {
        "instance": str(Path(instance).resolve()),
        "executor": executor,
        "weights": weights_file,
        "ticks": ticks,
        "comm_ticks": comm_ticks,
        "delays": delays,
        "delay_seed": delay_seed,
        "levers": dataclasses.asdict(levers),
        "seed": seed,
        "hold": hold,
    }
    # Through JSON so that a saved copy compares equal (tuples become lists).
    out: dict[str, Any] = json.loads(json.dumps(settings))
    return out


def _finished_2026(folder: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The metrics of a finished run in ``folder`` with exactly ``settings``, else ``None``."""
    marker = folder / RUN_FILE_2026
    if not marker.exists():
        return None
    try:
        saved = json.loads(marker.read_text())
    except (OSError, ValueError):
        saved = {}
    if saved.get("settings") == settings and isinstance(saved.get("metrics"), dict):
        metrics: dict[str, Any] = saved["metrics"]
        return metrics
    marker.unlink()  # other settings: this run is redone, not half-trusted
    return None


def _robots(path: Path) -> int:
    return int(json.loads(path.read_text())["teamSize"])


def _row_2026(
    name: str,
    executor: str,
    ticks: int,
    runs: dict[str, dict[str, Any]],
    kits: list[dict[str, Any]],
) -> dict[str, Any]:
    on = [m for cell, m in runs.items() if cell != "off"]
    mean, half = mean_interval([m["finished"] for m in on])
    every = list(runs.values())
    return {
        "problem": name,
        "executor": executor,
        "robots": every[0]["robots"],
        "ticks": ticks,
        "delays_off": runs["off"]["finished"],
        "delays_on": [m["finished"] for m in on],
        "delays_on_mean": mean,
        "delays_on_ci95": half,
        "refused_on_mean": float(np.mean([m["refused_by_action_model"] for m in on])),
        "refused_off": runs["off"]["refused_by_action_model"],
        "executor_p99_ms": max(m["executor_ms"]["p99"] for m in every),
        "planner_p50_ms": float(np.median([m["planner_ms"]["p50"] for m in every])),
        "planner_p99_ms": max(m["planner_ms"]["p99"] for m in every),
        "collisions": sum(m["collisions"] for m in every),
        "validated": all(m["validated"] for m in every),
        "kit": [
            {
                "file": Path(k["output"]).name,
                "ticks": k["makespan"],
                "finished": k["numTaskFinished"],
                "delays_recorded": k["hasDelayIntervals"],
            }
            for k in kits
        ],
    }


def targets_2026(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 49's executor targets per problem: learned vs rules, delays on and off."""
    by = {(r["problem"], r["executor"]): r for r in result["rows"]}
    out = []
    for (problem, executor), r in by.items():
        base = by.get((problem, "rules"))
        if executor == "rules" or base is None:
            continue
        ratio = r["delays_on_mean"] / base["delays_on_mean"] if base["delays_on_mean"] else None
        out.append(
            {
                "problem": problem,
                "executor": executor,
                "on_ratio": ratio,
                "on_target_met": ratio is not None and ratio >= 1.05,
                "off_delta": r["delays_off"] - base["delays_off"],
                "off_target_met": r["delays_off"] >= base["delays_off"],
            }
        )
    return out


def format_2026(result: dict[str, Any]) -> str:
    """The 2026 benchmark as plain text lines."""
    lines = []
    for r in result["rows"]:
        on = " / ".join(str(x) for x in r["delays_on"])
        kit = "; ".join(
            f"kit {k['file']}: {k['finished']} in {k['ticks']} ticks"
            + ("" if k["delays_recorded"] else " (no delays recorded)")
            for k in r["kit"]
        )
        lines.append(
            f"{r['problem']} [{r['executor']}] {r['robots']} robots, {r['ticks']} ticks: delays "
            f"on {on} = {r['delays_on_mean']:.1f} +- {r['delays_on_ci95']:.1f}, off "
            f"{r['delays_off']}; refused by the action model {r['refused_on_mean']:.0f} (on) / "
            f"{r['refused_off']} (off); executor p99 {r['executor_p99_ms']:.2f} ms; planner "
            f"p50 {r['planner_p50_ms']:.0f} / p99 {r['planner_p99_ms']:.0f} ms; "
            f"{r['collisions']} collisions; validated {r['validated']}"
            + (f"; {kit}" if kit else "")
        )
    for t in targets_2026(result):
        ratio = "n/a" if t["on_ratio"] is None else f"{t['on_ratio']:.3f}x"
        lines.append(
            f"target {t['problem']} {t['executor']} vs rules: delays on {ratio} (>= 1.05x: "
            f"{'met' if t['on_target_met'] else 'missed'}), delays off {t['off_delta']:+d} "
            f"(never fewer: {'met' if t['off_target_met'] else 'missed'})"
        )
    return "\n".join(lines)


def generated(
    *,
    rules: str,
    variants: Sequence[str],
    seed: int,
    count: int,
    steps: int,
    kind: str = "random",
    size: int = 32,
    robots: int = 100,
    executor: str = "rules",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Planner levers on generated problems (``fleetmind lorr generated``): never scored maps.

    2024: :func:`~fleetmind.rl.lorr_executor.problems_2024` (``kind``, ``size``, ``robots``),
    ``steps`` steps each, no time limit. 2026: the executor's training problems
    (:func:`~fleetmind.rl.lorr_executor.training_problems`), ``steps`` ticks each, delays off
    and on (delay seed: the problem's index). A variant is a name of :data:`LEVER_SETS`, in
    2026 with ``:hold`` for :func:`run_2026`'s ``hold``.

    Returns:
        One row per variant: tasks finished per problem (2026: delays off and on) and totals.
    """
    if rules not in ("2024", "2026"):
        raise ConfigError(f"--rules: 2024 or 2026, got {rules!r}")
    parsed = []
    for v in variants:
        name, _, flag = v.partition(":")
        if name not in LEVER_SETS or flag not in ("", "hold") or (flag and rules == "2024"):
            known = ", ".join(LEVER_SETS)
            raise ConfigError(f"--variants: unknown {v!r} (lever sets: {known}; 2026: NAME:hold)")
        parsed.append((v, LEVER_SETS[name], flag == "hold"))
    if rules == "2024":
        insts = lorr_executor.problems_2024(seed, count, kind=kind, size=size, robots=robots)
    else:
        insts = lorr_executor.training_problems(seed, count)
    rows = []
    for label, levers, hold in parsed:
        runs: dict[str, list[int]] = {}
        for cell in ("steps",) if rules == "2024" else ("off", "on"):
            done = []
            for k, inst in enumerate(insts):
                if rules == "2024":
                    result = lorr.simulate(inst, PibtPlanner(levers), steps=steps)
                    done.append(result.finished)
                    continue
                ex = executor_2026(executor, hold=hold)
                planner = StagedPlanner(PibtPlanner(levers), executor=ex if hold else None)
                run = simulate2026(
                    inst, planner, ex, ticks=steps, delays=cell == "on", delay_seed=k
                )
                done.append(run.finished)
            runs[cell] = done
            if progress is not None:
                progress(f"{label} {cell}: {sum(done)} {done}")
        rows.append({"variant": label, **runs, **{f"{c}_total": sum(v) for c, v in runs.items()}})
    return {
        "rules": rules, "seed": seed, "count": count, "steps": steps, "kind": kind,
        "size": size, "robots": robots, "executor": executor, "rows": rows,
    }  # fmt: skip


def format_generated(result: dict[str, Any]) -> str:
    """:func:`generated` as plain text lines."""
    lines = []
    for r in result["rows"]:
        cells = [k for k in ("steps", "off", "on") if k in r]
        body = "; ".join(
            f"{'tasks' if c == 'steps' else 'delays ' + c} {r[c + '_total']} {r[c]}" for c in cells
        )
        lines.append(f"{r['variant']}: {body}")
    return "\n".join(lines)
