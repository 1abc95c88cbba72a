"""Compiled per-tick work of the congestion-aware executors (``dispatch/executors.py``).

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

from fleetmind.sim.distances import RouteReader, gather_after_moves
from fleetmind.sim.grid import DELTAS

_POW_TABLE = 4096
"""Ages with a precomputed ``decay ** age``; older counts take ``math.pow``."""


@numba.njit(inline="always", nogil=True)
def _aged(age: int, table: NDArray[np.float64], decay: float) -> float:
    """``decay ** age`` (the table for recent ages)."""
    if age < table.shape[0]:
        return float(table[age])
    return math.pow(decay, age)


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
    numba.int64,
    numba.int32[:, ::1],
    _F2,
    numba.int64,
    _F2,
    _F1,
    numba.float64,
    _F1,
    _I2,
    _I1,
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


@numba.njit(_KEYS_SIG, cache=True, nogil=True)
def _keys(
    here: NDArray[np.int64],
    idx: NDArray[np.int64],
    dist: NDArray[np.int64],
    blocked: NDArray[np.bool_],
    height: int,
    width: int,
    deltas: NDArray[np.int32],
    ties: NDArray[np.float64],
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    wt: NDArray[np.float64],
    claims: NDArray[np.int64],
    intent: NDArray[np.int64],
) -> NDArray[np.float64]:
    """``(M, 5)`` action costs of the robots ``idx`` (see ``CongestionExecutor.costs``).

    ``claims`` (per cell: the robot in it, the robots heading into it) comes in as -1 and 0
    and leaves so; ``intent`` (per robot) is scratch.
    """
    n = here.shape[0]
    m = idx.shape[0]
    opposite = (0, 2, 1, 4, 3)
    nxt = np.full((m, 5), -1, dtype=np.int64)  # flat cell after each action, -1 if blocked
    for j in range(m):
        r, c = here[idx[j]] // width, here[idx[j]] % width
        for a in range(5):
            rr, cc = r + deltas[a, 0], c + deltas[a, 1]
            if 0 <= rr < height and 0 <= cc < width and not blocked[rr * width + cc]:
                nxt[j, a] = rr * width + cc
    for i in range(n):
        claims[here[i], 0] = i
        intent[i] = -1
    # Every robot's plain choice (lowest route cost, ties at random): where traffic is heading.
    for j in range(m):
        best = 0
        for a in range(1, 5):
            if dist[j, a] < dist[j, best] or (
                dist[j, a] == dist[j, best] and ties[j, a] < ties[j, best]
            ):
                best = a
        if best != 0:
            intent[idx[j]] = nxt[j, best] if nxt[j, best] >= 0 else 0
            claims[intent[idx[j]], 1] += 1
    key = np.empty((m, 5), dtype=np.float64)
    share = 1.0 - decay
    for j in range(m):
        me = idx[j]
        key[j, 0] = dist[j, 0]
        for a in range(1, 5):
            cell = nxt[j, a]
            if cell < 0:
                key[j, a] = np.inf
                continue
            holder = claims[cell, 0]
            cost = 0.0
            if holder >= 0:
                h_intent = intent[holder]
                head_on = h_intent == here[me]
                cost += wt[0]  # occupied
                if h_intent < 0 or head_on:
                    cost += wt[1]  # stayer
                if head_on:
                    cost += wt[2]
            own = 1 if intent[me] == cell else 0
            cost += wt[3] * (claims[cell, 1] - own)
            heat = counts[cell, _HEAT] * _aged(tick - int(counts[cell, _HEAT_T]), table, decay)
            cost += wt[4] * share * heat
            age = tick - int(counts[cell, _FLOW_T])
            cost += wt[5] * share * counts[cell, _FLOW + opposite[a]] * _aged(age, table, decay)
            key[j, a] = dist[j, a] + cost
    for i in range(n):
        claims[here[i], 0] = -1
        if intent[i] >= 0:
            claims[intent[i], 1] = 0
    return key


@numba.njit(_I2(_F2, _F2), cache=True, nogil=True)
def order(key: NDArray[np.float64], ties: NDArray[np.float64]) -> NDArray[np.int64]:
    """``(M, 5)`` actions by ``key``, then ``ties``: ``np.lexsort((ties, key), axis=1)``."""
    m = key.shape[0]
    out = np.empty((m, 5), dtype=np.int64)
    for j in range(m):
        for a in range(5):
            out[j, a] = a
        for a in range(1, 5):  # insertion sort of five
            b = a
            while b > 0:
                x, y = out[j, b - 1], out[j, b]
                if key[j, x] > key[j, y] or (key[j, x] == key[j, y] and ties[j, x] > ties[j, y]):
                    out[j, b - 1], out[j, b] = y, x
                    b -= 1
                else:
                    break
    return out


_RANK_SIG = [
    numba.void(
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
        numba.int64,
        numba.int32[:, ::1],
        _F2,
        numba.int64,
        _F2,
        _F1,
        numba.float64,
        _F1,
        _I2,
        _I1,
        _I2,
    )
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(_RANK_SIG, cache=True, nogil=True)
def _rank(
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
    height: int,
    deltas: NDArray[np.int32],
    ties: NDArray[np.float64],
    tick: int,
    counts: NDArray[np.float64],
    table: NDArray[np.float64],
    decay: float,
    wt: NDArray[np.float64],
    claims: NDArray[np.int64],
    intent: NDArray[np.int64],
    ranking: NDArray[np.int64],
) -> None:
    """A whole tick in one call: count it, read route costs, add traffic, order the rows ``idx``.

    The same steps as :func:`_advance`, ``DistanceOracle.after_moves``, :func:`_keys` and
    :func:`order` called one by one, without a trip through Python between them.
    """
    _advance(here, last, tick, counts, table, decay, width)
    m = idx.shape[0]
    if m == 0:
        return
    at = np.empty(m, dtype=np.int64)
    for j in range(m):
        at[j] = here[idx[j]]
    dist = np.empty((m, 5), dtype=np.int64)
    gather_after_moves(slab, slots, none, at, route_blocked, width, step, stepped, dist)
    # The route maps' walls (the traffic pass's own, after any reroute), in cache from the gather.
    key = _keys(
        here,
        idx,
        dist,
        route_blocked,
        height,
        width,
        deltas,
        ties,
        tick,
        counts,
        table,
        decay,
        wt,
        claims,
        intent,
    )
    best = order(key, ties)
    for j in range(m):
        for a in range(5):
            ranking[idx[j], a] = best[j, a]


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
        self.decay = 0.0
        self.weights = np.zeros(6, dtype=np.float64)
        self.table = np.zeros(_POW_TABLE, dtype=np.float64)
        self.retune(decay, weights)
        self.blocked = np.ascontiguousarray(blocked.ravel(), dtype=np.bool_)
        self.tick = 0
        # (H * W, 8) per cell, a cache line each: see ``_HEAT`` and the columns after it.
        self.counts = np.zeros((h * w, 8), dtype=np.float64)
        self.last = np.zeros(0, dtype=np.int64)
        self.claims = np.zeros((h * w, 2), dtype=np.int64)
        self.claims[:, 0] = -1
        self._intent = np.zeros(0, dtype=np.int64)  # (N,) scratch of the cost pass

    def retune(self, decay: float, weights: NDArray[np.float64]) -> None:
        """New weights and decay from the next tick; the counts so far are kept."""
        self.decay = float(decay)
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.table = self.decay ** np.arange(_POW_TABLE, dtype=np.float64)

    def advance(self, here: NDArray[np.int64]) -> None:
        """Count one tick: the robots at flat cells ``here`` and the moves since the last."""
        self.tick += 1
        _advance(here, self.last, self.tick, self.counts, self.table, self.decay, self.shape[1])
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
        h, w = self.shape
        row = np.asarray(idx, dtype=np.int64), np.ascontiguousarray(dist, dtype=np.int64)
        return np.asarray(
            _keys(here, *row, self.blocked, h, w, DELTAS, ties, *self._counted(len(here)))
        )

    def _counted(self, robots: int) -> tuple[Any, ...]:
        """The traffic arguments of the cost pass (``_keys``' last seven), scratch sized."""
        if len(self._intent) != robots:
            self._intent = np.empty(robots, dtype=np.int64)
        return (
            self.tick,
            self.counts,
            self.table,
            self.decay,
            self.weights,
            self.claims,
            self._intent,
        )

    def rank(
        self,
        here: NDArray[np.int64],
        idx: NDArray[np.intp],
        routes: RouteReader,
        ties: NDArray[np.float64],
        ranking: NDArray[np.int64],
    ) -> None:
        """Count one tick and write the rows ``idx`` of ``ranking``, all in one compiled call.

        The same as :meth:`advance`, the route costs ``routes`` give, :meth:`keys` and
        :func:`order`, one after the other.

        Args:
            here: ``(N,)`` flat cells of every robot.
            idx: ``(M,)`` the robots to rank.
            routes: the route costs to the targets of ``idx`` (``DistanceOracle.reader``).
            ties: ``(M, 5)`` their random tie-breakers.
            ranking: ``(N, 5)`` rankings; rows ``idx`` are written.
        """
        at = np.ascontiguousarray(here, dtype=np.int64)
        self.tick += 1
        moved = at, self.last, np.asarray(idx, dtype=np.int64)
        # ``routes``' fields come in ``_rank``'s order.
        args: tuple[Any, ...] = (
            *moved,
            *routes,
            self.shape[0],
            DELTAS,
            ties,
            *self._counted(len(at)),
            ranking,
        )
        _rank(*args)
        self.last = at.copy()
