"""True shortest-path distances on a grid, cached per target cell.

A distance map of a target holds, for every cell, the number of moves to reach the target while
avoiding blocked cells (robots ignored); unreachable cells hold :data:`UNREACHABLE`. Maps are
computed in C by :func:`scipy.sparse.csgraph.shortest_path` (unweighted, so breadth-first), many
targets per call, and kept in a bounded cache (least recently used).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import shortest_path

from fleetmind.sim.grid import DELTAS, Cell, GridMap

UNREACHABLE = np.iinfo(np.int32).max // 2


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


class DistanceOracle:
    """Cached distance maps for one grid.

    Args:
        grid: the map.
        max_cached: the most distance maps kept (each ``H * W`` int32); default: as many as fit
            in ``memory_mb``, at most 4096.
        memory_mb: the cache's memory budget when ``max_cached`` is not given.
    """

    def __init__(
        self, grid: GridMap, *, max_cached: int | None = None, memory_mb: int = 768
    ) -> None:
        self.grid = grid
        self.shape = grid.shape
        self._graph = adjacency(grid.blocked)
        self._cache: OrderedDict[int, NDArray[np.int32]] = OrderedDict()
        h, w = grid.shape
        per_map = h * w * 4
        self.max_cached = max_cached or max(16, min(4096, (memory_mb << 20) // per_map))
        self._table: tuple[bytes, NDArray[np.int64], NDArray[np.int32]] | None = None

    def _flat(self, cell: Cell) -> int:
        return int(cell[0]) * self.shape[1] + int(cell[1])

    def prefetch(self, targets: Iterable[Cell]) -> None:
        """Compute the maps of many targets in one call."""
        missing = sorted({self._flat(t) for t in targets} - self._cache.keys())
        for start in range(0, len(missing), 256):
            chunk = missing[start : start + 256]
            dist = shortest_path(self._graph, method="D", unweighted=True, indices=chunk)
            dist = np.where(np.isinf(dist), UNREACHABLE, dist).astype(np.int32)
            for flat, row in zip(chunk, dist, strict=True):
                self._store(flat, row.reshape(self.shape))

    def _store(self, flat: int, dmap: NDArray[np.int32]) -> None:
        self._cache[flat] = dmap
        self._cache.move_to_end(flat)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)

    def to(self, target: Cell) -> NDArray[np.int32]:
        """``(H, W)`` moves from every cell to ``target``."""
        flat = self._flat(target)
        dmap = self._cache.get(flat)
        if dmap is None:
            self.prefetch([target])
            dmap = self._cache[flat]
        else:
            self._cache.move_to_end(flat)
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
        cells = self.shape[0] * self.shape[1]
        if len(flat) == 0 or len(flat) * cells * 4 > max_bytes:
            return None
        dist = np.empty((len(flat), cells), dtype=np.int32)
        for start in range(0, len(flat), 256):
            chunk = flat[start : start + 256]
            d = shortest_path(self._graph, method="D", unweighted=True, indices=chunk)
            dist[start : start + len(chunk)] = np.where(np.isinf(d), UNREACHABLE, d)
        row_of = np.full(cells, -1, dtype=np.int64)
        row_of[flat] = np.arange(len(flat))
        self._table = (key, row_of, dist)
        return row_of, dist

    def between(self, a: Cell, b: Cell) -> int:
        """Moves from ``a`` to ``b`` (``UNREACHABLE`` when there is no path)."""
        return int(self.to(b)[a])
