"""Offline replay of a recorded run (FIELD-NOTES §6: decide offline first).

Three replays, all reading only the run folder:

- :func:`strict_replay` re-runs the recorded configuration with the recorded LLM calls served by
  :class:`~fleetmind.llm.record.ReplayClient` (no network) and checks that the new run is the same
  bit for bit: every episode row, every event (wall-clock latencies aside) and every metric. This
  needs a run recorded with ``planner_mode="sync"``: in ``async`` mode a plan lands at whatever
  tick the planner thread finishes, which depends on wall-clock timing, so no replay can
  reproduce it. Async runs are refused with a :class:`~fleetmind.errors.ConfigError`.
- :func:`decision_replay` restores the world at each recorded planner decision, asks a (possibly
  different) planner, and reports agreement with the recorded plan (Jaccard of the
  (robot, order) pairs), latency, and the counterfactual gain: both plans are applied to the same
  snapshot and the world is re-simulated ``horizon`` ticks with the recorded executor and shield
  and the same order stream (the order generator's state is part of the snapshot); later
  decisions inside the horizon are taken by a fixed ``continuation`` planner (the assignment
  solver by default, ``none`` to hold), identical for both branches, so the gain is the effect of
  this one decision. Gain = deliveries under the replayed plan minus under the recorded one.
- :func:`rl_replay` trains a tabular learner in batch on the recorded transitions (no new
  interaction): batch-constrained fitted Q iteration (greedy only among actions the data holds,
  which keeps it off unseen actions) on the state ``(target offset clipped to ±4, carrying,
  has task)``, independently per robot and pooled; then per-agent reward-curve variance and the
  doctor's findings (:func:`fleetmind.rl.diagnostics.diagnose`), and off-policy estimates of the
  learned policy's value against the behaviour policy: tabular fitted Q evaluation (FQE) and
  weighted importance sampling (WIS) over fixed-length segments, with the behaviour policy
  estimated from action counts and the learned policy softened by ``epsilon``.
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
import pyarrow as pa
from numpy.typing import NDArray

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import Executor, ShortestPathExecutor
from fleetmind.dispatch.faults import parse_fault
from fleetmind.dispatch.planners import Planner
from fleetmind.dispatch.plans import Plan, PlanOutcome, Snapshot
from fleetmind.envs.warehouse import resolve_map
from fleetmind.errors import ConfigError
from fleetmind.eval.runner import (
    RunConfig,
    execute,
    llm_client,
    make_executor,
    make_planner,
    make_world,
)
from fleetmind.eval.store import (
    load_config,
    load_episode,
    load_events,
    load_metrics,
    load_snapshots,
    run_path,
)
from fleetmind.llm.chat import ChatClient
from fleetmind.sim.grid import GridMap
from fleetmind.sim.warehouse import Warehouse

LATENCY_KEYS = ("latency_ms", "latency_s")
VOLATILE_METRICS = ("step_latency_ms", "planner_latency_ms", "tier_latency_ms", "run_dir")


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


# ---------------------------------------------------------------------- RL replay
CLIP = 4
N_ACTIONS = 5
N_STATES = (2 * CLIP + 1) ** 2 * 4


def encode_states(
    cells: NDArray[np.int64], targets: NDArray[np.int64], carrying: NDArray[Any], task: NDArray[Any]
) -> NDArray[np.int64]:
    """Tabular state ids: target offset (clipped to ±4), carrying, has task.

    Args:
        cells: ``(T, 2)`` cells.
        targets: ``(T, 2)`` target cells.
        carrying: ``(T,)`` loaded.
        task: ``(T,)`` has a task.
    """
    d = np.clip(targets - cells, -CLIP, CLIP) + CLIP
    flags = carrying.astype(np.int64) * 2 + task.astype(np.int64)
    states: NDArray[np.int64] = (d[:, 0] * (2 * CLIP + 1) + d[:, 1]) * 4 + flags
    return states


@dataclass(frozen=True)
class Transitions:
    """Recorded transitions of one or more robots (arrays of equal length T)."""

    robot: NDArray[np.int64]
    s: NDArray[np.int64]
    a: NDArray[np.int64]
    r: NDArray[np.float64]
    s2: NDArray[np.int64]
    done: NDArray[np.bool_]

    def subset(self, mask: NDArray[np.bool_]) -> Transitions:
        """The transitions where ``mask`` holds."""
        return Transitions(
            self.robot[mask],
            self.s[mask],
            self.a[mask],
            self.r[mask],
            self.s2[mask],
            self.done[mask],
        )


def transitions(table: pa.Table) -> Transitions:
    """Consecutive-tick transitions per robot from the episode rows (rewards scaled to [-1, 1]).

    The state at tick ``t`` uses the target, load and task recorded after tick ``t - 1`` (what the
    robot knew when it moved; the episode rows hold them after the move).

    Raises:
        ConfigError: the run was recorded without target columns.
    """
    if "target_row" not in table.column_names:
        raise ConfigError("episode.parquet has no target_row/target_col: re-record the run")

    def col(name: str) -> NDArray[Any]:
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False))

    robot, tick = col("robot").astype(np.int64), col("tick").astype(np.int64)
    order = np.lexsort((tick, robot))
    robot, tick = robot[order], tick[order]
    cells = np.stack([col("row"), col("col")], axis=1).astype(np.int64)[order]
    targets = np.stack([col("target_row"), col("target_col")], axis=1).astype(np.int64)[order]
    carrying = col("carrying").astype(bool)[order]
    task = col("has_task").astype(bool)[order]
    action = col("executed").astype(np.int64)[order]
    reward = col("reward").astype(np.float64)[order]
    n = len(tick)
    done = col("done").astype(bool)[order] if "done" in table.column_names else np.zeros(n, bool)
    prev = np.roll(np.arange(n), 1)
    has_prev = (robot[prev] == robot) & (tick[prev] == tick - 1)
    pre_targets = np.where(has_prev[:, None], targets[prev], cells)
    pre_carrying = np.where(has_prev, carrying[prev], False)
    pre_task = np.where(has_prev, task[prev], False)
    states = encode_states(cells, pre_targets, pre_carrying, pre_task)
    nxt = np.roll(np.arange(n), -1)
    same = (robot[nxt] == robot) & (tick[nxt] == tick + 1)
    keep = same | done
    scale = max(1.0, float(np.abs(reward).max(initial=0.0)))
    return Transitions(
        robot=robot[keep],
        s=states[keep],
        a=action[keep],
        r=reward[keep] / scale,
        s2=np.where(same, states[nxt], states)[keep],
        done=(done & ~same)[keep],
    )


def fitted_q(
    tr: Transitions, *, gamma: float, iterations: int, policy: NDArray[np.int64] | None = None
) -> NDArray[np.float64]:
    """Tabular fitted Q iteration (``policy`` None) or fitted Q evaluation of ``policy``.

    Each iteration sets Q(s, a) to the mean target over the recorded (s, a) pairs, target
    ``r + gamma * Q(s', a')`` with ``a'`` greedy among seen actions (FQI) or ``policy[s']`` (FQE).
    Unseen (s, a) stay at ``-inf`` for the greedy choice (batch-constrained).
    """
    sa = tr.s * N_ACTIONS + tr.a
    counts = np.bincount(sa, minlength=N_STATES * N_ACTIONS).astype(np.float64)
    seen = (counts > 0).reshape(N_STATES, N_ACTIONS)
    q = np.zeros((N_STATES, N_ACTIONS), dtype=np.float64)
    for _ in range(iterations):
        if policy is None:
            nxt = np.where(seen, q, -np.inf).max(axis=1)
            nxt = np.where(np.isfinite(nxt), nxt, 0.0)[tr.s2]
        else:
            nxt = q[tr.s2, policy[tr.s2]]
        target = tr.r + gamma * (~tr.done) * nxt
        sums = np.bincount(sa, weights=target, minlength=N_STATES * N_ACTIONS)
        q = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0).reshape(N_STATES, N_ACTIONS)
    return q


def greedy(q: NDArray[np.float64], tr: Transitions) -> NDArray[np.int64]:
    """The greedy policy among actions seen in ``tr`` (WAIT where a state was never seen)."""
    counts = np.bincount(tr.s * N_ACTIONS + tr.a, minlength=N_STATES * N_ACTIONS)
    seen = counts.reshape(N_STATES, N_ACTIONS) > 0
    pol: NDArray[np.int64] = np.where(seen, q, -np.inf).argmax(axis=1).astype(np.int64)
    return pol


def behaviour_policy(tr: Transitions) -> NDArray[np.float64]:
    """``pi_b(a | s)`` from action counts (uniform where a state was never seen)."""
    counts = np.bincount(tr.s * N_ACTIONS + tr.a, minlength=N_STATES * N_ACTIONS).reshape(
        N_STATES, N_ACTIONS
    )
    tot = counts.sum(axis=1, keepdims=True)
    probs: NDArray[np.float64] = np.where(tot > 0, counts / np.maximum(tot, 1), 1.0 / N_ACTIONS)
    return probs


def wis(
    tr: Transitions,
    target: NDArray[np.float64],
    behaviour: NDArray[np.float64],
    *,
    gamma: float,
    segment: int,
) -> dict[str, float]:
    """Weighted importance sampling over fixed-length segments of each robot's trajectory.

    Args:
        tr: transitions.
        target: ``pi(a | s)`` of the evaluated policy, shape ``(states, 5)``.
        behaviour: ``pi_b(a | s)``, same shape.
        gamma: discount.
        segment: segment length in ticks.

    Returns:
        ``value`` (WIS estimate of the discounted segment return), ``behaviour_value`` (the
        on-policy mean return), ``ess`` (effective sample size) and ``segments``.
    """
    weights, returns = [], []
    for robot in np.unique(tr.robot):
        idx = np.flatnonzero(tr.robot == robot)
        for lo in range(0, len(idx) - segment + 1, segment):
            seg = idx[lo : lo + segment]
            ratio = target[tr.s[seg], tr.a[seg]] / behaviour[tr.s[seg], tr.a[seg]]
            weights.append(float(np.prod(ratio)))
            returns.append(float(np.sum(tr.r[seg] * gamma ** np.arange(len(seg)))))
    w = np.asarray(weights)
    g = np.asarray(returns)
    if not len(w):
        return {"value": float("nan"), "behaviour_value": float("nan"), "ess": 0.0, "segments": 0}
    total = w.sum()
    return {
        "value": float((w * g).sum() / total) if total > 0 else float("nan"),
        "behaviour_value": float(g.mean()),
        "ess": float(total**2 / (w**2).sum()) if total > 0 else 0.0,
        "segments": float(len(w)),
    }


def reward_curves(table: pa.Table, window: int) -> dict[str, NDArray[np.float64]]:
    """Per-robot reward summed over consecutive windows of ``window`` ticks."""
    robot = table.column("robot").to_numpy()
    tick = table.column("tick").to_numpy().astype(np.int64)
    reward = table.column("reward").to_numpy().astype(np.float64)
    bins = int(tick.max()) // window + 1
    out = {}
    for r in np.unique(robot):
        m = robot == r
        curve = np.bincount(tick[m] // window, weights=reward[m], minlength=bins)
        out[f"robot_{int(r)}"] = curve.astype(np.float64)
    return out


def rl_replay(
    run_dir: str | Path,
    *,
    gamma: float = 0.95,
    iterations: int = 60,
    epsilon: float = 0.05,
    segment: int = 20,
    window: int = 25,
) -> dict[str, Any]:
    """Batch RL on the recorded transitions; variance of per-agent curves; off-policy value.

    Args:
        run_dir: the recorded run folder.
        gamma: discount.
        iterations: fitted Q iterations.
        epsilon: the learned policy's softening for importance sampling.
        segment: WIS segment length (ticks).
        window: ticks per point of the per-agent reward curves.

    Returns:
        ``pooled`` (learned on all robots), ``per_agent`` (independent learners), ``curves``
        (per-robot reward per window), ``curve_variance``, ``findings`` of the doctor.
    """
    from fleetmind.rl.diagnostics import diagnose

    table = load_episode(run_dir)
    tr = transitions(table)

    def evaluate(data: Transitions) -> dict[str, Any]:
        q = fitted_q(data, gamma=gamma, iterations=iterations)
        pol = greedy(q, data)
        pi = np.full((N_STATES, N_ACTIONS), epsilon / N_ACTIONS)
        pi[np.arange(N_STATES), pol] += 1.0 - epsilon
        pb = behaviour_policy(data)
        q_pi = fitted_q(data, gamma=gamma, iterations=iterations, policy=pol)
        starts = data.s
        fqe = float(q_pi[starts, pol[starts]].mean()) if len(starts) else float("nan")
        # Behaviour value by FQE with the expected next value under pi_b.
        sa = data.s * N_ACTIONS + data.a
        counts = np.bincount(sa, minlength=N_STATES * N_ACTIONS).astype(np.float64)
        qb = np.zeros((N_STATES, N_ACTIONS))
        for _ in range(iterations):
            nxt = (pb * qb).sum(axis=1)[data.s2]
            sums = np.bincount(
                sa, weights=data.r + gamma * (~data.done) * nxt, minlength=N_STATES * N_ACTIONS
            )
            qb = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0).reshape(
                N_STATES, N_ACTIONS
            )
        fqe_b = float((pb * qb).sum(axis=1)[starts].mean()) if len(starts) else float("nan")
        return {
            "transitions": len(data.s),
            "states_seen": len(np.unique(data.s)),
            "agreement_with_behaviour": float(np.mean(pol[data.s] == data.a))
            if len(data.s)
            else 0.0,
            "fqe_value": fqe,
            "fqe_behaviour_value": fqe_b,
            "fqi_greedy_value": float(q[starts, pol[starts]].mean()) if len(starts) else 0.0,
            "wis": wis(data, pi, pb, gamma=gamma, segment=segment),
        }

    per_agent = {f"robot_{int(r)}": evaluate(tr.subset(tr.robot == r)) for r in np.unique(tr.robot)}
    curves = reward_curves(table, window)
    variance = {k: float(np.var(v)) for k, v in curves.items()}
    totals = np.array([float(v.sum()) for v in curves.values()])
    findings: list[dict[str, Any]] = []
    try:
        findings = [
            {"kind": f.kind, "agents": list(f.agents), "message": f.message, "evidence": f.evidence}
            for f in diagnose(curves)
        ]
    except ConfigError as exc:
        findings = [{"kind": "error", "agents": [], "message": str(exc), "evidence": {}}]
    return {
        "gamma": gamma,
        "pooled": evaluate(tr),
        "per_agent": per_agent,
        "curves": {k: v.tolist() for k, v in curves.items()},
        "curve_window": window,
        "curve_variance": variance,
        "reward_spread": {
            "mean": float(totals.mean()) if len(totals) else 0.0,
            "std": float(totals.std()) if len(totals) else 0.0,
        },
        "findings": findings,
    }
