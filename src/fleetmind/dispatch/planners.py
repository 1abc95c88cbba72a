"""Classical planners: optimal assignment, its oracle twin, and greedy nearest-robot.

All three answer a :class:`~fleetmind.dispatch.plans.Snapshot` with a
:class:`~fleetmind.dispatch.plans.Plan` that gives at most one open order to each idle robot.

``assignment`` solves the robot-order assignment optimally with
:func:`scipy.optimize.linear_sum_assignment` on true path distances. The cost of robot ``r``
serving order ``o`` at tick ``t``::

    travel   = d(r.cell, o.pickup) + d(o.pickup, o.station)
    lateness = max(0, t + travel - o.due) - max(0, t - o.due)
    age      = t - o.tick
    cost     = travel + LATE_WEIGHT * lateness
               - URGENT_BONUS * [o urgent] - AGE_WEIGHT * age
               - STARVE_WEIGHT * (max(0, age - WAIT_LIMIT) + held)

Lateness counts what the trip adds, not the ticks an order is late by already (late whoever
serves it, whenever). Counted, they made an order costlier the later it got, so that with more
orders open than robots idle a late order was passed over for fresher ones for good (orders held
past their due time were never served). An order that can still be on time still goes before
one that cannot (the late one's trip counts LATE_WEIGHT times over), until its age evens it out.

Past ``WAIT_LIMIT`` ticks an order's age weighs six times as much (``AGE_WEIGHT`` plus
``STARVE_WEIGHT`` a tick), so that no order waits for good. With more orders open than robots the
matching serves the orders cheapest to serve, and a late order (its whole trip adds lateness) or
one only a few robots can carry (a ``cold`` load) lost to fresh ones for hundreds of ticks: on the
incident-desk fault suite (8 robots, 0.15 orders a tick, 10 seeds) an order waited up to 396 ticks
and 11 incidents stayed open at the end because their orders never got a robot. The limit sits
above an order's usual slack (its due tick is 30 + 3 x its distance after arrival), so an order
that is only late is not rushed.

``held`` is the ticks an incident handler kept the order on hold (its pickup in a closed aisle):
out of every planner's sight, through no choice of the planner's, so once back on the open list
they weigh as waiting past the limit and the orders the aisle kept go before fresh work. Without
it a released order queued behind fresher ones for another 90-150 ticks on the desk's fault suite.

Forbidden pairs (robot lacks the capability, battery too low for the trip, no path) never match.
It honours every structured field and is blind to the free-text note.

``oracle`` is the same solver given the ground truth behind the notes (evaluation only: the
upper bound a note-reading planner can reach): ``only_robot`` forbids all other robots,
``not_robot`` forbids the one named, a deadline weighs lateness against it heavily, and a hold is
only assigned once the robot would arrive after its release (the plan asks to be woken up then).
A note-reading planner passes the same solver what it read instead of the ground truth.

``greedy`` takes orders oldest first and gives each the nearest idle capable robot.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import numba
import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from fleetmind.dispatch.plans import (
    Assignment,
    FleetView,
    Plan,
    PlanOutcome,
    RobotColumns,
    RobotView,
    Snapshot,
)
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.grid import GridMap
from fleetmind.sim.notes import Constraint
from fleetmind.sim.orders import URGENT_WEIGHT, Order

LATE_WEIGHT = 2.0
URGENT_BONUS = 20.0
DEADLINE_BONUS = 30.0
AGE_WEIGHT = 0.2
WAIT_LIMIT = 150
"""Ticks an order may wait from its arrival before its age weighs :data:`STARVE_WEIGHT` more."""
STARVE_WEIGHT = 1.0
FORBIDDEN = 1e9
DRAIN_PER_MOVE = 1.0


class Planner(Protocol):
    """Turns a snapshot into a plan. Called on events, on a worker thread."""

    name: str

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """Plan for ``snapshot`` (never mutates it)."""
        ...


ARBITRATION_BOOST = 2.0


def arbitrate_by_rule(snapshot: Snapshot) -> tuple[tuple[str, float], ...]:
    """Settle a reported deadlock by rule: the loaded robot, then the most urgent, goes first.

    Returns:
        Priority boosts ``(robot id, boost)`` for the control loop's shield priorities.
    """
    if len(snapshot.stuck) < 2:
        return ()
    fleet = snapshot.robots
    if isinstance(fleet, FleetView):
        # Only the stuck robots' views (a fleet of thousands has many reports a tick).
        found = [fleet.get(rid) for rid in snapshot.stuck]
        stuck = [r for r in found if r is not None]
    else:
        robots = {r.id: r for r in fleet}
        stuck = [robots[rid] for rid in snapshot.stuck if rid in robots]
    if not stuck:
        return ()
    first = max(stuck, key=lambda r: (r.carrying, r.order is not None, -r.index))
    return ((first.id, ARBITRATION_BOOST),)


def priority_of(order: Order, tick: int) -> float:
    """The shield priority of a task: urgent orders and late orders first."""
    late = max(0, tick - order.due)
    return (URGENT_WEIGHT - 1.0) * (order.priority == "urgent") + 0.01 * late


def task_priorities(
    urgent: NDArray[np.bool_], due: NDArray[np.int64], tick: int
) -> NDArray[np.float64]:
    """:func:`priority_of` of many tasks at once (``(M,)`` urgent flags and due ticks)."""
    late = np.maximum(0, tick - due)
    out: NDArray[np.float64] = (URGENT_WEIGHT - 1.0) * urgent + 0.01 * late
    return out


# Compiled when the module is imported (each slab type), not on a first call inside a tick.
_TRIP_COSTS_SIG = [
    numba.void(
        numba.types.Array(slab, 2, "A"),
        *(numba.int64[:], numba.int64, numba.int64[:], numba.int64[:], numba.int64[:]),
        numba.int64[:],
        *(numba.float64[:], numba.float64[:], numba.int64[:], numba.boolean[:, :], numba.int64),
        numba.int64[:, :],
        numba.float64[:, :],
    )
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(_TRIP_COSTS_SIG, cache=True)
def trip_costs(
    slab: NDArray[np.integer],
    slots: NDArray[np.int64],
    none: int,
    cells: NDArray[np.int64],
    by_cell: NDArray[np.int64],
    carry: NDArray[np.int64],
    due: NDArray[np.int64],
    bonus: NDArray[np.float64],
    battery: NDArray[np.float64],
    need: NDArray[np.int64],
    has: NDArray[np.bool_],
    tick: int,
    trips: NDArray[np.int64],
    cost: NDArray[np.float64],
) -> None:
    """The assignment's trips and costs, order by robot, in one pass (compiled).

    The same arithmetic, in the same order, as the numpy expressions it replaces (the module
    docstring's cost; FORBIDDEN for no path, a battery too low or a missing capability).

    Args:
        slab: distance maps; ``slab[slots[j], c]`` the moves from flat cell ``c`` to order
            ``j``'s pickup, ``none`` where there is no path.
        slots: ``(O,)`` the pickup maps' rows.
        none: the slab's value for no path.
        cells: ``(R,)`` robots' flat cells.
        by_cell: ``(R,)`` the robots in cell order (map reads then walk each row forward).
        carry: ``(O,)`` moves from pickup to station (``UNREACHABLE`` if none).
        due: ``(O,)`` due ticks.
        bonus: ``(O,)`` urgency and age bonus.
        battery: ``(R,)`` charge left.
        need: ``(O,)`` index of the capability an order needs in ``has`` (-1: none).
        has: ``(R, K)`` robot has capability ``k``.
        tick: now.
        trips: ``(O, R)`` written: moves to deliver (``UNREACHABLE`` if impossible).
        cost: ``(O, R)`` written: the cost.
    """
    r_count = cells.shape[0]
    # Order-major: one pickup map row read at the robots' cells, written contiguously.
    for j in range(slots.shape[0]):
        row = slots[j]
        c = carry[j]
        for k in range(r_count):
            i = by_cell[k]
            raw = slab[row, cells[i]]
            trip = UNREACHABLE if raw == none or c >= UNREACHABLE else raw + c
            trips[j, i] = trip
            late = tick + trip - due[j]
            sunk = tick - due[j]  # late by this much already, whoever serves it
            value = float(trip) + LATE_WEIGHT * (
                (late if late > 0 else 0) - (sunk if sunk > 0 else 0)
            )
            value -= bonus[j]
            if (
                trip >= UNREACHABLE
                or battery[i] < DRAIN_PER_MOVE * trip
                or (need[j] >= 0 and not has[i, need[j]])
            ):
                value = FORBIDDEN
            cost[j, i] = value


class _Distances:
    """A distance oracle per planner (planners run on their own thread)."""

    def __init__(self, grid: GridMap) -> None:
        self.oracle = DistanceOracle(grid, memory_mb=256)
        self._width = grid.shape[1]
        # Every trip starts at a pickup: their maps now, not in the first plans of a run (a
        # fraction of a millisecond each; a few hundred on the large warehouse).
        pickups = grid.pickup_cells()
        if len(pickups) <= self.oracle.max_cached // 2:
            self.oracle.prefetch(pickups)

    def _flat(self, cells: list[tuple[int, int]]) -> NDArray[np.int64]:
        rc = np.array(cells, dtype=np.int64).reshape(-1, 2)
        out: NDArray[np.int64] = rc[:, 0] * self._width + rc[:, 1]
        return out

    def trips(self, robots: list[RobotView], orders: list[Order]) -> np.ndarray:
        """``(R, O)`` moves for robot ``r`` to deliver order ``o`` (UNREACHABLE if impossible)."""
        # Only pickup maps: the grid is undirected, so d(pickup, station) reads the same map.
        # One gather for every robot and order (no loop per order or per robot).
        pickups = self._flat([o.pickup for o in orders])  # (O,)
        cells = self._flat([r.cell for r in robots])  # (R,)
        to_pickup = self.oracle.lookup(pickups, np.broadcast_to(cells, (len(orders), len(cells))))
        carry = self.oracle.lookup(pickups, self._flat([o.station for o in orders]))  # (O,)
        out = np.where(
            (to_pickup >= UNREACHABLE) | (carry[:, None] >= UNREACHABLE),
            UNREACHABLE,
            to_pickup + carry[:, None],
        )
        return np.ascontiguousarray(out.T)

    def to_pickup(self, robots: list[RobotView] | RobotColumns, order: Order) -> np.ndarray:
        """``(R,)`` moves from each robot to the order's pickup."""
        if isinstance(robots, RobotColumns):
            cells = robots.cells[:, 0] * self._width + robots.cells[:, 1]
        else:
            cells = self._flat([r.cell for r in robots])
        return self.oracle.lookup(np.repeat(self._flat([order.pickup]), len(cells)), cells)

    def costs(
        self,
        robots: RobotColumns,
        orders: list[Order],
        tick: int,
        held_ticks: Mapping[str, int] | None = None,
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """``(R, O)`` trips and costs before note constraints (:func:`trip_costs`).

        Both are transposed views of ``(O, R)`` arrays (the kernel's layout). ``held_ticks``:
        per order, the ticks an incident handler held it (they weigh as waiting past the limit).
        """
        held = held_ticks or {}
        pickups = self._flat([o.pickup for o in orders])  # (O,)
        carry = self.oracle.lookup(pickups, self._flat([o.station for o in orders]))
        slab, slots, none = self.oracle.maps(pickups)
        caps = sorted({o.capability for o in orders if o.capability is not None})
        need = np.array(
            [-1 if o.capability is None else caps.index(o.capability) for o in orders],
            dtype=np.int64,
        )
        rows: dict[frozenset[str], list[bool]] = {}  # robots share few capability sets
        has = np.array(
            [
                rows.setdefault(c, [k in c for k in caps]) if caps else []
                for c in robots.capabilities
            ],
            dtype=np.bool_,
        ).reshape(len(robots.ids), len(caps))
        due = np.array([o.due for o in orders], dtype=np.int64)
        bonus = np.array(
            [
                URGENT_BONUS * (o.priority == "urgent")
                + AGE_WEIGHT * (tick - o.tick)
                + STARVE_WEIGHT * (max(0, tick - o.tick - WAIT_LIMIT) + held.get(o.id, 0))
                for o in orders
            ],
            dtype=np.float64,
        )
        shape = (len(orders), len(robots.ids))
        trips = np.empty(shape, dtype=np.int64)
        cost = np.empty(shape, dtype=np.float64)
        cells = robots.cells[:, 0] * self._width + robots.cells[:, 1]
        args = (carry, due, bonus, robots.battery, need, has, tick, trips, cost)
        by_cell = np.argsort(cells, kind="stable")
        trip_costs(slab, slots, none, cells, by_cell, *args)
        return trips.T, cost.T


class AssignmentPlanner:
    """Optimal assignment on true path distances, honouring structured order fields.

    Args:
        grid: the map (for distances).
        use_hidden: also honour the ground truth behind notes (the ``oracle`` planner).
    """

    def __init__(self, grid: GridMap, *, use_hidden: bool = False) -> None:
        self.name = "oracle" if use_hidden else "assignment"
        self.use_hidden = use_hidden
        # Only a planner that knows note deadlines frees busy robots for them.
        self.preempts = use_hidden
        self._dist = _Distances(grid)

    def costs(
        self,
        snapshot: Snapshot,
        robots: Sequence[RobotView] | RobotColumns,
        orders: list[Order],
        constraints: Mapping[str, Sequence[Constraint]] | None = None,
    ) -> tuple[np.ndarray, int | None]:
        """The ``(R, O)`` cost matrix (``FORBIDDEN`` where a pair may not match) and a wake tick.

        Args:
            snapshot: the world view.
            robots: the idle robots (rows).
            orders: the open orders (columns).
            constraints: per order id, the constraints read from its note (the oracle passes the
                ground truth; a note-reading planner passes what it understood).
        """
        t = snapshot.tick
        cols = robots if isinstance(robots, RobotColumns) else RobotColumns.of(robots)
        # Every pair at once, compiled (the same arithmetic as pair by pair).
        trips, cost = self._dist.costs(cols, orders, t, snapshot.held_ticks)
        wake: int | None = None
        ids = np.array(cols.ids)
        noted = [] if not constraints else [j for j, o in enumerate(orders) if o.id in constraints]
        for j in noted:
            o = orders[j]
            for h in () if constraints is None else constraints.get(o.id, ()):
                if h.kind == "only_robot":
                    cost[ids != h.robot, j] = FORBIDDEN
                elif h.kind == "not_robot":
                    cost[ids == h.robot, j] = FORBIDDEN
                elif h.kind == "deadline" and h.tick is not None:
                    late = np.maximum(0, t + trips[:, j] - (h.tick - 1))
                    # What the trip adds, as for the due time (module docstring).
                    cost[:, j] += 4 * LATE_WEIGHT * (late - max(0, t - (h.tick - 1)))
                    # A deadline someone can still meet goes first (like an urgent order); one
                    # nobody can meet any more gets no head start over orders still savable.
                    cost[late == 0, j] -= DEADLINE_BONUS
                elif h.kind == "hold" and h.tick is not None:
                    reach = self._dist.to_pickup(cols, o)
                    early = t + reach < h.tick
                    cost[early, j] = FORBIDDEN
                    if early.any():
                        soonest = max(t + 1, int(h.tick - reach[early].max()))
                        wake = soonest if wake is None else min(wake, soonest)
        return cost, wake

    def solve(
        self, snapshot: Snapshot, constraints: Mapping[str, Sequence[Constraint]] | None = None
    ) -> Plan:
        """The optimal plan for the idle robots and open orders of ``snapshot``."""
        robots = snapshot.idle_columns  # no object per robot
        orders = list(snapshot.orders)
        if constraints is None and self.use_hidden:
            constraints = {o.id: o.constraints for o in (*orders, *snapshot.tasks) if o.constraints}
        boosts = arbitrate_by_rule(snapshot)
        revoke = self.preempt(snapshot, constraints or {})
        if not robots.ids or not orders:
            return Plan(
                tick=snapshot.tick,
                assignments=(),
                source=self.name,
                boosts=boosts,
                revoke=revoke,
            )
        cost, wake = self.costs(snapshot, robots, orders, constraints)
        if cost.shape[0] > cost.shape[1]:
            # scipy solves a tall matrix as its transpose: hand it that one (contiguous here)
            # and sort by robot, as it would return them: the same pairs, in the same order.
            by_order, by_robot = linear_sum_assignment(cost.T)
            k = np.argsort(by_robot)
            rows, cols = by_robot[k], by_order[k]
        else:
            rows, cols = linear_sum_assignment(cost)
        noted = constraints or {}
        chosen = [
            Assignment(
                robots.ids[i],
                orders[j].id,
                priority_of(orders[j], snapshot.tick)
                # A note deadline makes the task urgent for the shield too.
                + (URGENT_WEIGHT - 1.0)
                * any(c.kind == "deadline" for c in noted.get(orders[j].id, ())),
            )
            for i, j in zip(rows, cols, strict=True)
            if cost[i, j] < FORBIDDEN / 2
        ]
        return Plan(
            tick=snapshot.tick,
            assignments=tuple(chosen),
            source=self.name,
            wake_at=wake,
            boosts=boosts,
            revoke=revoke,
        )

    def preempt(
        self, snapshot: Snapshot, constraints: Mapping[str, Sequence[Constraint]]
    ) -> tuple[str, ...]:
        """Unloaded tasks to take back so an open order's note deadline can still be met.

        For each open order with a deadline that no idle robot can meet, the nearest robot that
        is driving to the pickup of an order with no deadline of its own (and not urgent) and
        could meet it is freed; the next plan gives it the deadline order.
        """
        t = snapshot.tick
        if not constraints:
            return ()
        # Only open orders with a note deadline (and no robot or hold rule) can free a robot;
        # without one nothing below runs (it reads every robot of the snapshot).
        wanted = [
            o
            for o in snapshot.orders
            if any(c.kind == "deadline" and c.tick for c in constraints.get(o.id, ()))
        ]
        if not wanted:
            return ()
        idle = snapshot.idle_robots
        tasks = {o.id: o for o in snapshot.tasks}
        movable = [
            r
            for r in snapshot.robots
            if r.order in tasks
            and not r.carrying
            and tasks[r.order].priority != "urgent"
            and not any(c.kind == "deadline" for c in constraints.get(r.order, ()))
        ]
        if not movable:
            return ()
        out: list[str] = []
        for o in wanted:
            deadline = min(
                (c.tick for c in constraints.get(o.id, ()) if c.kind == "deadline" and c.tick),
                default=None,
            )
            if deadline is None or any(
                c.kind in ("only_robot", "not_robot", "hold") for c in constraints.get(o.id, ())
            ):
                continue
            if idle and (t + self._dist.trips(idle, [o])[:, 0] < deadline).any():
                continue
            able = [r for r in movable if o.capability is None or o.capability in r.capabilities]
            if not able:
                continue
            trips = self._dist.trips(able, [o])[:, 0]
            best = int(np.argmin(trips))
            if t + trips[best] < deadline:
                out.append(str(able[best].order))
                movable.remove(able[best])
                if not movable:
                    break
        return tuple(out)

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """Solve and wrap as an outcome."""
        start = time.perf_counter()
        plan = self.solve(snapshot)
        return PlanOutcome(plan=plan, latency_s=time.perf_counter() - start)


class GreedyPlanner:
    """Oldest order first, to the nearest idle robot able to serve it."""

    name = "greedy"

    def __init__(self, grid: GridMap) -> None:
        self._dist = _Distances(grid)

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """Greedy nearest-robot assignment."""
        start = time.perf_counter()
        free = list(snapshot.idle_robots)
        chosen: list[Assignment] = []
        for o in snapshot.orders:
            able = [r for r in free if o.capability is None or o.capability in r.capabilities]
            if not able:
                continue
            reach = self._dist.to_pickup(able, o)
            best = int(np.argmin(reach))
            if reach[best] >= UNREACHABLE:
                continue
            chosen.append(Assignment(able[best].id, o.id, priority_of(o, snapshot.tick)))
            free.remove(able[best])
            if not free:
                break
        plan = Plan(tick=snapshot.tick, assignments=tuple(chosen), source=self.name)
        return PlanOutcome(plan=plan, latency_s=time.perf_counter() - start)
