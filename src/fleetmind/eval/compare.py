"""Side-by-side comparison of strategies on identical maps, order streams and seeds.

Each (strategy, seed) pair is one run folder ``OUT/<strategy>/seed-<k>``; strategies see the same
map, and for a given seed the same order stream and fault schedule (the world's order generator
is seeded by the run seed alone, so a planner's choices never change which orders arrive).

Scheduling: strategies without an LLM run in a ``ProcessPoolExecutor`` (``workers`` processes,
2 by default: the machines this runs on have two cores). Strategies that call an LLM run one
after the other in the parent process, sharing one LLM client (one embedded server unless
``llm_base_url`` is given): the embedded model uses every core it is given, so running two LLM
runs at once only makes both slower, and one server avoids loading the model twice.

The table holds, per strategy, the mean over seeds with a 95% confidence interval (Student t,
``mean ± t(0.975, n-1) * sd / sqrt(n)``; no interval with one seed).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import ConfigError, check_range
from fleetmind.eval.recorder import earlier_run
from fleetmind.eval.runner import RunConfig, execute, llm_client, load_config, prepare
from fleetmind.eval.signals import signals
from fleetmind.eval.strategies import strategy

# (key, label, how to read it from metrics + signals)
ROWS: tuple[tuple[str, str], ...] = (
    ("throughput", "throughput (tasks/tick)"),
    ("on_time_rate", "on-time rate"),
    ("priority_weighted_throughput", "priority-weighted throughput"),
    ("violations_structured", "violations: structured"),
    ("violations_text_only", "violations: text-only"),
    ("collisions", "collisions executed"),
    ("shield_interventions", "shield interventions"),
    ("moves_net", "net progress (cells per busy robot-tick)"),
    ("moves_away_chosen", "moves away, the executor's choice (share)"),
    ("moves_away_shield", "moves away, the shield's call (share)"),
    ("moves_held", "held by the shield (share)"),
    ("moves_held_taken", "held, another robot took the cell (share)"),
    ("step_latency_p99_ms", "step latency p99 (ms)"),
    ("planner_calls", "planner calls"),
    ("llm_tokens", "LLM tokens"),
    ("recovery_extra_ticks", "recovery extra ticks (mean)"),
    ("recovery_unrecovered", "faults not recovered"),
    ("reward_spread", "per-agent reward spread (sd)"),
)


MOVE_ROWS: tuple[str, ...] = ("net", "away_chosen", "away_shield", "held", "held_taken")
"""The shares of :mod:`fleetmind.eval.moves` the table shows."""


def run_values(metrics: dict[str, Any], sig: dict[str, Any] | None) -> dict[str, float]:
    """The comparison-table values of one run (NaN where a value does not apply)."""
    cv = metrics.get("constraint_violations", {})
    rewards = list((metrics.get("per_agent_reward") or {}).values())
    rec = (sig or {}).get("recovery", [])
    moves = (sig or {}).get("moves") or {}
    extra = [r["extra_ticks"] for r in rec if r["recovered"]]
    return {
        "throughput": float(metrics.get("throughput", 0.0)),
        "on_time_rate": float(metrics.get("on_time_rate", 0.0)),
        "priority_weighted_throughput": float(metrics.get("priority_weighted_throughput", 0.0)),
        "violations_structured": float(cv.get("structured", 0)),
        "violations_text_only": float(cv.get("text_only", 0)),
        "collisions": float(metrics.get("collisions", 0)),
        "shield_interventions": float(metrics.get("shield_interventions", 0)),
        **{f"moves_{k}": float(moves.get(k, math.nan)) for k in MOVE_ROWS},
        "step_latency_p99_ms": float((metrics.get("step_latency_ms") or {}).get("p99", 0.0)),
        "planner_calls": float(metrics.get("planner_calls", 0)),
        "llm_tokens": float(
            metrics.get("llm_tokens_prompt", 0) + metrics.get("llm_tokens_completion", 0)
        ),
        "recovery_extra_ticks": float(np.mean(extra)) if extra else math.nan,
        "recovery_unrecovered": float(sum(1 for r in rec if r["baseline"] and not r["recovered"])),
        "reward_spread": float(np.std(rewards)) if rewards else 0.0,
    }


def confidence(values: list[float]) -> dict[str, float | int | None]:
    """Mean and 95% t-interval half-width of the finite values (None when undefined)."""
    from scipy import stats

    x = np.asarray([v for v in values if not math.isnan(v)], dtype=np.float64)
    if not len(x):
        return {"mean": None, "ci95": None, "n": 0}
    half = None
    if len(x) > 1:
        half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return {"mean": float(x.mean()), "ci95": half, "n": len(x)}


def mean_interval(values: list[float]) -> tuple[float, float]:
    """:func:`confidence` as ``(mean, half-width)``, the half-width 0 for one value."""
    c = confidence(values)
    if c["mean"] is None:
        raise ValueError("mean_interval: no finite value")
    return float(c["mean"]), float(c["ci95"] or 0.0)


def _folder(name: str) -> str:
    return name.replace(":", "-")


def _run_one(cfg_data: dict[str, Any], out: str, overwrite: bool) -> dict[str, Any]:
    """Worker: one run (picklable arguments only)."""
    return execute(RunConfig.model_validate(cfg_data), out, overwrite=overwrite)


def earlier_comparison(root: str | Path) -> list[str]:
    """What of an earlier comparison ``root`` holds: ``comparison.json`` and run folders."""
    p = Path(root)
    if not p.is_dir():
        return []
    found = ["comparison.json"] if (p / "comparison.json").exists() else []
    found += sorted(
        str(run.relative_to(p)) for run in p.glob("*/seed-*") if run.is_dir() and earlier_run(run)
    )
    return found


def compare(
    strategies: list[str],
    *,
    map_name: str = "warehouse-small",
    robots: int = 8,
    steps: int = 300,
    seeds: int = 3,
    seed: int = 0,
    out: str | Path = "runs/compare",
    backend: str = "local",
    workers: int = 2,
    common: dict[str, Any] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    run_many: Callable[[list[tuple[RunConfig, Path]]], list[dict[str, Any]]] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run every strategy on seeds ``seed .. seed+seeds-1``; write ``OUT/comparison.json``.

    Args:
        strategies: strategy names (see :mod:`fleetmind.eval.strategies`).
        map_name: the map.
        robots: robots.
        steps: ticks per run.
        seeds: seeds per strategy.
        seed: first seed.
        out: the comparison folder.
        backend: ``local`` (a process pool) or ``ray`` (needs ``run_many``).
        workers: processes for the runs without an LLM.
        common: more RunConfig fields for every run (faults, order rate, LLM settings...).
        progress: called with (label, runs done, runs total).
        run_many: runs a batch of (config, run folder) pairs elsewhere and returns their
            metrics in order; :mod:`fleetmind.scale` provides one on Ray (the evaluation tier
            does not import Ray itself). It may overwrite the run folders it is given.
        overwrite: replace an earlier comparison in ``out`` (else such a folder is refused).

    Returns:
        The comparison: ``strategies``, ``seeds``, ``rows`` (label per key), ``table``
        (strategy -> key -> mean/ci95/n), ``runs`` (strategy -> list of run folders).

    Raises:
        ConfigError: unknown strategy or backend, no strategy given, a run that cannot start
            (checked for every run before any runs), or ``out`` holds an earlier comparison.
    """
    if backend == "ray" and run_many is None:
        raise ConfigError("--backend ray: needs fleetmind.scale (pip install fleetmind[ray])")
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend {backend!r}: expected local or ray")
    names = [s.strip() for s in strategies if s.strip()]
    if not names:
        raise ConfigError("--strategies: give at least one strategy, e.g. classical,rl")
    check_range("--seeds", seeds, low=1)
    root = Path(out)
    jobs: list[tuple[str, int, RunConfig, Path]] = []
    for name in names:
        fields = strategy(name)
        for k in range(seeds):
            cfg = load_config(
                None,
                {
                    **(common or {}),
                    **fields,
                    "map": map_name,
                    "robots": robots,
                    "steps": steps,
                    "seed": seed + k,
                },
            )
            prepare(cfg)  # every run is checked before any run starts
            jobs.append((name, seed + k, cfg, root / _folder(name) / f"seed-{seed + k}"))
    found = earlier_comparison(root)
    if found and not overwrite:
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise ConfigError(
            f"--out {root}: holds an earlier comparison ({shown}); pass --overwrite to replace "
            "it, or choose another --out"
        )
    total = len(jobs)
    done = 0
    results: dict[tuple[str, int], dict[str, Any]] = {}
    plain = [j for j in jobs if not j[2].needs_llm]
    with_llm = [j for j in jobs if j[2].needs_llm]
    if plain and run_many is not None:
        metrics = run_many([(cfg, path) for _, _, cfg, path in plain])
        for (name, s, _, _), m in zip(plain, metrics, strict=True):
            results[(name, s)] = m
            done += 1
            if progress is not None:
                progress(name, done, total)
    elif plain:
        with ProcessPoolExecutor(max_workers=max(1, min(workers, len(plain)))) as pool:
            futures = {
                pool.submit(_run_one, cfg.model_dump(), str(path), overwrite): (name, s)
                for name, s, cfg, path in plain
            }
            for fut, key in futures.items():
                results[key] = fut.result()
                done += 1
                if progress is not None:
                    progress(key[0], done, total)
    if with_llm:
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(llm_client(with_llm[0][2], None))
            for name, s, cfg, path in with_llm:
                results[(name, s)] = execute(cfg, path, client=client, overwrite=overwrite)
                done += 1
                if progress is not None:
                    progress(name, done, total)
    table: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[str]] = {}
    for name in names:
        per_seed = []
        runs[name] = []
        for k in range(seeds):
            path = root / _folder(name) / f"seed-{seed + k}"
            runs[name].append(str(path))
            per_seed.append(run_values(results[(name, seed + k)], signals(path)))
        table[name] = {key: confidence([v[key] for v in per_seed]) for key, _ in ROWS}
    comparison = {
        "map": map_name,
        "robots": robots,
        "steps": steps,
        "seeds": [seed + k for k in range(seeds)],
        "strategies": names,
        "rows": dict(ROWS),
        "table": table,
        "runs": runs,
        "common": {k: v for k, v in (common or {}).items() if k != "llm_api_key"},
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "comparison.json").write_text(json.dumps(comparison, indent=2, sort_keys=True))
    return comparison


def format_cell(cell: dict[str, Any]) -> str:
    """``mean ± ci`` with sensible digits (``-`` when undefined)."""
    mean, ci = cell.get("mean"), cell.get("ci95")
    if mean is None:
        return "-"
    digits = 4 if abs(mean) < 10 else 1
    text = f"{mean:.{digits}f}"
    if ci is not None:
        text += f" ± {ci:.{digits}f}"
    return text
