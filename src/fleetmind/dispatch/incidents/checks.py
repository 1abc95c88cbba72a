"""The check of one desk action against the live state, with a one-line reason when refused."""

from __future__ import annotations

from typing import Any

import numpy as np

from fleetmind.dispatch.faults import BATTERY_MARGIN
from fleetmind.dispatch.incidents.state import (
    ACTIONS,
    MAX_HOLD,
    MAX_ZONE,
    DeskState,
    Refused,
    RobotState,
    floor_labels,
    nearest_charger,
    zone_cells,
)
from fleetmind.errors import range_message


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
        cells = zone_cells(args["cells"])
        if not cells:
            raise Refused("cells: give at least one [row, col]")
        if len(cells) > MAX_ZONE:
            raise Refused(range_message("cells at once", len(cells), high=MAX_ZONE))
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
