"""Decision replay of a recorded run: each planner decision asked again, and what it changes.

:func:`decision_replay` restores the world at each recorded planner decision, asks a (possibly
different) planner, and reports agreement with the recorded plan (Jaccard of the
(robot, order) pairs), latency, and the counterfactual gain: both plans are applied to the same
snapshot and the world is re-simulated ``horizon`` ticks with the recorded executor and shield
and the same order stream (the order generator's state is part of the snapshot); later
decisions inside the horizon are taken by a fixed ``continuation`` planner (the assignment
solver by default, ``none`` to hold), identical for both branches, so the gain is the effect of
this one decision. Gain = deliveries under the replayed plan minus under the recorded one.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import Executor, ShortestPathExecutor
from fleetmind.dispatch.faults import parse_fault
from fleetmind.dispatch.planners import Planner
from fleetmind.dispatch.plans import Plan, PlanOutcome, Snapshot
from fleetmind.envs.warehouse import resolve_map
from fleetmind.errors import ConfigError
from fleetmind.eval.replay import recorded_config
from fleetmind.eval.runner import (
    RunConfig,
    llm_client,
    make_executor,
    make_planner,
    make_world,
)
from fleetmind.eval.store import (
    load_events,
    load_snapshots,
    run_path,
)
from fleetmind.llm.chat import ChatClient
from fleetmind.sim.grid import GridMap
from fleetmind.sim.warehouse import Warehouse


# ---------------------------------------------------------------------- decision replay
class HoldPlanner:
    """A planner that never assigns (continuation ``none``)."""

    name = "none"

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """An empty plan."""
        return PlanOutcome(plan=Plan(tick=snapshot.tick, assignments=(), source=self.name))


@dataclass(frozen=True)
class Branch:
    """One counterfactual branch.

    Attributes:
        deliveries: orders delivered within the horizon.
        weighted: priority-weighted deliveries within the horizon.
        applied: assignments of the plan that were valid in the snapshot.
    """

    deliveries: int
    weighted: float
    applied: int


def counterfactual(
    world: Warehouse,
    state: dict[str, Any],
    pairs: list[tuple[str, str]],
    *,
    executor: Executor,
    horizon: int,
    shield: bool = True,
    continuation: Planner | None = None,
    faults: list[str] | None = None,
) -> Branch:
    """Apply ``pairs`` to the world restored at ``state`` and simulate ``horizon`` ticks.

    Args:
        world: a world of the run's map and config (its state is replaced).
        state: a ``Warehouse.snapshot()``.
        pairs: (robot id, order id) assignments to apply first (invalid ones are skipped).
        executor: the executor tier.
        horizon: ticks to simulate.
        shield: run the shield.
        continuation: planner for later decisions in the horizon (None: hold).
        faults: fault specs of the run (those due inside the horizon apply).

    Returns:
        Deliveries and priority-weighted deliveries within the horizon.
    """
    world.restore(state)
    t0 = world.tick
    applied = 0
    for robot, order in pairs:
        try:
            world.assign(robot, order)
        except ConfigError:
            continue
        applied += 1
    loop = ControlLoop(
        world,
        continuation or HoldPlanner(),
        executor,
        config=LoopConfig(shield=shield, planner_mode="sync", snapshot_text=False),
        faults=[parse_fault(f) for f in faults or []],
    )
    loop.run(horizon)
    done = [r for r in world.records if r.delivered_tick > t0]
    return Branch(
        deliveries=len(done), weighted=float(sum(r.order.weight for r in done)), applied=applied
    )


@dataclass(frozen=True)
class Decision:
    """One recorded planner decision, replayed.

    Attributes:
        tick: the snapshot tick.
        events: why the planner was called.
        recorded: the recorded plan's (robot, order) pairs (None if the run ended first).
        recorded_source: which planner produced it (``llm``, ``fallback:assignment``...).
        recorded_latency_ms: its recorded latency.
        replayed: the replay planner's pairs.
        replayed_source: its source.
        latency_ms: the replay planner's latency.
        agreement: Jaccard similarity of the two pair sets (1.0 when both are empty).
        exact: the two sets are equal.
        recorded_branch: the counterfactual under the recorded plan.
        replayed_branch: the counterfactual under the replayed plan.
        gain: replayed minus recorded deliveries within the horizon.
    """

    tick: int
    events: tuple[str, ...]
    recorded: tuple[tuple[str, str], ...] | None
    recorded_source: str | None
    recorded_latency_ms: float | None
    replayed: tuple[tuple[str, str], ...]
    replayed_source: str
    latency_ms: float
    agreement: float | None
    exact: bool | None
    recorded_branch: Branch | None
    replayed_branch: Branch
    gain: int | None


def jaccard(a: set[tuple[str, str]], b: set[tuple[str, str]]) -> float:
    """|a ∩ b| / |a ∪ b| (1.0 for two empty sets)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def _counterfactual_executor(cfg: RunConfig, grid: GridMap) -> Executor:
    # An LLM that moves robots would need the network on every tick; use shortest path.
    if cfg.executor == "llm-direct":
        return ShortestPathExecutor(grid)
    return make_executor(cfg, grid, None)


