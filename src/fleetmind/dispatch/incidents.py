"""Incidents on the live floor, the actions that answer them, and the rule-based handler.

An incident is something the planner's solver cannot express: a robot breaks down carrying a
load (``breakdown``), an aisle is closed (``block``), the shield's deadlock monitor reports robots
stuck (``deadlock``), a surge of orders overruns the fleet (``surge``), a robot's battery runs low
mid-task (``battery``). :class:`IncidentHost` lives on the control thread: it injects the
``block`` and ``battery`` faults' effects, opens incidents, hands each to its handler (none, the
rules, or the LLM desk of :mod:`fleetmind.dispatch.desk` on a worker thread), applies the actions
handlers queue at a tick boundary after checking them again against the live world, and tracks
recovery.

Actions (the desk's tools and the rules' vocabulary), each checked by :func:`check` against a
:class:`DeskState` with a one-line reason when refused: ``reassign(order, robot)``,
``hand_over(order)``, ``hold(order, until)``, ``release(order)``, ``send_to_charger(robot)``,
``block_zone(cells)``, ``unblock_zone(cells)``, ``boost(robot)``.

Recovery: an incident has *affected orders* (the broken robot's order, orders whose pickup lies
in the closed zone, the stuck robots' orders, the surge's orders, the low robot's order). Each
affected order recovers at the first tick after the incident at which it is delivered, or its
robot (not broken, not out of charge) changes cell; a ``battery`` incident also needs the robot
on its way to a charger. The incident recovers when every affected order has (its recovery ticks
are the ticks from the incident to then); an incident with no affected order recovers at once.
One still open at the end of the run is ``unresolved``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from fleetmind.dispatch.faults import BATTERY_MARGIN, Fault
from fleetmind.errors import ConfigError
from fleetmind.sim.grid import DELTAS, Cell, GridMap
from fleetmind.sim.warehouse import StepResult, Warehouse

log = logging.getLogger(__name__)

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


def _cells(cells: Any) -> list[Cell]:
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


def check(name: str, args: dict[str, Any], state: DeskState) -> None:
    """Check one action against the world and the dispatch rules.

    Raises:
        Refused: with the one-line reason (unknown id, robot busy or broken, zone unreachable...).
    """
    if name not in ACTIONS:
        raise Refused(f"unknown action {name!r} (actions: {', '.join(ACTIONS)})")
    if name == "reassign":
        o = state.order(str(args["order"]))
        r = state.robot(str(args["robot"]))
        if r.broken:
            raise Refused(f"{r.id} is broken")
        if r.battery <= 0:
            raise Refused(f"{r.id} is out of charge")
        if r.order == o.id:
            raise Refused(f"{r.id} already serves {o.id}")
        if r.carrying:
            raise Refused(f"{r.id} is busy carrying {r.order}")
        if r.errand:
            raise Refused(f"{r.id} is on its way to a charger")
        if o.state == "parked":
            raise Refused(f"{o.id} is on hold until tick {o.parked_until}; release it first")
        src = o.pickup
        if o.state == "loaded":
            loader = state.robots[o.robot or ""]
            if not loader.frozen and loader.battery > 0 and not _low(state, loader):
                raise Refused(f"{o.id} is loaded on {loader.id}, which is working: leave it")
            src = loader.cell
            _room_beside(state, loader)
        if o.capability is not None and o.capability not in r.capabilities:
            raise Refused(f"{r.id} lacks capability {o.capability!r} for {o.id}")
        if not state.reachable(r.cell, src):
            raise Refused(f"zone unreachable: {r.id} cannot reach {o.id}'s pickup {src}")
    elif name == "hand_over":
        o = state.order(str(args["order"]))
        if o.state != "loaded":
            raise Refused(f"{o.id} is not loaded ({o.state}): nothing to hand over")
        loader = state.robots[o.robot or ""]
        if not loader.frozen and not _low(state, loader):
            raise Refused(f"{o.id} is loaded on {loader.id}, which is working: leave it")
        _room_beside(state, loader)
    elif name == "hold":
        o = state.order(str(args["order"]))
        until = int(args["until"])
        if o.state == "loaded":
            raise Refused(f"{o.id} is already loaded on {o.robot}")
        if until <= state.tick:
            raise Refused(f"until {until} is not after the current tick {state.tick}")
        if until > state.tick + MAX_HOLD:
            raise Refused(f"until {until} is more than {MAX_HOLD} ticks ahead")
    elif name == "release":
        o = state.order(str(args["order"]))
        if o.state != "parked":
            raise Refused(f"{o.id} is not on hold ({o.state})")
        if o.pickup in state.closed:
            raise Refused(
                f"zone unreachable: {o.id}'s pickup {o.pickup} is in a closed zone"
                + (f" until tick {state.zone_until}" if state.zone_until is not None else "")
            )
    elif name == "send_to_charger":
        r = state.robot(str(args["robot"]))
        if r.broken:
            raise Refused(f"{r.id} is broken")
        if r.carrying:
            raise Refused(f"{r.id} is carrying {r.order}: hand_over it first or let it deliver")
        if r.errand:
            raise Refused(f"{r.id} is already on its way to a charger")
        if not np.isfinite(r.battery):
            raise Refused(f"{r.id} has no battery to charge")
        if nearest_charger(state, r.cell) is None:
            raise Refused(f"zone unreachable: no charger reachable from {r.id}")
    elif name in ("block_zone", "unblock_zone"):
        cells = _cells(args["cells"])
        if not cells:
            raise Refused("cells: give at least one [row, col]")
        if len(cells) > MAX_ZONE:
            raise Refused(f"cells: at most {MAX_ZONE} cells at once")
        h, w = state.grid.shape
        for k, c in enumerate(cells):
            if not (0 <= c[0] < h and 0 <= c[1] < w):
                raise Refused(f"cells[{k}]: {c} is off the {h}x{w} map")
        if name == "unblock_zone":
            for k, c in enumerate(cells):
                if c in state.fault_zone:
                    raise Refused(
                        f"cells[{k}]: {c} is closed by the fault until tick {state.zone_until}"
                    )
                if c not in state.desk_zone:
                    raise Refused(f"cells[{k}]: {c} is not closed")
        else:
            for k, c in enumerate(cells):
                if state.grid.blocked[c]:
                    raise Refused(f"cells[{k}]: {c} is a wall")
                if state.grid.stations[c]:
                    raise Refused(f"cells[{k}]: {c} is a station")
            labels = floor_labels(state.grid, state.closed | set(cells))
            stations = [(int(r), int(c)) for r, c in np.argwhere(state.grid.stations)]
            if len({int(labels[s]) for s in stations}) > 1:
                raise Refused("zone unreachable: closing these cells cuts a station off")
    elif name == "boost":
        r = state.robot(str(args["robot"]))
        if r.frozen:
            raise Refused(f"{r.id} cannot move (broken or out of charge)")


def _room_beside(state: DeskState, r: RobotState) -> None:
    """Refuse when no free floor cell beside ``r`` can take its load (robots all round it)."""
    taken = {o.cell for o in state.robots.values() if o.id != r.id}
    if state.grid.free_beside(r.cell, taken):
        return
    raise Refused(f"no free cell beside {r.id} at {r.cell} to set the load down: wait")


def _low(state: DeskState, r: RobotState) -> bool:
    """A robot whose charge cannot take it to its target and a charger."""
    if not np.isfinite(r.battery):
        return False
    return r.battery <= BATTERY_MARGIN + 2 * state.grid.shape[0]


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


def rule_actions(inc: Incident, state: DeskState) -> list[tuple[str, dict[str, Any]]]:
    """The rule-based handler: the actions it takes for an incident (deterministic).

    - breakdown carrying a load: hand the load to the nearest idle robot that can take it, else
      the nearest robot still on its way to an unloaded order (``reassign``; that order goes
      back to the planner), or set it down for the planner (``hand_over``);
    - battery: a loaded robot hands its load over (as for a breakdown) and heads for the nearest
      charger; an unloaded one goes there at once (``send_to_charger``);
    - block: orders whose pickup is in the closed zone are held until it opens;
    - deadlock: the stuck robot with the most urgent order is boosted;
    - surge: robots serving urgent orders are boosted; with none, the
      :data:`SURGE_BOOSTS` loaded robots whose orders are due first.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    if inc.kind in ("breakdown", "battery") and inc.robots:
        r = state.robots.get(inc.robots[0])
        if r is not None and r.carrying and r.order is not None:
            helper = _nearest_idle(state, r.order, r.cell)
            if helper is not None:
                out.append(("reassign", {"order": r.order, "robot": helper}))
            else:
                out.append(("hand_over", {"order": r.order}))
        elif inc.kind == "battery" and r is not None and not r.broken and not r.errand:
            # (A robot that hands its load over heads for the charger by itself.)
            out.append(("send_to_charger", {"robot": r.id}))
    elif inc.kind == "block":
        until = inc.until if inc.until is not None else state.tick + BOOST_TICKS
        for oid in inc.orders:
            o = state.orders.get(oid)
            if o is not None and o.state in ("open", "assigned") and o.pickup in state.closed:
                out.append(("hold", {"order": oid, "until": until}))
    elif inc.kind == "deadlock":
        stuck = [state.robots[r] for r in inc.robots if r in state.robots]
        served = [r for r in stuck if r.order is not None and not r.frozen]
        if served:
            best = min(
                served,
                key=lambda r: (state.orders[r.order].due if r.order in state.orders else 0, r.id),
            )
            out.append(("boost", {"robot": best.id}))
    elif inc.kind == "surge":
        for r in state.robots.values():
            o = state.orders.get(r.order or "")
            if o is not None and o.priority == "urgent" and not r.frozen:
                out.append(("boost", {"robot": r.id}))
        if not out:
            # No urgent work: clear the way for the loads due first, so robots come free for
            # the surge sooner (the planner gives the surge's orders to robots as they free up).
            loaded = sorted(
                (state.orders[r.order].due, r.id)
                for r in state.robots.values()
                if r.carrying and r.order in state.orders and not r.frozen
            )
            out.extend(("boost", {"robot": rid}) for _, rid in loaded[:SURGE_BOOSTS])
    return out


