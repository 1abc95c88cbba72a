"""The distance oracle against scipy's own shortest paths, on random grids."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy.sparse.csgraph import shortest_path

from fleetmind.sim.distances import (
    UNREACHABLE,
    DistanceOracle,
    adjacency,
    bfs_distances,
    chain_dial,
    contract,
    grid_bfs,
    grid_dial,
    incoming_weights,
)
from fleetmind.sim.grid import DELTAS, GridMap


def _grid(blocked: NDArray[np.bool_]) -> GridMap:
    none = np.zeros_like(blocked)
    return GridMap(name="random", blocked=blocked, pickups=none, stations=none, chargers=none)


@st.composite
def grids(draw: st.DrawFn) -> GridMap:
    h = draw(st.integers(1, 9))
    w = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    density = draw(st.sampled_from([0.0, 0.2, 0.4, 0.6]))
    blocked = np.random.default_rng(seed).random((h, w)) < density
    return _grid(blocked)


def _reference(grid: GridMap, flat: int) -> NDArray[np.int64]:
    d = shortest_path(adjacency(grid.blocked), method="D", unweighted=True, indices=[flat])[0]
    return np.where(np.isinf(d), UNREACHABLE, d).astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(grids(), st.data())
def test_breadth_first_distances_equal_scipy_shortest_paths(
    grid: GridMap, data: st.DataObject
) -> None:
    cells = grid.shape[0] * grid.shape[1]
    flat = data.draw(st.integers(0, cells - 1))
    got = bfs_distances(adjacency(grid.blocked), flat)
    assert got.dtype == np.int32
    assert np.array_equal(got, _reference(grid, flat))


@settings(max_examples=80, deadline=None)
@given(grids(), st.data(), st.sampled_from([np.uint16, np.int32]))
def test_the_compiled_search_equals_the_scipy_reference(
    grid: GridMap, data: st.DataObject, dtype: type
) -> None:
    cells = grid.shape[0] * grid.shape[1]
    flat = data.draw(st.integers(0, cells - 1))
    none = np.iinfo(np.uint16).max if dtype is np.uint16 else UNREACHABLE
    out = np.zeros(cells, dtype=dtype)
    grid_bfs(grid.blocked.reshape(-1), grid.shape[1], flat, out, none)
    want = bfs_distances(adjacency(grid.blocked), flat)
    assert np.array_equal(np.where(out == none, UNREACHABLE, out.astype(np.int64)), want)
    # The reference itself is scipy's shortest paths (a blocked source reaches only itself).
    assert np.array_equal(want, _reference(grid, flat))


def test_the_compiled_search_equals_the_reference_on_the_large_warehouse() -> None:
    from fleetmind.envs.warehouse import resolve_map

    grid = resolve_map("benchmarks/data/lorr/maps/warehouse_large.map")
    graph = adjacency(grid.blocked)
    oracle = DistanceOracle(grid, max_cached=4)
    for flat in np.random.default_rng(0).choice(grid.blocked.size, 5, replace=False).tolist():
        w = grid.shape[1]
        assert np.array_equal(oracle.to((flat // w, flat % w)).ravel(), bfs_distances(graph, flat))


@settings(max_examples=40, deadline=None)
@given(grids(), st.data(), st.integers(16, 20))
def test_lookup_reads_the_same_maps_as_to_even_when_the_cache_evicts(
    grid: GridMap, data: st.DataObject, cached: int
) -> None:
    cells = grid.shape[0] * grid.shape[1]
    oracle = DistanceOracle(grid, max_cached=cached)
    most = cached
    for _ in range(3):
        m = data.draw(st.integers(1, 40))
        targets = np.array(data.draw(st.lists(st.integers(0, cells - 1), min_size=m, max_size=m)))
        at = np.array(
            data.draw(st.lists(st.integers(-1, cells - 1), min_size=5 * m, max_size=5 * m))
        ).reshape(m, 5)
        got = oracle.lookup(targets, at)
        want = np.array(
            [
                [_reference(grid, int(t))[c] if c >= 0 else UNREACHABLE for c in row]
                for t, row in zip(targets, at, strict=True)
            ]
        )
        assert np.array_equal(got, want)
        # The cache grew to hold every target of one read at once, and no more than needed.
        most = max(most, len(set(targets.tolist())))
        assert oracle.cached <= oracle.max_cached == most
        w = grid.shape[1]
        t0 = int(targets[0])
        assert np.array_equal(oracle.to((t0 // w, t0 % w)).ravel(), _reference(grid, t0))


def test_maps_asked_for_ahead_are_computed_in_the_background_to_the_same_values() -> None:
    rng = np.random.default_rng(3)
    grid = _grid(rng.random((30, 40)) < 0.3)
    free = np.flatnonzero(~grid.blocked.ravel())
    targets = free[:25]
    oracle = DistanceOracle(grid)
    oracle.request([(int(f) // 40, int(f) % 40) for f in targets])
    deadline = time.monotonic() + 30
    while oracle.computed_ahead < len(targets) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert oracle.computed_ahead == len(targets)
    got = oracle.lookup(targets, np.tile(free[:7], (len(targets), 1)))
    assert oracle.computed == 0  # every map came from the worker
    for t, row in zip(targets, got, strict=True):
        assert np.array_equal(row, _reference(grid, int(t))[free[:7]])


def _wait_for(oracle: DistanceOracle, maps: int, read: NDArray[np.int64]) -> None:
    """Read ``read``'s map while the worker makes ``maps`` maps (reads take its maps in)."""
    deadline = time.monotonic() + 30
    while oracle.computed_ahead < maps and time.monotonic() < deadline:
        oracle.lookup(read, read[None, :])
        time.sleep(0.005)
    assert oracle.computed_ahead >= maps


