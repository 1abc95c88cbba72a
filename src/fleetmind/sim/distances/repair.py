"""Repair of held distance maps in place when walls change (:meth:`DistanceOracle.rerouted`)."""

from __future__ import annotations

import heapq

import numba
import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.distances.search import (
    next_cell,
)

Change = tuple[
    NDArray[np.bool_],  # blocked: (H * W,) the new walls
    int,  # width: the map's width
    NDArray[np.uint16],  # step: (H * W, 5) the new move weights when stepped, else unread
    bool,  # stepped: whether moves are weighted
    NDArray[np.int64],  # check: cells whose own moves changed, new walls' and reopened
    #   cells' neighbours
    NDArray[np.int64],  # reopened: cells that were walls and are free now
    NDArray[np.int64],  # walled: cells that are walls now and were free
    int,  # most: the most cells that may lose their routes before a repair gives up
]
"""How the walls changed, as every held map's repair reads it."""

_CHANGE_TYPE = numba.types.Tuple(  # type: ignore[no-untyped-call]
    (
        numba.boolean[::1],
        numba.int64,
        numba.uint16[:, ::1],
        numba.boolean,
        numba.int64[::1],
        numba.int64[::1],
        numba.int64[::1],
        numba.int64,
    )
)


@numba.njit(inline="always", nogil=True)
def _supported(
    row: NDArray[np.integer],
    none: int,
    u: int,
    change: Change,
    lost: NDArray[np.uint8],
) -> bool:
    """Whether a free neighbour still gives ``u`` its value (weight plus its own)."""
    blocked, width, step, stepped = change[0], change[1], change[2], change[3]
    n = blocked.shape[0]
    du = int(row[u])
    for a in range(1, 5):
        v = next_cell(u, a, width, n)
        if v < 0 or blocked[v] or lost[v] or row[v] == none:
            continue
        if int(row[v]) + (int(step[u, a]) if stepped else 1) == du:
            return True
    return False


@numba.njit(inline="always", nogil=True)
def _offer(
    row: NDArray[np.integer],
    none: int,
    u: int,
    change: Change,
) -> int:
    """The least value ``u``'s free neighbours give it (weight plus their own); else int64 max."""
    blocked, width, step, stepped = change[0], change[1], change[2], change[3]
    n = blocked.shape[0]
    best = np.iinfo(np.int64).max
    for a in range(1, 5):
        v = next_cell(u, a, width, n)
        if v < 0 or blocked[v] or row[v] == none:
            continue
        c = int(row[v]) + (int(step[u, a]) if stepped else 1)
        if c < best and c < none:
            best = c
    return best


