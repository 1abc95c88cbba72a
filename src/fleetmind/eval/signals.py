"""Online signals of FIELD-NOTES §6, computed from a run folder.

- **Step latency per tier**: p50/p95/p99 of executor, shield, sim, whole step (from
  ``latency.parquet``, else the percentiles in ``metrics.json``) and planner (from the plan events).
- **Throughput over time**: deliveries per tick in a trailing window of ``window`` ticks.
- **Recovery cost** after each injected fault: the pre-fault level is the delivery rate over the
  ``window`` ticks before the fault starts (fewer if the fault starts earlier; no baseline before
  tick 10). From the tick the fault ends, the run has recovered at the first tick ``t`` whose
  trailing-window rate (the ``window`` ticks up to ``t``) is at least 90% of the pre-fault level.
  The cost is the ticks from the fault's end to ``t`` (``extra_ticks``), and the LLM calls and
  tokens spent from the fault's start to ``t``; ``recovered`` is False when no such tick exists
  before the run ends ("not recovered").
- **LLM cost** per order, per robot and per decision type: calls, tokens and latency from
  ``calls.jsonl`` (calls are keyed to decisions by their context tick; a decision's calls are
  charged to the orders and robots its plan assigned).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.plans import percentiles
from fleetmind.eval.moves import run_moves
from fleetmind.eval.store import load_calls, load_config, load_events, load_latency, load_metrics

RECOVERY_LEVEL = 0.9
MIN_BASELINE_TICKS = 10


@dataclass(frozen=True)
class Recovery:
    """The recovery cost of one fault.

    Attributes:
        fault: the fault spec.
        start: first fault tick.
        end: first tick after the fault.
        baseline: delivery rate (per tick) before the fault; None without enough history.
        recovered: throughput came back within 10% of the baseline before the run ended.
        recovery_tick: the tick it came back (None if not).
        extra_ticks: ticks from the fault's end to recovery (None if not recovered).
        llm_calls: LLM calls from the fault's start to recovery (or the run's end).
        llm_tokens: tokens of those calls.
        planner_fallbacks: plans replaced by the solver in that span.
    """

    fault: str
    start: int
    end: int
    baseline: float | None
    recovered: bool
    recovery_tick: int | None
    extra_ticks: int | None
    llm_calls: int
    llm_tokens: int
    planner_fallbacks: int

    def describe(self) -> str:
        """One plain line, e.g. ``llm-outage@40+20: recovered 12 ticks after it ended``."""
        if self.baseline is None:
            return f"{self.fault}: no pre-fault baseline (starts before tick {MIN_BASELINE_TICKS})"
        if not self.recovered:
            return (
                f"{self.fault}: not recovered by the end of the run "
                f"({self.llm_calls} LLM calls, {self.llm_tokens} tokens since it started)"
            )
        return (
            f"{self.fault}: back within 10% of {self.baseline:.3f} tasks/tick "
            f"{self.extra_ticks} ticks after it ended ({self.llm_calls} LLM calls, "
            f"{self.llm_tokens} tokens, {self.planner_fallbacks} fallbacks)"
        )


def deliveries_per_tick(events: list[dict[str, Any]], steps: int) -> NDArray[np.float64]:
    """Deliveries at each tick ``0..steps-1`` (from ``delivered`` events)."""
    out = np.zeros(max(steps, 1), dtype=np.float64)
    for e in events:
        if e["kind"] == "delivered" and 0 <= e["tick"] - 1 < len(out):
            # The event is emitted after the step, when the world tick is already t+1.
            out[e["tick"] - 1] += len(e.get("ids", ()))
    return out


def throughput_curve(per_tick: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    """Trailing-window delivery rate: ``out[t]`` = mean of ``per_tick[max(0, t-window+1)..t]``."""
    c = np.concatenate([[0.0], np.cumsum(per_tick)])
    t = np.arange(len(per_tick))
    lo = np.maximum(0, t - window + 1)
    rate: NDArray[np.float64] = (c[t + 1] - c[lo]) / (t + 1 - lo)
    return rate


def recovery_costs(
    per_tick: NDArray[np.float64],
    faults: list[dict[str, Any]],
    *,
    window: int = 50,
    calls: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> list[Recovery]:
    """The recovery cost of each fault (see the module docstring).

    Args:
        per_tick: deliveries at each tick.
        faults: ``{"spec", "start", "end"}`` per fault (``metrics.json``'s ``faults``).
        window: ticks of the trailing window (and of the pre-fault baseline).
        calls: LLM call records (for calls and tokens).
        events: events (for planner fallbacks).
    """
    n = len(per_tick)
    call_ticks = np.array(
        [int((c.get("context") or {}).get("tick") or -1) for c in calls or []], dtype=np.int64
    )
    call_tokens = np.array(
        [
            int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0)
            for c in calls or []
        ],
        dtype=np.int64,
    )
    fallback_ticks = np.array(
        [
            int(e.get("snapshot_tick", e["tick"]))
            for e in events or []
            if e["kind"] == "plan" and e.get("fallback")
        ],
        dtype=np.int64,
    )
    out = []
    for f in faults:
        start, end = int(f["start"]), int(f["end"])
        spec = str(f.get("spec", f.get("kind", "fault")))
        lo = max(0, start - window)
        baseline = float(per_tick[lo:start].mean()) if start - lo >= MIN_BASELINE_TICKS else None
        rec_tick: int | None = None
        if baseline is not None:
            for t in range(min(end, n), n):
                a = max(0, t - window + 1)
                if per_tick[a : t + 1].mean() >= RECOVERY_LEVEL * baseline:
                    rec_tick = t
                    break
        stop = rec_tick if rec_tick is not None else n
        in_span = (call_ticks >= start) & (call_ticks <= stop)
        out.append(
            Recovery(
                fault=spec,
                start=start,
                end=end,
                baseline=baseline,
                recovered=rec_tick is not None,
                recovery_tick=rec_tick,
                extra_ticks=None if rec_tick is None else max(0, rec_tick - end),
                llm_calls=int(in_span.sum()),
                llm_tokens=int(call_tokens[in_span].sum()),
                planner_fallbacks=int(((fallback_ticks >= start) & (fallback_ticks <= stop)).sum()),
            )
        )
    return out


def llm_costs(
    calls: list[dict[str, Any]], events: list[dict[str, Any]]
) -> dict[str, dict[str, dict[str, float]]]:
    """LLM calls, tokens and latency per decision type, per robot and per order.

    A call is charged to its decision type (its context); calls of a planner decision (same
    context tick as a ``plan`` event's ``snapshot_tick``) are split evenly over the robots and
    orders that plan assigned; calls of other callers that name a robot in their context
    (``extra.robot``) are charged to it.

    Returns:
        ``{"decision_type": {...}, "robot": {...}, "order": {...}}``, each key mapping to
        ``{"calls", "tokens", "latency_s"}``.
    """
    by: dict[str, dict[str, dict[str, float]]] = {
        "decision_type": defaultdict(lambda: {"calls": 0.0, "tokens": 0.0, "latency_s": 0.0}),
        "robot": defaultdict(lambda: {"calls": 0.0, "tokens": 0.0, "latency_s": 0.0}),
        "order": defaultdict(lambda: {"calls": 0.0, "tokens": 0.0, "latency_s": 0.0}),
    }
    plans: dict[int, list[tuple[str, str]]] = {}
    for e in events:
        if e["kind"] == "plan":
            pairs = [(str(a), str(b)) for a, b in e.get("assignments", [])]
            plans.setdefault(int(e.get("snapshot_tick", e["tick"])), []).extend(pairs)

    def charge(kind: str, key: str, share: float, tokens: float, latency: float) -> None:
        slot = by[kind][key]
        slot["calls"] += share
        slot["tokens"] += tokens * share
        slot["latency_s"] += latency * share

    for c in calls:
        ctx = c.get("context") or {}
        tokens = float(int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0))
        latency = float(c.get("latency_s") or 0.0)
        charge("decision_type", str(ctx.get("decision_type", "default")), 1.0, tokens, latency)
        extra = ctx.get("extra") or {}
        if isinstance(extra, dict) and extra.get("robot"):
            charge("robot", str(extra["robot"]), 1.0, tokens, latency)
        tick = ctx.get("tick")
        if ctx.get("caller") == "dispatch.planner" and tick is not None:
            pairs = plans.get(int(tick), [])
            for robot, order in pairs:
                share = 1.0 / len(pairs)
                charge("robot", robot, share, tokens, latency)
                charge("order", order, share, tokens, latency)
    return {k: {kk: dict(vv) for kk, vv in sorted(v.items())} for k, v in by.items()}


def tier_latency(run_dir: str | Path) -> dict[str, dict[str, float]]:
    """p50/p95/p99 milliseconds per tier: executor, shield, sim, step, planner."""
    table = load_latency(run_dir)
    metrics = load_metrics(run_dir)
    out: dict[str, dict[str, float]] = {}
    if table is not None and table.num_rows:
        for col in ("executor_ms", "shield_ms", "sim_ms", "step_ms"):
            out[col.removesuffix("_ms")] = percentiles(table.column(col).to_pylist())
    else:
        out.update(metrics.get("tier_latency_ms", {}))
        if "step_latency_ms" in metrics:
            out["step"] = metrics["step_latency_ms"]
    planner = [float(e["latency_ms"]) for e in load_events(run_dir) if e["kind"] == "plan"]
    out["planner"] = percentiles(planner)
    return out


def signals(run_dir: str | Path, *, window: int = 50) -> dict[str, Any]:
    """Every online signal of one run folder, JSON-ready.

    Returns:
        ``tier_latency_ms``, ``throughput`` (``window`` and the trailing curve), ``recovery``
        (one entry per fault), ``llm_costs``, ``llm_per_order`` (tokens per delivered order),
        ``moves`` (where the busy robot-ticks went: :func:`fleetmind.eval.moves.run_moves`).
    """
    events = load_events(run_dir)
    calls = load_calls(run_dir)
    metrics = load_metrics(run_dir)
    steps = int(metrics.get("steps") or load_config(run_dir).get("steps") or 0)
    per_tick = deliveries_per_tick(events, steps)
    faults = metrics.get("faults") or _faults_from_events(events)
    recs = recovery_costs(per_tick, faults, window=window, calls=calls, events=events)
    tokens = sum(
        int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0) for c in calls
    )
    delivered = float(per_tick.sum())
    return {
        "tier_latency_ms": tier_latency(run_dir),
        "throughput": {
            "window": window,
            "curve": throughput_curve(per_tick, window).round(5).tolist(),
            "deliveries": int(delivered),
        },
        "recovery": [asdict(r) | {"text": r.describe()} for r in recs],
        "llm_costs": llm_costs(calls, events),
        "llm_calls": len(calls),
        "llm_tokens": tokens,
        "llm_tokens_per_order": tokens / delivered if delivered else None,
        "moves": run_moves(run_dir),
    }


def _faults_from_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fault windows from ``fault_start``/``fault_end`` events (a killed run has no metrics)."""
    from fleetmind.dispatch.faults import parse_fault

    out = []
    for e in events:
        if e["kind"] == "fault_start":
            f = parse_fault(str(e["fault"]))
            out.append({"spec": f.spec, "kind": f.kind, "start": f.start, "end": f.end})
    return out