@pytest.mark.parametrize("weighted", [False, True])
def test_the_worker_writes_maps_into_the_cache_itself_and_they_read_exact(weighted: bool) -> None:
    # Once the cache exists the worker writes into empty slots kept for it: a map is taken in
    # without a copy inside the tick, and reads the same as one searched on the caller's thread.
    rng = np.random.default_rng(5)
    grid = _grid(rng.random((30, 40)) < 0.3)
    free = np.flatnonzero(~grid.blocked.ravel())
    weights = rng.integers(1, 4, size=(30 * 40, 5)) if weighted else None
    oracle = DistanceOracle(grid, max_cached=64, weights=weights)
    fresh = DistanceOracle(grid, weights=weights)
    first = free[:1]
    oracle.lookup(first, first[None, :])  # the cache exists from here
    targets = free[1:41]
    ahead, later = targets[:30], targets[30:]
    oracle.request([(int(f) // 40, int(f) % 40) for f in ahead])
    _wait_for(oracle, len(ahead), first)  # each read also keeps empty slots for the worker
    oracle.lookup(first, first[None, :])
    adopted = oracle.adopted
    oracle.request([(int(f) // 40, int(f) % 40) for f in later])  # fewer than the slots kept
    _wait_for(oracle, len(targets), first)
    got = oracle.lookup(targets, np.tile(free, (len(targets), 1)))
    assert oracle.computed == 1  # only the first map was searched on this thread
    assert oracle.adopted == adopted + len(later)  # each went straight into the cache
    want = fresh.lookup(targets, np.tile(free, (len(targets), 1)))
    assert np.array_equal(got, want)
    assert oracle.cached == 1 + len(targets)  # empty slots kept for the worker are not maps
    # The worker's maps and their CPU time are counted, and go on across a reroute.
    counts = oracle.counts()
    assert counts["made_in_caller"] == 1
    assert counts["made_ahead"] >= len(targets)
    assert counts["made_ahead_cpu_s"] > 0
    closed = grid.with_walls([divmod(int(free[-1]), 40)])
    assert oracle.rerouted(closed, weights=weights).counts() == counts


def test_a_map_needed_while_the_worker_makes_it_is_taken_from_the_worker_not_made_twice() -> None:
    # Early in a large run robots load before the worker reaches their station's map; where it
    # is making that very map, the tick waits for the rest of that search instead of its own.
    rng = np.random.default_rng(9)
    grid = _grid(rng.random((400, 400)) < 0.2)
    free = np.flatnonzero(~grid.blocked.ravel())
    weights = rng.integers(1, 9, size=(400 * 400, 5))
    oracle = DistanceOracle(grid, weights=weights)
    target = int(free[len(free) // 2])
    oracle.request([divmod(target, 400)])
    deadline = time.monotonic() + 30
    while oracle._making != target and oracle.computed_ahead == 0:
        assert time.monotonic() < deadline
        time.sleep(0.0001)
    got = oracle.lookup(np.array([target]), free[None, :200])
    assert oracle.computed == 0  # the worker's map, taken in
    assert oracle.computed_ahead == 1
    fresh = DistanceOracle(grid, weights=weights)
    assert np.array_equal(got, fresh.lookup(np.array([target]), free[None, :200]))


def test_the_worker_makes_the_maps_needed_soonest_first() -> None:
    # At a thousand robots the station maps asked for at one plan outnumber what the worker
    # makes before the first is needed: it makes them in the order they are due, and one asked
    # for again with an earlier due moves up.
    rng = np.random.default_rng(9)
    grid = _grid(rng.random((30, 40)) < 0.2)
    free = np.flatnonzero(~grid.blocked.ravel())
    targets = [divmod(int(f), 40) for f in free[:12]]
    due = [int(d) for d in rng.permutation(12) * 10]
    due[3] = 1000
    oracle = DistanceOracle(grid)
    oracle.request([*targets, targets[3]], due=[*due, 5])  # the worker starts after the puts
    deadline = time.monotonic() + 30
    while oracle.computed_ahead < len(targets) and time.monotonic() < deadline:
        time.sleep(0.01)
    made = list(oracle._ready)  # the order the worker finished them (not taken in yet)
    due[3] = 5
    want = [int(free[k]) for k in sorted(range(12), key=lambda k: due[k])]
    assert made == want
    with pytest.raises(ValueError, match="due: expected one per target"):
        oracle.request(targets[:2], due=[1])  # one due per target


def test_a_reroute_while_the_worker_writes_into_the_cache_reads_the_new_walls() -> None:
    # The slab changes hands while the worker may be writing into it: nothing it wrote for the
    # old walls is read after, and every map asked for is made again on the new ones.
    from fleetmind.sim.maps import load_map

    grid = load_map("warehouse-small")
    w = grid.shape[1]
    free = np.flatnonzero(~grid.blocked.ravel())
    oracle = DistanceOracle(grid, max_cached=256)
    first = free[:1]
    oracle.lookup(first, first[None, :])
    targets = free[1:200:3]
    oracle.request([divmod(int(f), w) for f in targets])
    _wait_for(oracle, 5, first)  # some maps made, most still to come
    closed = [divmod(int(c), w) for c in free[300:340:4]]
    walled = grid.with_walls(closed)
    new = oracle.rerouted(walled)
    fresh = DistanceOracle(walled)
    assert np.array_equal(
        new.lookup(targets, np.tile(free, (len(targets), 1))),
        fresh.lookup(targets, np.tile(free, (len(targets), 1))),
    )


def test_a_long_map_keeps_exact_distances_past_the_uint16_range_check() -> None:
    # A 1 x 70,000 corridor: more free cells than a uint16 can count, so the slab is int32.
    grid = _grid(np.zeros((1, 70_000), dtype=bool))
    oracle = DistanceOracle(grid, max_cached=2)
    assert int(oracle.lookup(np.array([0]), np.array([[69_999]]))[0, 0]) == 69_999
    assert int(oracle.to((0, 69_000))[(0, 5)]) == 68_995


def _weighted_reference(grid: GridMap, weights: NDArray[np.int64], flat: int) -> NDArray[np.int64]:
    """scipy's Dijkstra to ``flat`` over the moves between free cells, each at its weight."""
    from scipy.sparse import coo_matrix

    h, w = grid.shape
    src, dst, cost = [], [], []
    for v in np.flatnonzero(~grid.blocked.ravel()).tolist():
        r, c = divmod(v, w)
        for a in range(1, 5):
            rr, cc = r + int(DELTAS[a, 0]), c + int(DELTAS[a, 1])
            if 0 <= rr < h and 0 <= cc < w and not grid.blocked[rr, cc]:
                # Reversed edges: the search runs from the target.
                src.append(rr * w + cc)
                dst.append(v)
                cost.append(float(weights[v, a]))
    graph = coo_matrix((cost, (src, dst)), shape=(h * w, h * w)).tocsr()
    d = shortest_path(graph, method="D", indices=[flat])[0]
    return np.where(np.isinf(d), UNREACHABLE, d).astype(np.int64)


@settings(max_examples=80, deadline=None)
@given(grids(), st.data(), st.sampled_from([np.uint16, np.int32]), st.integers(1, 40))
def test_the_weighted_search_equals_scipy_dijkstra(
    grid: GridMap, data: st.DataObject, dtype: type, top: int
) -> None:
    cells = grid.shape[0] * grid.shape[1]
    flat = data.draw(st.integers(0, cells - 1))
    seed = data.draw(st.integers(0, 2**31 - 1))
    weights = np.random.default_rng(seed).integers(1, top + 1, size=(cells, 5), dtype=np.uint16)
    none = np.iinfo(np.uint16).max if dtype is np.uint16 else UNREACHABLE
    out = np.zeros(cells, dtype=dtype)
    blocked = grid.blocked.reshape(-1)
    node, nxt = np.empty(4 * cells + 1, dtype=np.int32), np.empty(4 * cells + 1, dtype=np.int32)
    incoming = incoming_weights(blocked, grid.shape[1], weights)
    grid_dial(blocked, grid.shape[1], incoming, top, flat, out, none, node, nxt)
    got = np.where(out == none, UNREACHABLE, out.astype(np.int64))
    want = _weighted_reference(grid, weights, flat)
    if grid.blocked.reshape(-1)[flat]:
        want[:] = UNREACHABLE  # a blocked source reaches only itself, as the BFS
        want[flat] = 0
    assert np.array_equal(got, want)
    # Unit weights are the breadth-first search.
    unit = incoming_weights(blocked, grid.shape[1], np.ones_like(weights))
    grid_dial(blocked, grid.shape[1], unit, 1, flat, out, none, node, nxt)
    plain = np.zeros(cells, dtype=dtype)
    grid_bfs(blocked, grid.shape[1], flat, plain, none)
    assert np.array_equal(out, plain)


@st.composite
def aisle_grids(draw: st.DrawFn) -> GridMap:
    """Random grids, many with aisles: rows of racks, crossing lanes, rings, long corridors."""
    h = draw(st.integers(1, 14))
    w = draw(st.integers(1, 14))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    kind = draw(st.sampled_from(["random", "racks", "lanes"]))
    blocked = rng.random((h, w)) < draw(st.sampled_from([0.0, 0.2, 0.4]))
    if kind == "racks":  # every other row mostly racks: one-wide aisles between them
        blocked[::2] = rng.random(blocked[::2].shape) < 0.85
    elif kind == "lanes":  # walls but for one row and one column: four long corridors
        blocked[:] = True
        blocked[rng.integers(0, h)] = False
        blocked[:, rng.integers(0, w)] = False
    return _grid(blocked)


def _dial(
    grid: GridMap, weights: NDArray[np.uint16], flat: int, out: NDArray[np.integer], none: int
) -> None:
    """The weighted search over every cell (:func:`grid_dial`) into ``out``."""
    cells = grid.shape[0] * grid.shape[1]
    blocked = grid.blocked.reshape(-1)
    node, nxt = np.empty(4 * cells + 1, dtype=np.int32), np.empty(4 * cells + 1, dtype=np.int32)
    incoming = incoming_weights(blocked, grid.shape[1], weights)
    top = int(weights[:, 1:].max())
    grid_dial(blocked, grid.shape[1], incoming, top, flat, out, none, node, nxt)


@settings(max_examples=120, deadline=None)
@given(aisle_grids(), st.data(), st.sampled_from([np.uint16, np.int32]), st.integers(1, 36))
def test_the_search_on_chains_equals_the_search_over_every_cell(
    grid: GridMap, data: st.DataObject, dtype: type, top: int
) -> None:
    cells = grid.shape[0] * grid.shape[1]
    seed = data.draw(st.integers(0, 2**31 - 1))
    weights = np.random.default_rng(seed).integers(1, top + 1, size=(cells, 5), dtype=np.uint16)
    none = np.iinfo(np.uint16).max if dtype is np.uint16 else UNREACHABLE
    blocked = grid.blocked.reshape(-1)
    chains = contract(blocked, grid.shape[1], weights)
    dist = np.empty(len(chains.node_cell), dtype=np.int64)
    qnode = np.empty(len(chains.in_src) + 3, dtype=np.int32)
    qnext = np.empty(len(chains.in_src) + 3, dtype=np.int32)
    want, got = np.empty(cells, dtype=dtype), np.empty(cells, dtype=dtype)
    for flat in range(cells):  # every target: a node, a chain's end or a cell inside one
        _dial(grid, weights, flat, want, none)
        chain_dial(blocked, *chains[:-1], chains.top, flat, got, none, dist, qnode, qnext)
        assert np.array_equal(got, want), flat


def test_a_long_corridor_is_cut_into_short_chains_and_a_ring_has_a_node() -> None:
    weights = np.full((300, 5), 7, dtype=np.uint16)
    chains = contract(np.zeros(300, dtype=bool), 300, weights)
    lengths = np.diff(chains.ch_ptr)
    assert lengths.max() == 16
    assert len(chains.ch_cells) > 250
    assert chains.top == 17 * 7  # the dearest edge: a whole chain and the move out of it
    # A ring of eight cells, each with two free neighbours: no cell is a node until one is made.
    blocked = np.ones((3, 3), dtype=bool)
    blocked[[0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 2, 0, 2, 0, 1, 2]] = False
    ring = contract(blocked.reshape(-1), 3, np.ones((9, 5), dtype=np.uint16))
    assert len(ring.node_cell) == 1
    assert len(ring.ch_cells) == 7


def test_an_oracle_searches_on_chains_where_aisles_are_many_to_the_same_maps() -> None:
    from fleetmind.envs.warehouse import resolve_map

    for name, on_chains in (("warehouse_large", True), ("sortation_large", False)):
        grid = resolve_map(f"benchmarks/data/lorr/maps/{name}.map")
        cells = grid.blocked.size
        weights = np.random.default_rng(3).integers(5, 36, size=(cells, 5), dtype=np.uint16)
        oracle = DistanceOracle(grid, max_cached=4, weights=weights)
        # LoRR warehouse_large: 63% of the free cells in aisles; sortation_large: lone gaps.
        assert (oracle._chains is not None) is on_chains
        # Moves so dear that a chain would need too many buckets: the search over every cell.
        dear = DistanceOracle(grid, max_cached=2, weights=np.full((cells, 5), 5_000))
        assert dear._chains is None
        want = np.empty(cells, dtype=oracle._dtype)
        for cell in np.argwhere(grid.stations)[:: max(1, int(grid.stations.sum()) // 5)][:5]:
            target = (int(cell[0]), int(cell[1]))
            _dial(grid, weights, target[0] * grid.shape[1] + target[1], want, oracle._none)
            got = oracle.to(target).reshape(-1)
            unreached = got >= UNREACHABLE
            assert np.array_equal(want == oracle._none, unreached)
            assert np.array_equal(want[~unreached], got[~unreached])


def test_a_weighted_oracle_costs_moves_against_the_way_and_reads_them_in_one_gather() -> None:
    # One row of 6 free cells: moving right costs 1, moving left costs 3.
    grid = _grid(np.zeros((1, 6), dtype=bool))
    weights = np.ones((6, 5), dtype=np.int64)
    weights[:, 3] = 3  # LEFT
    oracle = DistanceOracle(grid, weights=weights)
    got = oracle.lookup(np.array([5, 0]), np.array([[0, 3], [5, 2]]))
    assert got.tolist() == [[5, 2], [15, 6]]
    assert int(oracle.to((0, 5))[(0, 0)]) == 5
    assert int(oracle.to((0, 0))[(0, 5)]) == 15
    with pytest.raises(ValueError, match="weights"):
        DistanceOracle(grid, weights=np.zeros((6, 5), dtype=np.int64))


def test_weighted_maps_store_uint16_only_when_every_route_cost_fits() -> None:
    # 1 x 3,000 corridor at weight 20: 59,980 fits under 65,535, weight 30 (89,970) does not.
    grid = _grid(np.zeros((1, 3_000), dtype=bool))
    for top, dtype in ((20, np.uint16), (30, np.int32)):
        oracle = DistanceOracle(grid, max_cached=2, weights=np.full((3_000, 5), top))
        assert oracle.to((0, 0)).max() == 2_999 * top
        assert oracle._dtype == np.dtype(dtype)


@settings(max_examples=40, deadline=None)
@given(grids(), st.data(), st.integers(16, 20), st.sampled_from([np.int32, np.int64]))
def test_a_fleet_reader_reads_the_maps_of_the_chosen_robots_targets(
    grid: GridMap, data: st.DataObject, cached: int, kind: type
) -> None:
    h, w = grid.shape
    oracle = DistanceOracle(grid, max_cached=cached)
    for _ in range(3):
        n = data.draw(st.integers(1, 40))
        cells = np.array(
            data.draw(
                st.lists(
                    st.tuples(st.integers(0, h - 1), st.integers(0, w - 1)), min_size=n, max_size=n
                )
            ),
            dtype=kind,
        )
        rows = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        slab, slots, none, *_ = oracle.fleet_reader(cells, rows.astype(np.int64))
        assert len(slots) == len(rows)
        for j, i in enumerate(rows):
            t = int(cells[i, 0]) * w + int(cells[i, 1])
            want = _reference(grid, t)
            got = slab[slots[j]].astype(np.int64)
            assert np.array_equal(np.where(got == none, UNREACHABLE, got), want)


@settings(max_examples=40, deadline=None)
@given(grids(), st.data(), st.booleans())
def test_after_moves_reads_each_actions_cell_plus_its_weight(
    grid: GridMap, data: st.DataObject, weighted: bool
) -> None:
    h, w = grid.shape
    cells = h * w
    seed = data.draw(st.integers(0, 2**31 - 1))
    weights = np.random.default_rng(seed).integers(1, 9, size=(cells, 5)) if weighted else None
    oracle = DistanceOracle(grid, weights=weights)
    m = data.draw(st.integers(1, 12))
    targets = np.array(data.draw(st.lists(st.integers(0, cells - 1), min_size=m, max_size=m)))
    here = np.array(data.draw(st.lists(st.integers(0, cells - 1), min_size=m, max_size=m)))
    got = oracle.after_moves(targets, here)
    for j in range(m):
        r, c = divmod(int(here[j]), w)
        for a in range(5):
            rr, cc = r + int(DELTAS[a, 0]), c + int(DELTAS[a, 1])
            if not (0 <= rr < h and 0 <= cc < w) or grid.blocked[rr, cc]:
                assert got[j, a] == UNREACHABLE
                continue
            t = int(targets[j])
            rest = int(oracle.to((t // w, t % w))[(rr, cc)])
            step = int(weights[here[j], a]) if weights is not None else 0
            assert got[j, a] == (UNREACHABLE if rest >= UNREACHABLE else rest + step)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_a_rerouted_oracle_reads_what_a_new_search_gives(weighted: bool, seed: int) -> None:
    # Walls come and go (a robot stops, an aisle closes, a repair reopens a cell); every map
    # the rerouted oracle holds or makes equals a new oracle's, whether it was kept or dropped.
    from fleetmind.sim.maps import load_map

    rng = np.random.default_rng(seed)
    base = load_map("warehouse-small")
    h, w = base.shape
    free = np.flatnonzero(~base.blocked.ravel())

    def weights_of(grid: GridMap) -> NDArray[np.int64] | None:
        if not weighted:
            return None
        if seed % 2 == 0:
            return rng_weights  # guidance's crisscross: the same whatever the walls
        # Weights that depend on the walls, as a learned guidance graph's do: dearer beside one.
        near = np.zeros((h + 2, w + 2), dtype=np.int64)
        near[1:-1, 1:-1] = grid.blocked
        beside = near[:-2, 1:-1] + near[2:, 1:-1] + near[1:-1, :-2] + near[1:-1, 2:]
        wt = np.tile(rng_weights, 1)
        wt[:, 1:] += beside.reshape(-1, 1)
        return wt

    rng_weights = rng.integers(1, 3, size=(h * w, 5))
    picked = rng.choice(free, 30, replace=False)
    targets = [tuple(int(v) for v in divmod(int(c), w)) for c in picked]
    grid = base
    oracle = DistanceOracle(grid, weights=weights_of(grid))
    closed: set[tuple[int, int]] = set()
    for _ in range(6):
        for t in targets:
            oracle.to(t)  # held before the change
        cells = [tuple(int(v) for v in divmod(int(c), w)) for c in rng.choice(free, 1)]
        if closed and rng.random() < 0.5:
            closed -= {min(closed)}  # a stopped robot moves on
        closed |= set(cells)
        grid = base.with_walls(sorted(closed))
        oracle = oracle.rerouted(grid, weights=weights_of(grid))
        fresh = DistanceOracle(grid, weights=weights_of(grid))
        for t in targets:
            assert np.array_equal(oracle.to(t), fresh.to(t)), t
    # The point of it: maps are repaired, not searched again (not a closed target's, nor one
    # where a quarter of the map lost its routes).
    assert oracle.kept >= 3 * len(targets)  # at least half of the 6 x 30


def test_an_aisle_closed_and_reopened_keeps_the_maps_it_never_touched() -> None:
    # A block fault closes four cells in a row and lifts them: reopened cells take their values
    # from each other, and the maps on the far side of the map never need a new search.
    from fleetmind.sim.maps import load_map

    base = load_map("warehouse-medium")
    rows, cols = np.nonzero(~base.blocked)
    r, c = int(rows[len(rows) // 2]), int(cols[len(cols) // 2])
    aisle = [(r, c + k) for k in range(4) if not base.blocked[r, c + k]]
    targets = [(int(a), int(b)) for a, b in zip(rows[::97], cols[::97], strict=True)]
    oracle = DistanceOracle(base)
    for grid in (base.with_walls(aisle), base):
        for t in targets:
            oracle.to(t)
        oracle = oracle.rerouted(grid)
        fresh = DistanceOracle(grid)
        for t in targets:
            assert np.array_equal(oracle.to(t), fresh.to(t)), t
    assert oracle.kept > 0
