"""What the desk sees and records: robot and order states, the floor's reach, incidents."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from fleetmind.sim.grid import DELTAS, Cell, GridMap
from fleetmind.sim.warehouse import Warehouse

IncidentKind = Literal["breakdown", "block", "deadlock", "surge", "battery"]
INCIDENT_KINDS: tuple[IncidentKind, ...] = ("breakdown", "block", "deadlock", "surge", "battery")
DeskMode = Literal["off", "rules", "llm"]
ACTIONS = (
    "reassign",
    "hand_over",
    "hold",
    "release",
    "send_to_charger",
    "block_zone",
    "unblock_zone",
    "boost",
)
BOOST = 2.0
"""Priority boost a ``boost`` gives a robot with the shield (the planner's arbitration value)."""
BOOST_TICKS = 20
MAX_HOLD = 1000
"""The furthest ahead (ticks) a hold may end."""
MAX_ZONE = 50
"""The most cells one ``block_zone`` may close."""
DEADLOCK_REPEAT = 20
"""Ticks within which a second stuck report of a robot makes a deadlock incident."""
SURGE_BOOSTS = 2
"""Loaded robots a surge with no urgent order boosts (those whose orders are due first)."""
RESERVE_TICKS = 40
"""Ticks a robot named as a helper in the desk's options stays off the planner's list (and, if
it is on its way to an unloaded order, waits to load it), unless the desk acts, decides on
another or its incident closes first (the coordinator decides and the executor acts a model
call later each)."""
HELPER_GATE = "desk helper"
"""The load-gate reason of a helper's order while the desk may still send it elsewhere."""


class Refused(Exception):
    """An action the world or the dispatch rules refuse; the message is the one-line reason."""


@dataclass(frozen=True)
class RobotState:
    """One robot as a handler sees it."""

    id: str
    cell: Cell
    broken: bool
    battery: float
    carrying: bool
    order: str | None
    errand: bool
    capabilities: frozenset[str]

    @property
    def frozen(self) -> bool:
        """Cannot move: broken or out of charge."""
        return self.broken or self.battery <= 0

    @property
    def idle(self) -> bool:
        """May take an order."""
        return not self.frozen and self.order is None and not self.errand


@dataclass(frozen=True)
class OrderState:
    """One undelivered order as a handler sees it (``state``: open, assigned, loaded, parked)."""

    id: str
    pickup: Cell
    station: Cell
    priority: str
    due: int
    capability: str | None
    state: Literal["open", "assigned", "loaded", "parked"]
    robot: str | None
    parked_until: int | None


@dataclass(frozen=True)
class DeskState:
    """An immutable view of what handlers check actions against (taken on the control thread).

    Attributes:
        tick: when it was taken.
        robots: every robot by id.
        orders: every undelivered order by id.
        fault_zone: cells closed by a fault (only the fault lifts them).
        desk_zone: cells closed by a handler (``unblock_zone`` may open them).
        zone_until: tick the fault zones open again (None: no fault zone).
        labels: ``(H, W)`` connected components of the open floor (0: closed or wall).
        grid: the map.
    """

    tick: int
    robots: dict[str, RobotState]
    orders: dict[str, OrderState]
    fault_zone: frozenset[Cell]
    desk_zone: frozenset[Cell]
    zone_until: int | None
    labels: NDArray[np.int32]
    grid: GridMap

    @property
    def closed(self) -> frozenset[Cell]:
        """Every closed cell."""
        return self.fault_zone | self.desk_zone

    def reachable(self, src: Cell, dst: Cell) -> bool:
        """Whether a robot on ``src`` can reach ``dst`` on the open floor."""
        return reachable(self.labels, src, dst)

    def robot(self, rid: str) -> RobotState:
        """The robot, or a refusal naming the fleet."""
        r = self.robots.get(rid)
        if r is None:
            ids = list(self.robots)
            raise Refused(f"unknown robot {rid!r} (robots: {ids[0]}..{ids[-1]})")
        return r

    def order(self, oid: str) -> OrderState:
        """The undelivered order, or a refusal."""
        o = self.orders.get(oid)
        if o is None:
            raise Refused(f"unknown order {oid!r} (or already delivered)")
        return o


def floor_labels(grid: GridMap, closed: Iterable[Cell]) -> NDArray[np.int32]:
    """Connected components of the free, unclosed floor (4-neighbour)."""
    free = ~grid.blocked.copy()
    for r, c in closed:
        free[r, c] = False
    labels, _ = ndimage.label(free)
    return np.asarray(labels, dtype=np.int32)


def reachable(labels: NDArray[np.int32], src: Cell, dst: Cell) -> bool:
    """Whether ``dst`` is reachable from ``src`` (a robot on a closed cell may step off it)."""
    h, w = labels.shape
    target = int(labels[dst])
    if target == 0:
        return False
    if int(labels[src]) == target:
        return True
    for d in DELTAS[1:]:
        r, c = src[0] + int(d[0]), src[1] + int(d[1])
        if 0 <= r < h and 0 <= c < w and int(labels[r, c]) == target:
            return True
    return False


def take_state(
    world: Warehouse,
    *,
    fault_zone: frozenset[Cell],
    desk_zone: frozenset[Cell],
    zone_until: int | None,
    labels: NDArray[np.int32],
) -> DeskState:
    """Freeze what handlers need of the live world."""
    broken = world.broken
    robots = {}
    for i, rid in enumerate(world.robot_ids):
        o = world.task_of(i)
        robots[rid] = RobotState(
            id=rid,
            cell=world.cell_of(i),
            broken=bool(broken[i]),
            battery=float(world.battery[i]),
            carrying=bool(world.carrying[i]),
            order=None if o is None else o.id,
            errand=bool(world.errand[i]),
            capabilities=world.capabilities[i],
        )
    open_set = set(world.open)
    orders = {}
    for idx, rec in enumerate(world.records):
        if rec.delivered_tick >= 0:
            continue
        o = rec.order
        state: Literal["open", "assigned", "loaded", "parked"]
        if idx in world.parked:
            state = "parked"
        elif idx in open_set:
            state = "open"
        elif rec.robot >= 0 and rec.picked_tick >= 0:
            state = "loaded"
        elif rec.robot >= 0:
            state = "assigned"
        else:
            continue  # e.g. dropped by the open-list bound
        orders[o.id] = OrderState(
            id=o.id,
            pickup=o.pickup,
            station=o.station,
            priority=o.priority,
            due=o.due,
            capability=o.capability,
            state=state,
            robot=world.robot_ids[rec.robot] if rec.robot >= 0 and state != "open" else None,
            parked_until=world.parked.get(idx),
        )
    return DeskState(
        tick=world.tick,
        robots=robots,
        orders=orders,
        fault_zone=fault_zone,
        desk_zone=desk_zone,
        zone_until=zone_until,
        labels=labels,
        grid=world.grid,
    )


def zone_cells(cells: Any) -> list[Cell]:
    """A zone argument's cells as ``(row, col)``; :class:`Refused` names the first bad one."""
    out = []
    for k, c in enumerate(cells):
        if not isinstance(c, list | tuple) or len(c) != 2:
            raise Refused(f"cells[{k}]: expected [row, col], got {c!r}")
        out.append((int(c[0]), int(c[1])))
    return out


def nearest_charger(state: DeskState, cell: Cell) -> Cell | None:
    """The closest reachable charger (Manhattan distance), or None."""
    chargers = [
        (int(r), int(c))
        for r, c in np.argwhere(state.grid.chargers)
        if state.reachable(cell, (int(r), int(c)))
    ]
    if not chargers:
        return None
    return min(chargers, key=lambda ch: (abs(ch[0] - cell[0]) + abs(ch[1] - cell[1]), ch))


@dataclass
class Incident:
    """One incident and what became of it.

    Attributes:
        id: ``i0``, ``i1``, ...
        kind: the incident kind.
        tick: the tick it happened.
        summary: one line for people and models.
        robots: robots involved.
        orders: affected orders (recovery waits for them).
        handler: ``none``, ``rules`` or ``desk``.
        fallback: why the rules acted instead of the desk (None if they did not).
        recovered_tick: the tick every affected order moved again (None: not yet).
        actions: every action asked for: tool, args, source, tick and result.
        conversation: the desk's structured messages (``role``, ``phase``, ``content``).
        decision: the desk coordinator's first decision: ``chosen`` and ``rules`` (the calls
            of its choice and of the rule handler's proposal on the same view, as text) and
            ``deviates`` (they differ); None when the coordinator decided nothing.
        calls: desk model calls.
        tokens: desk tokens.
        closed: the handler is done (the desk decided, or the rules acted).
    """

    id: str
    kind: IncidentKind
    tick: int
    summary: str
    robots: tuple[str, ...] = ()
    orders: tuple[str, ...] = ()
    until: int | None = None
    handler: str = "none"
    fallback: str | None = None
    recovered_tick: int | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)
    conversation: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    tokens: int = 0
    tokens_prompt: int = 0
    closed: bool = False
    moved: set[str] = field(default_factory=set)
    started_s: float | None = None
    decision: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """The JSON record (metrics.json ``incident_log``, the report, the dashboard)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "tick": self.tick,
            "summary": self.summary,
            "robots": list(self.robots),
            "orders": list(self.orders),
            "handler": self.handler,
            "fallback": self.fallback,
            "recovered_tick": self.recovered_tick,
            "recovery_ticks": (
                None if self.recovered_tick is None else self.recovered_tick - self.tick
            ),
            "actions": self.actions,
            "conversation": self.conversation,
            "calls": self.calls,
            "tokens": self.tokens,
            "decision": self.decision,
        }


def desk_decisions(incs: list[Incident]) -> dict[str, Any]:
    """How often the desk's coordinator chose something other than the rule handler's option.

    Counted over the incidents where the coordinator decided (a model answer, not a default).
    """
    decided = [i.decision for i in incs if i.decision is not None]
    deviations = sum(1 for d in decided if d.get("deviates"))
    return {
        "decided": len(decided),
        "deviations": deviations,
        "deviation_rate": deviations / len(decided) if decided else None,
    }
