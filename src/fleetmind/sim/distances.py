"""True shortest-path distances on a grid, cached per target cell.

A distance map of a target holds, for every cell, the number of moves to reach the target while
avoiding blocked cells (robots ignored); unreachable cells hold :data:`UNREACHABLE`. A map is one
breadth-first search over the grid, compiled (:func:`grid_bfs`, numba: a fraction of a
millisecond on a 140 x 500 map, written straight into the cache in its storage type, without the
GIL so the background worker runs beside the control thread). :func:`bfs_distances` (scipy's
breadth-first order plus numpy passes over its tree, several times slower) stays as the
reference the kernel is tested against.

Maps are kept in one slab, a row per target (``uint16`` when the map has fewer than 65,535 free
cells, else ``int32``), least recently used out first, so that many robots' distances are read in
one numpy gather (:meth:`DistanceOracle.lookup`): nothing per robot runs in Python. Maps can be
asked for ahead of need (:meth:`DistanceOracle.request`, e.g. an order's station when a robot is
given it): a background thread computes them while the control thread goes on. A map that is not
there when needed is computed on the spot, to the same values, so results never depend on timing.

An oracle can also hold the maps of a weighted guidance graph (``weights``: the cost of each
move from each cell, whole numbers): each map is then one compiled bucket-queue Dijkstra search
(:func:`grid_dial`), stored and read the same way. On a map where many cells lie in aisles (two
free neighbours), the search runs on the cells between aisles and fills the aisles from their
ends (:func:`chain_dial` on :func:`contract`'s :class:`Chains`), to the same values.
:meth:`DistanceOracle.after_moves` reads the route cost after each of a robot's five actions for a
whole fleet in one compiled pass.

When walls change (a robot stops, an aisle closes or reopens), :meth:`DistanceOracle.rerouted`
repairs the held maps in place from the changed cells outward (``_repair``) rather than
searching each again: what a new search would give, at a fraction of the cost.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from fleetmind.sim.grid import DELTAS, Cell, GridMap

UNREACHABLE = np.iinfo(np.int32).max // 2

_U16_NONE = np.iinfo(np.uint16).max  # "unreachable" in a uint16 slab
_IDLE_EXIT_S = 2.0  # a background worker with nothing to do for this long stops
_SPARE_SLOTS = 16  # empty slab slots kept for the background worker to write maps into
_SPARE = np.iinfo(np.int64).max  # the last use of a spare slot: never the least recent
# Counters an oracle hands on to the one that replaces it (``DistanceOracle.rerouted``).
_COUNTS = ("computed", "computed_ahead", "computed_s", "computed_ahead_s", "adopted", "kept")


def adjacency(blocked: NDArray[np.bool_]) -> csr_matrix:
    """The 4-neighbour adjacency of free cells, over flat indices ``row * W + col``."""
    h, w = blocked.shape
    free = ~blocked
    src_list = []
    dst_list = []
    for dr, dc in DELTAS[1:]:
        r0, r1 = max(0, -dr), h - max(0, dr)
        c0, c1 = max(0, -dc), w - max(0, dc)
        rows, cols = np.nonzero(free[r0:r1, c0:c1] & free[r0 + dr : r1 + dr, c0 + dc : c1 + dc])
        rows, cols = rows + r0, cols + c0
        src_list.append(rows * w + cols)
        dst_list.append((rows + dr) * w + cols + dc)
    src = np.concatenate(src_list)
    dst = np.concatenate(dst_list)
    data = np.ones(len(src), dtype=np.float32)
    return coo_matrix((data, (src, dst)), shape=(h * w, h * w)).tocsr()


def bfs_distances(graph: csr_matrix, source: int) -> NDArray[np.int32]:
    """``(V,)`` moves between ``source`` and every node of an undirected unweighted graph.

    One breadth-first search in C gives the visiting order and each node's parent; the depths
    follow by pointer doubling over that tree (``log2(depth)`` numpy passes), never a Python loop
    per node or per level. Nodes not reached hold :data:`UNREACHABLE`.
    """
    order, pred = breadth_first_order(graph, source, directed=True, return_predecessors=True)
    n = graph.shape[0]
    m = len(order)
    where = np.empty(n, dtype=np.int64)
    where[order] = np.arange(m)
    up = np.zeros(m, dtype=np.int64)  # (m,) position of each visited node's ancestor
    up[1:] = where[pred[order[1:]]]
    depth = np.ones(m, dtype=np.int32)  # (m,) moves from each node to ``up``
    depth[0] = 0
    while up.any():
        depth += depth[up]
        up = up[up]
    out = np.full(n, UNREACHABLE, dtype=np.int32)
    out[order] = depth
    return out


@numba.njit(inline="always", nogil=True)
def _reset(blocked: NDArray[np.bool_], source: int, out: NDArray[np.integer], none: int) -> bool:
    """``out`` all ``none`` but the source (0); whether a search runs (a free source)."""
    for i in range(out.shape[0]):
        out[i] = none
    out[source] = 0
    return not blocked[source]


# Compiled when the module is imported (each storage type), not on a first call in a tick.
_GRID_BFS_SIG = [
    numba.void(numba.boolean[:], numba.int64, numba.int64, out[:], numba.int64)
    for out in (numba.uint16, numba.int32)
]


@numba.njit(_GRID_BFS_SIG, cache=True, nogil=True)
def grid_bfs(
    blocked: NDArray[np.bool_], width: int, source: int, out: NDArray[np.integer], none: int
) -> None:
    """Moves from every cell to ``source`` over 4-neighbour free cells, written into ``out``.

    The same values as :func:`bfs_distances` on :func:`adjacency` (a blocked source reaches only
    itself), with ``none`` where there is no path, in ``out``'s own type.

    Args:
        blocked: ``(H * W,)`` flat blocked mask.
        width: the grid's width ``W``.
        source: the flat target cell.
        out: ``(H * W,)`` written: the distances.
        none: the value for cells without a path.
    """
    n = blocked.shape[0]
    if not _reset(blocked, source, out, none):
        return
    queue = np.empty(n, dtype=np.int64)
    queue[0] = source
    head, tail = 0, 1
    while head < tail:
        v = queue[head]
        head += 1
        d = out[v] + 1
        c = v % width
        # Up, down, left, right: each inside the grid, free, and not reached yet.
        if v >= width and not blocked[v - width] and out[v - width] == none:
            out[v - width] = d
            queue[tail] = v - width
            tail += 1
        if v + width < n and not blocked[v + width] and out[v + width] == none:
            out[v + width] = d
            queue[tail] = v + width
            tail += 1
        if c > 0 and not blocked[v - 1] and out[v - 1] == none:
            out[v - 1] = d
            queue[tail] = v - 1
            tail += 1
        if c < width - 1 and not blocked[v + 1] and out[v + 1] == none:
            out[v + 1] = d
            queue[tail] = v + 1
            tail += 1


def incoming_weights(
    blocked: NDArray[np.bool_], width: int, weights: NDArray[np.integer]
) -> NDArray[np.uint16]:
    """``(H * W, 4)`` the cost of each move into a cell: from above, below, left and right.

    Column ``k`` of cell ``u`` is the weight (``weights``, ``sim.grid`` action ids) of the move
    a free neighbour makes into ``u``: the one above moves DOWN, below UP, left RIGHT, right
    LEFT. 0 where that neighbour is off the grid or blocked, or ``u`` is. :func:`grid_dial`
    reads one row of it per settled cell instead of four rows of ``weights``.
    """
    n = blocked.shape[0]
    free = ~np.asarray(blocked, dtype=bool).reshape(-1)
    wt = np.asarray(weights)
    u = np.arange(n)
    col = u % width
    inc = np.zeros((n, 4), dtype=np.uint16)
    # (column, the neighbour's offset, whether it exists, the action it moves into u with)
    for k, off, there, action in (
        (0, -width, u >= width, 2),
        (1, width, u + width < n, 1),
        (2, -1, col > 0, 4),
        (3, 1, col < width - 1, 3),
    ):
        v = np.where(there, u + off, 0)
        ok = there & free & free[v]
        inc[ok, k] = wt[v[ok], action]
    return inc


_GRID_DIAL_SIG = [
    numba.void(
        numba.boolean[::1],
        numba.int64,
        numba.uint16[:, ::1],
        numba.int64,
        numba.int64,
        out[::1],
        numba.int64,
        numba.int32[::1],
        numba.int32[::1],
    )
    for out in (numba.uint16, numba.int32)
]


@numba.njit(_GRID_DIAL_SIG, cache=True, nogil=True)
def grid_dial(
    blocked: NDArray[np.bool_],
    width: int,
    incoming: NDArray[np.uint16],
    top: int,
    source: int,
    out: NDArray[np.integer],
    none: int,
    node: NDArray[np.int32],
    nxt: NDArray[np.int32],
) -> None:
    """Weighted cost from every cell to ``source`` (Dial's bucket queue), written into ``out``.

    The move from a cell into its neighbour ``u`` costs ``incoming[u, k]``
    (:func:`incoming_weights`: ``k`` 0-3 for the neighbour above, below, left, right; 0: no such
    move), a whole number in ``[1, top]``, so a cell's value is the cheapest sum of move costs
    to the target: a guidance graph's distance. Whole weights no larger than ``top`` make a
    circular queue of ``top + 1`` buckets (or the next power of two) exact, with no heap. Same
    conventions as :func:`grid_bfs`: ``none`` where there is no path, a blocked source reaches
    only itself. Every finite cost must be below ``none`` (``out`` holds the search's
    tentative costs; the caller's storage type is chosen so).

    Args:
        blocked: ``(H * W,)`` flat blocked mask.
        width: the grid's width ``W``.
        incoming: ``(H * W, 4)`` the cost of each move into each cell.
        top: the largest move weight (or more).
        source: the flat target cell.
        out: ``(H * W,)`` written: the costs.
        none: the value for cells without a path.
        node: ``(4 * H * W + 1,)`` scratch: each queue entry's cell.
        nxt: ``(4 * H * W + 1,)`` scratch: the entry after each in its bucket.
    """
    if not _reset(blocked, source, out, none):
        return
    nb = 1
    while nb <= top:
        nb *= 2
    mask = nb - 1
    head = np.full(nb, -1, dtype=np.int32)
    # An entry is pushed on each improvement (at most one per edge), popped in cost order.
    node[0], nxt[0], head[0] = source, -1, 0
    used, pending, d = 1, 1, 0
    while pending > 0:
        while head[d & mask] < 0:
            d += 1
        e = head[d & mask]
        head[d & mask] = nxt[e]
        pending -= 1
        u = node[e]
        if out[u] != d:
            continue  # a stale entry: ``u`` was reached cheaper since
        # The four cells that step into ``u``, with what each move costs: one row, one read.
        for k in range(4):
            cost = incoming[u, k]
            if cost == 0:
                continue
            if k == 0:
                v = u - width
            elif k == 1:
                v = u + width
            elif k == 2:
                v = u - 1
            else:
                v = u + 1
            nd = d + cost
            if nd >= out[v]:
                continue
            out[v] = nd
            node[used] = v
            nxt[used] = head[nd & mask]
            head[nd & mask] = used
            used += 1
            pending += 1


@numba.njit(inline="always", nogil=True)
def next_cell(u: int, a: int, width: int, n: int) -> int:
    """The cell action ``a`` (1-4) leads to from ``u``, -1 off the grid."""
    c = u % width
    if a == 1:
        v = u - width
    elif a == 2:
        v = u + width
    elif a == 3:
        v = u - 1 if c > 0 else -1
    else:
        v = u + 1 if c < width - 1 else -1
    return v if 0 <= v < n else -1


# ---------------------------------------------------------------- chains of two-neighbour cells
# Most free cells of a warehouse lie in aisles: two free neighbours, one on each side. A route
# through such a chain of cells has no choice to make until its end, so the weighted search
# runs on the graph of the other cells (nodes) joined by whole chains, and then fills each
# chain's cells from its two ends' costs. On LoRR warehouse_large (63% of the free cells in
# chains) that takes 0.46 ms a map against 0.75 for the search over every cell.
_CHAIN_MAX = 16
"""Cells at most in one chain: a longer one is cut by a node, so that an edge costs at most
``_CHAIN_MAX + 1`` moves and Dial's bucket queue stays small."""
_CHAIN_SHARE = 0.25
"""The share of free cells in chains from which an oracle searches on chains."""
_CHAIN_TOP = 1 << 12
"""The dearest chain an oracle searches on: Dial's queue holds a bucket per unit of it."""
_BIG = np.iinfo(np.int64).max // 4


class Chains(NamedTuple):
    """A grid's chains of two-neighbour cells and the graph of the cells between them.

    Nodes are the free cells with other than two free neighbours, a two-neighbour cell between
    two such cells, one cell of each loop of chain cells, and a cell every ``_CHAIN_MAX`` cells
    of a long chain. Every other free cell belongs to one chain, whose ends ``A`` and ``B``
    are nodes (the same node for a loop).

    Attributes:
        node_of: ``(H * W,)`` a cell's node, -1 for chain cells and walls.
        node_cell: ``(N,)`` each node's cell.
        in_ptr: ``(N + 1,)`` node ``x``'s incoming edges are ``in_ptr[x]:in_ptr[x + 1]``.
        in_src: ``(E,)`` the node each edge leaves.
        in_cost: ``(E,)`` its cost: one move, or the whole chain between the two nodes.
        chain_of: ``(H * W,)`` a chain cell's chain, -1 for others.
        at: ``(H * W,)`` a chain cell's place in its chain, from end ``A``.
        ch_ptr: ``(C + 1,)`` chain ``c``'s cells are ``ch_cells[ch_ptr[c]:ch_ptr[c + 1]]``.
        ch_cells: ``(L,)`` every chain's cells in order from end ``A``.
        ch_a: ``(C,)`` the node at end ``A``.
        ch_b: ``(C,)`` the node at end ``B``.
        ent_a: ``(C,)`` the move from ``A`` into the chain.
        ent_b: ``(C,)`` the move from ``B`` into the chain.
        to_a: ``(L,)`` the cost from a chain cell along its chain out to ``A``.
        to_b: ``(L,)`` the cost from a chain cell along its chain out to ``B``.
        top: the dearest edge (Dial's bucket range).
    """

    node_of: NDArray[np.int32]
    node_cell: NDArray[np.int64]
    in_ptr: NDArray[np.int64]
    in_src: NDArray[np.int32]
    in_cost: NDArray[np.int32]
    chain_of: NDArray[np.int32]
    at: NDArray[np.int32]
    ch_ptr: NDArray[np.int64]
    ch_cells: NDArray[np.int32]
    ch_a: NDArray[np.int32]
    ch_b: NDArray[np.int32]
    ent_a: NDArray[np.int32]
    ent_b: NDArray[np.int32]
    to_a: NDArray[np.int32]
    to_b: NDArray[np.int32]
    top: int


@numba.njit(inline="always")
def _free_next(v: int, k: int, width: int, blocked: NDArray[np.bool_]) -> int:
    """The free neighbour ``k`` (0-3: up, down, left, right) of ``v``, -1 if none."""
    u = next_cell(v, k + 1, width, blocked.shape[0])
    return -1 if u < 0 or blocked[u] else u


@numba.njit(inline="always")
def _move_cost(v: int, u: int, width: int, blocked: NDArray[np.bool_], step: Any) -> int:
    """The weight of the move from ``v`` into its free neighbour ``u``."""
    for k in range(4):
        if _free_next(v, k, width, blocked) == u:
            return int(step[v, k + 1])
    return 0


@numba.njit(cache=True)
def _contract(blocked: NDArray[np.bool_], width: int, step: NDArray[np.uint16]) -> Any:
    """The arrays of :class:`Chains` (see there), in its order."""
    n = blocked.shape[0]
    deg = np.zeros(n, dtype=np.int32)
    for v in range(n):
        if not blocked[v]:
            for k in range(4):
                if _free_next(v, k, width, blocked) >= 0:
                    deg[v] += 1
    node_of = np.full(n, -1, dtype=np.int32)
    node_cell = np.empty(n, dtype=np.int64)
    nn = 0
    for v in range(n):
        if blocked[v]:
            continue
        node = deg[v] != 2
        if not node:  # a chain of one cell saves nothing: a node
            ends = 0
            for k in range(4):
                u = _free_next(v, k, width, blocked)
                if u >= 0 and deg[u] != 2:
                    ends += 1
            node = ends == 2
        if node:
            node_of[v] = nn
            node_cell[nn] = v
            nn += 1
    chain_of = np.full(n, -1, dtype=np.int32)
    at = np.full(n, -1, dtype=np.int32)
    ch_ptr = np.zeros(n + 1, dtype=np.int64)
    ch_cells = np.empty(n, dtype=np.int32)
    ch_a = np.empty(n, dtype=np.int32)
    ch_b = np.empty(n, dtype=np.int32)
    ent_a = np.empty(n, dtype=np.int32)
    ent_b = np.empty(n, dtype=np.int32)
    to_a = np.empty(n, dtype=np.int32)
    to_b = np.empty(n, dtype=np.int32)
    # Edges (to, from, cost): at most four leave a node, and a chain adds two.
    e_to = np.empty(4 * n + 4, dtype=np.int32)
    e_from = np.empty(4 * n + 4, dtype=np.int32)
    e_cost = np.empty(4 * n + 4, dtype=np.int32)
    ne = nc = nl = 0
    top = 1
    i = scan = 0
    while True:  # nodes are added below (loops, long chains): walk until none is left
        while i == nn and scan < n:  # a loop of chain cells with no node: one cell becomes one
            if not blocked[scan] and node_of[scan] < 0 and chain_of[scan] < 0:
                node_of[scan] = nn
                node_cell[nn] = scan
                nn += 1
            scan += 1  # every cell before it is a wall, a node or a chain cell: never again
        if i == nn:
            break
        v = node_cell[i]
        for k in range(4):
            u = _free_next(v, k, width, blocked)
            if u < 0 or chain_of[u] >= 0:  # none, or a chain walked from its other end
                continue
            first_move = int(step[v, k + 1])
            if node_of[u] >= 0:
                if u != v:
                    e_to[ne], e_from[ne], e_cost[ne] = node_of[u], i, first_move
                    ne += 1
                    top = max(top, first_move)
                continue
            start = nl
            prev, cur = v, u
            while node_of[cur] < 0:
                if nl - start == _CHAIN_MAX:  # cut a long chain here
                    node_of[cur] = nn
                    node_cell[nn] = cur
                    nn += 1
                    break
                chain_of[cur] = nc
                at[cur] = nl - start
                ch_cells[nl] = cur
                nl += 1
                for kk in range(4):
                    x = _free_next(cur, kk, width, blocked)
                    if x >= 0 and x != prev:
                        prev, cur = cur, x
                        break
            b = cur
            last = ch_cells[nl - 1]
            to_b[nl - 1] = _move_cost(last, b, width, blocked, step)
            for j in range(nl - 2, start - 1, -1):
                to_b[j] = (
                    _move_cost(ch_cells[j], ch_cells[j + 1], width, blocked, step) + to_b[j + 1]
                )
            to_a[start] = _move_cost(ch_cells[start], v, width, blocked, step)
            for j in range(start + 1, nl):
                to_a[j] = (
                    _move_cost(ch_cells[j], ch_cells[j - 1], width, blocked, step) + to_a[j - 1]
                )
            ch_a[nc], ch_b[nc] = i, node_of[b]
            ent_a[nc] = first_move
            ent_b[nc] = _move_cost(b, last, width, blocked, step)
            ab = ent_a[nc] + to_b[start]
            ba = ent_b[nc] + to_a[nl - 1]
            if node_of[b] != i:
                e_to[ne], e_from[ne], e_cost[ne] = node_of[b], i, ab
                e_to[ne + 1], e_from[ne + 1], e_cost[ne + 1] = i, node_of[b], ba
                ne += 2
            top = max(top, ab, ba)
            nc += 1
            ch_ptr[nc] = nl
        i += 1
    in_ptr = np.zeros(nn + 1, dtype=np.int64)
    for e in range(ne):
        in_ptr[e_to[e] + 1] += 1
    for x in range(nn):
        in_ptr[x + 1] += in_ptr[x]
    fill = in_ptr[:-1].copy()
    in_src = np.empty(ne, dtype=np.int32)
    in_cost = np.empty(ne, dtype=np.int32)
    for e in range(ne):
        x = e_to[e]
        in_src[fill[x]], in_cost[fill[x]] = e_from[e], e_cost[e]
        fill[x] += 1
    return (
        node_of,
        node_cell[:nn].copy(),
        in_ptr,
        in_src,
        in_cost,
        chain_of,
        at,
        ch_ptr[: nc + 1].copy(),
        ch_cells[:nl].copy(),
        ch_a[:nc].copy(),
        ch_b[:nc].copy(),
        ent_a[:nc].copy(),
        ent_b[:nc].copy(),
        to_a[:nl].copy(),
        to_b[:nl].copy(),
        top,
    )


def contract(blocked: NDArray[np.bool_], width: int, weights: NDArray[np.integer]) -> Chains:
    """The :class:`Chains` of a grid (``(H * W,)`` walls) with move ``weights`` ``(H * W, 5)``."""
    flat = np.ascontiguousarray(blocked, dtype=np.bool_).reshape(-1)
    return Chains(*_contract(flat, width, np.ascontiguousarray(weights, dtype=np.uint16)))


_CHAIN_DIAL_SIG = [
    numba.void(
        numba.boolean[::1],
        numba.int32[::1],
        numba.int64[::1],
        numba.int64[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int64[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int32[::1],
        numba.int64,
        numba.int64,
        out[::1],
        numba.int64,
        numba.int64[::1],
        numba.int32[::1],
        numba.int32[::1],
    )
    for out in (numba.uint16, numba.int32)
]


@numba.njit(_CHAIN_DIAL_SIG, cache=True, nogil=True)
def chain_dial(
    blocked: NDArray[np.bool_],
    node_of: NDArray[np.int32],
    node_cell: NDArray[np.int64],
    in_ptr: NDArray[np.int64],
    in_src: NDArray[np.int32],
    in_cost: NDArray[np.int32],
    chain_of: NDArray[np.int32],
    at: NDArray[np.int32],
    ch_ptr: NDArray[np.int64],
    ch_cells: NDArray[np.int32],
    ch_a: NDArray[np.int32],
    ch_b: NDArray[np.int32],
    ent_a: NDArray[np.int32],
    ent_b: NDArray[np.int32],
    to_a: NDArray[np.int32],
    to_b: NDArray[np.int32],
    top: int,
    source: int,
    out: NDArray[np.integer],
    none: int,
    dist: NDArray[np.int64],
    qnode: NDArray[np.int32],
    qnext: NDArray[np.int32],
) -> None:
    """:func:`grid_dial`'s costs, searched on the nodes of :class:`Chains` (its fields first).

    Dial's search runs from the target over the nodes (a target inside a chain seeds the
    chain's two ends with their costs along it), then every chain cell takes the cheaper of its
    two ends (and of the target, on the target's own chain): a chain cell's only ways out.

    Args:
        blocked: ``(H * W,)`` flat blocked mask.
        node_of: :attr:`Chains.node_of`.
        node_cell: :attr:`Chains.node_cell`.
        in_ptr: :attr:`Chains.in_ptr`.
        in_src: :attr:`Chains.in_src`.
        in_cost: :attr:`Chains.in_cost`.
        chain_of: :attr:`Chains.chain_of`.
        at: :attr:`Chains.at`.
        ch_ptr: :attr:`Chains.ch_ptr`.
        ch_cells: :attr:`Chains.ch_cells`.
        ch_a: :attr:`Chains.ch_a`.
        ch_b: :attr:`Chains.ch_b`.
        ent_a: :attr:`Chains.ent_a`.
        ent_b: :attr:`Chains.ent_b`.
        to_a: :attr:`Chains.to_a`.
        to_b: :attr:`Chains.to_b`.
        top: :attr:`Chains.top`.
        source: the flat target cell.
        out: ``(H * W,)`` written: the costs (``none`` where there is no path).
        none: the value for cells without a path.
        dist: ``(N,)`` scratch: each node's cost.
        qnode: ``(E + 3,)`` scratch: each queue entry's node.
        qnext: ``(E + 3,)`` scratch: the entry after each in its bucket.
    """
    if not _reset(blocked, source, out, none):
        return
    for x in range(node_cell.shape[0]):
        dist[x] = _BIG
    nb = 1
    while nb <= top:
        nb *= 2
    mask = nb - 1
    head = np.full(nb, -1, dtype=np.int32)
    used = pending = 0
    sc = chain_of[source]
    m = 0
    if sc < 0:
        s = node_of[source]
        dist[s] = 0
        qnode[0], qnext[0], head[0] = s, -1, 0
        used = pending = 1
    else:  # the chain's ends, at their costs along it to the target
        base = ch_ptr[sc]
        m = at[source]
        last = ch_ptr[sc + 1] - 1
        a, b = ch_a[sc], ch_b[sc]
        dist[a] = ent_a[sc] + to_b[base] - to_b[base + m]
        # min: a loop's two ends are one node
        dist[b] = min(dist[b], ent_b[sc] + to_a[last] - to_a[base + m])
        for s in (a, b):
            ds = dist[s]
            qnode[used], qnext[used], head[ds & mask] = s, head[ds & mask], used
            used += 1
            pending += 1
    d = 0
    while pending > 0:
        while head[d & mask] < 0:
            d += 1
        e = head[d & mask]
        head[d & mask] = qnext[e]
        pending -= 1
        x = qnode[e]
        if dist[x] != d:
            continue  # a stale entry: reached cheaper since
        for f in range(in_ptr[x], in_ptr[x + 1]):
            y = in_src[f]
            nd = d + in_cost[f]
            if nd >= dist[y]:
                continue
            dist[y] = nd
            qnode[used], qnext[used], head[nd & mask] = y, head[nd & mask], used
            used += 1
            pending += 1
    for x in range(node_cell.shape[0]):
        if dist[x] < _BIG:
            out[node_cell[x]] = dist[x]
    for c in range(ch_a.shape[0]):
        da, db = dist[ch_a[c]], dist[ch_b[c]]
        base = ch_ptr[c]
        for j in range(base, ch_ptr[c + 1]):
            best = to_a[j] + da if da < _BIG else _BIG
            if db < _BIG and to_b[j] + db < best:
                best = to_b[j] + db
            if c == sc:  # along the chain to the target itself
                k = j - base
                if k < m:
                    best = min(best, to_b[j] - to_b[base + m])
                elif k > m:
                    best = min(best, to_a[j] - to_a[base + m])
                else:
                    best = 0
            if best < _BIG:
                out[ch_cells[j]] = best


_GATHER_SIG = [
    numba.void(
        slab[:, ::1],
        numba.int64[::1],
        numba.int64,
        numba.int64[::1],
        numba.boolean[::1],
        numba.int64,
        numba.uint16[:, ::1],
        numba.boolean,
        numba.int64[:, ::1],
    )
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(inline="always", nogil=True)
def moves_pass(
    at: NDArray[np.int64], blocked: NDArray[np.bool_], width: int, cell: NDArray[np.int64]
) -> None:
    """``cell[j, a]``: the cell action ``a`` (``sim.grid`` ids, waiting first) takes ``at[j]`` to.

    ``-1`` off the grid or into a wall (waiting too, for a robot on a closed cell). Kernels
    that visit a robot's neighbourhood more than once per tick find it once and read it back.

    This and the other compiled passes here each loop over the whole fleet, rather than call
    a helper per robot: with helpers called per robot on array arguments, the traffic pass
    at a thousand robots took 0.100 ms instead of 0.038 (measured, warm caches).
    """
    n = blocked.shape[0]
    for j in range(at.shape[0]):
        v = at[j]
        c = v % width
        cell[j, 0] = -1 if blocked[v] else v
        cell[j, 1] = v - width if v >= width and not blocked[v - width] else -1
        cell[j, 2] = v + width if v + width < n and not blocked[v + width] else -1
        cell[j, 3] = v - 1 if c > 0 and not blocked[v - 1] else -1
        cell[j, 4] = v + 1 if c < width - 1 and not blocked[v + 1] else -1


@numba.njit(inline="always", nogil=True)
def gather_pass(
    slab: NDArray[np.integer],
    slots: NDArray[np.int64],
    none: int,
    at: NDArray[np.int64],
    cell: NDArray[np.int64],
    step: NDArray[np.uint16],
    stepped: bool,
    out: NDArray[np.int64],
) -> None:
    """``out[j, a]``: map row ``slots[j]``'s value at ``cell[j, a]``, where action ``a`` leads.

    ``cell`` is :func:`moves_pass` of ``at``. Plus the action's own weight ``step[at[j], a]``
    when ``stepped``; :data:`UNREACHABLE` off the grid, into walls, or without a path.
    """
    for j in range(at.shape[0]):
        v = at[j]
        slot = slots[j]
        for a in range(5):
            u = cell[j, a]
            if u < 0:
                out[j, a] = UNREACHABLE
                continue
            raw = slab[slot, u]
            if raw == none:
                out[j, a] = UNREACHABLE
            elif stepped:
                out[j, a] = raw + step[v, a]
            else:
                out[j, a] = raw


@numba.njit(_GATHER_SIG, cache=True, nogil=True)
def gather_after_moves(
    slab: NDArray[np.integer],
    slots: NDArray[np.int64],
    none: int,
    here: NDArray[np.int64],
    blocked: NDArray[np.bool_],
    width: int,
    step: NDArray[np.uint16],
    stepped: bool,
    out: NDArray[np.int64],
) -> None:
    """``out[j, a]``: the map value of ``slots[j]`` where action ``a`` takes ``here[j]``.

    Plus the action's own weight ``step[here[j], a]`` when ``stepped``. Moves off the grid or
    into walls, and cells without a path, read :data:`UNREACHABLE`.
    """
    cell = np.empty((here.shape[0], 5), dtype=np.int64)
    moves_pass(here, blocked, width, cell)
    gather_pass(slab, slots, none, here, cell, step, stepped, out)


_PAIR = numba.types.UniTuple(numba.int64, 2)  # type: ignore[no-untyped-call]


@numba.njit(
    _PAIR(
        numba.int64[::1],
        numba.int64[::1],
        numba.int64[::1],
        numba.int64,
        numba.int64[::1],
        numba.int64[::1],
    ),
    cache=True,
    nogil=True,
)
def _touch(
    targets: NDArray[np.int64],
    slot_of: NDArray[np.int64],
    used: NDArray[np.int64],
    clock: int,
    missing: NDArray[np.int64],
    slots: NDArray[np.int64],
) -> tuple[int, int]:
    """Mark the held maps of ``targets`` used at ``clock``; list the distinct missing ones.

    ``slots[j]``: the slot of ``targets[j]``'s map, -1 where it is missing. Returns
    ``(held, k)``: how many distinct targets have a map, and how many distinct ones do not
    (written to ``missing[:k]`` in first-seen order). No sort: a tick reads one target per
    robot, almost all of them held.
    """
    held = 0
    k = 0
    for j in range(targets.shape[0]):
        t = targets[j]
        s = slot_of[t]
        slots[j] = s
        if s >= 0:
            if used[s] != clock:
                used[s] = clock
                held += 1
            continue
        for q in range(k):
            if missing[q] == t:
                break
        else:
            missing[k] = t
            k += 1
    return held, k


@numba.njit(
    [
        numba.void(cells[:, ::1], numba.int64[::1], numba.int64, numba.int64[::1])
        for cells in (numba.int32, numba.int64)
    ],
    cache=True,
    nogil=True,
)
def cell_flats(
    cells: NDArray[np.integer], rows: NDArray[np.int64], width: int, out: NDArray[np.int64]
) -> None:
    """``out[j]``: the flat index ``row * width + col`` of the cell ``cells[rows[j]]``."""
    for j in range(rows.shape[0]):
        i = rows[j]
        out[j] = cells[i, 0] * width + cells[i, 1]


@numba.njit(inline="always", nogil=True)
def _supported(
    row: NDArray[np.integer],
    none: int,
    u: int,
    blocked: NDArray[np.bool_],
    width: int,
    n: int,
    step: NDArray[np.uint16],
    stepped: bool,
    lost: NDArray[np.uint8],
) -> bool:
    """Whether a free neighbour still gives ``u`` its value (weight plus its own)."""
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
    blocked: NDArray[np.bool_],
    width: int,
    n: int,
    step: NDArray[np.uint16],
    stepped: bool,
) -> int:
    """The least value ``u``'s free neighbours give it (weight plus their own); else int64 max."""
    best = np.iinfo(np.int64).max
    for a in range(1, 5):
        v = next_cell(u, a, width, n)
        if v < 0 or blocked[v] or row[v] == none:
            continue
        c = int(row[v]) + (int(step[u, a]) if stepped else 1)
        if c < best and c < none:
            best = c
    return best


_REPAIR_SIG = [
    numba.boolean(
        slab[::1],
        numba.int64,
        numba.int64,
        numba.boolean[::1],
        numba.int64,
        numba.uint16[:, ::1],
        numba.boolean,
        numba.int64[::1],
        numba.int64[::1],
        numba.int64[::1],
        numba.int64,
        numba.uint8[::1],
        numba.int64[::1],
        numba.int64[::1],
    )
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(_REPAIR_SIG, cache=True, nogil=True)
def _repair(
    row: NDArray[np.integer],
    none: int,
    target: int,
    blocked: NDArray[np.bool_],
    width: int,
    step: NDArray[np.uint16],
    stepped: bool,
    check: NDArray[np.int64],
    reopened: NDArray[np.int64],
    walled: NDArray[np.int64],
    most: int,
    lost: NDArray[np.uint8],
    stack: NDArray[np.int64],
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
        blocked: ``(H * W,)`` the new walls.
        width: the map's width.
        step: ``(H * W, 5)`` the new move weights when ``stepped``, else unread.
        stepped: whether moves are weighted.
        check: flat cells whose own moves changed (walls beside them, weights) and new walls'
            and reopened cells' neighbours.
        reopened: flat cells that were walls and are free now.
        walled: flat cells that are walls now and were free.
        most: the most cells that may lose their routes before the repair gives up.
        lost: ``(H * W,)`` zeros, scratch (left zero).
        stack: ``(H * W,)`` scratch.
        members: ``(H * W,)`` scratch.
    """
    n = blocked.shape[0]
    if blocked[target]:
        return False
    for k in range(reopened.shape[0]):
        if reopened[k] == target:
            return False
    for k in range(walled.shape[0]):
        row[walled[k]] = none
    inf = np.iinfo(np.int64).max
    # 1. Routes lost.
    top = 0
    m = 0
    for j in range(check.shape[0]):
        u = check[j]
        if blocked[u] or u == target or lost[u] or row[u] == none:
            continue
        if not _supported(row, none, u, blocked, width, n, step, stepped, lost):
            lost[u] = 1
            stack[top] = u
            top += 1
            members[m] = u
            m += 1
    while top > 0 and m <= most:
        top -= 1
        v = stack[top]
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
            if not _supported(row, none, u, blocked, width, n, step, stepped, lost):
                lost[u] = 1
                stack[top] = u
                top += 1
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
            c = _offer(row, none, u, blocked, width, n, step, stepped)
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
    numba.boolean[::1](
        slab[:, ::1],
        numba.int64[::1],
        numba.int64,
        numba.int64,
        numba.boolean[::1],
        numba.int64,
        numba.uint16[:, ::1],
        numba.boolean,
        numba.int64[::1],
        numba.int64[::1],
        numba.int64[::1],
        numba.int64,
    )
    for slab in (numba.uint16, numba.int32)
]


@numba.njit(_REPAIR_HELD_SIG, cache=True, nogil=True)
def _repair_held(
    slab: NDArray[np.integer],
    target_of: NDArray[np.int64],
    filled: int,
    none: int,
    blocked: NDArray[np.bool_],
    width: int,
    step: NDArray[np.uint16],
    stepped: bool,
    check: NDArray[np.int64],
    reopened: NDArray[np.int64],
    walled: NDArray[np.int64],
    most: int,
) -> NDArray[np.bool_]:
    """:func:`_repair` on every held row ``slab[:filled]``: whether each row was repaired."""
    n = blocked.shape[0]
    lost = np.zeros(n, dtype=np.uint8)
    stack = np.empty(n, dtype=np.int64)
    members = np.empty(n, dtype=np.int64)
    ok = np.zeros(filled, dtype=np.bool_)
    for slot in range(filled):
        target = target_of[slot]
        if target < 0:
            continue
        ok[slot] = _repair(
            slab[slot],
            none,
            target,
            blocked,
            width,
            step,
            stepped,
            check,
            reopened,
            walled,
            most,
            lost,
            stack,
            members,
        )
    return ok


def _route_bound(blocked: NDArray[np.bool_], top: int) -> int:
    """An upper bound on any finite route cost with move weights at most ``top``.

    The cheapest route costs at most its fewest-moves route, so at most ``top`` times the
    diameter in moves; a component's diameter is at most twice any cell's eccentricity (one
    search from a cell of each component of more than one cell), and never more than its cells.
    """
    free = ~blocked.ravel()
    n_free = int(free.sum())
    if n_free * top < _U16_NONE:
        return n_free * top
    h, w = blocked.shape
    flat = np.ascontiguousarray(blocked.ravel(), dtype=np.bool_)
    seen = ~free
    out = np.empty(h * w, dtype=np.int32)
    worst = 0
    for start in np.flatnonzero(free).tolist():
        if seen[start]:
            continue
        grid_bfs(flat, w, start, out, UNREACHABLE)
        reached = out < UNREACHABLE
        seen |= reached
        worst = max(worst, min(2 * int(out[reached].max()), int(reached.sum())))
    return worst * top


class RouteReader(NamedTuple):
    """What :func:`gather_after_moves` reads for some targets, but for the cells and the output.

    Attributes:
        slab: the oracle's maps, a row per target.
        slots: ``(M,)`` the row of each target's map.
        none: the value of "no path" in ``slab``.
        blocked: ``(H * W,)`` walls.
        width: the map's width.
        step: ``(H * W, 5)`` each action's own weight (weighted oracle; else unread).
        stepped: whether a move's weight is added to the map value.
    """

    slab: NDArray[np.integer]
    slots: NDArray[np.int64]
    none: int
    blocked: NDArray[np.bool_]
    width: int
    step: NDArray[np.uint16]
    stepped: bool


class DistanceOracle:
    """Cached distance maps for one grid: moves, or the costs of a weighted guidance graph.

    Args:
        grid: the map.
        max_cached: the most distance maps kept; default: as many as fit in ``memory_mb``, at
            most 4096. :meth:`reserve` raises it (a fleet needs one map per robot target).
        memory_mb: the cache's memory budget when ``max_cached`` is not given.
        weights: ``(H * W, 5)`` whole cost >= 1 of each action from each cell (``sim.grid``
            action ids; the ``WAIT`` column is unread): maps then hold the cheapest route cost
            (:func:`grid_dial`, or :func:`chain_dial` when a quarter of the free cells or more
            lie in chains and no chain costs more than ``_CHAIN_TOP``) instead of moves. None:
            every move costs 1.

    Raises:
        ValueError: ``weights`` of the wrong shape, or a move weight below 1.
    """

    def __init__(
        self,
        grid: GridMap,
        *,
        max_cached: int | None = None,
        memory_mb: int = 768,
        weights: NDArray[np.integer] | None = None,
    ) -> None:
        self.grid = grid
        self.shape = grid.shape
        h, w = grid.shape
        self._blocked = np.ascontiguousarray(grid.blocked, dtype=np.bool_).reshape(-1)
        self._cells = h * w
        self._weights: NDArray[np.uint16] | None = None
        self._incoming: NDArray[np.uint16] | None = None  # what the weighted search reads
        self._chains: Chains | None = None  # or this, on a map with many aisle cells
        self._unit_step = np.ones((1, 5), dtype=np.uint16)  # unread: plain maps add no step
        self._top = 1
        if weights is None:
            # A path never has more moves than there are free cells.
            small = int((~grid.blocked).sum()) < _U16_NONE
        else:
            wt = np.asarray(weights)
            if wt.shape != (h * w, 5) or (h * w and int(wt[:, 1:].min()) < 1):
                raise ValueError("weights: expected (H * W, 5) whole numbers >= 1")
            self._top = max(1, int(wt[:, 1:].max()))
            bound = _route_bound(grid.blocked, self._top)
            if self._top > _U16_NONE or bound >= UNREACHABLE:
                raise ValueError(f"weights: up to {self._top} a move is too costly for this map")
            self._weights = np.ascontiguousarray(wt, dtype=np.uint16)
            chains = contract(self._blocked, w, self._weights)
            many = len(chains.ch_cells) >= _CHAIN_SHARE * int((~grid.blocked).sum())
            if many and chains.top <= _CHAIN_TOP:
                self._chains = chains
            else:
                self._incoming = incoming_weights(self._blocked, w, self._weights)
            small = bound < _U16_NONE
        # Scratch of the weighted search, one per thread (the caller's and the worker).
        self._scratch = threading.local()
        self._dtype = np.dtype(np.uint16 if small else np.int32)
        self._none = _U16_NONE if small else UNREACHABLE
        per_map = self._cells * self._dtype.itemsize
        self.max_cached = max_cached or max(16, min(4096, (memory_mb << 20) // per_map))
        self._slab: NDArray[np.integer] | None = None  # (max_cached, H * W), on first store
        self._slot_of = np.full(self._cells, -1, dtype=np.int64)  # (H * W,) slot of a target
        self._target_of = np.full(self.max_cached, -1, dtype=np.int64)  # (max_cached,)
        self._used = np.zeros(self.max_cached, dtype=np.int64)  # (max_cached,) last use
        self._clock = 1
        self._filled = 0
        self.computed = 0  # maps computed on the caller's thread
        self.computed_ahead = 0  # maps computed by the background worker
        # CPU seconds of those searches (each thread's own clock): the worker's are spent beside
        # the control loop, in no tick's time, and a fair account of an executor counts them.
        self.computed_s = 0.0
        self.computed_ahead_s = 0.0
        self.adopted = 0  # of those, maps taken in where the worker wrote them (no copy)
        self.kept = 0  # maps a reroute repaired instead of dropping (:meth:`rerouted`)
        self._table: tuple[bytes, NDArray[np.int64], NDArray[np.int32]] | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # the worker wrote no slab row
        # Maps the worker finished: target -> (the array holding it, its row, whether the row
        # is a slab slot). A map written straight into a spare slot of the slab is taken over
        # by setting two indices, not by copying a map's worth of memory inside the tick.
        self._ready: dict[int, tuple[NDArray[np.integer], int, bool]] = {}
        self._spare: list[int] = []  # empty slab slots the worker may write into
        self._writing = False  # the worker is writing into a spare slot
        self._making = -1  # the target whose map the worker is making now (-1: none)
        # (due, order asked, target): the worker makes the map needed soonest first.
        self._requests: queue.PriorityQueue[tuple[int, int, int]] = queue.PriorityQueue()
        self._due: dict[int, int] = {}  # a queued target -> the due of its live entry
        self._asked = 0
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------------ storage
    @property
    def cached(self) -> int:
        """How many maps are held."""
        return int((self._target_of[: self._filled] >= 0).sum())

    @property
    def nbytes(self) -> int:
        """Bytes of the maps held."""
        return self.cached * self._cells * self._dtype.itemsize

    def counts(self) -> dict[str, float]:
        """Maps made so far and their CPU time: on the caller's thread, and by the worker."""
        return {
            "made_in_caller": self.computed,
            "made_ahead": self.computed_ahead,
            "made_in_caller_cpu_s": self.computed_s,
            "made_ahead_cpu_s": self.computed_ahead_s,
        }

    def reserve(self, count: int, *, touch: bool = False) -> None:
        """Keep room for at least ``count`` maps (e.g. one per robot target).

        Args:
            count: maps to hold at once.
            touch: write the room now, so that the page faults of fresh memory (about as
                long as a search per map) are paid here, not when a map is first stored.
        """
        if count > self.max_cached:
            grow = count - self.max_cached
            if self._slab is not None:
                slab = np.empty((count, self._cells), dtype=self._dtype)
                slab[: self._filled] = self._slab[: self._filled]
                self._slab = slab
            self._target_of = np.concatenate([self._target_of, np.full(grow, -1, dtype=np.int64)])
            self._used = np.concatenate([self._used, np.zeros(grow, dtype=np.int64)])
            self.max_cached = count
        if touch:
            if self._slab is None:
                self._slab = np.empty((self.max_cached, self._cells), dtype=self._dtype)
            self._slab[self._filled : count].fill(0)  # rows not stored yet: never read

    def _flat(self, cell: Cell) -> int:
        return int(cell[0]) * self.shape[1] + int(cell[1])

    def _bfs(self, flat: int, out: NDArray[np.integer] | None = None) -> NDArray[np.integer]:
        """The map of ``flat`` in the slab's type (into ``out`` when given)."""
        if out is None:
            out = np.empty(self._cells, dtype=self._dtype)
        self._search(flat, out, self._none)
        return out

    def _search(self, flat: int, out: NDArray[np.integer], none: int) -> None:
        """One map into ``out``: moves (BFS), or route costs on the weighted graph."""
        if self._weights is None:
            grid_bfs(self._blocked, self.shape[1], flat, out, none)
            return
        scratch = self._scratch
        ch = self._chains
        if ch is not None:
            if getattr(scratch, "dist", None) is None:
                scratch.dist = np.empty(len(ch.node_cell), dtype=np.int64)
                scratch.qnode = np.empty(len(ch.in_src) + 3, dtype=np.int32)
                scratch.qnext = np.empty(len(ch.in_src) + 3, dtype=np.int32)
            chain_dial(
                self._blocked,
                *ch[:-1],
                ch.top,
                flat,
                out,
                none,
                scratch.dist,
                scratch.qnode,
                scratch.qnext,
            )
            return
        if getattr(scratch, "node", None) is None:
            scratch.node = np.empty(4 * self._cells + 1, dtype=np.int32)
            scratch.nxt = np.empty(4 * self._cells + 1, dtype=np.int32)
        assert self._incoming is not None
        grid_dial(
            self._blocked,
            self.shape[1],
            self._incoming,
            self._top,
            flat,
            out,
            none,
            scratch.node,
            scratch.nxt,
        )

    def _free_slot(self, *, spare_recent: bool = True) -> int:
        """An empty slot: one never written, or the least recently used one emptied.

        Without ``spare_recent``, -1 rather than empty a map read at this clock or the last.
        """
        if self._filled < self.max_cached:
            self._filled += 1
            return self._filled - 1
        slot = int(np.argmin(self._used))
        if not spare_recent and self._used[slot] >= self._clock - 1:
            return -1
        if self._target_of[slot] >= 0:  # a slot a reroute emptied holds no target
            self._slot_of[self._target_of[slot]] = -1
            self._target_of[slot] = -1
        return slot

    def _slot(self, flat: int) -> int:
        """A slot for the map of ``flat``: a free one, or the least recently used."""
        if self._slab is None:
            self._slab = np.empty((self.max_cached, self._cells), dtype=self._dtype)
        slot = self._free_slot()
        self._target_of[slot] = flat
        self._slot_of[flat] = slot
        self._used[slot] = self._clock
        return slot

    def _store(self, flat: int, row: NDArray[np.integer] | None = None) -> None:
        """Put the map of ``flat`` (computed now when ``row`` is None) into the slab."""
        if self._slot_of[flat] >= 0:
            return
        slot = self._slot(flat)
        assert self._slab is not None
        if row is None:
            self._bfs(flat, self._slab[slot])
        else:
            self._slab[slot] = row

    def _absorb(self) -> None:
        """Take in the maps the background worker finished (caller's thread only).

        A map the worker wrote into a spare slot of the current slab is held from now on; one
        in its own array, or in a slab since replaced by a larger one, is copied in. The worker
        then gets its spare slots topped up.
        """
        if self._ready:
            with self._lock:
                ready, self._ready = self._ready, {}
            for flat, done in ready.items():
                self._take(flat, *done)
        if self._worker is not None:
            self._top_up()

    def _take(self, flat: int, buf: NDArray[np.integer], row: int, slotted: bool) -> None:
        """Hold the map of ``flat`` the worker wrote into row ``row`` of ``buf``."""
        if slotted and buf is self._slab and self._slot_of[flat] < 0:
            self._slot_of[flat] = row
            self._target_of[row] = flat
            self._used[row] = self._clock
            self.adopted += 1
            return
        self._store(flat, buf[row])
        if slotted:  # the slot is empty again (an older slab, or a map made twice)
            with self._lock:
                self._spare.append(row)

    def _top_up(self) -> None:
        """Keep :data:`_SPARE_SLOTS` empty slab slots for the worker to write maps into.

        A spare slot leaves the least-recently-used order (it is never handed out to another
        map while the worker may write into it).
        """
        if self._slab is None:
            return
        # At most a quarter of the cache: the least recently used slot is never a spare.
        want = min(_SPARE_SLOTS, self.max_cached // 4) - len(self._spare)
        if want <= 0:
            return
        fresh: list[int] = []
        for _ in range(want):
            slot = self._free_slot(spare_recent=False)
            if slot < 0:
                break  # every map was read this tick or the last: none to spare
            self._used[slot] = _SPARE
            fresh.append(slot)
        with self._lock:
            self._spare.extend(fresh)

    def _ensure(self, flats: NDArray[np.int64], *, keep_all: bool) -> NDArray[np.int64]:
        """Make sure the maps of the targets ``flats`` (repeats allowed) are held.

        With ``keep_all`` the cache grows to hold them all at once (they are read together).
        Returns ``(len(flats),)`` the slot of each target's map.
        """
        flats = np.ascontiguousarray(flats, dtype=np.int64)
        self._absorb()
        self._clock += 1
        # Touch what is there first, so that storing the missing maps never evicts them.
        missing = np.empty(len(flats), dtype=np.int64)
        slots = np.empty(len(flats), dtype=np.int64)
        held, k = _touch(flats, self._slot_of, self._used, self._clock, missing, slots)
        if keep_all:
            self.reserve(held + k + len(self._spare))
        if not k:
            return slots  # the common tick: every map held, no clock read
        t0 = time.thread_time()
        making = self._making  # the worker's map is taken when it is done, not made twice
        for flat in sorted(missing[:k].tolist()):
            if flat != making:
                self._store(flat)
                self.computed += 1
        self.computed_s += time.thread_time() - t0
        if making in missing[:k]:
            self._await(making)
        out: NDArray[np.int64] = self._slot_of[flats]
        return out

    def _await(self, flat: int) -> None:
        """Hold the map of ``flat``: the worker's, once it has made it, else made now.

        Called when the map is needed while the worker is making it: waiting for the rest of
        that search costs less than a whole search of its own in the caller.
        """
        with self._idle:
            while self._making == flat:
                self._idle.wait()
            done = self._ready.pop(flat, None)
        # Only this map is taken in: room was kept for it, not for others finished meanwhile.
        if done is not None:
            self._take(flat, *done)
        if self._slot_of[flat] < 0:  # the worker failed, or a reroute took the map away
            t0 = time.thread_time()
            self._store(flat)
            self.computed += 1
            self.computed_s += time.thread_time() - t0

    def rerouted(
        self, grid: GridMap, *, weights: NDArray[np.integer] | None = None
    ) -> DistanceOracle:
        """An oracle of ``grid`` (this map with walls added or removed) that keeps what still holds.

        A wall where a robot stopped changes a map only where routes ran through it: each held
        map is repaired in place from the changed cells outward (``_repair``: the cells that
        lost their cheapest routes are found and searched again, reopened cells lower what
        they can), instead of a whole new search per map. A map whose target closed, or where
        a quarter of the map lost its routes, is dropped and made again when read. Repaired or
        made again, every map holds what a new search on ``grid`` gives. This oracle hands its
        maps over and must not be used after.

        Args:
            grid: the same map with other walls.
            weights: the move weights on ``grid`` (a weighted oracle's; may differ near walls).
        """
        new = DistanceOracle(grid, max_cached=self.max_cached, weights=weights)
        for count in _COUNTS:  # the run's totals go on across reroutes
            setattr(new, count, getattr(self, count))
        old_blocked = self._blocked
        if (
            self._slab is None
            or new._dtype != self._dtype
            or new.shape != self.shape
            or (weights is None) != (self._weights is None)
        ):
            return new
        changed = old_blocked != new._blocked
        step = new._weights if new._weights is not None else new._unit_step
        if self._weights is not None and new._weights is not None:
            changed_step = (self._weights != new._weights).any(axis=1)
        else:
            changed_step = np.zeros_like(changed)
        h, w = self.shape
        flat = changed.reshape(h, w)
        near = flat.copy()
        near[1:] |= flat[:-1]
        near[:-1] |= flat[1:]
        near[:, 1:] |= flat[:, :-1]
        near[:, :-1] |= flat[:, 1:]
        check = np.flatnonzero(near.reshape(-1) | changed_step)
        reopened = np.flatnonzero(old_blocked & ~new._blocked)
        walled = np.flatnonzero(~old_blocked & new._blocked)
        stepped = new._weights is not None
        # Past a quarter of the free cells losing their routes, a new search is as quick.
        most = max(16, int((~new._blocked).sum()) // 4)
        with self._lock:  # asked for and not taken in: the new oracle asks for them again
            waiting = sorted(set(self._due) | set(self._ready))
            dues = [self._due.get(f, 0) for f in waiting]
        self._give_up_spares()
        held = (self._slab, self._target_of, self._filled, new._none, new._blocked, w, step)
        ok = _repair_held(*held, stepped, check, reopened, walled, most)
        self.kept += int(ok.sum())
        dropped = np.flatnonzero(~ok & (self._target_of[: self._filled] >= 0))
        self._slot_of[self._target_of[dropped]] = -1
        self._target_of[dropped] = -1
        self._used[dropped] = 0  # the first slots new maps take
        new._slab, self._slab = self._slab, None
        new._slot_of, new._target_of, new._used = self._slot_of, self._target_of, self._used
        new._filled, new._clock = self._filled, self._clock
        new.kept = self.kept  # with the maps repaired just now
        if waiting:
            new.request((divmod(f, w) for f in waiting), due=dues)
        return new

    def _give_up_spares(self) -> None:
        """Wait for the worker to finish any slab row, then free the spare slots.

        Before the slab changes hands (:meth:`rerouted`): no worker of this oracle writes into
        it afterwards, and its spare slots, and those of finished maps not taken in (the new
        oracle asks for them again), become plain empty slots.
        """
        with self._lock:
            while self._writing:
                self._idle.wait()
            spare, self._spare = self._spare, []
            spare += [row for buf, row, slotted in self._ready.values() if slotted]
            self._ready = {}
        self._used[spare] = 0

    # ------------------------------------------------------------------ reading
    def prefetch(self, targets: Iterable[Cell]) -> None:
        """Compute the maps of many targets now."""
        flats = np.unique(np.array([self._flat(t) for t in targets], dtype=np.int64))
        self._ensure(flats, keep_all=False)

    def request(self, targets: Iterable[Cell], due: Iterable[int] | None = None) -> None:
        """Have the maps of ``targets`` computed in the background (they are needed later).

        Returns at once. The maps go into the cache at the next read; one not finished by the
        time it is read is computed then, to the same values.

        Args:
            targets: the cells whose maps are wanted.
            due: per target, when its map is needed (the tick, say): the worker makes the
                soonest first, equal ones in the order asked. Default: 0 for each (as soon as
                possible). A target asked for again with an earlier due moves up.

        Raises:
            ValueError: when ``due`` does not give one value per target.
        """
        cells = list(targets)
        dues = [0] * len(cells) if due is None else [int(d) for d in due]
        if len(dues) != len(cells):
            raise ValueError(f"due: expected one per target ({len(cells)}), got {len(dues)}")
        with self._lock:
            for cell, d in zip(cells, dues, strict=True):
                f = self._flat(cell)
                if self._slot_of[f] >= 0 or f in self._ready:
                    continue
                if f in self._due and self._due[f] <= d:
                    continue
                self._due[f] = d
                self._asked += 1
                self._requests.put((d, self._asked, f))
            if self._due and self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name="distance-maps", daemon=True
                )
                self._worker.start()

    def _work(self) -> None:
        while True:
            try:
                due, _, flat = self._requests.get(timeout=_IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._requests.empty():
                        self._worker = None
                        return
                continue
            with self._lock:
                if self._due.get(flat) != due:
                    continue  # asked for again with an earlier due: made from that entry
                # The caller's thread may have made this map since (it was needed before it
                # was ready): a worker that made it again would fall behind the requests.
                if self._slot_of[flat] >= 0:
                    del self._due[flat]
                    continue
                slab = self._slab
                slot = self._spare.pop() if self._spare and slab is not None else -1
                self._writing = slot >= 0
                self._making = flat
            try:
                t0 = time.thread_time()
                if slab is not None and slot >= 0:
                    self._search(flat, slab[slot], self._none)
                    done = (slab, slot, True)
                else:
                    done = (self._bfs(flat)[None, :], 0, False)
                with self._lock:
                    self._ready[flat] = done
                    self._due.pop(flat, None)
                    self.computed_ahead += 1
                    self.computed_ahead_s += time.thread_time() - t0
            finally:  # a reroute waiting for this row must never wait for ever
                with self._lock:
                    self._writing = False
                    self._making = -1
                    self._idle.notify_all()

    def lookup(self, targets: ArrayLike, cells: ArrayLike) -> NDArray[np.int64]:
        """Distances from many cells to many targets in one gather.

        Args:
            targets: ``(M,)`` flat target cells ``row * W + col``.
            cells: ``(M,)`` or ``(M, K)`` flat cells, each row read in its target's map; ``-1``
                (a move off the grid, say) reads :data:`UNREACHABLE`.

        Returns:
            ``cells``-shaped int64 moves (:data:`UNREACHABLE` where there is no path).
        """
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        at = np.asarray(cells, dtype=np.int64)
        if at.shape[:1] != tgt.shape:
            raise ValueError(f"cells: expected {len(tgt)} rows, got shape {at.shape}")
        if tgt.size == 0:
            return np.zeros(at.shape, dtype=np.int64)
        self._ensure(tgt, keep_all=True)
        assert self._slab is not None
        slots = self._slot_of[tgt].reshape(tgt.shape + (1,) * (at.ndim - 1))
        raw = self._slab[slots, np.maximum(at, 0)]
        out = raw.astype(np.int64)
        out[(raw == self._none) | (at < 0)] = UNREACHABLE
        return out

    def maps(self, targets: ArrayLike) -> tuple[NDArray[np.integer], NDArray[np.int64], int]:
        """The slab holding the maps of ``targets`` and their rows, for a kernel to read.

        Returns:
            ``(slab, slots, none)``: ``slab[slots[k], cell]`` is the distance from ``cell`` to
            ``targets[k]``, ``none`` where there is no path. Valid until the next call that
            may store a map (the caller's thread only).
        """
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        slots = self._ensure(tgt, keep_all=True) if tgt.size else np.zeros(0, dtype=np.int64)
        if self._slab is None:
            self._slab = np.empty((self.max_cached, self._cells), dtype=self._dtype)
        return self._slab, slots, self._none

    def after_moves(self, targets: ArrayLike, here: ArrayLike) -> NDArray[np.int64]:
        """``(M, 5)`` route cost to ``targets[j]`` after each action from ``here[j]``.

        The map value of the cell each action (``sim.grid`` ids, waiting first) leads to; on a
        weighted oracle plus that action's own weight, so that a move's cost is its step and
        the rest of the route, and waiting's the wait plus the route from where it stands.
        Moves off the grid or into walls read :data:`UNREACHABLE`. One compiled pass.

        Args:
            targets: ``(M,)`` flat target cells.
            here: ``(M,)`` flat cells the robots stand on.
        """
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        at = np.ascontiguousarray(here, dtype=np.int64).reshape(-1)
        out = np.empty((len(tgt), 5), dtype=np.int64)
        if not len(tgt):
            return out
        slab, slots, none, blocked, width, step, stepped = self.reader(tgt)
        gather_after_moves(slab, slots, none, at, blocked, width, step, stepped, out)
        return out

    def reader(self, targets: ArrayLike) -> RouteReader:
        """What a compiled kernel reads for route costs to ``targets`` (a :class:`RouteReader`).

        Stores any missing map first; valid until the next call that may store a map.
        """
        slab, slots, none = self.maps(targets)
        stepped = self._weights is not None
        step = self._weights if self._weights is not None else self._unit_step
        return RouteReader(slab, slots, none, self._blocked, self.shape[1], step, stepped)

    def fleet_reader(self, cells: NDArray[np.integer], rows: NDArray[np.int64]) -> RouteReader:
        """:meth:`reader` of the targets ``cells[rows]``, given as ``(N, 2)`` cells.

        The flat targets come from one compiled pass, not from numpy steps per tick: a
        thousand robots' targets in a few microseconds.
        """
        kind = np.int32 if np.asarray(cells).dtype == np.int32 else np.int64
        flats = np.empty(len(rows), dtype=np.int64)
        cell_flats(np.ascontiguousarray(cells, dtype=kind), rows, self.shape[1], flats)
        return self.reader(flats)

    def to(self, target: Cell) -> NDArray[np.int32]:
        """``(H, W)`` moves from every cell to ``target`` (a fresh array)."""
        flat = self._flat(target)
        self._ensure(np.array([flat], dtype=np.int64), keep_all=True)
        assert self._slab is not None
        row = self._slab[self._slot_of[flat]]
        out = row.astype(np.int32)
        if self._none != UNREACHABLE:
            out[row == self._none] = UNREACHABLE
        dmap: NDArray[np.int32] = out.reshape(self.shape)
        return dmap

    def table(
        self, targets: NDArray[np.bool_], *, max_bytes: int = 256 << 20
    ) -> tuple[NDArray[np.int64], NDArray[np.int32]] | None:
        """Dense distance maps of every ``True`` cell of ``targets``, or None if too big.

        Returns:
            ``(row_of, dist)``: ``row_of`` ``(H * W,)`` maps a flat target cell to its row in
            ``dist`` (``-1`` for other cells); ``dist`` ``(T, H * W)`` holds the distances.
            Built once per mask and kept.
        """
        key = targets.tobytes()
        if self._table is not None and self._table[0] == key:
            return self._table[1], self._table[2]
        flat = np.flatnonzero(targets.ravel())
        if len(flat) == 0 or len(flat) * self._cells * 4 > max_bytes:
            return None
        dist = np.empty((len(flat), self._cells), dtype=np.int32)
        for k, f in enumerate(flat.tolist()):
            self._search(f, dist[k], UNREACHABLE)
        row_of = np.full(self._cells, -1, dtype=np.int64)
        row_of[flat] = np.arange(len(flat))
        self._table = (key, row_of, dist)
        return row_of, dist

    def between(self, a: Cell, b: Cell) -> int:
        """Moves from ``a`` to ``b`` (``UNREACHABLE`` when there is no path)."""
        flat_a = np.array([self._flat(a)], dtype=np.int64)
        return int(self.lookup(np.array([self._flat(b)]), flat_a)[0])
