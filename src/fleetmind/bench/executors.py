"""``fleetmind bench executors``: the RL executor against the strongest simple executors.

Every run is ``fleetmind run`` as a user gives it (:func:`fleetmind.eval.runner.execute`, no
run folder): assignment planner, shield on, ``steps`` ticks, the same seeds for every executor
(a seed fixes the map's start cells and the order stream, whatever the executor does).

Cases: LoRR ``warehouse_small.map`` (the map the shipped policy was trained on) at 100 and 200
robots, and two held-out maps the policy never saw, LoRR ``warehouse_large.map`` and
``sortation_large.map`` (140x500), dense enough to make traffic. ``random-64-64-10.map`` has
no pickup cells, so no order can be served on it.

Executors: ``shortest-path`` (ties in a fixed action order), ``shortest-path-random`` (seeded
ties), ``pibt`` (PIBT's own order: distance, then a free cell before an occupied one, then
random), ``congestion`` (shortest path plus costs for occupied cells, head-on meetings and
recent traffic), ``guidance`` (congestion costs over LoRR's crisscross highway maps), and the
learned ones: ``rl`` (the shipped navigation policy, heuristic fallbacks), ``rl-guided`` (a PPO
residual over guidance) and ``learned-guidance`` (guidance on a cost map learned by CMA-ES,
``fleetmind nav guide``). For each case and executor: tasks
delivered (mean and the value of every seed), the delivered share of all orders that arrived,
executed collisions (0 with the shield), the ratio to the best simple executor of the case,
and the executor's own time per tick (p50 / p99 of ``tier_latency_ms.executor``, the mean over
seeds), beside the CPU time per tick its background map workers spent (``distance_maps`` of
the run's metrics: maps made ahead cost no tick's time, but they are the executor's work). A
scale row times the executors on ``warehouse_large.map`` with 1,000 robots for a few ticks (the
target: RL at or below shortest path); a case of that map and size is reused instead (the
default cases include it: 300 ticks, every seed).

Targets (issue 17): RL >= 1.05x the best simple executor at 100 robots and >= 1.10x at 200 on
``warehouse_small.map``, >= 1.0x on the held-out maps, 0 collisions; RL's time per tick at 1,000
robots <= shortest path's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import ConfigError
from fleetmind.eval.runner import RunConfig, execute

logger = logging.getLogger(__name__)

LORR = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "lorr" / "maps"
SIMPLE: tuple[str, ...] = (
    "shortest-path",
    "shortest-path-random",
    "pibt",
    "congestion",
    "guidance",
)
LEARNED: tuple[str, ...] = ("rl", "rl-guided", "learned-guidance")
"""The learned executors; each is compared with the best of the simple ones."""
EXECUTORS: tuple[str, ...] = (*SIMPLE, *LEARNED)


@dataclass(frozen=True)
class Case:
    """One map and fleet size, and the ratio RL must reach against the best simple executor."""

    map: str
    robots: int
    target: float
    held_out: bool


CASES: tuple[Case, ...] = (
    Case(str(LORR / "warehouse_small.map"), 100, 1.05, held_out=False),
    Case(str(LORR / "warehouse_small.map"), 200, 1.10, held_out=False),
    Case(str(LORR / "warehouse_large.map"), 1000, 1.0, held_out=True),
    Case(str(LORR / "sortation_large.map"), 1000, 1.0, held_out=True),
)
QUICK_CASES: tuple[Case, ...] = (Case("warehouse-small", 12, 1.0, held_out=False),)
HELDOUT = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "heldout"
LAYOUT_CASES: tuple[Case, ...] = (
    Case("warehouse-small", 40, 1.0, held_out=True),
    Case("warehouse-small", 80, 1.0, held_out=True),
    Case("warehouse-medium", 60, 1.0, held_out=True),
    Case("warehouse-medium", 100, 1.0, held_out=True),
    Case("warehouse-medium", 150, 1.0, held_out=True),
    Case(str(HELDOUT / "warehouse-2wide.txt"), 150, 1.0, held_out=True),
    Case(str(HELDOUT / "warehouse-2wide.txt"), 350, 1.0, held_out=True),
    Case(str(HELDOUT / "warehouse-deep.txt"), 80, 1.0, held_out=True),
    Case(str(HELDOUT / "warehouse-deep.txt"), 160, 1.0, held_out=True),
    Case(str(HELDOUT / "random-64-64-10-errands.map"), 150, 1.0, held_out=True),
    Case(str(HELDOUT / "random-64-64-10-errands.map"), 400, 1.0, held_out=True),
)
"""``--cases layouts``: maps no guide model was trained on, sparse to jammed.

