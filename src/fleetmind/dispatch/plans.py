"""What crosses the planner boundary: immutable snapshots in, validated plans out.

A planner never touches the live world: it gets a :class:`Snapshot` (taken on the control thread,
frozen) and answers with a :class:`Plan` stamped with the snapshot's tick. The control loop checks
a plan against the *current* world before applying it (:func:`validate`), so a plan computed on an
older snapshot cannot double-book a robot or an order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.describe import describe
from fleetmind.sim.grid import Cell, GridMap
from fleetmind.sim.orders import Order

if TYPE_CHECKING:
    from fleetmind.sim.warehouse import OrderRecord, Warehouse


@dataclass(frozen=True)
class RobotView:
    """One robot as a planner sees it.

    Attributes:
        id: ``robot_i``.
        index: ``i``.
        cell: current cell.
        idle: no task and not broken: may be assigned.
        broken: out of order.
        carrying: loaded.
        order: id of the order it serves, if any.
        capabilities: what it can carry.
        battery: charge left (``inf`` without a battery model).
    """

    id: str
    index: int
    cell: Cell
    idle: bool
    broken: bool
    carrying: bool
    order: str | None
    capabilities: frozenset[str]
    battery: float


@dataclass(frozen=True)
class RobotColumns:
    """Some robots as columns (what a solver reads of many robots at once).

    Attributes:
        ids: ``R`` robot ids.
        cells: ``(R, 2)`` int64 cells (row, col).
        battery: ``(R,)`` float64 charge left.
        capabilities: ``R`` capability sets.
    """

    ids: list[str]
    cells: NDArray[np.int64]
    battery: NDArray[np.float64]
    capabilities: list[frozenset[str]]

    @staticmethod
    def of(robots: Sequence[RobotView]) -> RobotColumns:
        """The columns of ``robots``."""
        return RobotColumns(
            ids=[r.id for r in robots],
            cells=np.array([r.cell for r in robots], dtype=np.int64).reshape(-1, 2),
            battery=np.array([r.battery for r in robots], dtype=np.float64),
            capabilities=[r.capabilities for r in robots],
        )


class FleetView(Sequence[RobotView]):
    """Every robot of a snapshot as :class:`RobotView` s, each built when first read.

    The columns are copied when the snapshot is taken; a view is made from them on first
    access, since a planner often reads only the idle robots (a thousand views per planner call
    would cost more than the call).
    """

    def __init__(
        self,
        *,
        ids: Sequence[str],
        cells: NDArray[np.integer],
        broken: list[bool],
        busy: list[bool],
        carrying: list[bool],
        order_of: list[int],
        records: Sequence[OrderRecord],
        capabilities: Sequence[frozenset[str]],
        battery: list[float],
    ) -> None:
        self._ids = ids
        self._cells = cells  # (N, 2): a copy; a list of pairs would be an object per robot
        self._broken = broken
        self._busy = busy
        self._carrying = carrying
        # Record indices; a record's order id never changes and records are only appended,
        # so the id can be read when the view is built.
        self._order_of = order_of
        self._records = records
        self._capabilities = capabilities
        self._battery = battery
        self._views: list[RobotView | None] = [None] * len(ids)
        self._index: dict[str, int] | None = None
        self._idle = [i for i, (b, k) in enumerate(zip(busy, broken, strict=True)) if not (b or k)]

    def __len__(self) -> int:
        return len(self._views)

    def _view(self, i: int) -> RobotView:
        view = self._views[i]
        if view is None:
            view = RobotView(
                id=self._ids[i],
                index=i,
                cell=(int(self._cells[i, 0]), int(self._cells[i, 1])),
                idle=not (self._busy[i] or self._broken[i]),
                broken=self._broken[i],
                carrying=self._carrying[i],
                order=None if (k := self._order_of[i]) < 0 else self._records[k].order.id,
                capabilities=self._capabilities[i],
                battery=self._battery[i],
            )
            self._views[i] = view
        return view

    @overload
    def __getitem__(self, i: int) -> RobotView: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[RobotView]: ...

    def __getitem__(self, i: int | slice) -> RobotView | Sequence[RobotView]:
        if isinstance(i, slice):
            return tuple(self._view(k) for k in range(len(self))[i])
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._view(i % len(self))

    def __iter__(self) -> Iterator[RobotView]:
        return (self._view(i) for i in range(len(self)))

    def idle(self) -> list[RobotView]:
        """The robots that may take an order now (only their views are built)."""
        return [self._view(i) for i in self._idle]

    def idle_columns(self) -> RobotColumns:
        """The idle robots as columns (no view built): the same as ``RobotColumns.of(idle())``."""
        idle = self._idle
        return RobotColumns(
            ids=[self._ids[i] for i in idle],
            cells=self._cells[idle].astype(np.int64).reshape(-1, 2),
            battery=np.array([self._battery[i] for i in idle], dtype=np.float64),
            capabilities=[self._capabilities[i] for i in idle],
        )

    def get(self, robot: str) -> RobotView | None:
        """The robot with id ``robot`` (only its view is built), or None."""
        if self._index is None:
            self._index = {rid: i for i, rid in enumerate(self._ids)}
        i = self._index.get(robot)
        return None if i is None else self._view(i)


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of the world at one tick, for planning on another thread.

    Attributes:
        tick: the tick it was taken.
        seed: the run seed (for recording).
        robots: every robot, in id order.
        orders: open (unassigned) orders, oldest first.
        text: a compact text description for LLMs.
        grid: the static map.
        events: why the planner is called (``orders``, ``idle``, ``fault``, ...).
        stuck: robots the shield reported as deadlocked.
        tasks: orders assigned to a robot but not loaded yet (a planner may still revoke them).
        held_ticks: per open order that an incident handler held and released, the ticks it
            spent on hold (out of every planner's sight).
    """

    tick: int
    seed: int | None
    robots: Sequence[RobotView]
    orders: tuple[Order, ...]
    text: str
    grid: GridMap
    events: tuple[str, ...] = ()
    stuck: tuple[str, ...] = ()
    tasks: tuple[Order, ...] = ()
    held_ticks: Mapping[str, int] = field(default_factory=dict)

    @property
    def idle_columns(self) -> RobotColumns:
        """The idle robots as columns (built without a view per robot when possible)."""
        if isinstance(self.robots, FleetView):
            return self.robots.idle_columns()
        return RobotColumns.of(self.idle_robots)

    @property
    def idle_robots(self) -> list[RobotView]:
        """Robots that may take an order now."""
        if isinstance(self.robots, FleetView):
            return self.robots.idle()
        return [r for r in self.robots if r.idle]

    @staticmethod
    def take(
        world: Warehouse,
        *,
        events: tuple[str, ...] = (),
        stuck: tuple[str, ...] = (),
        text_tokens: int = 600,
        with_text: bool = True,
        held: Collection[str] = (),
    ) -> Snapshot:
        """Freeze the planning-relevant state of ``world``.

        Per robot only columns are copied here (no object per robot): see :class:`FleetView`.
        Robots in ``held`` (kept for the incident desk) count as busy.
        """
        recs = world.records
        busy = world.has_task.tolist()
        for rid in held:
            busy[world.robot_ids.index(rid)] = True
        robots = FleetView(
            ids=tuple(world.robot_ids),
            cells=world.pos.copy(),
            broken=world.broken.tolist(),
            busy=busy,
            carrying=world.carrying.tolist(),
            order_of=world.order_of.tolist(),
            records=recs,
            capabilities=tuple(world.capabilities),
            battery=world.battery.astype(np.float64).tolist(),
        )
        # Orders held by a robot that has not loaded them, in robot order.
        held = np.flatnonzero(~world.carrying & (world.order_of >= 0))
        open_now = set(world.open) if world.held_ticks else set()
        return Snapshot(
            tick=world.tick,
            seed=world.seed,
            robots=robots,
            orders=tuple(world.open_orders()),
            text=describe(world, max_tokens=text_tokens) if with_text else "",
            grid=world.grid,
            events=events,
            stuck=stuck,
            tasks=tuple(recs[k].order for k in world.order_of[held].tolist()),
            held_ticks={
                recs[i].order.id: t for i, t in world.held_ticks.items() if t > 0 and i in open_now
            },
        )


