"""fleetmind's numba kernels against their numpy references, on random states (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from fleetmind.errors import ConfigError
from fleetmind.sim import kernels
from fleetmind.sim import rewards as rw
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.dynamics import resolve_moves, resolve_moves_reference
from fleetmind.sim.maps import parse_text_map
from fleetmind.sim.observe import Fleet, LocalObserver
from fleetmind.sim.vector import VectorWarehouse
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig


@st.composite
def states(draw: st.DrawFn) -> dict[str, object]:
    """A random grid with walls, 1-3 worlds of distinct robots, actions, ticks, frozen robots."""
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    blocked = rng.random((h, w)) < draw(st.sampled_from([0.0, 0.2, 0.5]))
    b = draw(st.integers(1, 3))
    n = draw(st.integers(1, h * w))
    cells = np.stack([rng.choice(h * w, size=n, replace=False) for _ in range(b)])
    pos = np.stack([cells // w, cells % w], axis=-1).astype(np.int32)  # may stand on walls
    # Crowds: mostly moves, so chains, cycles, swaps and contested cells are common.
    acts = rng.choice(5, size=(b, n), p=draw(st.sampled_from([None, (0.05, 0.3, 0.2, 0.3, 0.15)])))
    frozen = rng.random((b, n)) < 0.2 if draw(st.booleans()) else None
    tick = rng.integers(0, 50, size=b) if draw(st.booleans()) else int(rng.integers(0, 50))
    return {"pos": pos, "acts": acts, "blocked": blocked, "tick": tick, "frozen": frozen}


@settings(max_examples=300, deadline=None)
@given(states())
def test_resolve_moves_kernel_matches_numpy(state: dict[str, object]) -> None:
    pos, acts, blocked = state["pos"], state["acts"], state["blocked"]
    kw = {"tick": state["tick"], "frozen": state["frozen"]}
    got = resolve_moves(pos, acts, blocked, **kw)  # type: ignore[arg-type]
    ticks = np.broadcast_to(np.asarray(state["tick"], dtype=np.int64), (len(acts),))  # type: ignore[arg-type]
    want = resolve_moves_reference(pos, acts, blocked, ticks, state["frozen"])  # type: ignore[arg-type]
    for name in ("pos", "moved", "wall_bump", "conflict"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_kernels_refuse_bad_actions_and_robots_off_the_grid() -> None:
    # The kernels index without bounds checks: bad input must be refused before any work.
    blocked = np.zeros((2, 2), dtype=bool)
    pos = np.array([[[0, 0], [1, 1]]], dtype=np.int32)
    for bad in (5, -1):
        with pytest.raises(ConfigError, match=f"action id must be between 0 and 4, got {bad}"):
            resolve_moves(pos, np.array([[0, bad]]), blocked)
    with pytest.raises(ConfigError, match="outside the 2x2 grid"):
        resolve_moves(np.array([[[0, 0], [2, 0]]], dtype=np.int32), np.array([[0, 0]]), blocked)
    grid = parse_text_map(MAP)
    world = Warehouse(grid, WarehouseConfig(n_robots=2), seed=0)
    with pytest.raises(ConfigError, match="action id must be between 0 and 4"):
        world.step([0, 7])
    world.pos = np.array([[0, 1], [-1, 3]], dtype=np.int32)
    with pytest.raises(ConfigError, match="outside the grid"):
        world.step([0, 0])
    vec = VectorWarehouse(grid, 2, 2, seed=0)
    with pytest.raises(ConfigError, match="action id must be between 0 and 4"):
        vec.step(np.array([[0, 0], [9, 0]]))
    observer = LocalObserver(grid.blocked, grid.pickups, 1)
    with pytest.raises(ConfigError, match="outside the grid"):
        observer(world.pos[None], world.pos[None], np.zeros((1, 2), bool), np.ones((1, 2), bool))


MAP = """
#......#
#.xx.x.#
#...#..#
#.xx.x.#
#..S..S#
"""


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3), st.booleans(), st.booleans())
def test_local_observations_kernel_matches_numpy(
    seed: int, radius: int, heuristic: bool, off_table: bool
) -> None:
    grid = parse_text_map(MAP)
    w = grid.shape[1]
    oracle = DistanceOracle(grid) if heuristic else None
    observer = LocalObserver(
        grid.blocked, grid.pickups, radius, oracle=oracle, task_cells=grid.pickups | grid.stations
    )
    rng = np.random.default_rng(seed)
    free = np.flatnonzero(~grid.blocked.ravel())
    b, n = int(rng.integers(1, 4)), int(rng.integers(1, 8))
    cells = np.stack([rng.choice(free, size=n, replace=False) for _ in range(b)])
    pos = np.stack([cells // w, cells % w], axis=-1).astype(np.int32)
    # Targets: task cells (in the dense table), or any free cell when off_table.
    targets = free if off_table else np.flatnonzero((grid.pickups | grid.stations).ravel())
    goal_cells = rng.choice(targets, size=(b, n))
    goal = np.stack([goal_cells // w, goal_cells % w], axis=-1).astype(np.int32)
    carrying = rng.random((b, n)) < 0.5
    has_task = rng.random((b, n)) < 0.8
    got = observer(pos, goal, carrying, has_task)
    want = observer.reference(Fleet(pos, goal, carrying, has_task))
    assert got.dtype == want.dtype == np.float32
    assert got.tobytes() == want.tobytes()  # bit for bit, signed zeros included


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 12),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, (1, False), (2, True), (0, True)]),
)
def test_warehouse_tick_kernel_matches_the_numpy_tick(
    seed: int, n: int, gates: bool, batteries: bool, observed: tuple[int, bool] | None
) -> None:
    grid = parse_text_map(MAP)
    rng = np.random.default_rng(seed)
    world = Warehouse(grid, WarehouseConfig(n_robots=n), seed=seed)
    h, w = grid.shape
    free = np.flatnonzero(~grid.blocked.ravel())
    world.pos = np.stack(divmod(rng.choice(free, size=n, replace=False), w), axis=-1).astype(
        np.int32
    )
    # Targets often one step away, so pickups and deliveries happen; or, on some draws, no
    # event at all (the kernel then also observes).
    quiet = rng.random() < 0.5
    near = world.pos + rng.integers(-1, 2, size=(n, 2))
    world.goal = np.clip(near, 0, [h - 1, w - 1]).astype(np.int32)
    if quiet:  # task cells, in the observer's distance table
        cells = rng.choice(np.flatnonzero((grid.pickups | grid.stations).ravel()), size=n)
        world.goal = np.stack(divmod(cells, w), axis=-1).astype(np.int32)
    world.has_task = np.ones(n, dtype=bool) if quiet else rng.random(n) < 0.8
    world.errand = np.zeros(n, dtype=bool) if quiet else rng.random(n) < 0.2
    world.carrying = rng.random(n) < 0.5
    world.broken_until = rng.integers(-2, 3, size=n) + world.tick
    if batteries:
        world.battery = np.where(rng.random(n) < 0.5, rng.integers(-1, 3, size=n), np.inf)
    gated = rng.random(n) < 0.5 if gates else np.zeros(0, dtype=bool)
    acts = rng.integers(0, 5, size=n)
    cfg = world.config.reward
    new_pos = np.empty((n, 2), dtype=np.int32)
    flags = np.empty((5, n), dtype=bool)
    ind = np.empty(n, dtype=np.float32)
    reward_sum = rng.random(n)
    sum_before = reward_sum.copy()
    observer = None
    obs = np.zeros((0, 0), dtype=np.float32)
    inputs = LocalObserver(grid.blocked, grid.pickups, 1).kernel_inputs  # unused without obs
    if observed is not None:
        radius, heuristic = observed
        oracle = DistanceOracle(grid) if heuristic else None
        observer = LocalObserver(
            grid.blocked,
            grid.pickups,
            radius,
            oracle=oracle,
            task_cells=grid.pickups | grid.stations,
        )
        inputs = observer.kernel_inputs
        obs = np.full((n, observer.size), np.nan, dtype=np.float32)
    assert inputs is not None
    events, n_conflict, n_bump = kernels.warehouse_tick(
        world.pos,
        acts,
        grid.blocked,
        world.tick,
        (
            world.goal,
            world.has_task,
            world.errand,
            world.carrying,
            gated,
            world.broken_until,
            world.battery,
        ),
        np.array([cfg.step_cost, cfg.delivery_bonus, cfg.pickup_bonus, cfg.conflict_penalty]),
        new_pos,
        flags,
        ind,
        reward_sum,
        inputs,
        obs,
    )
    if gates:
        world.gated = lambda: gated  # type: ignore[method-assign]
        world.gates = {0: (None, "test")}
    res, picked, delivered = world._transition(acts)
    want = rw.individual(cfg, delivered=delivered[0], picked=picked[0], conflict=res.conflict[0])
    np.testing.assert_array_equal(new_pos, res.pos[0])
    refs = (res.moved, res.wall_bump, res.conflict, picked, delivered)
    for got, ref in zip(flags, refs, strict=True):
        np.testing.assert_array_equal(got, ref[0])
    assert ind.tobytes() == want.tobytes()
    assert reward_sum.tobytes() == (sum_before + want).tobytes()  # float64 += float32
    assert (n_conflict, n_bump) == (int(res.conflict.sum()), int(res.wall_bump.sum()))
    assert bool(events & 1) == bool(picked.any())
    assert bool(events & 2) == bool(delivered.any())
    assert bool(events & 8) == bool(np.isfinite(world.battery).any())
    # Observed exactly when asked, no event leaves Python work and every target is in the
    # distance table; then bit for bit the numpy reference of the observations after the tick.
    leaves_work = bool(events & (1 | 2 | 4 | 16))
    complete = True
    if observer is not None and observer.oracle is not None:
        keys = world.goal[:, 0] * w + world.goal[:, 1]
        complete = bool((inputs[3][keys[world.has_task]] >= 0).all())
    assert bool(events & kernels.OBSERVED) == (
        observer is not None and not leaves_work and complete
    )
    event("observed" if events & kernels.OBSERVED else "not observed")
    if events & kernels.OBSERVED:
        assert observer is not None
        ref_obs = observer.reference(
            Fleet(new_pos[None], world.goal[None], world.carrying[None], world.has_task[None])
        )[0]
        assert obs.tobytes() == ref_obs.tobytes()


def test_warehouse_tick_kernel_refuses_an_observation_buffer_of_the_wrong_shape() -> None:
    grid = parse_text_map(MAP)
    world = Warehouse(grid, WarehouseConfig(n_robots=2), seed=0)
    observer = LocalObserver.for_map(grid, 2)
    for shape in ((2, observer.size - 5), (1, observer.size), (3, observer.size)):
        out = np.zeros(shape, dtype=np.float32)
        with pytest.raises(ConfigError, match="wrong shape"):
            world.advance([0, 0], observer=observer, out=out)
    assert world.tick == 0  # refused before any work


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 10),
    st.integers(1, 5),
    st.sampled_from(["individual", "shared", "mixed(0.3)"]),
)
def test_vector_tick_kernel_matches_the_numpy_step(seed: int, n: int, b: int, mode: str) -> None:
    grid = parse_text_map(MAP)
    kw = {"max_steps": 7, "reward": rw.RewardConfig.parse(mode), "seed": seed}
    fast, ref = VectorWarehouse(grid, n, b, **kw), VectorWarehouse(grid, n, b, **kw)
    rng = np.random.default_rng(seed)
    for _ in range(20):  # two time limits: in-place resets and their draws included
        acts = rng.integers(0, 5, size=(b, n))
        got, want = fast.step(acts), ref.step_reference(acts)
        for name in ("rewards", "delivered", "conflict", "truncated", "terminated"):
            a, w = getattr(got, name), getattr(want, name)
            assert a.dtype == w.dtype, name
            assert a.tobytes() == w.tobytes(), name
        for name in ("pos", "pickup", "station", "carrying", "tick", "delivered_total"):
            np.testing.assert_array_equal(getattr(fast, name), getattr(ref, name), err_msg=name)


def test_vector_tick_kernel_matches_numpy_through_deliveries() -> None:
    # Long enough for many deliveries (each draws fresh tasks) and time limits.
    grid = parse_text_map(MAP)
    fast, ref = (VectorWarehouse(grid, 6, 8, max_steps=100, seed=1) for _ in range(2))
    rng = np.random.default_rng(1)
    for _ in range(1500):
        acts = rng.integers(0, 5, size=(8, 6))
        got, want = fast.step(acts), ref.step_reference(acts)
        assert got.rewards.tobytes() == want.rewards.tobytes()
        np.testing.assert_array_equal(got.delivered, want.delivered)
    for name in ("pos", "pickup", "station", "carrying", "tick", "delivered_total"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(ref, name), err_msg=name)
    assert ref.delivered_total.sum() > 20


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_heuristic_off_the_table_matches_one_map_per_robot(seed: int) -> None:
    """The one-gather heuristic against each robot's own full distance map."""
    grid = parse_text_map(MAP)
    h, w = grid.shape
    oracle = DistanceOracle(grid)
    observer = LocalObserver(grid.blocked, grid.pickups, 1, oracle=oracle)
    rng = np.random.default_rng(seed)
    free = np.flatnonzero(~grid.blocked.ravel())
    n = int(rng.integers(1, 8))
    cells = rng.choice(free, size=(1, n), replace=False)
    goals = rng.choice(free, size=(1, n))
    pos = np.stack([cells // w, cells % w], axis=-1).astype(np.int32)
    goal = np.stack([goals // w, goals % w], axis=-1).astype(np.int32)
    has_task = rng.random((1, n)) < 0.8
    got = observer.heuristic(pos, goal, has_task)[0]
    for i in range(n):
        dmap = oracle.to((int(goal[0, i, 0]), int(goal[0, i, 1])))
        for a, (dr, dc) in enumerate([(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]):
            r, c = int(pos[0, i, 0]) + dr, int(pos[0, i, 1]) + dc
            if not (0 <= r < h and 0 <= c < w) or grid.blocked[r, c]:
                assert got[i, a] == 2.0
            elif not has_task[0, i]:
                assert got[i, a] == 0.0
            else:
                here = dmap[int(pos[0, i, 0]), int(pos[0, i, 1])]
                assert got[i, a] == np.sign(float(dmap[r, c]) - float(here))
