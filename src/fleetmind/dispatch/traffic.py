"""Compiled per-tick work of the congestion-aware executors (``dispatch/executors/``).

:class:`TrafficState` keeps the fleet's recent traffic (a decayed robot count per cell and a
decayed count of entries per cell and move) and turns route costs into action costs and
rankings for the whole fleet in one numba pass: nothing per robot runs in Python, and no
array the size of the map is touched per tick. The counts decay lazily: a cell's count is
stored with the tick it was last written and read as ``count * decay ** age``, the same value
as decaying every cell every tick, so a tick costs O(robots) instead of O(cells).

What each cost term means is documented on :class:`fleetmind.dispatch.executors.CongestionExecutor`.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.distances import RouteReader, gather_pass, moves_pass, next_cell

_POW_TABLE = 4096
"""Ages with a precomputed ``decay ** age``; older counts take ``math.pow``."""


@numba.njit(inline="always", nogil=True)
def _aged(age: int, table: NDArray[np.float64], decay: float) -> float:
    """``decay ** age`` (the table for recent ages)."""
    if age < table.shape[0]:
        return float(table[age])
    return math.pow(decay, age)


@numba.njit(inline="always", nogil=True)
def _step_to(u: int, a: int, blocked: NDArray[np.bool_], width: int) -> int:
    """The flat cell action ``a`` (1-4) takes ``u`` to, -1 off the grid or into a wall."""
    v = next_cell(u, a, width, blocked.shape[0])
    return -1 if v < 0 or blocked[v] else v


@numba.njit(inline="always", nogil=True)
def _counts_read(wt: NDArray[np.float64]) -> bool:
    """Whether a term reads the decayed counts: ``traffic`` or ``against`` weighs something."""
    return bool(wt[4] != 0.0 or wt[5] != 0.0)


_EMPTY = 255
"""``plan`` of a cell no robot stands on; else the action its robot would take (0: wait)."""
_OPPOSITE = (0, 2, 1, 4, 3)
"""The action back where an action came from (WAIT stays)."""


_I1, _I2 = numba.int64[::1], numba.int64[:, ::1]
_F1, _F2 = numba.float64[::1], numba.float64[:, ::1]
# Compiled when the module is imported, not in a first tick.
_ADVANCE_SIG = numba.void(_I1, _I1, numba.int64, _F2, _F1, numba.float64, numba.int64)
_KEYS_SIG = _F2(
    _I1,
    _I1,
    _I2,
    numba.boolean[::1],
    numba.int64,
    _F2,
    numba.int64,
    _F2,
    _F1,
    numba.float64,
    _F1,
    numba.uint8[::1],
    numba.int32[::1],
)
# Columns of a cell's row of counts (8 float64: one cache line): the decayed robot count, the
# tick it was written, the tick the entry counts were written, and the entries by move in
# column ``_FLOW + action`` (actions 1-4).
_HEAT, _HEAT_T, _FLOW_T, _FLOW = 0, 1, 2, 2


@numba.njit(_ADVANCE_SIG, cache=True, nogil=True)
def _advance(
    here: NDArray[np.int64],
    last: NDArray[np.int64],
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    width: int,
) -> None:
    """One tick of traffic: every robot's cell counts once, every move made into its cell."""
    for i in range(here.shape[0]):
        c = here[i]
        age = tick - int(counts[c, _HEAT_T])
        counts[c, _HEAT] = counts[c, _HEAT] * _aged(age, table, decay) + 1.0
        counts[c, _HEAT_T] = tick
    if last.shape[0] != here.shape[0]:
        return
    for i in range(here.shape[0]):
        step = here[i] - last[i]
        if step == -width:
            a = 1  # UP
        elif step == width:
            a = 2  # DOWN
        elif step == -1:
            a = 3  # LEFT
        elif step == 1:
            a = 4  # RIGHT
        else:
            continue
        c = here[i]
        f = _aged(tick - int(counts[c, _FLOW_T]), table, decay)
        if f != 1.0:
            for k in range(1, 5):
                counts[c, _FLOW + k] *= f
        counts[c, _FLOW_T] = tick
        counts[c, _FLOW + a] += 1.0


@numba.njit(inline="always", nogil=True)
def _intend_pass(
    at: NDArray[np.int64],
    cell: NDArray[np.int64],
    dist: NDArray[np.int64],
    ties: NDArray[np.float64],
    plan: NDArray[np.uint8],
    incoming: NDArray[np.int32],
    counted: bool,
) -> None:
    """Each robot's plain choice (lowest ``dist[j]``, then ``ties[j]``) into ``plan[at[j]]``.

    ``cell``: where each action leads (:func:`~fleetmind.sim.distances.moves_pass`). A move
    into a wall is no move (the robot stays). With ``counted`` a move also counts in
    ``incoming`` at the cell it leads to.
    """
    for j in range(at.shape[0]):
        best = 0
        for a in range(1, 5):
            d, e = dist[j, a], dist[j, best]
            if d < e or (d == e and ties[j, a] < ties[j, best]):
                best = a
        u = cell[j, best]
        if best != 0 and u >= 0:
            plan[at[j]] = best
            if counted:
                incoming[u] += 1


