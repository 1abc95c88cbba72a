"""Compiled hot paths of the RWARE twin: one step and the flattened observations, as numba kernels.

The kernels run :class:`fleetmind.sim.rware_twin.RwareWorlds`' rules world by world on its own
arrays (one world is a batch of one, so a single env and a vector env share the code). The
numpy methods of ``RwareWorlds`` stay the reference: tests compare the two on random states.

What stays in Python: resets (they draw from each world's numpy generator), deliveries (each
one draws a refill from the generator, in goal order) and the rare worlds where two chains of
equal length want one cell, which networkx settles by a Python set's order
(:func:`fleetmind.sim.rware_twin._networkx_pred_order`). :func:`step` skips such a world and
reports it; the caller resolves it on the numpy path and hands the moves back.

Compile cost: the first call in a process compiles (a few seconds) unless numba's on-disk
cache (``cache=True``, ``__pycache__`` beside this file) already holds the machine code.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BAD_ACTION",
    "DELIVER",
    "RESOLVE",
    "SKIP",
    "TIES",
    "USE_GIVEN",
    "State",
    "observe_flat",
    "step",
]

State = tuple[
    NDArray[np.int64],  # pos (B, N)
    NDArray[np.int8],  # heading (B, N)
    NDArray[np.int64],  # carrying (B, N)
    NDArray[np.bool_],  # delivered_flag (B, N)
    NDArray[np.int64],  # shelf_pos (B, S)
    NDArray[np.bool_],  # requested (B, S)
    NDArray[np.int64],  # robot_grid (B, HW)
    NDArray[np.int64],  # shelf_grid (B, HW)
    NDArray[np.int64],  # steps (B,)
    NDArray[np.int64],  # inactive (B,)
]
"""The worlds' arrays of ``RwareWorlds`` (``RwareWorlds.state``), as both kernels take them."""

FORWARD = 1
LEFT = 2
RIGHT = 3
TOGGLE_LOAD = 4
RESOLVE, USE_GIVEN, SKIP = 0, 1, 2
"""Per-world modes of :func:`step`: resolve the moves here, take the given ones, leave it."""
TIES, DELIVER, BAD_ACTION = 1, 2, 4
"""Bits of what :func:`step` returns."""


@numba.njit(cache=True)
def _resolve_world(
    k: int,
    act: NDArray[np.int64],
    pos: NDArray[np.int64],
    heading: NDArray[np.int8],
    carrying: NDArray[np.int64],
    robot_grid: NDArray[np.int64],
    shelf_grid: NDArray[np.int64],
    move_to: NDArray[np.int64],
    cell_pad: NDArray[np.int64],
    nbr_pad: NDArray[np.int64],
    moves: NDArray[np.bool_],
) -> bool:
    """Fill ``moves[k]`` with world ``k``'s forward moves; False where networkx must break a tie.

    The same rules as ``RwareWorlds._resolve`` (see there), world by world: cancel loaded
    robots driving into shelves, move everyone when no mover wants an occupied or a shared
    cell, else resolve rware's graph (cycles move unless they are swaps, cycle-free pieces
    move along their longest chain).
    """
    n = pos.shape[1]
    target = np.empty(n, dtype=np.int64)
    occupant = np.empty(n, dtype=np.int64)
    moving = np.zeros(n, dtype=np.bool_)
    any_moving = False
    for i in range(n):
        p = pos[k, i]
        t = move_to[heading[k, i], p] if act[k, i] == FORWARD else p
        tp = cell_pad[t]
        occ = robot_grid[k, tp] - 1
        occupant[i] = occ
        # A loaded robot may drive under a shelf only where a loaded robot stands.
        occ_loaded = occ >= 0 and carrying[k, occ] >= 0
        if carrying[k, i] >= 0 and t != p and shelf_grid[k, tp] > 0 and not occ_loaded:
            t = p
        target[i] = t
        moving[i] = t != p
        any_moving = any_moving or moving[i]
        moves[k, i] = False
    if not any_moving:
        return True
    hard = False
    for i in range(n):
        if moving[i]:
            if occupant[i] >= 0:
                hard = True
                break
            for j in range(i):
                if moving[j] and target[j] == target[i]:
                    hard = True
                    break
            if hard:
                break
    if not hard:
        for i in range(n):
            moves[k, i] = moving[i]
        return True
    # f: the robot each robot waits for; n stands for an empty cell (the end of a chain).
    f = np.empty(n + 1, dtype=np.int64)
    for i in range(n):
        if moving[i]:
            f[i] = occupant[i] if occupant[i] >= 0 else n
        else:
            f[i] = i
    f[n] = n
    doublings = max(1, _bit_length(n))
    g = f.copy()
    g2 = np.empty(n + 1, dtype=np.int64)
    for _ in range(doublings):
        for i in range(n + 1):
            g2[i] = g[g[i]]
        g[:] = g2
    on_cycle = np.zeros(n + 1, dtype=np.bool_)
    for i in range(n):
        on_cycle[g[i]] = True
    chain = np.zeros(n, dtype=np.bool_)
    any_chain = False
    for i in range(n):
        in_cycle_piece = g[i] != n
        swap = f[f[i]] == i and f[i] != i
        moves[k, i] = moving[i] and in_cycle_piece and on_cycle[i] and not swap
        chain[i] = moving[i] and not in_cycle_piece
        any_chain = any_chain or chain[i]
    if not any_chain:
        return True
    # Longest chains (networkx's dag_longest_path): preds[i, d], the robot on neighbour d of
    # robot i's cell that asks for it (n: none).
    preds = np.full((n, 4), n, dtype=np.int64)
    for i in range(n):
        for d in range(4):
            who = robot_grid[k, nbr_pad[pos[k, i], d]] - 1
            if who >= 0 and moving[who] and target[who] == pos[k, i]:
                preds[i, d] = who
    depth = np.zeros(n + 1, dtype=np.int64)
    new = np.empty(n, dtype=np.int64)
    for _ in range(n):
        changed = False
        for i in range(n):
            best = 0
            for d in range(4):
                if preds[i, d] < n:
                    best = max(best, depth[preds[i, d]] + 1)
            new[i] = best
            changed = changed or best != depth[i]
        if not changed:
            break
        depth[:n] = new
    chosen = np.zeros(n + 1, dtype=np.bool_)
    chosen[n] = True
    for i in range(n):
        if not chain[i]:
            continue
        best = -1
        count = 0
        for d in range(4):
            who = robot_grid[k, nbr_pad[target[i], d]] - 1
            if who >= 0 and moving[who] and target[who] == target[i]:
                if depth[who] > best:
                    best = depth[who]
                    count = 1
                elif depth[who] == best:
                    count += 1
        if depth[i] == best:
            if count > 1:
                return False  # equal chains into one cell: networkx's order decides
            chosen[i] = True
    # A chain robot moves when it and every robot ahead of it won their cell.
    for i in range(n):
        if chain[i]:
            ok = True
            j = i
            while j != n:
                ok = ok and chosen[j]
                j = f[j]
            if ok:
                moves[k, i] = True
    return True


