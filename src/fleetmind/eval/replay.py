"""Strict replay of a recorded run (FIELD-NOTES §6: decide offline first).

:func:`strict_replay` re-runs the recorded configuration with the recorded LLM calls served by
:class:`~fleetmind.llm.record.ReplayClient` (no network) and checks that the new run is the same
bit for bit: every episode row, every event (wall-clock latencies aside) and every metric. This
needs a run recorded with ``planner_mode="sync"``: in ``async`` mode a plan lands at whatever
tick the planner thread finishes, which depends on wall-clock timing, so no replay can
reproduce it. Async runs are refused with a :class:`~fleetmind.errors.ConfigError`.

The other two offline replays read the same run folder: :mod:`fleetmind.eval.decisions`
(each planner decision asked again, with its counterfactual gain) and
:mod:`fleetmind.eval.offpolicy` (batch RL on the recorded transitions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import ConfigError
from fleetmind.eval.runner import (
    RunConfig,
    execute,
)
from fleetmind.eval.store import (
    load_config,
    load_episode,
    load_events,
    load_metrics,
    run_path,
)

LATENCY_KEYS = ("latency_ms", "latency_s")
# Metrics of timing, not of the run: latencies, and which distance maps a background worker
# made before they were needed (and their CPU time), which the same run splits differently.
VOLATILE_METRICS = (
    "step_latency_ms",
    "planner_latency_ms",
    "tier_latency_ms",
    "distance_maps",
    "run_dir",
    # Wall-clock: call latencies, and deadlines measured from a warm-up call.
    "llm_call_outcomes",
    "llm_planner",
    "llm_desk",
    "note_reader",  # answered or timed out against a deadline measured at warm-up
)


def recorded_config(run_dir: str | Path) -> RunConfig:
    """The RunConfig a run folder was recorded with (the API key is never recorded)."""
    data = dict(load_config(run_dir))
    data["llm_api_key"] = None
    try:
        return RunConfig.model_validate(data)
    except Exception as exc:  # pydantic ValidationError: name the file
        raise ConfigError(f"{Path(run_dir) / 'config.json'}: {exc}") from None


# ---------------------------------------------------------------------- strict replay
@dataclass(frozen=True)
class StrictResult:
    """The outcome of a strict replay.

    Attributes:
        identical: episode, events and metrics all match.
        episode_rows: rows compared.
        events: events compared.
        mismatches: the first differences found (empty when identical).
        out_dir: the replay's run folder.
    """

    identical: bool
    episode_rows: int
    events: int
    mismatches: tuple[str, ...]
    out_dir: str


def _strip(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in LATENCY_KEYS}


def compare_runs(a: str | Path, b: str | Path, *, limit: int = 10) -> list[str]:
    """Differences between two run folders (episode rows, events, metrics), wall clock aside."""
    out: list[str] = []
    ea, eb = load_episode(a), load_episode(b)
    if ea.num_rows != eb.num_rows:
        out.append(f"episode: {ea.num_rows} rows vs {eb.num_rows}")
    else:
        for name in ea.column_names:
            if name not in eb.column_names:
                out.append(f"episode: column {name!r} missing in {b}")
                continue
            xa = ea.column(name).to_numpy(zero_copy_only=False)
            xb = eb.column(name).to_numpy(zero_copy_only=False)
            neq = np.flatnonzero(~((xa == xb) | ((xa != xa) & (xb != xb))))
            if len(neq):
                i = int(neq[0])
                out.append(
                    f"episode.{name}: {len(neq)} rows differ, first at tick "
                    f"{ea.column('tick')[i].as_py()} robot {ea.column('robot')[i].as_py()}: "
                    f"{xa[i]!r} vs {xb[i]!r}"
                )
    va, vb = [_strip(e) for e in load_events(a)], [_strip(e) for e in load_events(b)]
    if len(va) != len(vb):
        out.append(f"events: {len(va)} vs {len(vb)}")
    for x, y in zip(va, vb, strict=False):
        if x != y:
            out.append(f"events: first difference at tick {x['tick']}: {x} vs {y}")
            break
    ma, mb = load_metrics(a), load_metrics(b)
    for key in sorted(set(ma) | set(mb)):
        if key in VOLATILE_METRICS:
            continue
        if ma.get(key) != mb.get(key):
            out.append(f"metrics.{key}: {ma.get(key)!r} vs {mb.get(key)!r}")
    return out[:limit]


def strict_replay(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    progress: Callable[[int], None] | None = None,
    overwrite: bool = False,
) -> StrictResult:
    """Re-run a recorded run from its recording (LLM calls included) and compare bit for bit.

    Args:
        run_dir: the recorded run folder.
        out_dir: where the replay writes its own run folder.
        progress: called with the number of ticks done.
        overwrite: replace an earlier run in ``out_dir`` (else such a folder is refused).

    Raises:
        ConfigError: the run was recorded in ``async`` planner mode, or has no config, or
            ``out_dir`` holds an earlier run and ``overwrite`` is off.
    """
    src = run_path(run_dir)
    cfg = recorded_config(src)
    if cfg.planner_mode != "sync":
        raise ConfigError(
            f"{src}: strict replay needs a run recorded with planner_mode=sync "
            "(`fleetmind run --planner-mode sync`); this run used async, where plans land at "
            "wall-clock-dependent ticks, so it cannot be reproduced. Use `fleetmind replay DIR` "
            "without --strict for the decision replay instead."
        )
    calls = src / "calls.jsonl"
    update: dict[str, Any] = {"replay_calls": str(calls) if cfg.needs_llm else None}
    replay_cfg = cfg.model_copy(update=update)
    execute(replay_cfg, out_dir, progress=progress, overwrite=overwrite)
    diffs = compare_runs(src, out_dir)
    return StrictResult(
        identical=not diffs,
        episode_rows=load_episode(src).num_rows,
        events=len(load_events(src)),
        mismatches=tuple(diffs),
        out_dir=str(out_dir),
    )