@dataclass(frozen=True)
class Assignment:
    """One planner decision: ``robot`` serves ``order``.

    Attributes:
        robot: robot id.
        order: order id.
        priority: the planner's priority for the task (higher is more urgent); the shield uses it.
    """

    robot: str
    order: str
    priority: float = 0.0


@dataclass(frozen=True)
class Plan:
    """A planner's answer for one snapshot.

    Attributes:
        tick: the snapshot tick it was computed on.
        assignments: at most one per robot and per order.
        source: which planner produced it (``assignment``, ``llm``, ``fallback:assignment``...).
        wake_at: a tick at which the planner wants to be asked again (e.g. a hold is released).
        boosts: priority boosts per robot id (conflict arbitration).
        revoke: orders to take back from their robot before loading (re-planned next call).
        gates: ``(order, until, reason)``: no robot may load the order before tick ``until``
            (None: until lifted), e.g. while its note is being read.
        ungates: orders whose load gate is lifted.
    """

    tick: int
    assignments: tuple[Assignment, ...]
    source: str
    wake_at: int | None = None
    boosts: tuple[tuple[str, float], ...] = ()
    revoke: tuple[str, ...] = ()
    gates: tuple[tuple[str, int | None, str], ...] = ()
    ungates: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanOutcome:
    """A plan plus what it cost.

    Attributes:
        plan: the plan to apply.
        latency_s: wall-clock seconds of the planner call.
        calls: LLM calls made (those in flight when the run ended included).
        tokens_prompt: prompt tokens used.
        tokens_completion: completion tokens used.
        fallback: the LLM's answer was replaced by the solver's.
        failure: why the LLM failed (when ``fallback``).
        errors: error kinds met on the way (parse, validation, veto, network...).
        reviews: ``(order, reason)`` of notes the reader sent to review (served as plain).
        notes_read: notes read for this outcome (model or rules; cache hits excluded).
        notes_unreadable: notes the model could not read (outage), answered by the fallback.
        calls_abandoned: of ``calls``, those still in flight when the run ended (no answer).
    """

    plan: Plan
    latency_s: float = 0.0
    calls: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    fallback: bool = False
    failure: str | None = None
    errors: tuple[str, ...] = field(default=())
    reviews: tuple[tuple[str, str], ...] = ()
    notes_read: int = 0
    notes_unreadable: int = 0
    calls_abandoned: int = 0