Call = tuple[str, dict[str, Any]]
MAX_OPTIONS = 4


def rule_options(inc: Incident, state: DeskState) -> list[list[Call]]:
    """Courses of action for the desk's coordinator to choose from, the rules' own first.

    The first option is :func:`rule_actions`; the others change one thing a dispatcher would
    weigh: another helper for a load (the next nearest able robots) or setting the load down
    for the planner; another stuck robot to boost; and doing nothing for now. At most
    :data:`MAX_OPTIONS`, no two alike.
    """
    first = rule_actions(inc, state)
    options: list[list[Call]] = [first]
    for i, (name, args) in enumerate(first):
        if name == "reassign":
            o = state.orders[args["order"]]
            r = state.robots.get(inc.robots[0]) if inc.robots else None
            cell = r.cell if r is not None else o.pickup
            for other in _able_helpers(state, args["order"], cell)[1:3]:
                options.append(
                    [*first[:i], ("reassign", {**args, "robot": other}), *first[i + 1 :]]
                )
            options.append([*first[:i], ("hand_over", {"order": args["order"]}), *first[i + 1 :]])
        elif name == "boost" and inc.kind == "deadlock":
            for rid in inc.robots:
                if rid != args["robot"] and rid in state.robots and not state.robots[rid].frozen:
                    options.append([("boost", {"robot": rid})])
    options.append([])
    out: list[list[Call]] = []
    for opt in options:
        if opt not in out:
            out.append(opt)
    if len(out) > MAX_OPTIONS:
        # Doing nothing stays on the list: it is the coordinator's way to wait and see.
        kept = out[: MAX_OPTIONS - 1]
        out = kept + ([[]] if [] not in kept else [out[MAX_OPTIONS - 1]])
    return out


