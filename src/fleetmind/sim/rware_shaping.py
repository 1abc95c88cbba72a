"""Compiled kernels of the RWARE twin's dense guide (``rl.neural.adapters.RwareShaping``).

The guide reads :class:`fleetmind.sim.rware_twin.RwareWorlds`' arrays around every step: per
world and robot the distance to its aim (seek: the nearest requested shelf on the floor,
Manhattan; goal: the nearest goal along the highways; drop: the nearest empty shelf cell along
the highways), the potential difference, the pick-up and put-down bonuses and the claims.
Each world first lists its few candidate aims (the requested shelves on the floor, the empty
shelf cells: about as many as robots carry shelves), then each robot scans the list of its
kind, where a numpy broadcast would build ``(B, N, HW)`` arrays for all three kinds.

The values are those of the numpy formulation bit for bit (``tests/rl/test_rware_shaping.py``
keeps it as the reference): integer Manhattan distances are divided by the scale after the
minimum, which rounds to the same float as dividing before it.

Compile cost: the first call in a process compiles (a few seconds) unless numba's on-disk
cache (``cache=True``, ``__pycache__`` beside this file) already holds the machine code.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["DROP", "GOAL", "SEEK", "Scratch", "Tables", "View", "after", "before"]

SEEK, GOAL, DROP = 0, 1, 2
"""Aim kinds: empty-handed, carrying a requested shelf, carrying one that is not."""

View = tuple[
    NDArray[np.int64],  # pos (B, N)
    NDArray[np.int64],  # carrying (B, N)
    NDArray[np.int64],  # shelf_pos (B, S)
    NDArray[np.bool_],  # requested (B, S + 1)
]
"""What the guide reads of ``RwareWorlds``: ``(pos, carrying, shelf_pos, requested)``."""

Tables = tuple[
    NDArray[np.float64],  # carry (HW, HW): scaled steps of a loaded robot
    NDArray[np.float64],  # goal (HW,): scaled steps of a loaded robot to its nearest goal
    NDArray[np.int64],  # shelf_cells (C,): cells a shelf may stand on
    NDArray[np.int64],  # row_col (2, HW): each cell's row and column
]
"""The guide's read-only tables, built once per layout."""

Scratch = tuple[
    NDArray[np.bool_],  # occupied (HW,): all False between calls
    NDArray[np.bool_],  # floor (S,)
    NDArray[np.int64],  # seek (S,): the requested shelves' cells on the floor
    NDArray[np.int64],  # empty (C,): the empty shelf cells
]
"""Working arrays of the kernels, sized by the layout."""


@numba.njit(cache=True)
def _aims(
    kind: NDArray[np.int64],
    view: View,
    tables: Tables,
    scratch: Scratch,
    scale: float,
    skip: NDArray[np.bool_],
    out: NDArray[np.float64],
) -> None:
    """``out``: each robot's scaled distance to its aim of ``kind``, in the worlds not skipped.

    No aim (every requested shelf carried, no empty shelf cell) gives 0: a flat potential.
    One call for all worlds: a call per world would pass (and reference-count) a dozen
    arrays each time.
    """
    pos, carrying, shelf_pos, requested = view
    carry, goal, shelf_cells, row_col = tables
    occupied, floor, seek, empty = scratch
    b, n, s = pos.shape[0], pos.shape[1], shelf_pos.shape[1]
    for k in range(b):
        if skip[k]:
            continue
        for j in range(s):
            floor[j] = True
        need_seek = need_drop = False
        for i in range(n):
            if carrying[k, i] >= 0:
                floor[carrying[k, i]] = False
            need_seek = need_seek or kind[k, i] == SEEK
            need_drop = need_drop or kind[k, i] == DROP
        n_seek = n_empty = 0
        if need_seek:
            for j in range(s):
                if requested[k, j] and floor[j]:
                    seek[n_seek] = shelf_pos[k, j]
                    n_seek += 1
        if need_drop:
            # A carried shelf stands at its robot's cell but is not on the floor.
            for j in range(s):
                if floor[j]:
                    occupied[shelf_pos[k, j]] = True
            for c in shelf_cells:
                if not occupied[c]:
                    empty[n_empty] = c
                    n_empty += 1
            for j in range(s):
                occupied[shelf_pos[k, j]] = False
        for i in range(n):
            p = pos[k, i]
            if kind[k, i] == GOAL:
                out[k, i] = goal[p]
            elif kind[k, i] == DROP:
                best = np.inf
                for e in range(n_empty):
                    best = min(best, carry[p, empty[e]])
                out[k, i] = best if n_empty > 0 else 0.0
            else:
                # Empty-handed robots drive under shelves: Manhattan distance.
                row, col = row_col[0, p], row_col[1, p]
                near = -1
                for e in range(n_seek):
                    q = seek[e]
                    d = abs(row_col[0, q] - row) + abs(row_col[1, q] - col)
                    if near < 0 or d < near:
                        near = d
                out[k, i] = near / scale if near >= 0 else 0.0