def validate(plan_pairs: list[tuple[str, str]], snapshot: Snapshot) -> list[str]:
    """Reasons a list of (robot, order) pairs cannot be applied to ``snapshot``; empty if fine.

    Checks: unknown robot or order ids, a robot given two tasks, an order given twice, a busy or
    broken robot, and a robot without the order's required capability.
    """
    robots = {r.id: r for r in snapshot.robots}
    orders = {o.id: o for o in snapshot.orders}
    reasons: list[str] = []
    seen_robots: set[str] = set()
    seen_orders: set[str] = set()
    for k, (rid, oid) in enumerate(plan_pairs):
        where = f"assignments[{k}]"
        robot = robots.get(rid)
        order = orders.get(oid)
        if robot is None:
            idle = ", ".join(r.id for r in snapshot.idle_robots) or "none"
            reasons.append(f"{where}.robot: unknown robot {rid!r} (idle robots: {idle})")
        if order is None:
            reasons.append(f"{where}.order: {oid!r} is not an open order")
        if rid in seen_robots:
            reasons.append(f"{where}.robot: {rid} is given two tasks")
        if oid in seen_orders:
            reasons.append(f"{where}.order: {oid} is given twice")
        seen_robots.add(rid)
        seen_orders.add(oid)
        if robot is not None and robot.broken:
            reasons.append(f"{where}.robot: {rid} is broken")
        elif robot is not None and not robot.idle:
            reasons.append(f"{where}.robot: {rid} is busy with {robot.order}")
        if (
            robot is not None
            and order is not None
            and order.capability is not None
            and order.capability not in robot.capabilities
        ):
            reasons.append(f"{where}: {rid} lacks capability {order.capability!r} for {oid}")
    return reasons


def percentiles(values: list[float]) -> dict[str, float]:
    """``{"p50", "p95", "p99"}`` of a list (zeros when empty)."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    arr = np.asarray(values, dtype=np.float64)
    return {f"p{q}": float(np.percentile(arr, q)) for q in (50, 95, 99)}