def decision_replay(
    run_dir: str | Path,
    *,
    planner: str | None = None,
    horizon: int = 50,
    continuation: str = "assignment",
    client: ChatClient | None = None,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Replay every recorded planner decision with ``planner`` (default: the recorded one).

    Args:
        run_dir: the recorded run folder.
        planner: ``assignment``, ``greedy``, ``oracle``, ``llm`` or ``llm-notes``.
        horizon: ticks of each counterfactual (0: no counterfactual).
        continuation: ``assignment``, ``greedy`` or ``none``: who decides later in the horizon.
        client: an LLM client for LLM planners (default: built from the recorded LLM settings,
            the embedded model when none was given).
        limit: replay at most this many decisions (evenly spaced).
        progress: called with (decisions done, total).

    Returns:
        ``decisions`` (one :class:`Decision` dict each) and ``summary`` (agreement, mean gain,
        latency percentiles, wins/losses/ties).

    Raises:
        ConfigError: unknown planner or continuation, or no decision snapshots.
    """
    from fleetmind.dispatch.plans import percentiles

    src = run_path(run_dir)
    cfg = recorded_config(src)
    name = planner or cfg.planner
    try:
        replay_cfg = RunConfig.model_validate(
            {**cfg.model_dump(), "planner": name, "faults": [], "replay_calls": None}
        )
    except Exception:
        raise ConfigError(
            f"--planner {name!r}: expected assignment, greedy, oracle, llm or llm-notes"
        ) from None
    if continuation not in ("assignment", "greedy", "none"):
        raise ConfigError(f"--continuation {continuation!r}: expected assignment, greedy or none")
    snaps = load_snapshots(src, reason="decision")
    if not snaps:
        raise ConfigError(f"{src}: no decision snapshots recorded (snapshots/tick_*.pkl)")
    if limit is not None and len(snaps) > limit:
        idx = np.unique(np.linspace(0, len(snaps) - 1, limit).round().astype(int))
        snaps = [snaps[i] for i in idx]
    events = load_events(src)
    plans = {int(e.get("snapshot_tick", e["tick"])): e for e in events if e["kind"] == "plan"}
    calls = {e["tick"]: tuple(e.get("events", ())) for e in events if e["kind"] == "planner_call"}
    stuck: dict[int, tuple[str, ...]] = {}
    for e in events:
        if e["kind"] == "deadlock":
            stuck[e["tick"] + 1] = tuple(e.get("robots", ()))
    grid = resolve_map(cfg.map)
    world = make_world(cfg, grid)
    executor = _counterfactual_executor(cfg, grid)
    cont: Planner | None = None
    if continuation != "none":
        cont = make_planner(cfg.model_copy(update={"planner": continuation}), grid, None)
    decisions: list[Decision] = []
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(llm_client(replay_cfg, None))
        new_planner = make_planner(replay_cfg, grid, client)
        for k, snap in enumerate(snaps):
            tick = int(snap["tick"])
            world.restore(snap["state"])
            why = calls.get(tick, ())
            view = Snapshot.take(
                world,
                events=why,
                stuck=stuck.get(tick, ()) if "deadlock" in why else (),
                with_text=replay_cfg.planner in ("llm", "llm-notes"),
            )
            t0 = time.perf_counter()
            outcome = new_planner.plan(view)
            latency = (time.perf_counter() - t0) * 1e3
            replayed = tuple((a.robot, a.order) for a in outcome.plan.assignments)
            rec = plans.get(tick)
            recorded = (
                tuple((str(r), str(o)) for r, o in rec.get("assignments", []))
                if rec is not None
                else None
            )
            rb: Branch | None = None
            nb = Branch(0, 0.0, 0)
            if horizon > 0:
                branch = functools.partial(
                    counterfactual,
                    world,
                    snap["state"],
                    executor=executor,
                    horizon=horizon,
                    shield=cfg.shield,
                    continuation=cont,
                    faults=cfg.faults,
                )
                nb = branch(list(replayed))
                if recorded is not None:
                    rb = branch(list(recorded))
            decisions.append(
                Decision(
                    tick=tick,
                    events=why,
                    recorded=recorded,
                    recorded_source=None if rec is None else str(rec.get("source")),
                    recorded_latency_ms=None if rec is None else float(rec.get("latency_ms", 0.0)),
                    replayed=replayed,
                    replayed_source=outcome.plan.source,
                    latency_ms=latency,
                    agreement=None if recorded is None else jaccard(set(recorded), set(replayed)),
                    exact=None if recorded is None else set(recorded) == set(replayed),
                    recorded_branch=rb,
                    replayed_branch=nb,
                    gain=None if rb is None or horizon == 0 else nb.deliveries - rb.deliveries,
                )
            )
            if progress is not None:
                progress(k + 1, len(snaps))
    compared = [d for d in decisions if d.agreement is not None]
    gains = [d.gain for d in decisions if d.gain is not None]
    summary = {
        "run_dir": str(src),
        "recorded_planner": cfg.planner,
        "planner": name,
        "horizon": horizon,
        "continuation": continuation,
        "decisions": len(decisions),
        "compared": len(compared),
        "agreement_mean": float(np.mean([d.agreement for d in compared])) if compared else None,
        "exact_rate": float(np.mean([bool(d.exact) for d in compared])) if compared else None,
        "gain_mean": float(np.mean(gains)) if gains else None,
        "gain_total": int(sum(gains)) if gains else None,
        "better": sum(g > 0 for g in gains),
        "worse": sum(g < 0 for g in gains),
        "same": sum(g == 0 for g in gains),
        "latency_ms": percentiles([d.latency_ms for d in decisions]),
        "recorded_latency_ms": percentiles(
            [d.recorded_latency_ms for d in decisions if d.recorded_latency_ms is not None]
        ),
    }
    return {"summary": summary, "decisions": [asdict(d) for d in decisions]}
