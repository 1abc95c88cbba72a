"""The control loop's per-tick arrays against the per-robot reference computations."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from fleetmind.bench.scale import reference_priorities
from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.dispatch.planners import AssignmentPlanner, priority_of, task_priorities
from fleetmind.envs.warehouse import resolve_map
from fleetmind.safety.verify import conflicts, count_conflicts
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import RIGHT
from fleetmind.sim.orders import OrderConfig
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig


class _Tap:
    """A sink that keeps the order column of every tick."""

    def __init__(self) -> None:
        self.orders: list[list[str]] = []

    def on_tick(self, tick: int, columns: dict[str, NDArray[Any]]) -> None:
        self.orders.append(columns["order"].tolist())

    def on_event(self, event: dict[str, Any]) -> None:
        pass

    def snapshot(self, tick: int, state: dict[str, Any], *, reason: str) -> None:
        pass


def test_priorities_distances_conflicts_and_order_column_match_the_reference() -> None:
    grid = resolve_map("warehouse-small")
    world = Warehouse(
        grid,
        WarehouseConfig(
            n_robots=12, max_steps=200, orders=OrderConfig(rate=0.6), auto_assign=False
        ),
        seed=5,
    )
    tap = _Tap()
    loop = ControlLoop(
        world,
        AssignmentPlanner(grid),
        ShortestPathExecutor(grid),
        config=LoopConfig(planner_mode="sync"),
        sink=tap,
    )
    checked = 0
    for _ in range(120):
        w = loop.world
        assert np.array_equal(loop._priorities(), reference_priorities(loop))
        want = np.zeros(len(w.robot_ids), dtype=np.int64)
        for i in np.flatnonzero(w.has_task):
            goal = (int(w.goal[i, 0]), int(w.goal[i, 1]))
            want[i] = int(loop._oracle.to(goal)[w.cell_of(int(i))])
        dist, changed = loop._progress()
        assert np.array_equal(dist, want)
        assert changed is None  # plain distances: the monitor reads a jump as a new target
        loop.step()
        # The recorded order column: each robot's order after the tick, as the world says.
        ids = [(o.id if (o := w.task_of(i)) is not None else "") for i in range(len(w.robot_ids))]
        assert tap.orders[-1] == ids
        checked += int(world.has_task.sum())
    assert checked > 200  # robots were busy on most ticks: the comparison saw real tasks
    assert world.metrics()["tasks_completed"] > 0


def test_task_priorities_equal_priority_of() -> None:
    rng = np.random.default_rng(0)
    urgent = rng.random(200) < 0.3
    due = rng.integers(0, 400, 200)
    from fleetmind.sim.orders import Order

    for tick in (0, 150, 399, 1000):
        fast = task_priorities(urgent, due, tick)
        slow = [
            priority_of(
                Order(
                    id="o",
                    tick=0,
                    pickup=(0, 0),
                    station=(0, 1),
                    priority="urgent" if u else "normal",
                    due=int(d),
                ),
                tick,
            )
            for u, d in zip(urgent, due, strict=True)
        ]
        assert fast.tolist() == slow


def test_the_referee_count_is_the_reference_count_on_shielded_and_naive_moves() -> None:
    grid = resolve_map("warehouse-small")
    world = Warehouse(grid, WarehouseConfig(n_robots=30, max_steps=60), seed=2)
    ex = ShortestPathExecutor(grid)
    seen = 0
    for _ in range(40):
        first = ex.rank(world.pos, world.goal, world.has_task)[:, 0]
        n = count_conflicts(grid, world.pos, first)
        assert n == len(conflicts(grid, world.pos, first))
        seen += n
        world.step(first)
    assert seen > 0  # 30 robots on first choices do collide: the count saw conflicts


def test_shortest_path_distances_equal_the_per_robot_maps_on_random_states() -> None:
    from fleetmind.sim.distances import UNREACHABLE
    from fleetmind.sim.grid import DELTAS

    grid = resolve_map("warehouse-small")
    ex = ShortestPathExecutor(grid, DistanceOracle(grid, max_cached=16))
    free = np.argwhere(~grid.blocked).astype(np.int32)
    rng = np.random.default_rng(11)
    h, w = grid.shape
    for _ in range(5):
        pos = free[rng.choice(len(free), 40, replace=False)]
        goal = free[rng.integers(len(free), size=40)]
        got = ex.distances(pos, goal)
        for i in range(40):
            dmap = DistanceOracle(grid).to((int(goal[i, 0]), int(goal[i, 1])))
            for a, (dr, dc) in enumerate(DELTAS.tolist()):
                r, c = int(pos[i, 0]) + dr, int(pos[i, 1]) + dc
                inside = 0 <= r < h and 0 <= c < w and not grid.blocked[r, c]
                assert got[i, a] == (dmap[r, c] if inside else UNREACHABLE)


def _reference_costs(
    planner: AssignmentPlanner,
    snapshot: Any,
    robots: list[Any],
    orders: list[Any],
    constraints: Any,
) -> NDArray[np.float64]:
    """The assignment cost matrix as first written: pair by pair (the hold rule left out)."""
    from fleetmind.dispatch import planners as pl
    from fleetmind.sim.distances import UNREACHABLE

    t = snapshot.tick
    oracle = DistanceOracle(snapshot.grid)
    trips = np.zeros((len(robots), len(orders)), dtype=np.int64)
    for j, o in enumerate(orders):
        pmap = oracle.to(o.pickup)
        for i, r in enumerate(robots):
            a, b = int(pmap[r.cell]), int(pmap[o.station])
            trips[i, j] = UNREACHABLE if max(a, b) >= UNREACHABLE else a + b
    assert np.array_equal(planner._dist.trips(robots, orders), trips)
    cost = trips.astype(np.float64)
    for j, o in enumerate(orders):
        lateness = np.maximum(0, t + trips[:, j] - o.due) - max(0, t - o.due)
        cost[:, j] += pl.LATE_WEIGHT * lateness
        cost[:, j] -= pl.URGENT_BONUS * (o.priority == "urgent") + pl.AGE_WEIGHT * (t - o.tick)
        held = snapshot.held_ticks.get(o.id, 0)
        cost[:, j] -= pl.STARVE_WEIGHT * (max(0, t - o.tick - pl.WAIT_LIMIT) + held)
        for i, r in enumerate(robots):
            if (
                trips[i, j] >= UNREACHABLE
                or (o.capability is not None and o.capability not in r.capabilities)
                or r.battery < pl.DRAIN_PER_MOVE * trips[i, j]
            ):
                cost[i, j] = pl.FORBIDDEN
        for h in constraints.get(o.id, ()):
            if h.kind == "only_robot":
                for i, r in enumerate(robots):
                    if r.id != h.robot:
                        cost[i, j] = pl.FORBIDDEN
            elif h.kind == "not_robot":
                for i, r in enumerate(robots):
                    if r.id == h.robot:
                        cost[i, j] = pl.FORBIDDEN
            elif h.kind == "deadline" and h.tick is not None:
                late = np.maximum(0, t + trips[:, j] - (h.tick - 1))
                cost[:, j] += 4 * pl.LATE_WEIGHT * (late - max(0, t - (h.tick - 1)))
                cost[late == 0, j] -= pl.DEADLINE_BONUS
    return cost


def test_assignment_costs_equal_the_pair_by_pair_reference() -> None:
    from fleetmind.dispatch.plans import Snapshot
    from fleetmind.sim.warehouse import BatteryConfig

    grid = resolve_map("warehouse-small")
    world = Warehouse(
        grid,
        WarehouseConfig(
            n_robots=24,
            max_steps=100,
            orders=OrderConfig(rate=2.0, text_share=0.7, capability_share=0.5),
            battery=BatteryConfig(capacity=30.0),
            auto_assign=False,
        ),
        seed=9,
    )
    from scipy.optimize import linear_sum_assignment

    from fleetmind.dispatch import planners as pl

    planner = AssignmentPlanner(grid, use_hidden=True)
    rng = np.random.default_rng(1)
    compared = 0
    shapes = set()
    for _ in range(30):
        world.step(rng.integers(0, 5, len(world.robot_ids)))
        snap = Snapshot.take(world, with_text=False)
        robots, orders = snap.idle_robots, list(snap.orders)
        truth = {o.id: o.constraints for o in orders if o.constraints}
        # Holds wake the planner and read pickups alone; the rest is compared cell by cell.
        truth = {k: tuple(c for c in v if c.kind != "hold") for k, v in truth.items()}
        fast, _ = planner.costs(snap, robots, orders, truth)
        assert np.array_equal(fast, _reference_costs(planner, snap, robots, orders, truth))
        # The columns the solver reads (no view per robot) give the same matrix.
        cols = snap.idle_columns
        assert cols.ids == [r.id for r in robots]
        assert np.array_equal(planner.costs(snap, cols, orders, truth)[0], fast)
        compared += fast.size
        # The plan: the pairs scipy gives on the plain (R, O) matrix, in its order, whichever
        # way the solver hands the matrix over.
        full, _ = planner.costs(snap, robots, orders, None)
        rows, picks = linear_sum_assignment(np.ascontiguousarray(full))
        want = [
            (robots[i].id, orders[j].id)
            for i, j in zip(rows, picks, strict=True)
            if full[i, j] < pl.FORBIDDEN / 2
        ]
        plain = AssignmentPlanner(grid)
        got = [(a.robot, a.order) for a in plain.solve(snap).assignments]
        assert got == want
        shapes.add(full.shape[0] > full.shape[1])
    assert compared > 1000
    assert shapes == {True, False}  # tall and wide matrices both met


def test_the_snapshot_fleet_view_equals_the_per_robot_views() -> None:
    import dataclasses

    from fleetmind.dispatch.planners import arbitrate_by_rule
    from fleetmind.dispatch.plans import FleetView, RobotView, Snapshot
    from fleetmind.sim.warehouse import BatteryConfig

    grid = resolve_map("warehouse-small")
    world = Warehouse(
        grid,
        WarehouseConfig(
            n_robots=20,
            max_steps=100,
            orders=OrderConfig(rate=1.0, capability_share=0.5),
            battery=BatteryConfig(capacity=40.0),
        ),
        seed=3,
    )
    world.break_robot(4, 30)
    rng = np.random.default_rng(2)
    kinds = set()
    for _ in range(40):
        world.step(rng.integers(0, 5, len(world.robot_ids)))
        snap = Snapshot.take(world, with_text=False)
        # The views as Snapshot.take first built them: one object per robot, eagerly.
        want = [
            RobotView(
                id=rid,
                index=i,
                cell=world.cell_of(i),
                idle=bool(not world.has_task[i] and not world.broken[i]),
                broken=bool(world.broken[i]),
                carrying=bool(world.carrying[i]),
                order=(o.id if (o := world.task_of(i)) is not None else None),
                capabilities=world.capabilities[i],
                battery=float(world.battery[i]),
            )
            for i, rid in enumerate(world.robot_ids)
        ]
        assert snap.idle_robots == [r for r in want if r.idle]
        assert list(snap.robots) == want
        assert snap.robots[-1] == want[-1]
        assert isinstance(snap.robots, FleetView)
        assert snap.robots.get("robot_7") == want[7]
        assert snap.robots.get("robot_99") is None
        # Deadlock arbitration reads only the stuck robots' views: the same boost as all.
        stuck = tuple(f"robot_{i}" for i in rng.choice(20, 4, replace=False))
        some = dataclasses.replace(snap, stuck=stuck)
        every = dataclasses.replace(some, robots=tuple(want))
        assert arbitrate_by_rule(some) == arbitrate_by_rule(every) != ()
        assert list(snap.robots[2:5]) == want[2:5]
        held = tuple(
            o
            for i in range(len(world.robot_ids))
            if not world.carrying[i] and (o := world.task_of(i)) is not None
        )
        assert snap.tasks == held
        kinds |= {(r.idle, r.broken, r.carrying) for r in want}
    assert {(True, False, False), (False, True, False), (False, False, True)} <= kinds


def test_a_late_order_grows_no_costlier_while_it_waits() -> None:
    """Lateness counts what a trip adds: waiting never prices a late order out for good."""
    import dataclasses

    from fleetmind.dispatch.plans import Snapshot
    from fleetmind.sim.orders import OrderConfig

    grid = resolve_map("warehouse-small")
    world = Warehouse(
        grid,
        WarehouseConfig(n_robots=1, orders=OrderConfig(rate=1e-9), auto_assign=False),
        seed=0,
    )
    late = dataclasses.replace(world.stream.make(0), id="late", due=5)
    fresh = dataclasses.replace(world.stream.make(0), id="fresh", due=10**6)
    world.inject([late, fresh])
    planner = AssignmentPlanner(grid)
    for _ in range(10):  # past the late order's due tick
        world.step(np.zeros(1, dtype=np.int64))
    seen = []
    for _ in range(3):
        snap = Snapshot.take(world, with_text=False)
        cost, _ = planner.costs(snap, snap.idle_robots, list(snap.orders), None)
        seen.append(cost[0].tolist())
        for _ in range(100):
            world.step(np.zeros(1, dtype=np.int64))
    # Both orders age alike; the late one's price stays put relative to the fresh one (before,
    # it rose by LATE_WEIGHT for every tick it waited, and with a backlog it never came up).
    gaps = [c[0] - c[1] for c in seen]
    assert gaps[0] == pytest.approx(gaps[1])
    assert gaps[1] == pytest.approx(gaps[2])
    assert seen[2][0] < seen[0][0]  # and its age makes it cheaper


def _lone_robot() -> tuple[Any, Warehouse, tuple[int, int], Any]:
    """warehouse-small with one robot and no orders of its own: grid, world, its cell, distances."""
    from fleetmind.sim.distances import DistanceOracle
    from fleetmind.sim.orders import OrderConfig

    grid = resolve_map("warehouse-small")
    world = Warehouse(
        grid,
        WarehouseConfig(
            n_robots=1, max_steps=1000, orders=OrderConfig(rate=1e-9), auto_assign=False
        ),
        seed=0,
    )
    here = (int(world.pos[0, 0]), int(world.pos[0, 1]))
    return grid, world, here, DistanceOracle(grid)


def test_an_order_passed_over_past_the_wait_limit_goes_before_fresh_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No order waits for good: past WAIT_LIMIT ticks its age outweighs a fresh, nearer order."""
    import dataclasses

    from fleetmind.dispatch import planners as pl
    from fleetmind.dispatch.plans import Snapshot

    grid, world, here, oracle = _lone_robot()
    by_reach = sorted(grid.pickup_cells(), key=lambda c: int(oracle.to(c)[here]))
    station = grid.station_cells()[0]
    base = dataclasses.replace(world.stream.make(0), station=station, capability=None)
    (old,) = world.inject(
        [dataclasses.replace(base, pickup=by_reach[len(by_reach) // 2], due=5, priority="normal")]
    )
    for _ in range(pl.WAIT_LIMIT + 100):  # the robot stays put; the order waits, late
        world.step(np.zeros(1, dtype=np.int64))
    (fresh,) = world.inject([dataclasses.replace(base, pickup=by_reach[0], due=10**6)])
    snap = Snapshot.take(world, with_text=False)
    planner = AssignmentPlanner(grid)

    def served() -> str:
        (a,) = planner.solve(snap).assignments
        return a.order

    assert served() == old
    # Without the limit the fresh order wins (the old one's far trip all counts as lateness),
    # and would go on winning against every fresh order that came in.
    monkeypatch.setattr(pl, "STARVE_WEIGHT", 0.0)
    assert served() == fresh


def test_an_order_a_handler_held_goes_before_fresh_work_once_released() -> None:
    """The ticks on hold (a closed aisle) weigh as waiting past the limit, once it is back."""
    import dataclasses

    from fleetmind.dispatch import planners as pl
    from fleetmind.dispatch.plans import Snapshot

    grid, world, here, oracle = _lone_robot()
    station = grid.station_cells()[0]
    trip = {c: int(oracle.to(c)[here]) + int(oracle.to(c)[station]) for c in grid.pickup_cells()}
    near = min(trip, key=lambda c: trip[c])
    # Farther by more than the age bonus of the hold's ticks, less than the hold's weight.
    hold = 80
    far = next(c for c in trip if 40 <= trip[c] - trip[near] <= 60)
    base = dataclasses.replace(world.stream.make(0), station=station, capability=None, due=10**6)
    (kept,) = world.inject([dataclasses.replace(base, pickup=far)])
    world.park(kept, hold)
    for _ in range(hold + 1):  # the robot stays put; the order comes back at tick ``hold``
        world.step(np.zeros(1, dtype=np.int64))
    (fresh,) = world.inject([dataclasses.replace(base, pickup=near)])
    planner = AssignmentPlanner(grid)

    def served() -> str:
        (a,) = planner.solve(Snapshot.take(world, with_text=False)).assignments
        return a.order

    assert Snapshot.take(world, with_text=False).held_ticks == {kept: hold}
    assert served() == kept
    assert hold * pl.AGE_WEIGHT < trip[far] - trip[near]  # its age alone would not do it
    world.held_ticks.clear()
    assert served() == fresh


def test_a_robot_routes_around_a_broken_robot_in_a_one_wide_aisle() -> None:
    # Row 9, columns 5-9 of warehouse-small run between shelves: one wide, no way round inside.
    grid = resolve_map("warehouse-small")
    assert grid.blocked[8, 5:10].all()
    assert grid.blocked[10, 5:10].all()
    world = Warehouse(
        grid,
        WarehouseConfig(
            n_robots=2, max_steps=100, orders=OrderConfig(rate=None), auto_assign=False
        ),
        seed=0,
    )
    world.pos[0] = (9, 7)
    world.pos[1] = (9, 5)
    world.break_robot(0, 100)
    world.send_to(1, (9, 9))
    loop = ControlLoop(
        world,
        AssignmentPlanner(grid),
        ShortestPathExecutor(grid),
        config=LoopConfig(planner_mode="sync"),
    )
    for _ in range(40):
        loop.step()
        if world.cell_of(1) == (9, 9):
            break
    # The shield cannot push a broken robot: without the detour robot_1 waits at (9, 6).
    assert world.cell_of(1) == (9, 9)
    assert world.cell_of(0) == (9, 7)
    ex = loop.executor
    assert isinstance(ex, ShortestPathExecutor)
    at, goal = np.array([[9, 6]], dtype=np.int32), np.array([[9, 8]], dtype=np.int32)
    east = RIGHT  # into the broken robot's cell
    assert ex.distances(at, goal)[0, east] > 100  # a wall for routing while it stands
    # Repaired, its cell is open to routing again.
    world.broken_until[0] = world.tick - 1
    loop.step()
    assert ex.distances(at, goal)[0, east] == 1
