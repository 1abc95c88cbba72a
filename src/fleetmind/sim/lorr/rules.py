"""LoRR rule constants and the one-step transition (see :mod:`fleetmind.sim.lorr`)."""

from __future__ import annotations

from typing import Any, Final, Literal

import numpy as np
from numpy.typing import NDArray

Edition = Literal["2023", "2024", "2026"]

FW: Final = 0
CR: Final = 1
CCR: Final = 2
WAIT: Final = 3
TIMEOUT: Final = 4
"""Recorded (never planned) for the steps the robots waited because the planner ran over."""
ACTION_CHARS: Final = "FRCWT"
"""The start kit's letters for FW, CR, CCR, W and a timed-out step, indexed by action."""
ORIENT_CHARS: Final = "ESWN"
# (row, col) step of a forward move, indexed by orientation (0 E, 1 S, 2 W, 3 N).
HEADING: Final[NDArray[np.int64]] = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]], dtype=np.int64)

MAX_FILE_BYTES: Final = 64 * 1024 * 1024


def next_state(
    loc: NDArray[np.int64], ori: NDArray[np.int64], actions: NDArray[np.int64], width: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Locations, orientations and ``(row, col)`` after ``actions``, off-map cells unclamped.

    Returns:
        ``(new_loc, new_ori, row, col)``; ``new_loc`` is only meaningful where ``row, col`` are
        on the map.
    """
    row, col = np.divmod(loc, width)
    fw = actions == FW
    row = row + fw * HEADING[ori, 0]
    col = col + fw * HEADING[ori, 1]
    turn = (actions == CR).astype(np.int64) - (actions == CCR)
    return row * width + col, (ori + turn) % 4, row, col


def conflicts(
    loc: NDArray[np.int64],
    new_loc: NDArray[np.int64],
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Vertex and swap conflicts of one joint move, as pairs of robots (lower id first)."""
    order = np.argsort(new_loc, kind="stable")
    same = np.flatnonzero(new_loc[order][1:] == new_loc[order][:-1])
    vertex = [(int(order[i]), int(order[i + 1])) for i in same]
    moved = np.flatnonzero(new_loc != loc)
    swaps: list[tuple[int, int]] = []
    if moved.size:
        where = {int(loc[i]): int(i) for i in moved}
        for i in moved:
            j = where.get(int(new_loc[i]))
            if j is not None and j > i and new_loc[j] == loc[i]:
                swaps.append((int(i), j))
    return vertex, swaps


def first_fault(
    here: NDArray[np.int64], there: NDArray[np.int64], bad: NDArray[np.bool_], timestep: int
) -> list[Any] | None:
    """The start kit's scan of one joint move, robots in id order: its first fault, or None.

    Args:
        here: ``(n,)`` flat cells before the move.
        there: ``(n,)`` flat cells after it (unread where ``bad``).
        bad: ``(n,)`` robots that leave the map or enter a wall.
        timestep: the step stamped on the error.

    Returns:
        ``[robot, earlier_robot, timestep, text]`` with the kit's texts: ``unallowed move``
        (``earlier_robot`` -1), ``vertex conflict`` (an earlier robot enters the same cell),
        ``edge conflict`` (an earlier robot crosses the same edge the other way).
    """
    cells: dict[int, int] = {}
    edges: dict[tuple[int, int], int] = {}
    for i in range(len(here)):
        if bad[i]:
            return [i, -1, timestep, "unallowed move"]
        a, b = int(here[i]), int(there[i])
        if b in cells:
            return [i, cells[b], timestep, "vertex conflict"]
        if (a, b) in edges:
            return [i, edges[(a, b)], timestep, "edge conflict"]
        cells[b] = i
        edges[(b, a)] = i
    return None