def _able_helpers(state: DeskState, oid: str, cell: Cell) -> list[str]:
    """Robots that could take order ``oid``'s load at ``cell``, best first."""
    o = state.orders[oid]
    able = [
        r
        for r in state.robots.values()
        if not r.frozen
        and not r.carrying
        and not r.errand
        and (o.capability is None or o.capability in r.capabilities)
        and state.reachable(r.cell, cell)
    ]
    # Idle robots first, then the nearest robot still on its way to an unloaded order.
    able.sort(
        key=lambda r: (
            r.order is not None,
            abs(r.cell[0] - cell[0]) + abs(r.cell[1] - cell[1]),
            r.id,
        )
    )
    return [r.id for r in able]


def _nearest_idle(state: DeskState, oid: str, cell: Cell) -> str | None:
    ranked = _able_helpers(state, oid, cell)
    return ranked[0] if ranked else None


def _desk_acted(inc: Incident) -> bool:
    """Whether an action the desk asked for was applied to the world."""
    return any(
        a.get("source") == "desk" and not str(a.get("result", "")).startswith("refused")
        for a in inc.actions
    )


def _by_desk(inc: Incident) -> bool:
    """The desk kept the incident and acted on it (a wait after which it cleared is not this)."""
    return inc.handler == "desk" and inc.closed and inc.fallback is None and _desk_acted(inc)


def _desk_waited(inc: Incident) -> bool:
    """The desk kept the incident and did nothing (chose to wait, or its calls were refused)."""
    return inc.handler == "desk" and inc.closed and inc.fallback is None and not _desk_acted(inc)


class DeskWorker(ABC):
    """What the host needs of an off-thread desk (see :class:`fleetmind.dispatch.desk.LLMDesk`)."""

    @abstractmethod
    def submit(self, incident: Incident) -> None:
        """Take an incident (returns at once)."""

    @abstractmethod
    def poll(self) -> list[tuple[str, str, dict[str, Any], Any]]:
        """Messages from the worker: ``("action" | "reserve" | "done", incident, ...)``."""

    @abstractmethod
    def spent(self, incident_id: str) -> tuple[int, int, int]:
        """Calls, tokens and prompt tokens spent on an incident so far."""

    @abstractmethod
    def abandon(self, incident_id: str) -> None:
        """Stop caring for an incident (the rules took it over)."""

    @abstractmethod
    def close(self) -> None:
        """Stop the worker (never waits for a call in flight)."""


