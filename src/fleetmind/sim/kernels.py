"""Compiled hot paths of fleetmind's own rules: move resolution and local observations (numba).

Each kernel loops over a batch of worlds, so one world (a batch of one) and a vector env run
the same code. The numpy functions they replace stay as the reference
(:func:`fleetmind.sim.dynamics.resolve_moves_reference`,
:meth:`fleetmind.sim.observe.LocalObserver.reference`); tests compare both on random states.

Compile cost: the first call in a process compiles (a few seconds per kernel) unless numba's
on-disk cache (``cache=True``, ``__pycache__`` beside this file) already holds the machine code.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["local_observations", "resolve_moves"]

# (row, col) offset of each action id (fleetmind.sim.grid.DELTAS).
_DR = np.array([0, -1, 1, 0, 0], dtype=np.int64)
_DC = np.array([0, 0, 0, -1, 1], dtype=np.int64)


@numba.njit(cache=True)
def resolve_moves(
    pos: NDArray[np.integer],
    acts: NDArray[np.integer],
    blocked: NDArray[np.bool_],
    ticks: NDArray[np.int64],
    frozen: NDArray[np.bool_],
    new_pos: NDArray[np.int32],
    moved: NDArray[np.bool_],
    wall_bump: NDArray[np.bool_],
    conflict: NDArray[np.bool_],
) -> int:
    """Resolve one joint action per world, the rules of :mod:`fleetmind.sim.dynamics`.

    Args:
        pos: ``(B, N, 2)`` positions (row, col), distinct within a world.
        acts: ``(B, N)`` action ids.
        blocked: ``(H, W)`` cells no robot may enter.
        ticks: ``(B,)`` ticks (they rotate the priorities).
        frozen: ``(B, N)`` robots that wait whatever they asked (or shape ``(0, 0)``: none).
        new_pos: ``(B, N, 2)`` written: positions after the tick.
        moved: ``(B, N)`` written: the robot changed cell.
        wall_bump: ``(B, N)`` written: it tried to leave the grid or enter a blocked cell.
        conflict: ``(B, N)`` written: its move failed because of another robot.

    Returns:
        -1, or the first action id outside ``0..4`` (nothing is resolved then).
    """
    b, n = acts.shape
    h, w = blocked.shape
    for k in range(b):
        for i in range(n):
            if acts[k, i] < 0 or acts[k, i] > 4:
                return int(acts[k, i])
    has_frozen = frozen.shape[0] > 0
    # Per-cell scratch, reset after each world (touched cells only).
    occupant = np.full(h * w, -1, dtype=np.int64)
    best_key = np.full(h * w, -1, dtype=np.int64)
    best_robot = np.empty(h * w, dtype=np.int64)
    cur = np.empty(n, dtype=np.int64)
    nxt = np.empty(n, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    fail = np.empty(n, dtype=np.bool_)
    for k in range(b):
        for i in range(n):
            r, c = np.int64(pos[k, i, 0]), np.int64(pos[k, i, 1])
            a = 0 if has_frozen and frozen[k, i] else np.int64(acts[k, i])
            tr, tc = r + _DR[a], c + _DC[a]
            off = tr < 0 or tr >= h or tc < 0 or tc >= w
            if off:
                tr, tc = r, c
            bump = off or blocked[tr, tc]
            if bump:
                tr, tc = r, c
            wall_bump[k, i] = bump and a != 0
            cur[i] = r * w + c
            nxt[i] = tr * w + tc
            rank[i] = (i - ticks[k]) % n  # lower rank, higher priority
            conflict[k, i] = False
            occupant[cur[i]] = i
        while True:
            any_moving = False
            for i in range(n):
                any_moving = any_moving or nxt[i] != cur[i]
            if not any_moving:
                break
            # Vertex conflicts: a robot staying in the cell keeps it, else the highest priority.
            for i in range(n):
                key = 0 if nxt[i] == cur[i] else rank[i] + 1
                cell = nxt[i]
                if best_key[cell] < 0 or key < best_key[cell]:
                    best_key[cell] = key
                    best_robot[cell] = i
            any_fail = False
            for i in range(n):
                lost = best_robot[nxt[i]] != i
                # Swap conflicts: I move into your cell while you move into mine.
                if not lost and nxt[i] != cur[i]:
                    other = occupant[nxt[i]]
                    lost = other >= 0 and other != i and nxt[other] == cur[i]
                fail[i] = lost
                any_fail = any_fail or lost
            for i in range(n):
                best_key[nxt[i]] = -1
            if not any_fail:
                break
            for i in range(n):
                if fail[i]:
                    conflict[k, i] = True
                    nxt[i] = cur[i]
        for i in range(n):
            occupant[cur[i]] = -1
            new_pos[k, i, 0] = nxt[i] // w
            new_pos[k, i, 1] = nxt[i] % w
            moved[k, i] = nxt[i] != cur[i]
    return -1


@numba.njit(cache=True)
def local_observations(
    pos: NDArray[np.integer],
    goal: NDArray[np.integer],
    carrying: NDArray[np.bool_],
    has_task: NDArray[np.bool_],
    statics: tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.bool_]],
    row_of: NDArray[np.int64],
    dist: NDArray[np.int32],
    radius: int,
    heuristic: bool,
    out: NDArray[np.float32],
) -> bool:
    """Local observations of :class:`fleetmind.sim.observe.LocalObserver` into ``out``.

    Args:
        pos: ``(B, N, 2)`` positions.
        goal: ``(B, N, 2)`` targets.
        carrying: ``(B, N)`` loaded robots.
        has_task: ``(B, N)`` robots with a target.
        statics: ``(walls, pickups, blocked1)``: walls and pickup cells padded by ``radius``
            (float32, walls 1 off the grid), walls padded by 1 (bool, True off the grid).
        row_of: ``(H * W,)`` row of each target cell in ``dist`` (-1: not in the table).
        dist: ``(T, H * W)`` shortest-path distances to each table target.
        radius: window radius ``r``.
        heuristic: add the 5 heuristic values.
        out: ``(B, N, 4 k^2 + 6 [+ 5])`` written.

    Returns:
        False when a robot with a task has a target outside the table (then the heuristic
        values are left for the caller; everything else is written).
    """
    walls, pickups, blocked1 = statics
    b, n = carrying.shape
    hp, wp = walls.shape
    h, w = hp - 2 * radius, wp - 2 * radius
    k = 2 * radius + 1
    kk = k * k
    occ = np.zeros((hp, wp), dtype=np.bool_)
    in_table = True
    for e in range(b):
        for i in range(n):
            occ[pos[e, i, 0] + radius, pos[e, i, 1] + radius] = True
        for i in range(n):
            o = out[e, i]
            r0, c0 = np.int64(pos[e, i, 0]), np.int64(pos[e, i, 1])
            at = 0
            for dr in range(k):
                for dc in range(k):
                    o[at] = walls[r0 + dr, c0 + dc]
                    o[kk + at] = 1.0 if occ[r0 + dr, c0 + dc] else 0.0
                    o[2 * kk + at] = pickups[r0 + dr, c0 + dc]
                    o[3 * kk + at] = 0.0
                    at += 1
            o[kk + radius * k + radius] = 0.0  # not oneself
            task = has_task[e, i]
            rel_r = np.int64(goal[e, i, 0]) - r0
            rel_c = np.int64(goal[e, i, 1]) - c0
            if task and abs(rel_r) <= radius and abs(rel_c) <= radius:
                o[3 * kk + (rel_r + radius) * k + rel_c + radius] = 1.0
            s = 4 * kk
            t = 1.0 if task else 0.0
            o[s] = 1.0 if carrying[e, i] else 0.0
            o[s + 1] = t
            o[s + 2] = rel_r / h * t
            o[s + 3] = rel_c / w * t
            # Integer signs times 0 give +0.0 (numpy's), where a float product gives -0.0.
            o[s + 4] = np.sign(rel_r) if task else 0
            o[s + 5] = np.sign(rel_c) if task else 0
            if heuristic:
                s += 6
                row = row_of[goal[e, i, 0] * w + goal[e, i, 1]] if task else 0
                if task and row < 0:
                    in_table = False
                start = np.float32(0.0)
                for a in range(5):
                    tr, tc = r0 + _DR[a], c0 + _DC[a]
                    value = np.float32(0.0)
                    if task and row >= 0:
                        cr = min(max(tr, 0), h - 1)
                        cc = min(max(tc, 0), w - 1)
                        after = np.float32(dist[row, cr * w + cc])
                        if a == 0:
                            start = after
                        value = np.float32(np.sign(after - start))
                    if blocked1[tr + 1, tc + 1]:
                        value = np.float32(2.0)
                    o[s + a] = value
        for i in range(n):
            occ[pos[e, i, 0] + radius, pos[e, i, 1] + radius] = False
    return in_table
