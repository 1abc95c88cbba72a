"""The free-riding experiment's summary over seeds: intervals, shares, ratios, the table.

What :func:`fleetmind.bench.free_riding.free_riding` reports over its runs: each figure as a
mean with its Student-t 95% interval over seeds (:func:`ci95`), each robot's share of the
team's deliveries (:func:`shares`, :func:`share_summary`), the learners' throughput over
shortest-path robots' on the same episodes (:func:`ratios`), and the table ``fleetmind bench
free-riding`` prints (:func:`format_table`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.eval.compare import confidence as ci95


def shares(deliveries: Mapping[str, NDArray[np.int64]]) -> dict[str, float | None]:
    """Each robot's share of the team's deliveries; ``None`` for all when nobody delivered."""
    totals = {a: float(d.sum()) for a, d in deliveries.items()}
    team = sum(totals.values())
    return {a: (t / team if team > 0 else None) for a, t in totals.items()}


def ratios(pairs: Sequence[tuple[float, Mapping[str, Any] | None]]) -> list[float]:
    """Each throughput over its reference's, for the seeds whose reference delivered.

    Shortest-path robots exploring at the learners' epsilon can deliver nothing in a short
    evaluation; such a seed has no ratio (NaN would not be valid JSON in metrics.json).
    """
    out = []
    for throughput, reference in pairs:
        ref = float(reference["throughput"]) if reference else 0.0
        if ref > 0:
            out.append(throughput / ref)
    return out


def share_summary(prefix: str, shares: Sequence[Mapping[str, float | None]]) -> dict[str, Any]:
    """Mean and CI over seeds of each run's smallest and largest per-robot delivery share.

    Runs in which nobody delivered have no shares and are left out (``n`` counts the others).
    """
    known = [[v for v in x.values() if v is not None] for x in shares]
    lows = [min(v) for v in known if v]
    highs = [max(v) for v in known if v]
    if not lows:
        empty = {"mean": None, "ci95": None, "n": 0}
        return {
            f"{prefix}_min": {**empty, "lowest": None},
            f"{prefix}_max": {**empty, "highest": None},
        }
    return {
        f"{prefix}_min": {**ci95(lows), "lowest": min(lows)},
        f"{prefix}_max": {**ci95(highs), "highest": max(highs)},
    }


def format_table(metrics: Mapping[str, Any]) -> str:
    """The summary table (one line per mode) that ``fleetmind bench free-riding`` prints."""

    def fmt(d: Mapping[str, Any]) -> str:
        half = d["ci95"]
        if d["mean"] is None:
            return "n/a"
        return f"{d['mean']:.4f}" + ("" if half is None else f" +-{half:.4f}")

    cols = [
        ("train thr first", "train_throughput_early"),
        ("train thr last", "train_throughput_late"),
        ("greedy thr", "throughput"),
        ("eps thr", "throughput_explore"),
        ("shortest path eps", "shortest_path_throughput"),
        ("eps / SP", "explore_vs_shortest_path"),
        ("min share last", "train_delivery_share_min"),
        ("min share eps", "explore_delivery_share_min"),
    ]
    lines = [f"{'mode':<12} " + " ".join(f"{c:>17}" for c, _ in cols) + "  findings"]
    for m, s in metrics["summary"].items():
        cells = " ".join(f"{fmt(s[k]):>17}" for _, k in cols)
        lines.append(f"{m:<12} {cells}  {s['findings']}")
    return "\n".join(lines)
