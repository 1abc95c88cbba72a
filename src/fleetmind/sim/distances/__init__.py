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

One job a module: :mod:`.search` (one map: breadth-first and Dial searches, the scipy
reference), :mod:`.chains` (the search on the graph between aisles), :mod:`.gather` (compiled
reads of many robots' map values), :mod:`.repair` (maps mended in place when walls change),
:mod:`.oracle` (the cache: the slab, the background worker, the reads). Callers import from here.
"""

from __future__ import annotations

from fleetmind.sim.distances.chains import Chains, chain_dial, contract
from fleetmind.sim.distances.gather import (
    cell_flats,
    gather_after_moves,
    gather_pass,
    moves_pass,
)
from fleetmind.sim.distances.oracle import DistanceOracle, RouteReader
from fleetmind.sim.distances.search import (
    UNREACHABLE,
    adjacency,
    bfs_distances,
    grid_bfs,
    grid_dial,
    incoming_weights,
    next_cell,
)

__all__ = [
    "UNREACHABLE",
    "Chains",
    "DistanceOracle",
    "RouteReader",
    "adjacency",
    "bfs_distances",
    "cell_flats",
    "chain_dial",
    "contract",
    "gather_after_moves",
    "gather_pass",
    "grid_bfs",
    "grid_dial",
    "incoming_weights",
    "moves_pass",
    "next_cell",
]