Generated presets (one-wide aisles), two map files in ``benchmarks/data/heldout`` (two-wide
aisles; racks three rows deep), each written by ``warehouse_layout`` with the arguments in its
first line, and LoRR's random map with errands between random cells (no aisles, no racks).
Whether a learned cost map carries over to a layout it never saw."""
SCALE_MAP = str(LORR / "warehouse_large.map")


def select(cases: str | None, executors: str | None) -> dict[str, Any]:
    """``run`` arguments for the comma-separated case maps and executors a user named.

    Raises:
        ConfigError: naming a map with no case, or an executor the bench does not know.
    """
    from fleetmind.errors import ConfigError

    out: dict[str, Any] = {}
    if cases:
        names = [c.strip().removesuffix(".map") for c in cases.split(",") if c.strip()]
        known = {Path(c.map).stem for c in CASES}
        for name in names:
            if name not in known and name != "layouts":
                raise ConfigError(
                    f"--cases: no case on map {name!r} (known: {', '.join(sorted(known))}, "
                    "or layouts)"
                )
        out["cases"] = tuple(c for c in CASES if Path(c.map).stem in names)
        if "layouts" in names:
            out["cases"] += LAYOUT_CASES
    if executors:
        names = [e.strip() for e in executors.split(",") if e.strip()]
        for name in names:
            if name not in EXECUTORS:
                raise ConfigError(
                    f"--executors: unknown executor {name!r} (known: {', '.join(EXECUTORS)})"
                )
        out["executors"] = tuple(names)
    return out


def _one(cfg_data: dict[str, Any]) -> dict[str, Any]:
    """One run (in a worker process): the figures the bench keeps."""
    m = execute(RunConfig(**cfg_data), None)
    ex = m["tier_latency_ms"]["executor"]
    learned = m.get("executor_stats") or {}
    return {
        "curve": learned.get("curve", []),
        "rollbacks": int(learned.get("rollbacks", 0)),
        "updates": int(learned.get("updates", 0)),
        "tasks": int(m["tasks_completed"]),
        "orders": int(m["orders_arrived"]),
        "collisions": int(m["collisions"]),
        "shield_interventions": int(m["shield_interventions"]),
        "executor_ms": {"p50": float(ex["p50"]), "p99": float(ex["p99"])},
        "maps_ahead_ms": _maps_ahead_ms(m),
    }


def _maps_ahead_ms(metrics: dict[str, Any]) -> float:
    """CPU ms per tick the run's background map workers spent (in no tick's own time)."""
    maps = metrics.get("distance_maps") or {}
    total = sum(float(c.get("made_ahead_cpu_s", 0.0)) for c in maps.values())
    return 1e3 * total / max(1, int(metrics.get("steps", 1)))


def _run_all(
    jobs: list[dict[str, Any]], workers: int, progress: Callable[[str], None] | None
) -> list[dict[str, Any]]:
    """Run every job, in ``workers`` processes when more than one."""
    out: list[dict[str, Any]] = []
    if workers <= 1:
        for k, job in enumerate(jobs):
            out.append(_one(job))
            if progress:
                progress(_progress_line(k, len(jobs), job, out[-1]))
        return out
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for k, (job, res) in enumerate(zip(jobs, pool.map(_one, jobs), strict=True)):
            out.append(res)
            if progress:
                progress(_progress_line(k, len(jobs), job, res))
    return out


def _progress_line(k: int, n: int, job: dict[str, Any], res: dict[str, Any]) -> str:
    name = Path(job["map"]).name
    return (
        f"[{k + 1}/{n}] {name} {job['robots']} robots, {job['executor']}, seed {job['seed']}: "
        f"{res['tasks']} tasks"
    )


def run(
    *,
    quick: bool = False,
    seeds: tuple[int, ...] = (0, 1, 2),
    steps: int = 300,
    scale_robots: int = 1000,
    scale_steps: int = 40,
    executors: tuple[str, ...] = EXECUTORS,
    cases: tuple[Case, ...] | None = None,
    workers: int = 1,
    guide: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every case with every executor over ``seeds``; the scale row at ``scale_robots``.

    Args:
        quick: a smoke run: the warehouse-small preset with 12 robots, 40 ticks, one seed, and
            the scale row at 60 robots for 10 ticks.
        seeds: root seeds, one run each per case and executor.
        steps: ticks of each run.
        scale_robots: fleet size of the scale row (0: no scale row).
        scale_steps: ticks of each scale run.
        executors: the executors to compare (``rl`` is compared with the best of the others).
        cases: the cases (default :data:`CASES`).
        workers: processes running runs side by side.
        guide: ``learned-guidance``'s guide model file (default: the shipped one).
        progress: called with one line after each run.

    Returns:
        ``{"steps", "seeds", "cases": [...], "scale": {...} | None, "targets": {...}}``.
    """
    if quick:
        cases, seeds, steps = cases or QUICK_CASES, seeds[:1], 40
        scale_robots, scale_steps = min(scale_robots, 60), 10
    cases = cases or CASES
    jobs = [
        {
            "map": case.map,
            "robots": case.robots,
            "steps": steps,
            "seed": seed,
            "executor": name,
            "planner": "assignment",
            "shield": True,
            **({"policy": guide} if guide and name == "learned-guidance" else {}),
        }
        for case in cases
        for seed in seeds
        for name in executors
    ]
    # Executors take turns seed by seed (A B A B ...), so that a machine that slows down over
    # a case's runs slows every executor's time per tick alike, not the last one's alone.
    done = iter(_run_all(jobs, workers, progress))
    out_cases = []
    for case in cases:
        row: dict[str, Any] = {
            "map": Path(case.map).name,
            "robots": case.robots,
            "held_out": case.held_out,
            "target": case.target,
            "executors": {},
        }
        by_seed = [{name: next(done) for name in executors} for _ in seeds]
        for name in executors:
            runs = [turn[name] for turn in by_seed]
            tasks = [r["tasks"] for r in runs]
            orders = sum(r["orders"] for r in runs)
            row["executors"][name] = {
                "tasks": tasks,
                "tasks_mean": float(np.mean(tasks)),
                "delivered_share": sum(tasks) / orders if orders else 0.0,
                "collisions": sum(r["collisions"] for r in runs),
                "shield_interventions_mean": float(
                    np.mean([r["shield_interventions"] for r in runs])
                ),
                "executor_ms": {
                    q: float(np.mean([r["executor_ms"][q] for r in runs])) for q in ("p50", "p99")
                },
                "maps_ahead_ms": float(np.mean([r["maps_ahead_ms"] for r in runs])),
            }
        _ratios(row)
        out_cases.append(row)
    scale = None
    scale_map = "warehouse-small" if quick else SCALE_MAP
    same = [
        (case, row)
        for case, row in zip(cases, out_cases, strict=True)
        if case.map == scale_map and case.robots == scale_robots
    ]
    if scale_robots > 0 and same:
        # A case already ran this map and fleet size for ``steps`` ticks over every seed.
        case, row = same[0]
        scale = {
            "map": row["map"],
            "robots": scale_robots,
            "steps": steps,
            "seeds": list(seeds),
            "executor_ms": {n: c["executor_ms"] for n, c in row["executors"].items()},
            "maps_ahead_ms": {n: c["maps_ahead_ms"] for n, c in row["executors"].items()},
            "collisions": sum(c["collisions"] for c in row["executors"].values()),
        }
        _time_ratio(scale)
    elif scale_robots > 0:
        scale = _scale(
            scale_map,
            scale_robots,
            scale_steps,
            seed=seeds[0],
            executors=executors,
            workers=workers,
            progress=progress,
        )
    return {
        "steps": steps,
        "seeds": list(seeds),
        "cases": out_cases,
        "scale": scale,
        "targets": _targets(out_cases, scale),
    }


