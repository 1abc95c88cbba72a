"""An independent checker of one joint move: the referee the shield is tested against.

This module deliberately shares no code with :mod:`fleetmind.safety.shield`. It is written to be
obviously right rather than fast: plain dictionaries over robot indices. The evaluation tier uses
it to count executed collisions; the tests use it to check every joint move the shield returns.

Rules checked (the simulator's collision semantics):

- ``invalid_action``: an action id outside ``0..4``;
- ``out_of_bounds``: a move off the grid;
- ``wall``: a move onto a blocked cell;
- ``forbidden``: a move onto a forbidden cell (only when ``forbidden`` is given; a robot already
  on a forbidden cell may wait there or leave);
- ``vertex``: two or more robots end the tick on one cell;
- ``swap``: two robots exchange cells.

A robot whose move is illegal (the first four rules) is taken to stay where it is for the vertex
and swap checks, as the simulator would leave it. Following a robot that moves away, and rotations
of three or more robots, are not conflicts.

:func:`conflicts` is the reference: plain Python, one robot at a time. :func:`count_conflicts`
gives the same count with numpy over the whole fleet (the control loop counts executed and
commanded conflicts every tick with it); the tests hold the two equal on random joint moves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fleetmind.errors import FleetmindError
from fleetmind.sim.grid import Cell, GridMap

ConflictKind = Literal["invalid_action", "out_of_bounds", "wall", "forbidden", "vertex", "swap"]

# (row, col) offset of each action id; written out again here on purpose so the checker does not
# depend on the constants the shield uses.
_OFFSETS: dict[int, tuple[int, int]] = {0: (0, 0), 1: (-1, 0), 2: (1, 0), 3: (0, -1), 4: (0, 1)}


class VerifyInputError(FleetmindError, ValueError):
    """The positions or actions handed to :func:`conflicts` are malformed."""


@dataclass(frozen=True)
class Conflict:
    """One broken rule in a joint move.

    Attributes:
        kind: which rule is broken.
        robots: the robot indices involved, ascending.
        cell: the cell at fault (the shared cell for ``vertex``, the target cell for illegal
            moves, the first robot's start cell for ``swap``).
    """

    kind: ConflictKind
    robots: tuple[int, ...]
    cell: Cell


def _joint_move(positions: ArrayLike, actions: ArrayLike) -> tuple[NDArray[Any], NDArray[Any]]:
    """``(N, 2)`` positions and ``(N,)`` actions as arrays, or one line naming the bad shape."""
    pos = np.asarray(positions)
    act = np.asarray(actions)
    if pos.ndim != 2 or pos.shape[1] != 2:
        raise VerifyInputError(f"positions: expected shape (N, 2), got {pos.shape}")
    if act.shape != (pos.shape[0],):
        raise VerifyInputError(f"actions: expected shape ({pos.shape[0]},), got {act.shape}")
    return pos, act


def conflicts(
    grid: GridMap,
    positions: ArrayLike,
    actions: ArrayLike,
    *,
    forbidden: Iterable[Cell] = (),
) -> list[Conflict]:
    """List every rule the joint move ``actions`` breaks when taken from ``positions``.

    Args:
        grid: the map.
        positions: ``(N, 2)`` integer cells ``(row, col)``, one per robot.
        actions: ``(N,)`` action ids, one per robot.
        forbidden: cells no robot may enter this tick.

    Returns:
        The conflicts, in a deterministic order (illegal moves by robot, then vertex conflicts by
        cell, then swaps by robot pair). Empty when the joint move is safe.

    Raises:
        VerifyInputError: when the shapes do not match.
    """
    pos, act = _joint_move(positions, actions)
    height, width = grid.shape
    banned = {(int(r), int(c)) for r, c in forbidden}
    starts: list[Cell] = [(int(r), int(c)) for r, c in pos.tolist()]
    found: list[Conflict] = []

    ends: list[Cell] = []
    for i, (start, raw) in enumerate(zip(starts, act.tolist(), strict=True)):
        action = int(raw)
        if action not in _OFFSETS:
            found.append(Conflict("invalid_action", (i,), start))
            ends.append(start)
            continue
        dr, dc = _OFFSETS[action]
        end = (start[0] + dr, start[1] + dc)
        if action == 0:
            ends.append(start)
        elif not (0 <= end[0] < height and 0 <= end[1] < width):
            found.append(Conflict("out_of_bounds", (i,), end))
            ends.append(start)
        elif bool(grid.blocked[end]):
            found.append(Conflict("wall", (i,), end))
            ends.append(start)
        elif end in banned:
            found.append(Conflict("forbidden", (i,), end))
            ends.append(start)
        else:
            ends.append(end)

    by_cell: dict[Cell, list[int]] = {}
    for i, end in enumerate(ends):
        by_cell.setdefault(end, []).append(i)
    for cell in sorted(by_cell):
        robots = by_cell[cell]
        if len(robots) > 1:
            found.append(Conflict("vertex", tuple(robots), cell))

    start_owner = {cell: i for i, cell in enumerate(starts)}
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if start == end:
            continue
        j = start_owner.get(end)
        if j is not None and j > i and ends[j] == start:
            found.append(Conflict("swap", (i, j), start))
    return found


def count_conflicts(
    grid: GridMap,
    positions: ArrayLike,
    actions: ArrayLike,
    *,
    forbidden: Iterable[Cell] = (),
) -> int:
    """``len(conflicts(...))`` computed over the fleet at once (numpy; no loop per robot).

    The arguments and errors are those of :func:`conflicts`, whose per-robot loop is the
    reference this count is tested against.

    Returns:
        How many conflicts :func:`conflicts` lists for the same joint move.
    """
    pos, act = _joint_move(positions, actions)
    n = pos.shape[0]
    if n == 0:
        return 0
    height, width = grid.shape
    pos = pos.astype(np.int64)
    act = act.astype(np.int64)
    offsets = np.array([_OFFSETS[a] for a in sorted(_OFFSETS)], dtype=np.int64)  # (5, 2)
    valid = (act >= 0) & (act < len(offsets))
    end = pos + offsets[np.where(valid, act, 0)]
    inside = (end[:, 0] >= 0) & (end[:, 0] < height) & (end[:, 1] >= 0) & (end[:, 1] < width)
    # Waiting is never illegal (the reference checks nothing for it, wherever the robot is).
    moving = valid & inside & (act != 0)
    moving[moving] = ~grid.blocked[end[moving, 0], end[moving, 1]]
    banned = {(int(r), int(c)) for r, c in forbidden}
    banned = {(r, c) for r, c in banned if 0 <= r < height and 0 <= c < width}
    if banned:
        mask = np.zeros((height, width), dtype=bool)
        mask[tuple(np.array(sorted(banned)).T)] = True
        moving[moving] = ~mask[end[moving, 0], end[moving, 1]]
    legal = moving | (act == 0)
    illegal = int(n - legal.sum())
    final = np.where(legal[:, None], end, pos)  # (N, 2) where each robot ends the tick
    # Cells as distinct numbers (starts may lie anywhere; ends are starts or cells of the map).
    low = np.minimum(pos.min(axis=0), final.min(axis=0))
    span = int(max(pos[:, 1].max(), final[:, 1].max()) - low[1] + 1)
    start_key = (pos[:, 0] - low[0]) * span + (pos[:, 1] - low[1])
    end_key = (final[:, 0] - low[0]) * span + (final[:, 1] - low[1])
    _, counts = np.unique(end_key, return_counts=True)
    vertex = int((counts > 1).sum())
    # A swap: robot i ends where j started and j ends where i started. Like the reference, j is
    # the last robot starting on that cell, and each pair counts once (from its lower index).
    order = np.argsort(start_key, kind="stable")
    sorted_starts = start_key[order]
    k = np.searchsorted(sorted_starts, end_key, side="right") - 1
    found = k >= 0
    k = np.maximum(k, 0)
    j = order[k]
    moved = end_key != start_key
    hit = found & moved & (sorted_starts[k] == end_key) & (j > np.arange(n))
    swap = int((hit & (end_key[j] == start_key)).sum())
    return illegal + vertex + swap