@numba.njit(cache=True)
def _bit_length(n: int) -> int:
    bits = 0
    while n > 0:
        bits += 1
        n >>= 1
    return bits


@numba.njit(cache=True)
def step(
    mode: NDArray[np.int8],
    act: NDArray[np.int64],
    moves: NDArray[np.bool_],
    state: State,
    tables: tuple[
        NDArray[np.int64],
        NDArray[np.int64],
        NDArray[np.int64],
        NDArray[np.bool_],
        NDArray[np.int64],
    ],
    turns: tuple[NDArray[np.int8], NDArray[np.int8]],
    limits: tuple[int, int, bool],
    rewards: NDArray[np.float64],
    done: NDArray[np.bool_],
    deliver: NDArray[np.bool_],
) -> int:
    """One rware step of every world whose ``mode`` is not :data:`SKIP`, in place.

    Args:
        mode: ``(B,)`` :data:`RESOLVE` (resolve moves here), :data:`USE_GIVEN` (``moves[k]``
            holds them) or :data:`SKIP`.
        act: ``(B, N)`` actions.
        moves: ``(B, N)`` forward moves (written for RESOLVE worlds).
        state: the worlds (:data:`State`), updated in place but for ``requested``
            (deliveries are the caller's).
        tables: ``(move_to (4, HW), cell_pad (HW,), nbr_pad (HW, 4), highway (HW,),
            goal_pad (G,))``.
        turns: ``(left, right)``: the heading after a left and a right turn, per heading.
        limits: ``(max_steps or 0, max_inactivity_steps or 0, two_stage)``.
        rewards: ``(B, N)`` zeros; the drop half of ``two_stage`` rewards is added.
        done: ``(B,)`` written: the episode ended.
        deliver: ``(B,)`` written: a requested shelf stands on a goal (the caller delivers).

    Returns:
        Bits: :data:`TIES` some world needs networkx's order to break a tie (it is left as
        it was, its ``mode`` set to -1: the caller resolves its moves and calls again with
        ``USE_GIVEN`` for it and ``SKIP`` for the rest); :data:`DELIVER` some ``deliver``
        is set; :data:`BAD_ACTION` an action id outside 0..4 (nothing is done then).
    """
    pos, heading, carrying, delivered_flag, shelf_pos, requested = state[:6]
    robot_grid, shelf_grid, steps, inactive = state[6:]
    move_to, cell_pad, nbr_pad, highway, goal_pad = tables
    turn_left, turn_right = turns
    max_steps, max_inactive, two_stage = limits
    b, n = act.shape
    for k in range(b):
        for i in range(n):
            if act[k, i] < 0 or act[k, i] > 4:
                return BAD_ACTION
    events = 0
    for k in range(b):
        if mode[k] == SKIP:
            continue
        if mode[k] == RESOLVE and not _resolve_world(
            k,
            act,
            pos,
            heading,
            carrying,
            robot_grid,
            shelf_grid,
            move_to,
            cell_pad,
            nbr_pad,
            moves,
        ):
            mode[k] = -1
            events |= TIES
            continue
        # Committed forward moves carry their shelf along; every old cell is cleared before
        # any new one is set (chains and cycles hand cells on).
        for i in range(n):
            if moves[k, i]:
                robot_grid[k, cell_pad[pos[k, i]]] = 0
                s = carrying[k, i]
                if s >= 0:
                    shelf_grid[k, cell_pad[pos[k, i]]] = 0
        for i in range(n):
            if moves[k, i]:
                new = move_to[heading[k, i], pos[k, i]]
                pos[k, i] = new
                robot_grid[k, cell_pad[new]] = i + 1
                s = carrying[k, i]
                if s >= 0:
                    shelf_pos[k, s] = new
                    shelf_grid[k, cell_pad[new]] = s + 1
        for i in range(n):
            a = act[k, i]
            if a == LEFT:
                heading[k, i] = turn_left[heading[k, i]]
            elif a == RIGHT:
                heading[k, i] = turn_right[heading[k, i]]
            elif a == TOGGLE_LOAD:
                # Toggling robots stand still: the grid under them is current.
                if carrying[k, i] < 0:
                    under = shelf_grid[k, cell_pad[pos[k, i]]] - 1
                    if under >= 0:
                        carrying[k, i] = under
                elif not highway[pos[k, i]]:
                    if two_stage and delivered_flag[k, i]:
                        rewards[k, i] += 0.5
                    carrying[k, i] = -1
                    delivered_flag[k, i] = False
        hit = False
        for gp in goal_pad:
            s = shelf_grid[k, gp] - 1
            if s >= 0 and requested[k, s]:
                hit = True
        # A delivery at one goal can only make another goal's shelf requested if it happened:
        # no hit now means no delivery this step.
        deliver[k] = hit
        if hit:
            events |= DELIVER
        inactive[k] = 0 if hit else inactive[k] + 1
        steps[k] += 1
        done[k] = (max_inactive > 0 and inactive[k] >= max_inactive) or (
            max_steps > 0 and steps[k] >= max_steps
        )
    return events


