"""The rule-based incident handler and the courses of action offered to the desk."""

from __future__ import annotations

from typing import Any

from fleetmind.dispatch.incidents.state import (
    BOOST_TICKS,
    SURGE_BOOSTS,
    DeskState,
    Incident,
)
from fleetmind.sim.grid import Cell


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
