"""The event-driven control loop that joins planner, executor and shield.

Every tick::

    1. apply a finished plan, if any, after checking it against the current world
    2. inject faults due this tick
    3. on a pending event (new orders after a short batching window, a robot idle, a fault or
       repair, a deadlock report, a planner wake-up), snapshot the world and hand it to the
       planner on a worker thread -- unless a plan is still being computed (the events wait)
       or there is nothing to decide (no idle robot or no open order)
    4. the executor ranks each robot's 5 actions; the shield turns the rankings into one
       collision-free joint move (or, with the shield off, first choices go through as proposed)
    5. the simulator steps; deliveries, idle robots and new orders become events

The loop never waits on the planner in ``async`` mode: it keeps executing the last valid plan.
``sync`` mode waits for each plan, which makes a run reproducible bit for bit (used for record
and replay). Planner calls happen on events only, never on quiet ticks; events that come while a
plan is being computed (a planner wake-up included) stay pending for the next call.

At the end of a run the loop does not wait for a plan still being computed: the call is
abandoned (its thread is a daemon: it never holds the process), counted in
``planner_fallbacks`` and ``plans_abandoned`` with the time it took so far, and a planner that
can say what it spent (``abandon()``, e.g. the LLM planner's calls and tokens) adds that: LLM
calls still in flight count in ``llm_calls`` and, apart, in ``llm_calls_abandoned``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.executors import Executor
from fleetmind.dispatch.faults import Fault, resolve_robot, resolve_zone
from fleetmind.dispatch.incidents import DeskConfig, DeskWorker, IncidentHost
from fleetmind.dispatch.planners import Planner, task_priorities
from fleetmind.dispatch.plans import PlanOutcome, Snapshot, percentiles
from fleetmind.errors import ConfigError
from fleetmind.safety.shield import Shield
from fleetmind.safety.verify import count_conflicts
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.warehouse import Warehouse

logger = logging.getLogger(__name__)

IMMEDIATE_EVENTS = ("start", "idle", "fault", "repair", "deadlock", "timer", "notes")


class TickSink(Protocol):
    """Receives what the loop does, as it happens (the evaluation tier's recorder)."""

    def on_tick(self, tick: int, columns: dict[str, NDArray[Any]]) -> None:
        """One row per robot for ``tick`` (column arrays of equal length)."""
        ...

    def on_event(self, event: dict[str, Any]) -> None:
        """One event (orders, assignments, planner calls, faults, deadlocks)."""
        ...

    def snapshot(self, tick: int, state: dict[str, Any], *, reason: str) -> Any:
        """A world snapshot (``Warehouse.snapshot()``) taken at a decision or periodically.

        A sink may also offer ``capture(tick, world, *, reason)``: then the loop hands it the
        live world instead (the recorder captures it incrementally, without a deep copy).
        """
        ...


@dataclass(frozen=True)
class LoopConfig:
    """Control-loop settings.

    Attributes:
        shield: run the shield (off: first choices are executed as proposed).
        planner_mode: ``async`` (never wait) or ``sync`` (wait; reproducible).
        order_window: ticks to batch new orders before calling the planner.
        max_plan_age: plans computed on snapshots older than this many ticks are dropped.
        deadlock_window: ticks without progress before the shield reports a robot.
        snapshot_text: include the text description in snapshots (LLM planners need it).
        tick_period_s: real-time pacing: each tick takes at least this long (0: as fast as
            possible). Step latency counts the loop's own work, never the pacing sleep.
        snapshot_every: ticks between periodic world snapshots sent to the sink (0: only at
            planner decisions).
        forbidden: cells closed to robots (maintenance zones); the shield keeps robots out.
    """

    shield: bool = True
    planner_mode: Literal["async", "sync"] = "async"
    order_window: int = 2
    max_plan_age: int = 50
    deadlock_window: int = 8
    snapshot_text: bool = True
    tick_period_s: float = 0.0
    snapshot_every: int = 0
    forbidden: tuple[tuple[int, int], ...] = ()


@dataclass
class LoopStats:
    """Counters kept by the loop."""

    planner_calls: int = 0
    planner_failures: int = 0
    planner_fallbacks: int = 0
    llm_calls: int = 0
    llm_calls_abandoned: int = 0
    llm_tokens_prompt: int = 0
    llm_tokens_completion: int = 0
    plans_stale: int = 0
    plans_abandoned: int = 0
    assignments_applied: int = 0
    assignments_dropped: int = 0
    events_skipped: int = 0
    collisions: int = 0
    conflicts_commanded: int = 0
    shield_interventions: int = 0
    deadlocks_reported: int = 0
    notes_read: int = 0
    notes_unreadable: int = 0
    notes_needs_review: int = 0
    revoked: int = 0
    shield_rules: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    step_ms: list[float] = field(default_factory=list)
    planner_ms: list[float] = field(default_factory=list)
    executor_ms: list[float] = field(default_factory=list)
    shield_ms: list[float] = field(default_factory=list)
    sim_ms: list[float] = field(default_factory=list)
    call_ticks: list[int] = field(default_factory=list)

    def count_plan(self, outcome: PlanOutcome) -> None:
        """Count a finished plan's cost: its latency, LLM calls and tokens, and a fallback."""
        self.planner_ms.append(outcome.latency_s * 1e3)
        self.llm_calls += outcome.calls
        self.llm_tokens_prompt += outcome.tokens_prompt
        self.llm_tokens_completion += outcome.tokens_completion
        if outcome.fallback:
            self.planner_fallbacks += 1


class ControlLoop:
    """Runs one warehouse episode with a planner, an executor and (optionally) the shield.

    Args:
        world: the simulator (auto-assignment should be off: the planner assigns).
        planner: the planner tier.
        executor: the executor tier.
        config: loop settings.
        faults: faults to inject.
        sink: optional recorder of ticks and events.
        desk: incident handling (default: incidents tracked, nobody acts).
        desk_worker: the LLM desk (``desk.mode == "llm"``), run on its own thread.
    """

    def __init__(
        self,
        world: Warehouse,
        planner: Planner,
        executor: Executor,
        *,
        config: LoopConfig | None = None,
        faults: list[Fault] | None = None,
        sink: TickSink | None = None,
        desk: DeskConfig | None = None,
        desk_worker: DeskWorker | None = None,
    ) -> None:
        if world.config.auto_assign and world.config.orders.rate is not None:
            raise ConfigError("control loop: turn the world's auto_assign off; the planner assigns")
        self.world = world
        self.planner = planner
        self.executor = executor
        self.config = config or LoopConfig()
        self.faults = list(faults or [])
        self.sink = sink
        self.stats = LoopStats()
        self.shield = Shield(
            world.grid,
            forbidden=self.config.forbidden,
            deadlock_window=self.config.deadlock_window,
            seed=world.seed,
        )
        # Share the executor's distance maps when it has some (same thread, same targets).
        shared = getattr(executor, "oracle", None)
        self._oracle = shared if isinstance(shared, DistanceOracle) else DistanceOracle(world.grid)
        self._future: Future[PlanOutcome] | None = None
        self._submitted = 0.0  # perf_counter() when the plan in flight was asked for
        self._pending: set[str] = {"start"}
        self._orders_since: int | None = None
        self._wake_at: int | None = None
        self._stuck: tuple[str, ...] = ()
        self._boosts: dict[str, float] = {}
        self._order_priority: dict[str, float] = {}  # what the planner said an order is worth
        n = len(world.robot_ids)
        self._waiting = np.zeros(n, dtype=np.int64)
        self._fault_log: list[dict[str, Any]] = []
        # Per order record (the world's records, in order): what the tick needs of each, as
        # arrays, so that nothing per robot runs in Python (filled as records arrive).
        self._synced = 0
        self._rec_urgent = np.zeros(0, dtype=bool)
        self._rec_due = np.zeros(0, dtype=np.int64)
        self._rec_noted = np.zeros(0, dtype=np.float64)  # the planner's priority, once assigned
        self._rec_ids = np.zeros(1, dtype="<U1")  # order ids; the slot past the last holds ""
        self._robot_at = {rid: i for i, rid in enumerate(world.robot_ids)}
        g = world.grid
        self._width = g.shape[1]
        self._closed: list[tuple[int, int]] = list(self.config.forbidden)
        self._detours: frozenset[int] = frozenset()  # flat cells of stopped robots
        # What the deadlock monitor last watched on the executor's own maps (``_progress``).
        self._watched = np.full(n, -1, dtype=np.int64)
        self._watched_routes: DistanceOracle | None = None
        # Room for a map per robot target, and the pickup maps made before the first tick (a
        # new robot target is then a station, asked for in the background at assignment). An
        # executor with route costs of its own reads no plain station map (``_progress``), so
        # the plain maps need room for the pickups' only: fresh memory is paid for when touched.
        stations = n if self._own_routes() is None else 0
        self._oracle.reserve(stations + int(g.pickups.sum()) + 64, touch=True)
        reserve = getattr(executor, "reserve", None)  # an executor with maps of its own
        if callable(reserve):
            reserve(n)
        if g.pickups.sum() <= self._oracle.max_cached // 2:
            self._oracle.prefetch((int(r), int(c)) for r, c in np.argwhere(g.pickups))
        self.desk = IncidentHost(
            world,
            desk or DeskConfig(),
            worker=desk_worker,
            base_forbidden=self.config.forbidden,
            set_forbidden=self._set_forbidden,
            emit=self._emit,
            wake=lambda: self._pending.add("idle"),
        )
        attach = getattr(desk_worker, "attach", None)
        if callable(attach):
            attach(self.desk)

    def _set_forbidden(self, cells: list[tuple[int, int]]) -> None:
        """Closed cells changed (a block fault, the desk): the shield and the executor learn."""
        self.shield.set_forbidden(cells)
        self._closed = list(cells)
        self._reroute()

    def _reroute(self) -> None:
        """The executor routes around the closed cells and the stopped robots' cells."""
        reroute = getattr(self.executor, "reroute", None)
        if callable(reroute):
            width = self._width
            walls = set(self._closed) | {divmod(c, width) for c in self._detours}
            reroute(sorted(walls))
            shared = getattr(self.executor, "oracle", None)
            if isinstance(shared, DistanceOracle):
                self._oracle = shared

    def _route_around(self, frozen: NDArray[np.bool_]) -> None:
        """Stopped robots (broken, battery flat) become walls for routing while they stand.

        The shield cannot push a stopped robot, so robots whose shortest path runs through one
        queue behind it until it is repaired (in a one-wide aisle, for the whole repair);
        routed around it, they take another aisle. A cell some robot is heading for stays open:
        as a wall it would be unreachable.
        """
        if not self._detours and not frozen.any():
            return
        w = self.world
        width = self._width
        pos = w.pos.astype(np.int64)
        stopped = pos[frozen, 0] * width + pos[frozen, 1]
        moving = w.has_task & ~frozen
        goals = w.goal[moving].astype(np.int64)
        stopped = stopped[~np.isin(stopped, goals[:, 0] * width + goals[:, 1])]
        detours = frozenset(stopped.tolist())
        if detours != self._detours:
            self._detours = detours
            self._reroute()

    # ------------------------------------------------------------------ events and planning
    def _emit(self, kind: str, **fields: Any) -> None:
        self.stats.events[kind] += 1
        if self.sink is not None:
            self.sink.on_event({"tick": self.world.tick, "kind": kind, **fields})

    def _apply(self, outcome: PlanOutcome) -> None:
        w = self.world
        s = self.stats
        plan = outcome.plan
        s.count_plan(outcome)
        if outcome.failure:
            s.planner_failures += 1
        self._emit(
            "plan",
            source=plan.source,
            snapshot_tick=plan.tick,
            assignments=[(a.robot, a.order) for a in plan.assignments],
            latency_ms=outcome.latency_s * 1e3,
            fallback=outcome.fallback,
            failure=outcome.failure,
            errors=list(outcome.errors),
            calls=outcome.calls,
            tokens=outcome.tokens_prompt + outcome.tokens_completion,
        )
        s.notes_read += outcome.notes_read
        s.notes_unreadable += outcome.notes_unreadable
        for order, reason in outcome.reviews:
            s.notes_needs_review += 1
            self._emit("needs_review", order=order, reason=reason)
        if w.tick - plan.tick > self.config.max_plan_age:
            s.plans_stale += 1
            self._pending.add("timer")
            return
        for oid in plan.revoke:
            if oid in w.index and (r := w.order(oid).robot) >= 0 and not w.carrying[r]:
                w.unassign(r)
                s.revoked += 1
                self._emit("revoke", robot=w.robot_ids[r], order=oid)
                self._pending.add("idle")
        for oid in plan.ungates:
            w.ungate(oid)
        for oid, until, reason in plan.gates:
            if oid in w.index:
                w.gate(oid, until, reason)
        broken = w.broken  # once per plan: the property builds the fleet's array
        held = self.desk.reserved_robots() if self.desk.reserved else frozenset()
        self._sync_records()  # assignments add no record: once for the whole plan
        stations: list[tuple[int, int]] = []
        due: list[int] = []
        for a in plan.assignments:
            r = self._robot_at.get(a.robot, -1)
            try:
                if r < 0 or w.has_task[r] or broken[r] or a.order not in w.index:
                    raise ConfigError("stale")
                if a.robot in held:  # the desk's chosen helper (planned before it was kept)
                    raise ConfigError("stale")
                w.assign(r, a.order)
            except ConfigError:
                s.assignments_dropped += 1
                continue
            s.assignments_applied += 1
            self._order_priority[a.order] = a.priority
            self._rec_noted[w.index[a.order]] = a.priority
            job = w.order(a.order).order
            stations.append(job.station)
            # The station's map is needed once the robot has loaded: no sooner than the
            # moves to the pickup (a lower bound) from now. The maps needed first come first.
            (y, x), (py, px) = w.pos[r], job.pickup
            due.append(w.tick + abs(int(y) - py) + abs(int(x) - px))
            self._emit("assign", robot=a.robot, order=a.order, snapshot_tick=plan.tick)
        if stations:
            # An executor with maps of its own (guidance graphs) has them made ahead; the plain
            # ones only where something reads them (the executor, or the deadlock monitor).
            request = getattr(self.executor, "request", None)
            if callable(request):
                request(stations, due)
            if self._own_routes() is None:
                self._oracle.request(stations, due)
        self._boosts = dict(plan.boosts)
        if plan.wake_at is not None:
            self._wake_at = (
                plan.wake_at if self._wake_at is None else min(self._wake_at, plan.wake_at)
            )

    def _poll(self) -> None:
        if self._future is not None and self._future.done():
            outcome = self._future.result()
            self._future = None
            self._apply(outcome)

    def _due_events(self) -> set[str]:
        t = self.world.tick
        ready = getattr(self.planner, "has_news", None)
        if callable(ready) and ready():
            # A note read in the background: re-plan with what it says.
            self._pending.add("notes")
        due = {e for e in self._pending if e in IMMEDIATE_EVENTS}
        since = self._orders_since
        if (
            "orders" in self._pending
            and since is not None
            and t - since >= self.config.order_window
        ):
            due.add("orders")
        if self._wake_at is not None and t >= self._wake_at:
            # Cleared only once a planner call takes it (or nothing is left to decide): a
            # wake-up due while a plan is in flight stays pending.
            due.add("timer")
        return due

    def _maybe_plan(self) -> None:
        due = self._due_events()
        if not due or self._future is not None:
            return
        if "timer" in due:
            self._wake_at = None
        w = self.world
        has_idle = bool((~w.has_task & ~w.broken).any())
        # New orders with every robot busy still reach a planner that can free a robot for an
        # urgent one (a note deadline nobody idle can meet).
        preempts = "orders" in due and bool(w.open) and getattr(self.planner, "preempts", False)
        if (
            not (has_idle and w.open)
            and "deadlock" not in due
            and "notes" not in due
            and not preempts
        ):
            self.stats.events_skipped += 1
            self._pending -= due
            if "orders" in due:
                self._orders_since = None
            return
        events = tuple(sorted(due | ({"orders"} if "orders" in self._pending else set())))
        snap = Snapshot.take(
            w,
            events=events,
            stuck=self._stuck,
            with_text=self.config.snapshot_text,
            held=self.desk.reserved_robots() if self.desk.reserved else (),
        )
        self._pending.clear()
        self._orders_since = None
        self._stuck = ()
        self.stats.planner_calls += 1
        self.stats.call_ticks.append(w.tick)
        self._emit("planner_call", events=list(events))
        if self.sink is not None:
            # Restart point for offline replay: the world exactly as the planner saw it.
            self._record_world("decision")
        if self.config.planner_mode == "sync":
            self._apply(self.planner.plan(snap))
        else:
            self._future = self._submit(snap)

    def _record_world(self, reason: str) -> None:
        """Send the world to the sink: live to one that captures it, else as a deep copy."""
        assert self.sink is not None
        w = self.world
        capture = getattr(self.sink, "capture", None)
        if callable(capture):
            capture(w.tick, w, reason=reason)
        else:
            self.sink.snapshot(w.tick, w.snapshot(), reason=reason)

    def _submit(self, snap: Snapshot) -> Future[PlanOutcome]:
        """Plan on a daemon thread: a call still running at the end never holds the process."""
        future: Future[PlanOutcome] = Future()
        planner = self.planner

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(planner.plan(snap))
            except BaseException as exc:  # handed to the loop by _poll (code bugs raise there)
                future.set_exception(exc)

        self._submitted = time.perf_counter()
        threading.Thread(target=work, name="planner", daemon=True).start()
        return future

    def _inject_faults(self) -> None:
        w = self.world
        t = w.tick
        for f in self.faults:
            if f.start == t:
                extra: dict[str, Any] = {"cut": f.cut} if f.cut else {}  # a surge's cut orders
                if f.kind == "block":
                    f = resolve_zone(f, w)  # block:busy's cells are chosen now
                    extra["zone"] = list(f.zone_box or ())
                self._fault_log.append(
                    {"spec": f.spec, "kind": f.kind, "start": f.start, "end": f.end, **extra}
                )
                self._emit("fault_start", fault=f.spec, **extra)
                if f.kind in ("breakdown", "battery", "block"):
                    robot = resolve_robot(f, w) if f.robot is not None else None
                    self.desk.inject(f, robot)
                    self._pending.add("fault")
                elif f.kind == "surge":
                    orders = [w.stream.make(t) for _ in range(f.count)]
                    ids = w.inject(orders)
                    self._emit("orders", ids=ids)
                    self._note_orders()
                    self.desk.surge(ids)
            if f.end == t and f.kind != "surge":
                self._emit("fault_end", fault=f.spec)
                if f.kind == "breakdown":
                    self._pending.add("repair")
                elif f.kind == "block":
                    self.desk.lift(f)

    def _note_orders(self) -> None:
        self._pending.add("orders")
        if self._orders_since is None:
            self._orders_since = self.world.tick

    # ------------------------------------------------------------------ ticking
    def _sync_records(self) -> None:
        """Extend the per-record arrays to the world's records (Python per new order only)."""
        recs = self.world.records
        if len(recs) < self._synced:  # the world was restored to an earlier state
            self._synced = 0
        new = recs[self._synced :]
        if not new:
            return
        total = len(recs)
        if total > len(self._rec_due):
            cap = max(64, 2 * total)
            grow = cap - len(self._rec_due)
            self._rec_urgent = np.concatenate([self._rec_urgent, np.zeros(grow, dtype=bool)])
            self._rec_due = np.concatenate([self._rec_due, np.zeros(grow, dtype=np.int64)])
            self._rec_noted = np.concatenate([self._rec_noted, np.zeros(grow)])
        ids = np.array([r.order.id for r in new])
        if ids.dtype.itemsize > self._rec_ids.dtype.itemsize or len(self._rec_ids) < total + 1:
            kind = max(ids.dtype, self._rec_ids.dtype, key=lambda d: d.itemsize)
            wider = np.zeros(max(len(self._rec_due) + 1, total + 1), dtype=kind)
            wider[: self._synced] = self._rec_ids[: self._synced]
            self._rec_ids = wider
        k = slice(self._synced, total)
        self._rec_urgent[k] = [r.order.priority == "urgent" for r in new]
        self._rec_due[k] = [r.order.due for r in new]
        self._rec_noted[k] = [self._order_priority.get(r.order.id, 0.0) for r in new]
        self._rec_ids[k] = ids
        self._rec_ids[total:] = ""
        self._synced = total

    def _priorities(self) -> NDArray[np.float64]:
        w = self.world
        self._sync_records()
        pr = np.zeros(len(w.robot_ids), dtype=np.float64)
        rec = w.order_of
        serving = w.has_task & (rec >= 0)
        idx = rec[serving]
        # The planner may know more (a note deadline): the higher of the two counts.
        pr[serving] = np.maximum(
            task_priorities(self._rec_urgent[idx], self._rec_due[idx], w.tick),
            self._rec_noted[idx],
        )
        pr += 0.5 * w.carrying + 0.01 * self._waiting
        for rid, boost in self._boosts.items():
            if rid in self._robot_at:
                pr[self._robot_at[rid]] += boost
        if self.desk.boosts:
            pr += np.array([self.desk.boost_of(rid) for rid in w.robot_ids])
        return pr

    def _own_routes(self) -> DistanceOracle | None:
        """The executor's route-cost maps when it has maps of its own (a cost map), else None."""
        routes = getattr(self.executor, "routes", None)
        if isinstance(routes, DistanceOracle) and routes is not self._oracle:
            return routes
        return None

    def _dist_to_target(
        self, routes: DistanceOracle | None
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Each robot's distance to its target on the maps the monitor watches, and the target.

        On ``routes``, the executor's own route costs (:meth:`_own_routes`), or, when None, the
        plain distance. Returns ``(dist, watched)``: ``watched`` the flat target of each robot with
        a task, -1 for the others. Reads only: :meth:`_progress` keeps what changed.
        """
        w = self.world
        d = np.zeros(len(w.robot_ids), dtype=np.int64)
        idx = np.flatnonzero(w.has_task)
        goal, pos = w.goal[idx].astype(np.int64), w.pos[idx].astype(np.int64)
        width = self._width
        targets, here = goal[:, 0] * width + goal[:, 1], pos[:, 0] * width + pos[:, 1]
        d[idx] = (self._oracle if routes is None else routes).lookup(targets, here)
        watched = np.full(len(d), -1, dtype=np.int64)
        watched[idx] = targets
        return np.minimum(d, UNREACHABLE), watched

    def _progress(self) -> tuple[NDArray[np.int64], NDArray[np.bool_] | None]:
        """What the deadlock monitor watches: each robot's distance to its target, and changes.

        An executor with route costs of its own (``guidance``, ``learned-guidance``) is watched
        on those: a robot on its lanes progresses along its route even where a lane takes it
        away from the target for a while, and the loop needs no plain map of every station.
        One move can raise such a cost by several steps, so the monitor is also told whose
        target changed, or that every cost did (new maps: a reroute, a new model). Otherwise
        the plain distance, and None: the monitor reads a jump of more than a step as a new
        target.
        """
        routes = self._own_routes()
        dist, watched = self._dist_to_target(routes)
        if routes is None:
            return dist, None
        changed = (watched != self._watched) | (routes is not self._watched_routes)
        self._watched, self._watched_routes = watched, routes
        return dist, changed

    def step(self) -> None:
        """Run one control tick."""
        w = self.world
        s = self.stats
        t0 = time.perf_counter()
        every = self.config.snapshot_every
        if self.sink is not None and every and w.tick % every == 0:
            self._record_world("periodic")
        self._poll()
        self._inject_faults()
        self.desk.tick_start()
        self._maybe_plan()
        if self.config.planner_mode == "sync":
            self._poll()
        pos = w.pos.copy()
        frozen = w.frozen
        self._route_around(frozen)
        active = w.has_task & ~frozen
        t1 = time.perf_counter()
        ranking = self.executor.rank(pos, w.goal, active, w.carrying, w.tick)
        t2 = time.perf_counter()
        proposed = ranking[:, 0].copy()
        if self.config.shield:
            dist, changed = self._progress()
            decision = self.shield.resolve(
                pos,
                ranking,
                priorities=self._priorities(),
                broken=frozen,
                dist_to_target=dist,
                active=active,
                target_changed=changed,
            )
            actions = np.asarray(decision.actions, dtype=np.int64)
            intervened = np.asarray(decision.intervened, dtype=bool)
            s.shield_interventions += int(intervened.sum())
            s.shield_rules.update({k: v for k, v in decision.rule_counts.items() if v})
            if decision.stuck:
                self._stuck = tuple(w.robot_ids[i] for i in decision.stuck)
                s.deadlocks_reported += len(decision.stuck)
                self._pending.add("deadlock")
                self._emit("deadlock", robots=list(self._stuck))
                self.desk.deadlock(self._stuck)
        else:
            actions = proposed
            intervened = np.zeros(len(proposed), dtype=bool)
        t3 = time.perf_counter()
        # Executed collisions: conflicts in the joint move as sent to the robots. Commanded
        # conflicts: those in the executor's first choices, before the shield (the same moves
        # without it, which the simulator then refuses).
        executed = count_conflicts(w.grid, pos, actions)
        s.collisions += executed
        s.conflicts_commanded += (
            count_conflicts(w.grid, pos, proposed) if self.config.shield else executed
        )
        res = w.step(actions)
        t4 = time.perf_counter()
        self._waiting = np.where(res.moved | ~active, 0, self._waiting + 1)
        if self.sink is not None:
            self._sync_records()
            # Record -1 (no order) reads the "" kept past the last record.
            order_ids = self._rec_ids[np.where(w.order_of >= 0, w.order_of, self._synced)]
            self.sink.on_tick(
                w.tick - 1,
                {
                    "robot": np.arange(len(w.robot_ids), dtype=np.int32),
                    "row": pos[:, 0].astype(np.int32),
                    "col": pos[:, 1].astype(np.int32),
                    "order": order_ids,
                    "carrying": w.carrying.copy(),
                    "proposed": proposed.astype(np.int8),
                    "executed": actions.astype(np.int8),
                    "reward": res.rewards.astype(np.float32),
                    "shield_override": intervened,
                    "broken": w.broken.copy(),
                    "conflict": res.conflict.copy(),
                },
            )
        self.desk.tick_end(res)
        if res.arrived:
            self._emit("orders", ids=list(res.arrived))
            self._note_orders()
        if res.released:
            self._emit("orders_released", ids=list(res.released))
            self._note_orders()
        if res.delivered:
            self._emit("delivered", ids=list(res.delivered))
        if res.idle:
            self._pending.add("idle")
        self.desk.tick_done()  # last: the desk thread wakes as the loop goes to sleep
        s.executor_ms.append((t2 - t1) * 1e3)
        s.shield_ms.append((t3 - t2) * 1e3)
        s.sim_ms.append((t4 - t3) * 1e3)
        s.step_ms.append((time.perf_counter() - t0) * 1e3)
        if self.config.tick_period_s > 0:
            time.sleep(max(0.0, self.config.tick_period_s - (time.perf_counter() - t0)))

    def run(self, steps: int, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Run ``steps`` ticks; returns the metrics (see :meth:`metrics`)."""
        try:
            for k in range(steps):
                self.step()
                if progress is not None:
                    progress(k + 1)
            self._finish()
        finally:
            self.close()
        return self.metrics()

    def _finish(self) -> None:
        """Count a plan in flight at the end as abandoned (never wait for it), with its cost."""
        s = self.stats
        future, self._future = self._future, None
        if future is not None and future.done():
            # Finished but not applied (the run is over): its cost counts.
            s.count_plan(future.result())
            future = None
        elapsed_ms = (time.perf_counter() - self._submitted) * 1e3
        abandon = getattr(self.planner, "abandon", None)
        spent = abandon() if callable(abandon) else None
        if isinstance(spent, PlanOutcome):
            # The planner's own work in flight (e.g. LLM calls made so far, those still
            # running included), stopped now.
            s.llm_calls += spent.calls
            s.llm_calls_abandoned += spent.calls_abandoned
            s.llm_tokens_prompt += spent.tokens_prompt
            s.llm_tokens_completion += spent.tokens_completion
            s.notes_read += spent.notes_read
            s.notes_unreadable += spent.notes_unreadable
            if spent.fallback and future is None:
                s.planner_fallbacks += 1
                s.plans_abandoned += 1
                self._emit("plan_abandoned", reason=spent.failure or "run ended", calls=spent.calls)
        if future is not None:
            s.planner_ms.append(elapsed_ms)
            s.planner_fallbacks += 1
            s.plans_abandoned += 1
            self._emit("plan_abandoned", reason="run ended", elapsed_ms=elapsed_ms)

    def close(self) -> None:
        """Stop a planner's own background work (never waits for a plan in flight)."""
        self.desk.finish()
        close = getattr(self.planner, "close", None)
        if callable(close):
            close()

    def _map_counts(self) -> dict[str, dict[str, float]]:
        """Distance maps made: the loop's plain ones, and an executor's own (guidance graphs).

        Maps made by a background worker cost no tick's time; their CPU time is here, so that
        an executor's cost per tick can be told in full (``fleetmind bench executors``). Which
        maps the worker made before they were needed depends on timing (the run itself does
        not): a strict replay leaves these out (``eval.replay.VOLATILE_METRICS``).
        """
        out = {"plain": self._oracle.counts()}
        own = getattr(self.executor, "routes", None)
        if isinstance(own, DistanceOracle) and own is not self._oracle:
            out["executor"] = own.counts()
        return out

    def metrics(self) -> dict[str, Any]:
        """The DESIGN.md metrics of the run so far."""
        s = self.stats
        m = self.world.metrics()
        m.update(
            {
                "collisions": s.collisions,
                "conflicts_commanded": s.conflicts_commanded,
                "shield": self.config.shield,
                "shield_interventions": s.shield_interventions,
                "shield_rules": dict(s.shield_rules),
                "deadlocks_reported": s.deadlocks_reported,
                "notes_read": s.notes_read,
                "notes_needs_review": s.notes_needs_review,
                "notes_unreadable": s.notes_unreadable,
                "notes_wait_expired": int(self.world.gates_expired.get("unread", 0)),
                "orders_revoked": s.revoked,
                "planner": getattr(self.planner, "name", "?"),
                "executor": getattr(self.executor, "name", "?"),
                "planner_calls": s.planner_calls,
                "planner_failures": s.planner_failures,
                "planner_fallbacks": s.planner_fallbacks,
                "llm_calls": s.llm_calls,
                "llm_calls_abandoned": s.llm_calls_abandoned,
                "llm_tokens_prompt": s.llm_tokens_prompt,
                "llm_tokens_completion": s.llm_tokens_completion,
                "plans_stale": s.plans_stale,
                "plans_abandoned": s.plans_abandoned,
                "assignments_applied": s.assignments_applied,
                "assignments_dropped": s.assignments_dropped,
                "events_skipped": s.events_skipped,
                "events": dict(s.events),
                "step_latency_ms": percentiles(s.step_ms),
                "planner_latency_ms": percentiles(s.planner_ms),
                "tier_latency_ms": {
                    "executor": percentiles(s.executor_ms),
                    "shield": percentiles(s.shield_ms),
                    "sim": percentiles(s.sim_ms),
                    "planner": percentiles(s.planner_ms),
                },
                "faults": list(self._fault_log),
                "distance_maps": self._map_counts(),
            }
        )
        desk = self.desk.metrics()
        m.update(desk)
        m["llm_calls"] += desk["desk_calls"]
        m["llm_tokens_prompt"] += desk["desk_tokens_prompt"]
        m["llm_tokens_completion"] += desk["desk_tokens_completion"]
        stats = getattr(self.executor, "stats", None)
        if callable(stats):
            ex = stats()
            m["executor_stats"] = ex
            # An LLM that moves robots spends tokens too: count them with the planner's.
            m["llm_calls"] += int(ex.get("llm_calls", 0))
            m["llm_tokens_prompt"] += int(ex.get("llm_tokens_prompt", 0))
            m["llm_tokens_completion"] += int(ex.get("llm_tokens_completion", 0))
        return m