@numba.njit(inline="always", nogil=True)
def _cost_pass(
    at: NDArray[np.int64],
    cell: NDArray[np.int64],
    dist: NDArray[np.int64],
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    wt: NDArray[np.float64],
    plan: NDArray[np.uint8],
    incoming: NDArray[np.int32],
    key: NDArray[np.float64],
) -> None:
    """``key[j, a]``: route cost ``dist[j, a]`` plus the traffic cost of action ``a``.

    For the robot at ``at[j]``, ``cell`` as in :func:`_intend_pass`, ``plan`` and ``incoming``
    as it left them. A term whose weight is 0 is not read, so its counts stay out of the cache.
    """
    share = 1.0 - decay
    # Scalars, read once: read from ``wt`` in the loop, each would be read again after every
    # store to ``key`` (the compiler cannot rule out that the two overlap).
    occupied, stayer, head_on, heading, traffic, against = wt[0], wt[1], wt[2], wt[3], wt[4], wt[5]
    for j in range(at.shape[0]):
        key[j, 0] = dist[j, 0]
        mine = plan[at[j]]
        for a in range(1, 5):
            u = cell[j, a]
            if u < 0:
                key[j, a] = np.inf
                continue
            theirs = plan[u]
            cost = 0.0
            if theirs != _EMPTY:
                facing = theirs == _OPPOSITE[a]  # the robot there wants this robot's cell
                cost += occupied
                if theirs == 0 or facing:
                    cost += stayer
                if facing:
                    cost += head_on
            if heading != 0.0:
                cost += heading * (incoming[u] - (1 if mine == a else 0))
            if traffic != 0.0:
                age = tick - int(counts[u, _HEAT_T])
                cost += traffic * share * counts[u, _HEAT] * _aged(age, table, decay)
            if against != 0.0:
                age = tick - int(counts[u, _FLOW_T])
                flow = counts[u, _FLOW + _OPPOSITE[a]]  # entries moving the other way
                cost += against * share * flow * _aged(age, table, decay)
            key[j, a] = dist[j, a] + cost