@dataclass(frozen=True)
class DeskConfig:
    """Incident handling settings.

    Attributes:
        mode: ``off`` (incidents tracked, nobody acts), ``rules`` or ``llm``.
        deadline_s: wall-clock seconds the desk has per incident (from when it takes it up).
        deadline_ticks: ticks after the incident by which the desk must have decided.
        rules_delay_ticks: ``rules`` mode: the rule handler acts this many ticks after the
            incident instead of at once (the baseline that takes as long to decide as the
            desk: ``fleetmind bench desk``'s ``rules-delayed``).
    """

    mode: DeskMode = "off"
    deadline_s: float = 20.0
    deadline_ticks: int = 100
    rules_delay_ticks: int = 0


class IncidentHost:
    """The control thread's side of incident handling (never waits for the desk).

    Args:
        world: the live world.
        config: mode and deadlines.
        worker: the desk worker (``llm`` mode).
        base_forbidden: cells closed for the whole run (``--forbidden``).
        set_forbidden: called with every closed cell when the set changes (shield, executor).
        emit: the loop's event sink.
        wake: tells the loop the planner has something to decide (robots or orders freed).
    """

    def __init__(
        self,
        world: Warehouse,
        config: DeskConfig,
        *,
        worker: DeskWorker | None = None,
        base_forbidden: Iterable[Cell] = (),
        set_forbidden: Callable[[list[Cell]], None] | None = None,
        emit: Callable[..., None] | None = None,
        wake: Callable[[], None] | None = None,
    ) -> None:
        if config.mode == "llm" and worker is None:
            raise ConfigError("desk llm: no desk worker given")
        self.world = world
        self.config = config
        self.worker = worker
        self.base = frozenset(base_forbidden)
        self._set_forbidden = set_forbidden
        self._emit = emit or (lambda kind, **f: None)
        self._wake = wake or (lambda: None)
        self.fault_zones: dict[str, frozenset[Cell]] = {}
        self.zone_until: dict[str, int] = {}
        # Per block fault: the tick it closed and each order's held ticks then (see lift).
        self.zone_since: dict[str, tuple[int, dict[int, int]]] = {}
        self.desk_zone: frozenset[Cell] = frozenset()
        self.labels = floor_labels(world.grid, self.base)
        self.incidents: list[Incident] = []
        self.boosts: dict[str, tuple[int, float]] = {}
        self.reserved: dict[str, tuple[str, int]] = {}  # robot -> (incident, until tick)
        self.helper_gates: dict[str, str] = {}  # reserved robot -> its unloaded order, gated
        self.view: DeskState | None = None
        self.view_wanted = False
        # Set once a view asked for is served; the desk thread waits on it (no polling).
        self.view_served = threading.Event()
        # Wake-ups of the desk thread, sent when the tick's work is done (see tick_done).
        self._wakes: list[Callable[[], None]] = []
        self.actions_applied = 0
        self.actions_refused = 0
        self._by_id: dict[str, Incident] = {}
        self._stuck_at: dict[str, int] = {}
        self._last_deadlock = -(10**9)

    # ------------------------------------------------------------------ state
    @property
    def fault_zone(self) -> frozenset[Cell]:
        """Cells closed by faults now."""
        return frozenset().union(*self.fault_zones.values()) if self.fault_zones else frozenset()

    def state(self) -> DeskState:
        """A fresh :class:`DeskState` of the live world."""
        until = max(self.zone_until.values()) if self.zone_until else None
        return take_state(
            self.world,
            fault_zone=self.fault_zone,
            desk_zone=self.desk_zone,
            zone_until=until,
            labels=self.labels,
        )

    def _zones_changed(self) -> None:
        closed = self.base | self.fault_zone | self.desk_zone
        self.labels = floor_labels(self.world.grid, closed)
        if self._set_forbidden is not None:
            self._set_forbidden(sorted(closed))

    def reserved_robots(self) -> frozenset[str]:
        """Robots the desk may still send as helpers: the planner skips them.

        The helpers in the coordinator's options are held while it decides, the chosen one
        until the executor acts: each step is a model call (seconds, tens of ticks), and without
        the hold the planner gave the idle helpers other work in between, so that the desk's
        reassign was refused (3 of 6 breakdowns in one run went to the rules that way). A helper
        still on its way to an unloaded order is held too: that order is gated (the robot waits
        at its pickup instead of loading), since once loaded it can take no other load (in a
        bench run of 2026-12-03, two breakdowns went to the rules that way and a battery stayed
        open). A battery incident's low robot is held until the desk has decided.
        """
        t = self.world.tick
        freed = [
            r for r, (iid, until) in self.reserved.items() if until <= t or self._by_id[iid].closed
        ]
        for rid in freed:
            self._unhold(rid)
        if freed:
            self._wake()  # idle again: the planner may use them
        return frozenset(self.reserved)

    def _hold(self, inc: Incident, rid: str) -> None:
        """Keep ``rid`` for ``inc``'s desk (see :meth:`reserved_robots`), if it is free to help."""
        w = self.world
        r = w.robot_index(rid)
        if w.frozen[r] or w.carrying[r]:
            return
        until = w.tick + RESERVE_TICKS
        if w.has_task[r]:
            task = w.task_of(r)
            if task is None or w.index[task.id] in w.gates:
                return  # an errand, or a gate someone else set (a note not read yet)
            w.gate(task.id, until, HELPER_GATE)
            self.helper_gates[rid] = task.id
        self.reserved[rid] = (inc.id, until)

    def _unhold(self, rid: str) -> None:
        """Let ``rid`` go: the planner may use it again, its order may be loaded."""
        self.reserved.pop(rid, None)
        oid = self.helper_gates.pop(rid, None)
        w = self.world
        if oid is not None and oid in w.index:
            gate = w.gates.get(w.index[oid])
            if gate is not None and gate[1] == HELPER_GATE:
                w.ungate(oid)

    def boost_of(self, rid: str) -> float:
        """The priority boost a handler gave a robot (0 when none is in force)."""
        b = self.boosts.get(rid)
        return b[1] if b is not None and b[0] > self.world.tick else 0.0

    # ------------------------------------------------------------------ incidents
    def _open(self, kind: IncidentKind, summary: str, **fields: Any) -> Incident:
        inc = Incident(f"i{len(self.incidents)}", kind, self.world.tick, summary, **fields)
        self.incidents.append(inc)
        self._by_id[inc.id] = inc
        self._emit("incident", incident=inc.id, incident_kind=kind, summary=summary)
        if self.config.mode == "rules" and self.config.rules_delay_ticks == 0:
            self._rules(inc)  # else in tick_start, rules_delay_ticks from now
        elif self.config.mode == "llm":
            assert self.worker is not None
            inc.handler = "desk"
            if kind == "battery":
                # A low robot gets no new work while the desk talks: one that delivered its load
                # meanwhile was given another (the bench's seed 0 at tick 400: two loads in a row,
                # each making the decision moot), and ran flat instead of charging.
                for rid in inc.robots:
                    self.reserved[rid] = (inc.id, self.world.tick + self.config.deadline_ticks)
            self.worker.submit(inc)
        return inc

    def inject(self, fault: Fault, robot: str | None = None) -> None:
        """Apply a ``breakdown``, ``block`` or ``battery`` fault now and open its incident.

        Args:
            fault: the fault.
            robot: the robot it strikes (``busy`` resolved), for breakdown and battery.
        """
        w = self.world
        if fault.kind == "breakdown" and robot is not None:
            r = w.robot_index(robot)
            order = w.task_of(r)
            w.break_robot(robot, fault.length)
            loaded = bool(w.carrying[r])
            text = (
                f"{robot} broke down at {w.cell_of(r)} until tick {fault.end}"
                + (f", carrying {order.id}" if order is not None and loaded else "")
                + (
                    f"; its order {order.id} went back to the open list"
                    if order and not loaded
                    else ""
                )
            )
            self._open(
                "breakdown",
                text,
                robots=(robot,),
                orders=() if order is None else (order.id,),
                until=fault.end,
            )
        elif fault.kind == "block":
            zone = frozenset(c for c in fault.zone if not w.grid.blocked[c])
            self.fault_zones[fault.spec] = zone
            self.zone_until[fault.spec] = fault.end
            self.zone_since[fault.spec] = (w.tick, dict(w.held_ticks))
            self._zones_changed()
            affected = []
            for idx, rec in enumerate(w.records):
                if rec.delivered_tick >= 0 or idx in w.parked:
                    continue
                if rec.picked_tick < 0 and rec.order.pickup in zone:
                    affected.append(rec.order.id)
            inside = tuple(rid for i, rid in enumerate(w.robot_ids) if w.cell_of(i) in zone)
            box = fault.zone_box
            self._open(
                "block",
                f"cells {box[:2] if box else ()}..{box[2:] if box else ()} closed until tick "
                f"{fault.end}; {len(affected)} orders have their pickup inside"
                + (f"; robots inside: {', '.join(inside)}" if inside else ""),
                robots=inside,
                orders=tuple(affected),
                until=fault.end,
            )
        elif fault.kind == "battery" and robot is not None:
            r = w.robot_index(robot)
            state = self.state()
            ch = nearest_charger(state, w.cell_of(r))
            way = 0 if ch is None else abs(ch[0] - w.cell_of(r)[0]) + abs(ch[1] - w.cell_of(r)[1])
            w.set_battery(robot, way + BATTERY_MARGIN)
            order = w.task_of(r)
            self._open(
                "battery",
                f"{robot}'s battery is low: {way + BATTERY_MARGIN:.0f} moves of charge left, "
                f"the nearest charger {ch} is {way} moves away"
                + (f"; it serves {order.id}" if order is not None else "")
                + (" (loaded)" if w.carrying[r] else ""),
                robots=(robot,),
                orders=() if order is None else (order.id,),
            )

    def lift(self, fault: Fault) -> None:
        """A ``block`` fault ends: its cells open again.

        The ticks an open order's pickup sat in the closed zone count as ticks on hold for the
        planner (``Warehouse.held_ticks``, weighed as waiting past the wait limit), whoever
        handled the block or whether anyone held the order at all. Before, only a hold counted:
        when the fallback came as the zone opened, nothing was held, and in a saturated fleet
        the block's order waited for a robot to the end of the run while fresh ones were served
        (bench desk, misbehaving model, seed 2: o57 of the block at tick 350).
        """
        zone = self.fault_zones.pop(fault.spec, None)
        if zone is None:
            return
        self.zone_until.pop(fault.spec, None)
        since, held_then = self.zone_since.pop(fault.spec, (self.world.tick, {}))
        self._credit_blocked(zone, since, held_then)
        self._zones_changed()

    def _credit_blocked(self, zone: frozenset[Cell], since: int, held_then: dict[int, int]) -> None:
        """Add to each unloaded order in ``zone`` the ticks it was shut out and not parked."""
        w = self.world
        t = w.tick
        for idx, rec in enumerate(w.records):
            if rec.picked_tick >= 0 or rec.delivered_tick >= 0 or rec.order.pickup not in zone:
                continue
            blocked = t - max(since, rec.order.tick)
            # Ticks parked in the window are counted already (when it comes back, or were).
            parked = w.held_ticks.get(idx, 0) - held_then.get(idx, 0)
            if idx in w.parked:
                parked += t - max(since, w.parked_at.get(idx, t))
            extra = blocked - parked
            if extra > 0:
                w.held_ticks[idx] = w.held_ticks.get(idx, 0) + extra

    def surge(self, ids: list[str]) -> None:
        """A surge injected ``ids``: open its incident."""
        if ids:
            self._open(
                "surge",
                f"{len(ids)} extra orders arrived at once ({ids[0]}..{ids[-1]}); "
                f"{len(self.world.open)} orders are open for {len(self.world.robot_ids)} robots",
                orders=tuple(ids),
            )

    def deadlock(self, robots: tuple[str, ...]) -> None:
        """The shield reported ``robots`` stuck: an incident when its escape did not help.

        The shield reports a robot after a few ticks without progress and most reports clear
        by themselves; an incident opens for robots reported again within
        :data:`DEADLOCK_REPEAT` ticks, unless an open deadlock incident already has them or one
        opened less than :data:`DEADLOCK_REPEAT` ticks ago. A robot heading for a cell in a
        closed zone is not deadlocked but shut out: the shield keeps it at the zone's edge and
        no boost can let it in; that is the block's incident (its orders are the block's
        affected orders), so it is left out.
        """
        t = self.world.tick
        w = self.world
        zone = self.fault_zone | self.desk_zone
        again = []
        for r in robots:
            last = self._stuck_at.get(r)
            self._stuck_at[r] = t
            if last is not None and t - last <= DEADLOCK_REPEAT:
                if zone and tuple(int(v) for v in w.goal[w.robot_index(r)]) in zone:
                    continue
                again.append(r)
        busy = {
            r
            for inc in self.incidents
            if inc.kind == "deadlock" and inc.recovered_tick is None
            for r in inc.robots
        }
        new = tuple(r for r in again if r not in busy)
        if not new or t - self._last_deadlock < DEADLOCK_REPEAT:
            return
        self._last_deadlock = t
        orders = tuple(o.id for r in new if (o := w.task_of(w.robot_index(r))) is not None)
        self._open(
            "deadlock",
            f"the deadlock monitor reports {', '.join(new)} stuck"
            + (f" (orders {', '.join(orders)})" if orders else ""),
            robots=new,
            orders=orders,
        )

    # ------------------------------------------------------------------ acting
    def _rules(self, inc: Incident, reason: str | None = None) -> None:
        if reason is not None:
            inc.fallback = reason
            self._emit("desk_fallback", incident=inc.id, reason=reason)
        inc.handler = "rules"
        state = self.state()
        for name, args in rule_actions(inc, state):
            self.apply(inc, name, args, source="rules")
            state = self.state()
        inc.closed = True

    def apply(self, inc: Incident, name: str, args: dict[str, Any], *, source: str) -> str:
        """Check an action again against the live world and apply it; returns the result line."""
        w = self.world
        entry: dict[str, Any] = {"tool": name, "args": args, "source": source, "tick": w.tick}
        try:
            check(name, args, self.state())
            result = self._do(name, args)
        except (Refused, ConfigError) as exc:
            self.actions_refused += 1
            entry["result"] = f"refused: {exc}"
        else:
            self.actions_applied += 1
            entry["result"] = result
        inc.actions.append(entry)
        self._emit("desk_action", incident=inc.id, **entry)
        return str(entry["result"])

    def _do(self, name: str, args: dict[str, Any]) -> str:
        w = self.world
        t = w.tick
        if name == "reassign":
            oid, rid = str(args["order"]), str(args["robot"])
            self._unhold(rid)
            rec = w.order(oid)
            note = ""
            if rec.robot >= 0 and rec.picked_tick >= 0:
                loader = rec.robot
                cell = w.drop_load(loader)
                note = f"; the load was set down at {cell}" + self._to_charger(loader)
            elif rec.robot >= 0:
                w.unassign(rec.robot)
            w.unpark(oid)
            # A robot sent for an unloaded order gives it back: a load already picked comes first.
            back = w.unassign(rid)
            if back is not None:
                note += f"; {back} went back to the open list"
            w.assign(rid, oid)
            self._wake()
            return f"applied at tick {t}: {rid} now serves {oid}{note}"
        if name == "hand_over":
            oid = str(args["order"])
            loader = w.order(oid).robot
            cell = w.drop_load(loader)
            self._wake()
            return f"applied at tick {t}: {oid} set down at {cell} for the planner" + (
                self._to_charger(loader)
            )
        if name == "hold":
            oid, until = str(args["order"]), int(args["until"])
            w.park(oid, until)
            self._wake()
            return f"applied at tick {t}: {oid} on hold until tick {until}"
        if name == "release":
            w.unpark(str(args["order"]))
            self._wake()
            return f"applied at tick {t}: {args['order']} is open again"
        if name == "send_to_charger":
            rid = str(args["robot"])
            ch = nearest_charger(self.state(), w.cell_of(w.robot_index(rid)))
            assert ch is not None  # checked
            back = w.send_to(rid, ch)
            if back is not None:
                self._wake()
            return f"applied at tick {t}: {rid} heads for the charger at {ch}" + (
                f"; {back} went back to the open list" if back else ""
            )
        if name in ("block_zone", "unblock_zone"):
            cells = set(_cells(args["cells"]))
            if name == "block_zone":
                self.desk_zone = self.desk_zone | cells
            else:
                self.desk_zone = self.desk_zone - cells
            self._zones_changed()
            done = "closed" if name == "block_zone" else "opened"
            return f"applied at tick {t}: {len(cells)} cells {done}"
        rid = str(args["robot"])
        self.boosts[rid] = (t + BOOST_TICKS, BOOST)
        return f"applied at tick {t}: {rid} has right of way until tick {t + BOOST_TICKS}"

    def _to_charger(self, r: int) -> str:
        """A low robot that set its load down heads for a charger at once (no planner race)."""
        w = self.world
        if w.broken[r] or not np.isfinite(w.battery[r]):
            return ""
        ch = nearest_charger(self.state(), w.cell_of(r))
        if ch is None:
            return ""
        w.send_to(r, ch)
        return f"; {w.robot_ids[r]} heads for the charger at {ch}"

    # ------------------------------------------------------------------ ticking
    def tick_start(self) -> None:
        """At the tick boundary: apply what the desk queued, enforce deadlines, serve views."""
        if self.view_wanted:
            self.view = self.state()
            self.view_wanted = False
            self._wakes.append(self.view_served.set)
        if self.worker is None:
            delay = self.config.rules_delay_ticks
            if self.config.mode == "rules" and delay > 0:
                for due in self.incidents:
                    if not due.closed and self.world.tick - due.tick >= delay:
                        self._rules(due)
            return
        for kind, iid, payload, reply in self.worker.poll():
            inc = self._by_id.get(iid)
            if inc is None:
                continue
            if kind == "action":
                if inc.closed:
                    result = "refused: the incident is closed (the rules took it over)"
                else:
                    result = self.apply(inc, payload["tool"], payload["args"], source="desk")
                self._wakes.append(functools.partial(reply, result))
            elif kind == "reserve":
                if inc.closed:
                    continue
                # The incident's robots are now exactly these (a decision frees the others).
                for rid in [r for r, (i, _) in self.reserved.items() if i == inc.id]:
                    if not (inc.kind == "battery" and rid in inc.robots):
                        self._unhold(rid)
                self._wake()
                for rid in payload.get("robots", ()):
                    if rid in self.world.robot_ids and rid not in self.reserved:
                        self._hold(inc, rid)
            elif kind == "done":
                # The cost and the talk count even when the rules already took over.
                inc.calls, inc.tokens = payload.get("calls", 0), payload.get("tokens", 0)
                inc.tokens_prompt = payload.get("tokens_prompt", 0)
                inc.conversation = list(payload.get("conversation", []))
                inc.decision = payload.get("decision")
                if inc.closed:
                    continue
                if payload.get("fallback"):
                    self._rules(inc, str(payload["fallback"]))
                else:
                    inc.closed = True
        t = self.world.tick
        for inc in self.incidents:
            if inc.handler != "desk" or inc.closed:
                continue
            late_s = (
                inc.started_s is not None
                and time.perf_counter() - inc.started_s > self.config.deadline_s + 1.0
            )
            if t - inc.tick >= self.config.deadline_ticks or late_s:
                self.worker.abandon(inc.id)
                why = (
                    "deadline_ticks" if t - inc.tick >= self.config.deadline_ticks else "deadline_s"
                )
                self._rules(inc, why)

    def tick_done(self) -> None:
        """The tick's work is done: wake the desk thread for what this tick served it.

        Waking it at once (a view, an action's result) let it take the interpreter lock in the
        middle of the tick; the loop then waited for it, on a core shared with the model
        server, for milliseconds at a time (measured: up to 16 lock waits in one tick).
        """
        wakes, self._wakes = self._wakes, []
        for wake in wakes:
            wake()

    def tick_end(self, res: StepResult) -> None:
        """After the sim stepped: recovery of open incidents."""
        w = self.world
        t = w.tick
        moved = res.moved
        for inc in self.incidents:
            if inc.recovered_tick is not None:
                continue
            for oid in inc.orders:
                if oid in inc.moved or oid not in w.index:
                    continue
                rec = w.order(oid)
                if rec.delivered_tick >= 0:
                    inc.moved.add(oid)
                    continue
                r = rec.robot
                if r >= 0 and int(w.order_of[r]) == w.index[oid] and moved[r] and not w.frozen[r]:
                    inc.moved.add(oid)
            done = len(inc.moved) == len(set(inc.orders))
            if inc.kind == "battery" and inc.robots:
                r = w.robot_index(inc.robots[0])
                done = done and bool(w.errand[r] or w.battery[r] > BATTERY_MARGIN * 4)
            if done:
                inc.recovered_tick = t
                self._emit("incident_recovered", incident=inc.id, ticks=t - inc.tick)

    def finish(self) -> None:
        """The run ended: stop the worker (never waits); count what the desk spent so far."""
        if self.worker is not None:
            for inc in self.incidents:
                if inc.handler == "desk" and not inc.closed:
                    inc.fallback = "run ended"
                if inc.handler in ("desk", "rules") and inc.calls == 0:
                    inc.calls, inc.tokens, inc.tokens_prompt = self.worker.spent(inc.id)
            self.worker.close()
            # A desk thread waiting for a view stops waiting: no tick will serve one now.
            self.view_served.set()

    def lost_orders(self) -> int:
        """Orders in no state at all (neither open, parked, assigned nor delivered): must be 0."""
        w = self.world
        open_set = set(w.open)
        lost = 0
        for idx, rec in enumerate(w.records):
            if rec.delivered_tick >= 0 or idx in open_set or idx in w.parked:
                continue
            if rec.robot >= 0 and int(w.order_of[rec.robot]) == idx:
                continue
            lost += 1
        return lost

    def metrics(self) -> dict[str, Any]:
        """``incidents``, ``incident_recovery_ticks``, ``incident_log`` and desk counters."""
        incs = self.incidents
        resolved = [i for i in incs if i.recovered_tick is not None]
        ticks = [float(i.recovered_tick - i.tick) for i in resolved if i.recovered_tick is not None]
        by_kind: dict[str, dict[str, int]] = {}
        for i in incs:
            k = by_kind.setdefault(i.kind, {"total": 0, "resolved": 0})
            k["total"] += 1
            k["resolved"] += int(i.recovered_tick is not None)
        return {
            "desk": self.config.mode,
            "incidents": {
                "total": len(incs),
                # Recovered after an action of the desk was applied.
                "resolved_by_desk": sum(1 for i in resolved if _by_desk(i)),
                # Recovered after the desk chose to do nothing: it cleared by itself.
                "resolved_after_desk_wait": sum(1 for i in resolved if _desk_waited(i)),
                "resolved_by_rules": sum(1 for i in resolved if i.handler == "rules"),
                # Recovered with nobody deciding: desk off, or the run ended mid-talk.
                "resolved_unhandled": sum(
                    1
                    for i in resolved
                    if i.handler != "rules" and not _by_desk(i) and not _desk_waited(i)
                ),
                "unresolved": len(incs) - len(resolved),
                "fallbacks": sum(1 for i in incs if i.fallback is not None),
                "by_kind": by_kind,
            },
            "incident_recovery_ticks": {
                "p50": float(np.percentile(ticks, 50)) if ticks else 0.0,
                "max": max(ticks) if ticks else 0.0,
            },
            "desk_actions": {"applied": self.actions_applied, "refused": self.actions_refused},
            "desk_decisions": desk_decisions(incs),
            "desk_calls": sum(i.calls for i in incs),
            "desk_tokens": sum(i.tokens for i in incs),
            "desk_tokens_prompt": sum(i.tokens_prompt for i in incs),
            "desk_tokens_completion": sum(i.tokens - i.tokens_prompt for i in incs),
            "orders_lost": self.lost_orders(),
            "incident_log": [i.record() for i in incs],
        }


__all__ = [
    "ACTIONS",
    "INCIDENT_KINDS",
    "DeskConfig",
    "DeskState",
    "DeskWorker",
    "Incident",
    "IncidentHost",
    "Refused",
    "check",
    "rule_actions",
]