def _ratios(row: dict[str, Any]) -> None:
    """Mark the best simple executor of a case and every executor's ratio to it."""
    ex = row["executors"]
    simple = [n for n in ex if n not in LEARNED]
    if not simple:
        row["best_simple"] = None
        return
    best = max(simple, key=lambda n: ex[n]["tasks_mean"])
    row["best_simple"] = best
    base = ex[best]["tasks_mean"]
    for cell in ex.values():
        cell["vs_best_simple"] = cell["tasks_mean"] / base if base > 0 else None


def _scale(
    map_name: str,
    robots: int,
    steps: int,
    *,
    seed: int,
    executors: tuple[str, ...],
    workers: int,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Executor time per tick with ``robots`` robots, each executor on the same run."""
    jobs = [
        {
            "map": map_name,
            "robots": robots,
            "steps": steps,
            "seed": seed,
            "executor": name,
            "planner": "assignment",
            "shield": True,
        }
        for name in executors
    ]
    runs = _run_all(jobs, workers, progress)
    row: dict[str, Any] = {"map": Path(map_name).name, "robots": robots, "steps": steps}
    row["executor_ms"] = {name: r["executor_ms"] for name, r in zip(executors, runs, strict=True)}
    row["maps_ahead_ms"] = {n: r["maps_ahead_ms"] for n, r in zip(executors, runs, strict=True)}
    row["seeds"] = [seed]
    row["collisions"] = sum(r["collisions"] for r in runs)
    _time_ratio(row)
    return row


def _time_ratio(row: dict[str, Any]) -> None:
    """Each learned executor's time per tick over shortest path's (p50), where both ran."""
    ms = row["executor_ms"]
    if "shortest-path" not in ms or ms["shortest-path"]["p50"] <= 0:
        return
    for name in LEARNED:
        if name in ms:
            row[f"{name}_vs_shortest_path_p50"] = ms[name]["p50"] / ms["shortest-path"]["p50"]


def _targets(cases: list[dict[str, Any]], scale: dict[str, Any] | None) -> dict[str, Any]:
    """Each target of issue 17, with the figure it is judged on and whether it is met."""
    out: dict[str, Any] = {}
    for row in cases:
        for name in LEARNED:
            rl = row["executors"].get(name)
            if rl is None or rl.get("vs_best_simple") is None:
                continue
            out[f"{name}_vs_best_simple/{row['map']}/{row['robots']}"] = {
                "value": rl["vs_best_simple"],
                "target": row["target"],
                "best_simple": row["best_simple"],
                "met": bool(rl["vs_best_simple"] >= row["target"]),
            }
    total = sum(c["collisions"] for row in cases for c in row["executors"].values())
    out["collisions"] = {"value": total, "target": 0, "met": total == 0}
    for name in LEARNED:
        if scale is not None and f"{name}_vs_shortest_path_p50" in scale:
            v = scale[f"{name}_vs_shortest_path_p50"]
            out[f"{name}_time_vs_shortest_path"] = {
                "value": v,
                "target": 1.0,
                "met": bool(v <= 1.0),
            }
    return out


def format_table(result: dict[str, Any]) -> str:
    """The bench as plain-text tables."""
    lines = [
        f"Executors, assignment planner, shield on, {result['steps']} ticks, "
        f"seeds {', '.join(map(str, result['seeds']))} (tasks delivered)"
    ]
    for row in result["cases"]:
        tag = " (held out)" if row["held_out"] else ""
        lines.append("")
        lines.append(f"{row['map']}, {row['robots']} robots{tag}: best simple {row['best_simple']}")
        lines.append(
            f"  {'executor':22} {'mean':>7} {'per seed':>18} {'share':>6} {'vs best':>7} "
            f"{'coll.':>5} {'ms p50':>7} {'ms p99':>7}"
        )
        for name, c in row["executors"].items():
            ratio = c.get("vs_best_simple")
            lines.append(
                f"  {name:22} {c['tasks_mean']:7.1f} {' / '.join(map(str, c['tasks'])):>18} "
                f"{c['delivered_share']:6.3f} {'-' if ratio is None else f'{ratio:.3f}':>7} "
                f"{c['collisions']:5d} {c['executor_ms']['p50']:7.2f} "
                f"{c['executor_ms']['p99']:7.2f}"
            )
    scale = result.get("scale")
    if scale:
        lines.append("")
        lines.append(
            f"Executor time per tick, {scale['map']}, {scale['robots']} robots, "
            f"{scale['steps']} ticks, seeds {', '.join(map(str, scale['seeds']))} "
            "(ms p50 / p99, mean over seeds; maps: CPU ms a tick the background map workers "
            "spent, beside the loop)"
        )
        ahead = scale.get("maps_ahead_ms", {})
        for name, ms in scale["executor_ms"].items():
            bg = ahead.get(name)
            maps = "" if bg is None else f" {bg:8.2f} maps"
            lines.append(f"  {name:22} {ms['p50']:8.2f} {ms['p99']:8.2f}{maps}")
    lines.append("")
    lines.append("Targets")
    for key, t in result["targets"].items():
        value = t["value"]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        lines.append(
            f"  {key:44} {shown:>8} (target {t['target']}) {'met' if t['met'] else 'MISSED'}"
        )
    return "\n".join(lines)


LEARN_MAP = "warehouse-medium"
"""The first held-out map of the learning bench: neither learned executor was trained on it
(both on LoRR ``warehouse_small.map`` only); at 150 robots this 40x60 preset is dense (guidance
delivers 1.9x shortest path's tasks)."""
LEARN_CASES: tuple[tuple[str, int], ...] = ((LEARN_MAP, 150), ("warehouse-small", 80))
"""The learning bench's held-out maps and fleets, one of each kind a live learner meets.

``warehouse-medium``, 150 robots: the shipped cost map already fits (a search tuned on the map
does no better on fresh seeds), so learning has nothing to find. The ``warehouse-small`` preset
(20x30, not LoRR's map of that name), 80 robots: the shipped cost map fits badly (0.925x
``guidance``'s tasks over 1,000 ticks, seeds 20-22), so a learner has something to recover.
Chosen by a scan of six held-out maps and fleet sizes for the shipped model against
``guidance``, before any learning run (``docs/executors.md``)."""
LEARNERS: tuple[str, ...] = ("learned-guidance", "rl-guided")
"""The executors that can keep learning on a live fleet (``--learn-every``)."""


def learning(
    *,
    executor: str = "learned-guidance",
    map_name: str = LEARN_MAP,
    robots: int = 150,
    steps: int = 5000,
    every: int | None = None,
    seeds: tuple[int, ...] = (0, 1, 2),
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Continuous improvement on a held-out map: the fleet learning from its own experience.

    Runs per seed, on the same orders: ``executor`` learning (one update every ``every`` ticks,
    the rollback guard on); the control, the same runs with updates off (``learn_lr`` 0),
    which carries the warm-up of a run from empty (orders arriving, robots spreading out) and
    any drift of the map's throughput that a first-20%-against-last-20% figure would otherwise
    credit to learning; and ``guidance``. For ``rl-guided`` the control samples its actions
    as the learner does, and the shipped policy's greedy run is added. For
    ``learned-guidance`` each update is a CMA-ES generation scored by replaying the run's
    recorded orders (``eval/guide_live.py``).

    Args:
        executor: ``learned-guidance`` or ``rl-guided``.
        map_name: the held-out map.
        robots: fleet size.
        steps: ticks of each run.
        every: ticks between updates (default 500 for learned-guidance, 250 for rl-guided).
        seeds: root seeds, one run of each kind per seed.
        workers: processes running runs side by side.
        progress: called with one line after each run.

    Returns:
        ``{"executor", "map", "robots", "steps", "every", "seeds", "runs": {...},
        "figures": {...}}``: per kind the tasks of every seed, and for the learning kinds the
        deliveries per tick of the first and last 20% of the run (read off the windows).

    Raises:
        ConfigError: an executor that cannot learn live.
    """
    if executor not in LEARNERS:
        raise ConfigError(f"--learn-executor: expected one of {', '.join(LEARNERS)}")
    if every is None:
        every = 500 if executor == "learned-guidance" else 250
    kinds: dict[str, dict[str, Any]] = {
        "learning": {"executor": executor, "learn_every": every},
        "no updates": {"executor": executor, "learn_every": every, "learn_lr": 0.0},
    }
    if executor == "rl-guided":
        kinds["rl-guided greedy"] = {"executor": "rl-guided"}
    kinds["guidance"] = {"executor": "guidance"}
    common = {"map": map_name, "robots": robots, "steps": steps, "planner": "assignment"}
    jobs = [{**common, **kind, "seed": seed} for kind in kinds.values() for seed in seeds]
    results = iter(_run_all(jobs, workers, progress))
    runs: dict[str, Any] = {}
    for name in kinds:
        per_seed = [next(results) for _ in seeds]
        row: dict[str, Any] = {
            "tasks": [r["tasks"] for r in per_seed],
            "collisions": sum(r["collisions"] for r in per_seed),
        }
        if per_seed[0]["curve"]:
            first = [_rate(r["curve"], 0, 0.2 * steps) for r in per_seed]
            last = [_rate(r["curve"], 0.8 * steps, steps) for r in per_seed]
            row.update(
                first_20=first,
                last_20=last,
                last_vs_first=[b / a if a else None for a, b in zip(first, last, strict=True)],
                rollbacks=[r["rollbacks"] for r in per_seed],
                updates=[r["updates"] for r in per_seed],
                curve=[[w["deliveries_per_tick"] for w in r["curve"]] for r in per_seed],
            )
        row["tasks_mean"] = float(np.mean(row["tasks"]))
        runs[name] = row
    learn, control = runs["learning"], runs["no updates"]
    ratio = float(np.mean([x for x in learn["last_vs_first"] if x is not None]))
    figures = {
        "last_vs_first/learning": ratio,
        "last_vs_first/no updates": float(
            np.mean([x for x in control["last_vs_first"] if x is not None])
        ),
        "last_20/learning_vs_no_updates": float(
            np.mean(learn["last_20"]) / max(np.mean(control["last_20"]), 1e-9)
        ),
        "tasks/learning_vs_guidance": learn["tasks_mean"] / max(runs["guidance"]["tasks_mean"], 1),
        "collisions": sum(r["collisions"] for r in runs.values()),
        "target/last_vs_first": {"value": ratio, "target": 1.05, "met": bool(ratio >= 1.05)},
    }
    return {
        "executor": executor,
        "map": Path(map_name).name,
        "robots": robots,
        "steps": steps,
        "every": every,
        "seeds": list(seeds),
        "runs": runs,
        "figures": figures,
    }


def learning_cases(
    cases: tuple[tuple[str, int], ...] = LEARN_CASES, **options: Any
) -> dict[str, Any]:
    """:func:`learning` on each ``(map, robots)`` of ``cases``: ``{"cases": [...]}``.

    Args:
        cases: the held-out maps and fleet sizes.
        **options: :func:`learning`'s other arguments, the same for every case.
    """
    return {
        "cases": [learning(map_name=m, robots=n, **options) for m, n in cases],
    }


def _rate(curve: list[dict[str, Any]], start: float, end: float) -> float:
    """Deliveries per tick over the learner's windows lying inside ``[start, end]``."""
    inside = [w for w in curve if w["start"] >= start - 1 and w["end"] <= end]
    ticks = sum(w["end"] - w["start"] for w in inside)
    return sum(w["deliveries"] for w in inside) / ticks if ticks else 0.0


def format_learning(result: dict[str, Any]) -> str:
    """The learning bench as a plain-text table."""
    lines = [
        f"Continuous improvement of {result['executor']}, {result['map']} (held out), "
        f"{result['robots']} robots, "
        f"{result['steps']} ticks, an update every {result['every']}, seeds "
        f"{', '.join(map(str, result['seeds']))}",
        f"  {'run':22} {'tasks mean':>10} {'per seed':>24} {'first 20%':>10} {'last 20%':>9} "
        f"{'last/first':>10}",
    ]
    for name, row in result["runs"].items():
        per = " / ".join(map(str, row["tasks"]))
        if "first_20" in row:
            ratios = [x for x in row["last_vs_first"] if x is not None]
            tail = (
                f"{np.mean(row['first_20']):10.3f} {np.mean(row['last_20']):9.3f} "
                f"{np.mean(ratios) if ratios else float('nan'):10.3f}"
            )
        else:
            tail = f"{'-':>10} {'-':>9} {'-':>10}"
        lines.append(f"  {name:22} {row['tasks_mean']:10.1f} {per:>24} {tail}")
    f = result["figures"]
    lines += [
        "",
        f"  learning, last 20% over first 20%: {f['last_vs_first/learning']:.3f} (target 1.05 "
        f"{'met' if f['target/last_vs_first']['met'] else 'MISSED'}; "
        f"the same run without updates: {f['last_vs_first/no updates']:.3f})",
        f"  learning over no updates, last 20%: {f['last_20/learning_vs_no_updates']:.3f}",
        f"  learning over guidance, all tasks: {f['tasks/learning_vs_guidance']:.3f}",
        f"  collisions: {f['collisions']}",
    ]
    return "\n".join(lines)


def format_learning_cases(result: dict[str, Any]) -> str:
    """Every case of the learning bench, one table each (:func:`format_learning`)."""
    return "\n\n".join(format_learning(case) for case in result["cases"])