@numba.njit(inline="always", nogil=True)
def _order_pass(
    key: NDArray[np.float64],
    ties: NDArray[np.float64],
    rows: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:
    """``out[rows[j]]``: the 5 actions by ``key[j]``, then ``ties[j]`` (insertion sorts of five)."""
    for j in range(key.shape[0]):
        r = rows[j]
        for a in range(5):
            out[r, a] = a
        for a in range(1, 5):
            b = a
            while b > 0:
                x, y = out[r, b - 1], out[r, b]
                if key[j, x] > key[j, y] or (key[j, x] == key[j, y] and ties[j, x] > ties[j, y]):
                    out[r, b - 1], out[r, b] = y, x
                    b -= 1
                else:
                    break


@numba.njit(inline="always", nogil=True)
def _claim(here: NDArray[np.int64], plan: NDArray[np.uint8]) -> None:
    """Every robot's cell into ``plan`` as staying (idle robots stay; movers overwrite it)."""
    for i in range(here.shape[0]):
        plan[here[i]] = 0


@numba.njit(inline="always", nogil=True)
def _release(
    here: NDArray[np.int64],
    blocked: NDArray[np.bool_],
    width: int,
    plan: NDArray[np.uint8],
    incoming: NDArray[np.int32],
    counted: bool,
) -> None:
    """``plan`` back to empty, and ``incoming`` (when ``counted``) to 0, where a tick wrote."""
    for i in range(here.shape[0]):
        v = here[i]
        if counted and plan[v] != 0 and plan[v] != _EMPTY:
            incoming[_step_to(v, plan[v], blocked, width)] = 0
        plan[v] = _EMPTY


@numba.njit(inline="always", nogil=True)
def _traffic_keys(
    here: NDArray[np.int64],
    at: NDArray[np.int64],
    cell: NDArray[np.int64],
    dist: NDArray[np.int64],
    ties: NDArray[np.float64],
    blocked: NDArray[np.bool_],
    width: int,
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    wt: NDArray[np.float64],
    plan: NDArray[np.uint8],
    incoming: NDArray[np.int32],
) -> NDArray[np.float64]:
    """``(M, 5)`` route cost plus traffic cost of the robots at ``at`` (the passes in order).

    Every robot's cell ``here`` claimed, the plain choices, the costs, then ``plan`` and
    ``incoming`` left empty again. ``cell``: :func:`~fleetmind.sim.distances.moves_pass` of
    ``at``; ``dist``: their route costs.
    """
    counted = wt[3] != 0.0
    _claim(here, plan)
    _intend_pass(at, cell, dist, ties, plan, incoming, counted)
    key = np.empty((at.shape[0], 5), dtype=np.float64)
    _cost_pass(at, cell, dist, tick, counts, table, decay, wt, plan, incoming, key)
    _release(here, blocked, width, plan, incoming, counted)
    return key


@numba.njit(_KEYS_SIG, cache=True, nogil=True)
def _keys(
    here: NDArray[np.int64],
    idx: NDArray[np.int64],
    dist: NDArray[np.int64],
    blocked: NDArray[np.bool_],
    width: int,
    ties: NDArray[np.float64],
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    wt: NDArray[np.float64],
    plan: NDArray[np.uint8],
    incoming: NDArray[np.int32],
) -> NDArray[np.float64]:
    """``(M, 5)`` action costs of the robots ``idx`` (see ``CongestionExecutor.costs``).

    ``plan`` (per cell: the action its robot would take) comes in empty and ``incoming`` (per
    cell: the robots heading into it) as 0, and both leave so.
    """
    at = here[idx]
    cell = np.empty((idx.shape[0], 5), dtype=np.int64)
    moves_pass(at, blocked, width, cell)
    return _traffic_keys(
        here, at, cell, dist, ties, blocked, width, tick, counts, table, decay, wt, plan, incoming
    )


@numba.njit(_I2(_F2, _F2), cache=True, nogil=True)
def order(key: NDArray[np.float64], ties: NDArray[np.float64]) -> NDArray[np.int64]:
    """``(M, 5)`` actions by ``key``, then ``ties``: ``np.lexsort((ties, key), axis=1)``."""
    out = np.empty((key.shape[0], 5), dtype=np.int64)
    _order_pass(key, ties, np.arange(key.shape[0]), out)
    return out


_RANK_SIG = [
    numba.void(
        numba.int32[:, ::1],
        _I1,
        _I1,
        _I1,
        slab[:, ::1],
        _I1,
        numba.int64,
        numba.boolean[::1],
        numba.int64,
        numba.uint16[:, ::1],
        numba.boolean,
        _F2,
        numba.int64,
        _F2,
        _F1,
        numba.float64,
        _F1,
        numba.uint8[::1],
        numba.int32[::1],
        _I2,
    )
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(_RANK_SIG, cache=True, nogil=True)
def _rank(
    pos: NDArray[np.int32],
    here: NDArray[np.int64],
    last: NDArray[np.int64],
    idx: NDArray[np.int64],
    slab: NDArray[np.integer],
    slots: NDArray[np.int64],
    none: int,
    route_blocked: NDArray[np.bool_],
    width: int,
    step: NDArray[np.uint16],
    stepped: bool,
    ties: NDArray[np.float64],
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    wt: NDArray[np.float64],
    plan: NDArray[np.uint8],
    incoming: NDArray[np.int32],
    ranking: NDArray[np.int64],
) -> None:
    """A whole tick in one call: count it, read route costs, add traffic, order the rows ``idx``.

    ``here``: written, the flat cell of each robot at ``pos``. Then the same steps as
    :func:`_advance` (while a term reads the counts),
    ``DistanceOracle.after_moves``, :func:`_keys` and :func:`order`, one pass over the fleet
    each: where each move leads, the route costs, every robot's plain choice, the costs (a
    robot's traffic cost needs its neighbours' choices), the rankings. The walls are the
    route maps' (the traffic pass's own, after any reroute).
    """
    for i in range(pos.shape[0]):
        here[i] = pos[i, 0] * width + pos[i, 1]
    if _counts_read(wt):
        _advance(here, last, tick, counts, table, decay, width)
    m = idx.shape[0]
    if m == 0:
        return
    at = np.empty(m, dtype=np.int64)
    for j in range(m):
        at[j] = here[idx[j]]
    dist = np.empty((m, 5), dtype=np.int64)
    cell = np.empty((m, 5), dtype=np.int64)
    moves_pass(at, route_blocked, width, cell)
    gather_pass(slab, slots, none, at, cell, step, stepped, dist)
    key = _traffic_keys(
        here,
        at,
        cell,
        dist,
        ties,
        route_blocked,
        width,
        tick,
        counts,
        table,
        decay,
        wt,
        plan,
        incoming,
    )
    _order_pass(key, ties, idx, ranking)


class TrafficState:
    """Decayed traffic counts of one map and the compiled cost pass over them.

    Args:
        blocked: ``(H, W)`` walls.
        decay: per-tick decay of the counts, in [0, 1).
        weights: ``(6,)`` weights of occupied, stayer, head-on, incoming, traffic, against.
    """

    def __init__(self, blocked: NDArray[np.bool_], decay: float, weights: NDArray[np.float64]):
        h, w = blocked.shape
        self.shape = (h, w)
        # (H * W, 8) per cell, a cache line each: see ``_HEAT`` and the columns after it.
        self.counts = np.zeros((h * w, 8), dtype=np.float64)
        self.decay = 0.0
        self.weights = np.zeros(6, dtype=np.float64)
        self.table = np.zeros(_POW_TABLE, dtype=np.float64)
        self.retune(decay, weights)
        self.blocked = np.ascontiguousarray(blocked.ravel(), dtype=np.bool_)
        self.tick = 0
        self.last = np.zeros(0, dtype=np.int64)
        # Per cell, between ticks all empty / 0: the action the robot standing there would take
        # (``_EMPTY``: none), and the robots heading into it. A byte a cell keeps the reads
        # around every robot in cache.
        self.plan = np.full(h * w, _EMPTY, dtype=np.uint8)
        self.incoming = np.zeros(h * w, dtype=np.int32)

    @property
    def counting(self) -> bool:
        """Whether a term reads the counts (``traffic`` or ``against`` weighs something)."""
        return bool(_counts_read(self.weights))

    def retune(self, decay: float, weights: NDArray[np.float64]) -> None:
        """New weights and decay from the next tick.

        The counts so far are kept while they are counted; weights that start reading them
        after ticks that did not count start them from zero (no stale counts).
        """
        was = self.counting
        self.decay = float(decay)
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.table = self.decay ** np.arange(_POW_TABLE, dtype=np.float64)
        if self.counting and not was:
            self.counts[:] = 0.0

    def advance(self, here: NDArray[np.int64]) -> None:
        """Count one tick: the robots at flat cells ``here`` and the moves since the last.

        Counts only while a term reads them (:attr:`counting`): without it, a tick skips a
        cache line per robot.
        """
        self.tick += 1
        if self.counting:
            width = self.shape[1]
            _advance(here, self.last, self.tick, self.counts, self.table, self.decay, width)
        self.last = here.copy()

    def keys(
        self,
        here: NDArray[np.int64],
        idx: NDArray[np.intp],
        dist: NDArray[np.int64],
        ties: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """``(M, 5)`` route cost plus traffic cost of each action of robots ``idx``.

        Args:
            here: ``(N,)`` flat cells of every robot (as given to :meth:`advance` this tick).
            idx: ``(M,)`` the robots to cost.
            dist: ``(M, 5)`` their route cost after each action (waiting: from where they are).
            ties: ``(M, 5)`` their random tie-breakers.
        """
        row = np.asarray(idx, dtype=np.int64), np.ascontiguousarray(dist, dtype=np.int64)
        key = _keys(here, *row, self.blocked, self.shape[1], ties, *self._traffic())
        return np.asarray(key)

    def _traffic(self) -> tuple[Any, ...]:
        """The traffic arguments of the cost pass (``_keys``' last seven)."""
        state = self.tick, self.counts, self.table, self.decay, self.weights
        return (*state, self.plan, self.incoming)

    def rank(
        self,
        pos: NDArray[np.integer],
        idx: NDArray[np.int64],
        routes: RouteReader,
        ties: NDArray[np.float64],
        ranking: NDArray[np.int64],
    ) -> None:
        """Count one tick and write the rows ``idx`` of ``ranking``, all in one compiled call.

        The same as :meth:`advance` (of the flat cells of ``pos``), the route costs ``routes``
        give, :meth:`keys` and :func:`order`, one after the other.

        Args:
            pos: ``(N, 2)`` cells of every robot.
            idx: ``(M,)`` the robots to rank.
            routes: the route costs to the targets of ``idx`` (``DistanceOracle.reader``).
            ties: ``(M, 5)`` their random tie-breakers.
            ranking: ``(N, 5)`` rankings; rows ``idx`` are written.
        """
        cells = np.ascontiguousarray(pos, dtype=np.int32)
        here = np.empty(len(cells), dtype=np.int64)  # the kernel writes it: next tick's last
        self.tick += 1
        moved = cells, here, self.last, np.asarray(idx, dtype=np.int64)
        # ``routes``' fields come in ``_rank``'s order.
        args: tuple[Any, ...] = (*moved, *routes, ties, *self._traffic(), ranking)
        _rank(*args)
        self.last = here