# Compiled for the types repair_held calls it with (its signatures name both slab types).
@numba.njit(cache=True, nogil=True)
def _repair(
    row: NDArray[np.integer],
    none: int,
    target: int,
    change: Change,
    lost: NDArray[np.uint8],
    members: NDArray[np.int64],
) -> bool:
    """Bring the map ``row`` of ``target`` onto changed walls, touching only what changed.

    The dynamic shortest-path repair of Ramalingam and Reps, on the grid:

    1. *Routes lost.* A cell whose value no free neighbour still supports (a neighbour whose
       value plus the move's weight gives it) has lost every cheapest route; so has, in turn,
       each cell that such a cell supported and that has no other support. Those cells are
       cleared. Every other cell keeps a route that avoids them and the new walls: its value
       is still the cost of a real route.
    2. *Routes found.* From every cell that one of its neighbours can now give a lower value
       (the cleared cells, reopened cells, cells beside them), a Dijkstra search lowers values
       outward, as far as they fall.

    Every value then is the cost of a real route and no neighbour offers less, which with
    move weights >= 1 is the cheapest route cost: what a new search writes. Returns False
    (the row then is to be searched again) when the target itself is or was closed, or more
    than ``most`` cells lose their routes (a new search is then as quick).

    Args:
        row: the map (values, ``none`` for no path), changed in place.
        none: "no path" in ``row``.
        target: the map's flat target cell.
        change: the walls' change (:data:`Change`).
        lost: ``(H * W,)`` zeros, scratch (left zero).
        members: ``(H * W,)`` scratch.
    """
    blocked, width, step, stepped, check, reopened, walled, most = change
    n = blocked.shape[0]
    if blocked[target]:
        return False
    for k in range(reopened.shape[0]):
        if reopened[k] == target:
            return False
    for k in range(walled.shape[0]):
        row[walled[k]] = none
    inf = np.iinfo(np.int64).max
    # 1. Routes lost. ``members[:m]`` are the cells lost so far and the queue of cells whose
    # neighbours are still to be looked at (``members[k:m]``); the cells lost do not depend on
    # the order they are visited in (a cell is lost once every cell that supported it is).
    m = 0
    for j in range(check.shape[0]):
        u = check[j]
        if blocked[u] or u == target or lost[u] or row[u] == none:
            continue
        if not _supported(row, none, u, change, lost):
            lost[u] = 1
            members[m] = u
            m += 1
    k = 0
    while k < m <= most:
        v = members[k]
        k += 1
        dv = int(row[v])
        for a in range(1, 5):
            u = next_cell(v, a, width, n)
            if u < 0 or blocked[u] or u == target or lost[u] or row[u] == none:
                continue
            # ``u`` steps into ``v`` with the opposite action; was ``v`` what gave ``u`` its value?
            back = (0, 2, 1, 4, 3)[a]
            w = int(step[u, back]) if stepped else 1
            if int(row[u]) != dv + w:
                continue
            if not _supported(row, none, u, change, lost):
                lost[u] = 1
                members[m] = u
                m += 1
    if m > most:
        for k in range(m):
            lost[members[k]] = 0
        return False
    for k in range(m):
        row[members[k]] = none
        lost[members[k]] = 0
    # 2. Routes found: seeds are the cells a neighbour can now give a lower value.
    heap = [(np.int64(0), np.int64(0))]
    heap.pop()
    for group in range(2):  # ``check`` holds the reopened cells and their neighbours
        cells = check if group == 0 else members[:m]
        for j in range(cells.shape[0]):
            u = cells[j]
            if blocked[u] or u == target:
                continue
            c = _offer(row, none, u, change)
            cur = inf if row[u] == none else int(row[u])
            if c < cur:
                row[u] = c
                heapq.heappush(heap, (np.int64(c), np.int64(u)))
    while len(heap) > 0:
        entry = heapq.heappop(heap)
        d, v = int(entry[0]), int(entry[1])
        if row[v] == none or int(row[v]) != d:
            continue  # a stale entry: ``v`` was lowered further since
        for a in range(1, 5):
            u = next_cell(v, a, width, n)
            if u < 0 or blocked[u] or u == target:
                continue
            back = (0, 2, 1, 4, 3)[a]
            c = d + (int(step[u, back]) if stepped else 1)
            if c >= none:
                continue  # past what the row can hold; a cheaper route reaches it, if any
            if row[u] == none or c < int(row[u]):
                row[u] = c
                heapq.heappush(heap, (np.int64(c), np.int64(u)))
    return True


_REPAIR_HELD_SIG = [
    numba.boolean[::1](slab[:, ::1], numba.int64[::1], numba.int64, numba.int64, _CHANGE_TYPE)
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(_REPAIR_HELD_SIG, cache=True, nogil=True)
def repair_held(
    slab: NDArray[np.integer],
    target_of: NDArray[np.int64],
    filled: int,
    none: int,
    change: Change,
) -> NDArray[np.bool_]:
    """:func:`_repair` on every held row ``slab[:filled]``: whether each row was repaired."""
    n = change[0].shape[0]
    lost = np.zeros(n, dtype=np.uint8)
    members = np.empty(n, dtype=np.int64)
    ok = np.zeros(filled, dtype=np.bool_)
    for slot in range(filled):
        target = target_of[slot]
        if target < 0:
            continue
        ok[slot] = _repair(slab[slot], none, target, change, lost, members)
    return ok
