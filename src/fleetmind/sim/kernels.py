"""Compiled hot paths of fleetmind's own rules: moves, rewards and local observations (numba).

Each kernel loops over a batch of worlds, so one world (a batch of one) and a vector env run
the same code. The numpy functions they replace stay as the reference
(:func:`fleetmind.sim.dynamics.resolve_moves_reference`,
:meth:`fleetmind.sim.observe.LocalObserver.reference`); tests compare both on random states.

Compile cost: the first call in a process compiles (a few seconds per kernel) unless numba's
on-disk cache (``cache=True``, ``__pycache__`` beside this file) already holds the machine code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "OBSERVED",
    "ObserverInputs",
    "TickRobots",
    "compiled_entry",
    "local_observations",
    "resolve_moves",
    "vector_tick",
    "warehouse_tick",
]

# (row, col) offset of each action id (fleetmind.sim.grid.DELTAS).
_DR = np.array([0, -1, 1, 0, 0], dtype=np.int64)
_DC = np.array([0, 0, 0, -1, 1], dtype=np.int64)


# compiled_entry's answers by kernel and argument type keys (None: no exact overload).
_ENTRIES: dict[tuple[object, tuple[object, ...]], Callable[..., Any] | None] = {}


def _behaved(args: tuple[Any, ...]) -> bool:
    """Every array in ``args`` (tuples included) a plain, aligned ndarray."""
    for a in args:
        if isinstance(a, tuple):
            if not _behaved(a):
                return False
        elif isinstance(a, np.ndarray) and (type(a) is not np.ndarray or not a.flags.aligned):
            return False
    return True


def _type_key(a: Any) -> object:
    """A key that only values of one numba type share.

    An array's is what decides its numba type (dtype, dimensions, layout flags, writeability,
    alignment), read in a microsecond where ``numba.typeof`` takes tens; a tuple's, its items';
    any other value's, its numba type.

    Raises:
        ValueError: a value numba has no type for.
    """
    if isinstance(a, np.ndarray):
        f = a.flags
        return (a.dtype, a.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)
    if isinstance(a, tuple):
        return (tuple, *map(_type_key, a))
    return numba.typeof(a)  # type: ignore[no-untyped-call]


def compiled_entry(kernel: Any, args: tuple[Any, ...]) -> Callable[..., Any] | None:
    """The machine code ``kernel`` runs for exactly these argument types, if compiled, else None.

    Calling it skips numba's type dispatch (a type check of every argument, about 60 ns an
    array), which is the caller's job then: it may pass only arguments of the same types
    (dtype, dimensions, layout, writeability, alignment) as ``args``; nothing checks them.
    Through numba's public API only: the types are ``numba.typeof``'s, for plain aligned
    arrays only (anything else: None), and the code is what the dispatcher's ``compile``
    returns for a signature it already holds (``signatures``), so nothing is compiled here.
    """
    if not _behaved(args):
        return None
    try:
        key = (kernel, tuple(map(_type_key, args)))
    except ValueError:  # a value numba has no type for
        return None
    if key not in _ENTRIES:
        sig = tuple(map(numba.typeof, args))
        _ENTRIES[key] = kernel.compile(sig) if sig in kernel.signatures else None
    return _ENTRIES[key]


OK, BAD_ACTION, OFF_GRID, INCOMPLETE = 0, 1, 2, 3
"""What the kernels return: done, an action id outside 0..4, a robot (or target) off the grid,
observations without their heuristic values (:func:`local_observations`)."""


@numba.njit(cache=True)
def _invalid(pos: NDArray[np.integer], acts: NDArray[np.integer], h: int, w: int) -> int:
    """:data:`BAD_ACTION` or :data:`OFF_GRID` for a batch ``(B, N, 2)``, ``(B, N)``, else OK.

    The kernels index without bounds checks, so bad input is refused before any work.
    """
    b, n = acts.shape
    for k in range(b):
        for i in range(n):
            if acts[k, i] < 0 or acts[k, i] > 4:
                return BAD_ACTION
            if not (0 <= pos[k, i, 0] < h and 0 <= pos[k, i, 1] < w):
                return OFF_GRID
    return OK


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
        :data:`OK`, or :data:`BAD_ACTION` / :data:`OFF_GRID` (nothing is resolved then).
    """
    b, n = acts.shape
    h, w = blocked.shape
    bad = _invalid(pos, acts, h, w)
    if bad != OK:
        return bad
    scratch = _scratch(h * w, n)
    for k in range(b):
        _resolve_world(
            k, pos, acts, blocked, ticks[k], frozen, scratch, new_pos, moved, wall_bump, conflict
        )
    return OK