@numba.njit(cache=True)
def before(
    view: View,
    tables: Tables,
    scratch: Scratch,
    scale: float,
    kind: NDArray[np.int64],
    phi: NDArray[np.float64],
    carrying: NDArray[np.int64],
) -> None:
    """What a step's guide needs of the state before it, written into the last three arrays.

    Args:
        view: the worlds (:data:`View`), read only.
        tables: :data:`Tables`.
        scratch: :data:`Scratch`.
        scale: what distances are divided by (``H + W``).
        kind: ``(B, N)`` written: each robot's aim kind (:data:`SEEK`, :data:`GOAL`,
            :data:`DROP`).
        phi: ``(B, N)`` written: the potential, minus the scaled distance to that aim.
        carrying: ``(B, N)`` written: a copy of ``view``'s.
    """
    held, requested = view[1], view[3]
    b, n = kind.shape
    for k in range(b):
        for i in range(n):
            c = held[k, i]
            kind[k, i] = SEEK if c < 0 else (GOAL if requested[k, c] else DROP)
            carrying[k, i] = c
    _aims(kind, view, tables, scratch, scale, np.zeros(b, dtype=np.bool_), phi)
    for k in range(b):
        for i in range(n):
            phi[k, i] = -phi[k, i]


@numba.njit(cache=True)
def after(
    view: View,
    tables: Tables,
    scratch: Scratch,
    scale: float,
    start: tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]],
    events: tuple[NDArray[np.bool_], NDArray[np.bool_]],
    memory: tuple[NDArray[np.bool_], NDArray[np.bool_]],
    aim: NDArray[np.float64],
    out: NDArray[np.float32],
) -> None:
    """The guide of the step that led to ``view``, per robot, into ``out`` (unweighted).

    Per robot: the potential difference toward the aim of the step's start (none on a step
    that picks up or puts down), +0.5 for the first pick-up of a requested shelf in its
    request, +0.5 for putting down a shelf it delivered. Worlds that ended (they have
    restarted since) get 0 and forget both.

    Args:
        view: the worlds after the step (:data:`View`), read only.
        tables: :data:`Tables`.
        scratch: :data:`Scratch`.
        scale: what distances are divided by (``H + W``).
        start: ``(kind, phi, carrying)`` as :func:`before` wrote them.
        events: ``(delivered (B, N), done (B,))``: the robots whose shelf was delivered in
            the step, the worlds whose episode ended.
        memory: ``(claimed (B, S + 1), carries_delivered (B, N))``, updated: the shelves
            picked up in their current request, the robots carrying a shelf they delivered.
        aim: ``(B, N)`` float64 scratch.
        out: ``(B, N)`` written.
    """
    kind, phi, held_before = start
    delivered, done = events
    claimed, carries_delivered = memory
    carrying, requested = view[1], view[3]
    b, n = kind.shape
    s = claimed.shape[1] - 1
    _aims(kind, view, tables, scratch, scale, done, aim)
    for k in range(b):
        if done[k]:
            for i in range(n):
                out[k, i] = 0.0
                carries_delivered[k, i] = False
            for j in range(s + 1):
                claimed[k, j] = False
            continue
        for i in range(n):
            held, was = carrying[k, i], held_before[k, i]
            # A pick-up or put-down changes the aims (a shelf leaves or joins the floor): no
            # potential difference on that step, only the event bonuses.
            bonus = -aim[k, i] - phi[k, i] if held == was else 0.0
            if was < 0 and held >= 0 and requested[k, held] and not claimed[k, held]:
                claimed[k, held] = True
                bonus += 0.5
            carries_delivered[k, i] = carries_delivered[k, i] or delivered[k, i]
            if was >= 0 and held < 0:
                if carries_delivered[k, i]:
                    bonus += 0.5
                carries_delivered[k, i] = False
            out[k, i] = bonus
        # A delivered shelf leaves the queue: its claim ends.
        for j in range(s + 1):
            claimed[k, j] = claimed[k, j] and requested[k, j]
