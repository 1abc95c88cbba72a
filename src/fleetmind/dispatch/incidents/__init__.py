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

One job a module: :mod:`.state` (what the desk sees: robots, orders, the floor's reach, and the
incident records), :mod:`.checks` (:func:`check`), :mod:`.rules` (the rule handler and the
desk's options), :mod:`.host` (:class:`IncidentHost`, the desk worker's contract, the settings).
Callers import from here.
"""

from __future__ import annotations

from fleetmind.dispatch.incidents.checks import (
    check,
)
from fleetmind.dispatch.incidents.host import (
    DeskConfig,
    DeskWorker,
    IncidentHost,
)
from fleetmind.dispatch.incidents.rules import (
    MAX_OPTIONS,
    Call,
    rule_actions,
    rule_options,
)
from fleetmind.dispatch.incidents.state import (
    ACTIONS,
    BOOST,
    BOOST_TICKS,
    DEADLOCK_REPEAT,
    HELPER_GATE,
    INCIDENT_KINDS,
    MAX_HOLD,
    MAX_ZONE,
    RESERVE_TICKS,
    SURGE_BOOSTS,
    DeskMode,
    DeskState,
    Incident,
    IncidentKind,
    OrderState,
    Refused,
    RobotState,
    desk_decisions,
    floor_labels,
    nearest_charger,
    reachable,
    take_state,
)

__all__ = [
    "ACTIONS",
    "BOOST",
    "BOOST_TICKS",
    "DEADLOCK_REPEAT",
    "HELPER_GATE",
    "INCIDENT_KINDS",
    "MAX_HOLD",
    "MAX_OPTIONS",
    "MAX_ZONE",
    "RESERVE_TICKS",
    "SURGE_BOOSTS",
    "Call",
    "DeskConfig",
    "DeskMode",
    "DeskState",
    "DeskWorker",
    "Incident",
    "IncidentHost",
    "IncidentKind",
    "OrderState",
    "Refused",
    "RobotState",
    "check",
    "desk_decisions",
    "floor_labels",
    "nearest_charger",
    "reachable",
    "rule_actions",
    "rule_options",
    "take_state",
]
