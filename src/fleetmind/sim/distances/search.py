"""Compiled searches for one distance map: breadth-first (moves) and Dial (weighted moves).

:func:`bfs_distances` (scipy) stays the reference :func:`grid_bfs` is tested against.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from fleetmind.sim.grid import DELTAS

UNREACHABLE = np.iinfo(np.int32).max // 2

U16_NONE = np.iinfo(np.uint16).max  # "unreachable" in a uint16 slab


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
def reset_map(blocked: NDArray[np.bool_], source: int, out: NDArray[np.integer], none: int) -> bool:
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
    if not reset_map(blocked, source, out, none):
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
    if not reset_map(blocked, source, out, none):
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
