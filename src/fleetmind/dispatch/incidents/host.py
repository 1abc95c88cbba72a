"""The control thread's side of incidents: faults injected, incidents opened and handled."""

from __future__ import annotations

import functools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetmind.dispatch.faults import BATTERY_MARGIN, Fault
from fleetmind.dispatch.incidents.checks import check
from fleetmind.dispatch.incidents.rules import rule_actions
from fleetmind.dispatch.incidents.state import (
    BOOST,
    BOOST_TICKS,
    DEADLOCK_REPEAT,
    HELPER_GATE,
    RESERVE_TICKS,
    DeskMode,
    DeskState,
    Incident,
    IncidentKind,
    Refused,
    desk_decisions,
    floor_labels,
    nearest_charger,
    take_state,
    zone_cells,
)
from fleetmind.errors import ConfigError
from fleetmind.sim.grid import Cell
from fleetmind.sim.warehouse import StepResult, Warehouse

log = logging.getLogger(__name__)


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
            cells = set(zone_cells(args["cells"]))
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