_Scratch = tuple[
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.bool_],
]


@numba.njit(cache=True)
def _scratch(cells: int, n: int) -> _Scratch:
    """Scratch of :func:`_resolve_world`, allocated once per call.

    Per cell: occupant, best key, best robot (the first two -1); per robot: current cell,
    next cell, rank, fail.
    """
    # Two allocations, sliced (an allocation costs more than the work of a small world).
    ints = np.empty(3 * cells + 3 * n, dtype=np.int64)
    ints[: 2 * cells] = -1
    at = 3 * cells
    return (
        ints[:cells],
        ints[cells : 2 * cells],
        ints[2 * cells : at],
        ints[at : at + n],
        ints[at + n : at + 2 * n],
        ints[at + 2 * n :],
        np.empty(n, dtype=np.bool_),
    )


@numba.njit(cache=True)
def _resolve_world(
    k: int,
    pos: NDArray[np.integer],
    acts: NDArray[np.integer],
    blocked: NDArray[np.bool_],
    tick: int,
    frozen: NDArray[np.bool_],
    scratch: _Scratch,
    new_pos: NDArray[np.int32],
    moved: NDArray[np.bool_],
    wall_bump: NDArray[np.bool_],
    conflict: NDArray[np.bool_],
) -> None:
    """World ``k`` of :func:`resolve_moves` (same arrays; ``frozen`` ``(0, 0)``: none).

    The scratch arrays come back as they came (-1 in the first two).
    """
    n = acts.shape[1]
    h, w = blocked.shape
    occupant, best_key, best_robot, cur, nxt, rank, fail = scratch
    has_frozen = frozen.shape[0] > 0
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
        rank[i] = (i - tick) % n  # lower rank, higher priority
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
) -> int:
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
        :data:`OK`; :data:`INCOMPLETE` when a robot with a task has a target outside the
        table (then the heuristic values are left for the caller; everything else is
        written); :data:`OFF_GRID` when a robot or a target lies outside the grid (nothing is
        written then).
    """
    walls, pickups, blocked1 = statics
    b, n = carrying.shape
    hp, wp = walls.shape
    h, w = hp - 2 * radius, wp - 2 * radius
    k = 2 * radius + 1
    kk = k * k
    for e in range(b):
        for i in range(n):
            cells = (pos[e, i, 0], pos[e, i, 1], goal[e, i, 0], goal[e, i, 1])
            if not (0 <= cells[0] < h and 0 <= cells[1] < w):
                return OFF_GRID
            if has_task[e, i] and not (0 <= cells[2] < h and 0 <= cells[3] < w):
                return OFF_GRID
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
    return OK if in_table else INCOMPLETE


# fleetmind.sim.observe's window channels, scalars and heuristic values.
N_LOCAL_CHANNELS, N_SCALARS, N_HEURISTIC = 4, 6, 5
OBSERVED = 128
"""Bit of :func:`warehouse_tick`'s events: the observations after the tick are written."""
BAD_BUFFER = 256
"""What :func:`warehouse_tick` returns for an observation buffer of the wrong shape."""
_STATE_EVENTS = 1 | 2 | 4 | 16  # events after which Python changes targets, loads or tasks


ObserverInputs = tuple[
    NDArray[np.float32],  # walls, padded by the radius (1 off the grid)
    NDArray[np.float32],  # pickups, padded by the radius
    NDArray[np.bool_],  # walls padded by 1 (True off the grid)
    NDArray[np.int64],  # row_of (H * W,), or (0,): no heuristic values
    NDArray[np.int32],  # dist (T, H * W)
]
"""What :func:`warehouse_tick` observes with besides the robots (``LocalObserver.kernel_inputs``),
the inputs of :func:`local_observations`."""
TickRobots = tuple[
    NDArray[np.int32],  # goal (N, 2)
    NDArray[np.bool_],  # has_task
    NDArray[np.bool_],  # errand
    NDArray[np.bool_],  # carrying
    NDArray[np.bool_],  # gated, or (0,): no gates
    NDArray[np.int64],  # broken_until
    NDArray[np.float64],  # battery
]
"""The robots' state :func:`warehouse_tick` reads besides their positions, ``(N,)`` each."""


@numba.njit(cache=True, inline="always")
def _individual(reward: Any, delivered: bool, picked: bool, conflict: bool) -> np.float32:
    """:func:`fleetmind.sim.rewards.individual` of one robot, the same roundings.

    ``reward``: ``step_cost, delivery_bonus, pickup_bonus, conflict_penalty`` (an array or a
    tuple); float32 sums of float64 terms, rounded after each term.
    """
    r = np.float32(reward[0])
    r = np.float32(np.float64(r) + reward[1] * (1.0 if delivered else 0.0))
    r = np.float32(np.float64(r) + reward[2] * (1.0 if picked else 0.0))
    return np.float32(np.float64(r) + reward[3] * (1.0 if conflict else 0.0))


