"""What crosses the planner boundary: immutable snapshots in, validated plans out.

A planner never touches the live world: it gets a :class:`Snapshot` (taken on the control thread,
frozen) and answers with a :class:`Plan` stamped with the snapshot's tick. The control loop checks
a plan against the *current* world before applying it (:func:`validate`), so a plan computed on an
older snapshot cannot double-book a robot or an order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from fleetmind.sim.describe import describe
from fleetmind.sim.grid import Cell, GridMap
from fleetmind.sim.orders import Order

if TYPE_CHECKING:
    from fleetmind.sim.warehouse import Warehouse


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
    """

    tick: int
    seed: int | None
    robots: tuple[RobotView, ...]
    orders: tuple[Order, ...]
    text: str
    grid: GridMap
    events: tuple[str, ...] = ()
    stuck: tuple[str, ...] = ()
    tasks: tuple[Order, ...] = ()

    @property
    def idle_robots(self) -> list[RobotView]:
        """Robots that may take an order now."""
        return [r for r in self.robots if r.idle]

    @staticmethod
    def take(
        world: Warehouse,
        *,
        events: tuple[str, ...] = (),
        stuck: tuple[str, ...] = (),
        text_tokens: int = 600,
        with_text: bool = True,
    ) -> Snapshot:
        """Freeze the planning-relevant state of ``world``."""
        broken = world.broken
        robots = tuple(
            RobotView(
                id=rid,
                index=i,
                cell=world.cell_of(i),
                idle=bool(not world.has_task[i] and not broken[i]),
                broken=bool(broken[i]),
                carrying=bool(world.carrying[i]),
                order=(o.id if (o := world.task_of(i)) is not None else None),
                capabilities=world.capabilities[i],
                battery=float(world.battery[i]),
            )
            for i, rid in enumerate(world.robot_ids)
        )
        return Snapshot(
            tick=world.tick,
            seed=world.seed,
            robots=robots,
            orders=tuple(world.open_orders()),
            text=describe(world, max_tokens=text_tokens) if with_text else "",
            grid=world.grid,
            events=events,
            stuck=stuck,
            tasks=tuple(
                o
                for i in range(len(world.robot_ids))
                if not world.carrying[i] and (o := world.task_of(i)) is not None
            ),
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