@numba.njit(cache=True, error_model="numpy")  # x / 0 gives inf as numpy does, no raise
def observe_flat(
    state: State,
    tables: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]],
    scale: tuple[float, float],
    codes: NDArray[np.float32],
    out: NDArray[np.float32],
) -> None:
    """The flattened observations of rware into ``out`` ``(B, N, 8 + 7K)``.

    The kernel of ``RwareWorlds.observe_flat``.

    Args:
        state: the worlds (:data:`State`), read only.
        tables: ``(cell_pad (HW,), crow_ccol (2, HW), highway (HW,), window (K,))``.
        scale: what own column and row are divided by (1 or ``W - 1``, ``H - 1``).
        codes: ``(15, 7)`` the floats of each window-cell code ``robot * 3 + shelf``.
        out: written.
    """
    pos, heading, carrying, _, _, requested, robot_grid, shelf_grid, _, _ = state
    cell_pad, crow_ccol, highway, window = tables
    b, n = pos.shape
    for k in range(b):
        for i in range(n):
            p = pos[k, i]
            o = out[k, i]
            o[0] = crow_ccol[1, p] / scale[0]
            o[1] = crow_ccol[0, p] / scale[1]
            o[2] = 1.0 if carrying[k, i] >= 0 else 0.0
            for d in range(4):
                o[3 + d] = 0.0
            o[3 + heading[k, i]] = 1.0
            o[7] = 1.0 if highway[p] else 0.0
            base = cell_pad[p]
            at = 8
            for w in window:
                c = base + w
                robot = robot_grid[k, c]
                shelf = shelf_grid[k, c]
                code = 0
                if robot > 0:
                    code = (heading[k, robot - 1] + 1) * 3
                if shelf > 0:
                    code += 2 if requested[k, shelf - 1] else 1
                for j in range(7):
                    o[at + j] = codes[code, j]
                at += 7