@numba.njit(cache=True)
def warehouse_tick(
    pos: NDArray[np.int32],
    acts: NDArray[np.int64],
    blocked: NDArray[np.bool_],
    tick: int,
    robots: TickRobots,
    reward: NDArray[np.float64],
    new_pos: NDArray[np.int32],
    flags: NDArray[np.bool_],
    individual: NDArray[np.float32],
    reward_sum: NDArray[np.float64],
    observe: ObserverInputs,
    obs: NDArray[np.float32],
) -> tuple[int, int, int]:
    """The pure part of one :class:`fleetmind.sim.warehouse.Warehouse` tick, one world.

    Moves (frozen robots wait), then pickups and deliveries at the targets, then the
    individual rewards of :func:`fleetmind.sim.rewards.individual` (float32, the same
    roundings). The numpy reference is ``Warehouse._transition`` with ``rewards.individual``.
    When asked (``obs`` not empty) and no pickup, delivery, errand or idle robot leaves work
    for Python, the local observations after the tick (:func:`local_observations` of the new
    positions) are written too, so a quiet tick of an env is one compiled call.

    Args:
        pos: ``(N, 2)`` positions.
        acts: ``(N,)`` action ids.
        blocked: ``(H, W)`` walls.
        tick: the tick (priorities; robots broken until ``>= tick`` are frozen).
        robots: ``(goal (N, 2), has_task, errand, carrying, gated, broken_until, battery)``
            (``gated`` may be empty: no gates; ``battery <= 0``: frozen).
        reward: ``(4,)`` ``step_cost, delivery_bonus, pickup_bonus, conflict_penalty``.
        new_pos: ``(N, 2)`` written.
        flags: ``(5, N)`` written: moved, wall bump, conflict, picked, delivered.
        individual: ``(N,)`` written: individual rewards.
        reward_sum: ``(N,)`` the individual rewards are added to it in place (float64, as
            numpy adds float32 to float64), or ``(0,)``: left to the caller.
        observe: ``(walls, pickups, blocked1, row_of, dist)`` of
            :func:`local_observations` (unused when ``obs`` is empty); the window radius
            comes from the padding of ``walls``, the heuristic values are added when
            ``row_of`` is not empty.
        obs: ``(N, size)`` the observations after the tick, written when the events have
            bit :data:`OBSERVED`; or ``(0, 0)``: none asked.

    Returns:
        ``(events, conflicts, wall_bumps)``: ``events`` bit 1 some pickup, 2 some delivery,
        4 some errand, 8 some finite battery, 16 a robot without a task that is not broken
        next tick, 32 an action id outside 0..4, 64 a robot off the grid, 256
        (:data:`BAD_BUFFER`) ``obs`` of the wrong shape (nothing else is done then for
        these three), 128 (:data:`OBSERVED`) ``obs`` written; the counts of conflicts and
        wall bumps.
    """
    goal, has_task, errand, carrying, gated, broken_until, battery = robots
    n = acts.shape[0]
    h, w = blocked.shape
    walls, pickups, blocked1, row_of, dist = observe
    radius = (walls.shape[0] - h) // 2
    heuristic = row_of.shape[0] > 0
    k = 2 * radius + 1
    size = N_LOCAL_CHANNELS * k * k + N_SCALARS + (N_HEURISTIC if heuristic else 0)
    if obs.shape[0] > 0 and (obs.shape[0] != n or obs.shape[1] != size):
        return BAD_BUFFER, 0, 0  # the kernel writes without bounds checks
    # Batch-of-one views (no copies) for the batch helpers shared with the other kernels.
    pos1, acts1, new_pos1 = pos[None], acts[None], new_pos[None]
    bad = _invalid(pos1, acts1, h, w)
    if bad != OK:
        return (32 if bad == BAD_ACTION else 64), 0, 0
    frozen = np.empty((1, n), dtype=np.bool_)
    events = 0
    for i in range(n):
        frozen[0, i] = broken_until[i] >= tick or battery[i] <= 0
        if np.isfinite(battery[i]):
            events |= 8
        if errand[i]:
            events |= 4
        if not has_task[i] and broken_until[i] < tick + 1:
            events |= 16
    _resolve_world(
        0,
        pos1,
        acts1,
        blocked,
        tick,
        frozen,
        _scratch(h * w, n),
        new_pos1,
        flags[0:1],
        flags[1:2],
        flags[2:3],
    )
    n_conflict = 0
    n_bump = 0
    has_gates = gated.shape[0] > 0
    accumulate = reward_sum.shape[0] > 0
    for i in range(n):
        at_goal = (
            new_pos[i, 0] == goal[i, 0]
            and new_pos[i, 1] == goal[i, 1]
            and has_task[i]
            and not errand[i]
        )
        picked = at_goal and not carrying[i] and not (has_gates and gated[i])
        delivered = at_goal and carrying[i]
        flags[3, i] = picked
        flags[4, i] = delivered
        if picked:
            events |= 1
        if delivered:
            events |= 2
        r = _individual(reward, delivered, picked, flags[2, i])
        individual[i] = r
        if accumulate:
            reward_sum[i] += np.float64(r)
        n_conflict += flags[2, i]
        n_bump += flags[1, i]
    if obs.shape[0] > 0 and not events & _STATE_EVENTS:
        statics = (walls, pickups, blocked1)
        code = local_observations(
            new_pos1,
            goal[None],
            carrying[None],
            has_task[None],
            statics,
            row_of,
            dist,
            radius,
            heuristic,
            obs[None],
        )
        if code == OK:  # else the caller observes (and reports a robot off the grid)
            events |= OBSERVED
    return events, n_conflict, n_bump


@numba.njit(cache=True)
def vector_tick(
    pos: NDArray[np.int32],
    acts: NDArray[np.integer],
    blocked: NDArray[np.bool_],
    ticks: NDArray[np.int64],
    tasks: tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.bool_]],
    reward: tuple[float, float, float, float],
    max_steps: int,
    new_pos: NDArray[np.int32],
    flags: NDArray[np.bool_],
    individual: NDArray[np.float32],
    new_carrying: NDArray[np.bool_],
    delivered_total: NDArray[np.int64],
    truncated: NDArray[np.bool_],
) -> int:
    """One tick of :class:`fleetmind.sim.vector.VectorWarehouse` (no difference rewards).

    Moves, pickups and deliveries at each robot's target (the station when loaded, else the
    pickup), individual rewards, then ``delivered_total`` and ``ticks`` count on in place.
    The numpy reference is ``VectorWarehouse.step_reference``.

    Args:
        pos: ``(B, N, 2)`` positions.
        acts: ``(B, N)`` action ids.
        blocked: ``(H, W)`` walls.
        ticks: ``(B,)`` ticks, incremented in place.
        tasks: ``(pickup (B, N, 2), station (B, N, 2), carrying (B, N))``.
        reward: ``(step_cost, delivery_bonus, pickup_bonus, conflict_penalty)``.
        max_steps: the time limit.
        new_pos: ``(B, N, 2)`` written.
        flags: ``(2, B, N)`` written: delivered, conflict.
        individual: ``(B, N)`` written: individual rewards.
        new_carrying: ``(B, N)`` written: loaded after the tick.
        delivered_total: ``(B, N)`` deliveries so far, counted on in place.
        truncated: ``(B,)`` written: the world reached the time limit.

    Returns:
        Deliveries this tick, or ``-BAD_ACTION`` / ``-OFF_GRID`` (nothing is done then).
    """
    pickup, station, carrying = tasks
    b, n = acts.shape
    h, w = blocked.shape
    bad = _invalid(pos, acts, h, w)
    if bad != OK:
        return -bad
    scratch = _scratch(h * w, n)
    nobody = np.zeros((0, 0), dtype=np.bool_)
    moved = np.empty((b, n), dtype=np.bool_)
    bump = np.empty((b, n), dtype=np.bool_)
    n_delivered = 0
    for k in range(b):
        _resolve_world(
            k, pos, acts, blocked, ticks[k], nobody, scratch, new_pos, moved, bump, flags[1]
        )
        for i in range(n):
            loaded = carrying[k, i]
            r0, c0 = new_pos[k, i, 0], new_pos[k, i, 1]
            if loaded:
                at_goal = r0 == station[k, i, 0] and c0 == station[k, i, 1]
            else:
                at_goal = r0 == pickup[k, i, 0] and c0 == pickup[k, i, 1]
            picked = at_goal and not loaded
            delivered = at_goal and loaded
            flags[0, k, i] = delivered
            new_carrying[k, i] = (loaded or picked) and not delivered
            if delivered:
                delivered_total[k, i] += 1
                n_delivered += 1
            individual[k, i] = _individual(reward, delivered, picked, flags[1, k, i])
        ticks[k] += 1
        truncated[k] = ticks[k] >= max_steps
    return n_delivered
