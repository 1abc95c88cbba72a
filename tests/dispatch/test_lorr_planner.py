"""The LoRR planner: legal, conflict-free plans, head-on corridors resolved, schedules accepted,
real instances served."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.dispatch.lorr import DistanceMaps, Levers, PibtPlanner
from fleetmind.errors import ConfigError
from fleetmind.sim import lorr
from fleetmind.sim.lorr import World, write_instance

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lorr"


def layout_instance(tmp: Path, rows: list[str], goals: dict[str, str]) -> lorr.Instance:
    """Robots ``a``, ``b``, ... (2023 rules) each with one errand at the upper-case letter."""
    width = len(rows[0])
    cells = {ch: r * width + c for r, row in enumerate(rows) for c, ch in enumerate(row)}
    robots = sorted(goals)
    plain = [row.translate(str.maketrans(dict.fromkeys("abcdefABCDEF", "."))) for row in rows]
    tasks = [[cells[goals[r]]] for r in robots]
    path = write_instance(tmp, plain, [cells[r] for r in robots], tasks, edition="2023")
    return lorr.read_instance(path)


def run(inst: lorr.Instance, steps: int, levers: Levers | None = None) -> lorr.RunResult:
    return lorr.simulate(inst, PibtPlanner(levers), steps=steps)


def test_distance_maps_are_breadth_first_over_free_cells(tmp_path: Path) -> None:
    grid = lorr.read_map(write_instance(tmp_path, ["....", ".@@.", "...."], [0], [[1]]).parent
                         / "maps" / "instance.map")  # fmt: skip
    dm = DistanceMaps(grid, capacity=2)
    dm.compute([int(dm.cell_of[0])], set())
    slot = dm.slots(np.array([dm.cell_of[0]]))[0]
    dist = {int(loc): int(dm.maps[slot, dm.cell_of[loc]]) for loc in dm.loc_of}
    assert dist[0] == 0
    assert dist[3] == 3
    assert dist[11] == 5
    assert dist[9] == 3  # round the wall, not through it
    dm.compute([int(dm.cell_of[3]), int(dm.cell_of[11])], {int(dm.cell_of[3])})
    assert len(dm.slot_of) == 2  # least recently used out, the pinned one kept


def test_highways_make_the_wrong_way_dearer(tmp_path: Path) -> None:
    grid = lorr.read_map(write_instance(tmp_path, ["....", "...."], [0], [[1]]).parent
                         / "maps" / "instance.map")  # fmt: skip
    dm = DistanceMaps(grid, capacity=4, highway=3.0)
    dm.compute([int(dm.cell_of[3]), int(dm.cell_of[0])], set())
    east, west = dm.slots(np.array([dm.cell_of[3], dm.cell_of[0]]))
    assert dm.maps[east, dm.cell_of[0]] == 3  # row 0 runs east: three moves at cost 1
    # Back west: every route makes two moves against their way (3 each) and three with it,
    # e.g. down col 3, west along row 1, up col 1, west on row 0.
    assert dm.maps[west, dm.cell_of[3]] == 9
    with pytest.raises(ConfigError, match="whole number"):
        PibtPlanner(Levers(highway=1.5))
    plain = DistanceMaps(grid, capacity=1)
    plain.compute([int(plain.cell_of[0])], set())
    assert plain.maps[0, plain.cell_of[3]] == 3


def test_head_on_in_a_corridor_both_get_through(tmp_path: Path) -> None:
    # a faces east toward b (b starts facing east too and must turn round); the lane above is
    # the only way past. PIBT needs that loop: in a dead-end corridor it may block for good.
    rows = [
        ".......",
        ".@@@@@.",
        "Ba...bA",
    ]
    inst = layout_instance(tmp_path, rows, {"a": "A", "b": "B"})
    result = run(inst, 40)
    assert result.finished >= 2
    assert lorr.validate(lorr.result_json(result), inst, time_limit=None).ok


def test_a_queue_follows_its_leader_in_one_step(tmp_path: Path) -> None:
    rows = ["abc....ABC"]  # all face east, goals ahead: everyone drives at once
    inst = layout_instance(tmp_path, rows, {"a": "A", "b": "B", "c": "C"})
    world = World(inst, steps=5)
    planner = PibtPlanner()
    planner.initialize(inst)
    plan = planner.plan(world.view())
    assert plan.actions.tolist() == [lorr.FW] * 3
    assert world.check(plan.actions) is None


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_plans_never_conflict_or_leave_the_map(tmp_path_factory, data: st.DataObject) -> None:
    h = data.draw(st.integers(2, 5))
    w = data.draw(st.integers(2, 6))
    blocked = data.draw(st.lists(st.booleans(), min_size=h * w, max_size=h * w))
    free = [i for i, b in enumerate(blocked) if not b]
    if len(free) < 2:
        return
    n = data.draw(st.integers(1, min(6, len(free))))
    starts = data.draw(st.permutations(free))[:n]
    goals = data.draw(st.lists(st.sampled_from(free), min_size=n, max_size=n))
    rows = ["".join("@" if blocked[r * w + c] else "." for c in range(w)) for r in range(h)]
    folder = tmp_path_factory.mktemp("p")
    inst = lorr.read_instance(
        write_instance(folder, rows, starts, [[g] for g in goals], edition="2023")
    )
    world = World(inst, steps=12)
    world.ori[:] = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    planner = PibtPlanner(seed=data.draw(st.integers(0, 3)))
    planner.initialize(inst)
    for _ in range(12):
        plan = planner.plan(world.view())
        assert world.check(plan.actions) is None
        world.advance(plan.actions)
    assert not world.record.errors


def test_2024_schedules_are_accepted_and_tasks_finish(tmp_path: Path) -> None:
    rows = ["........", "..@@@@..", "........"]
    tasks = [[0, 7], [23, 16], [3, 20], [17, 6], [8, 15], [1, 22]]
    inst = lorr.read_instance(write_instance(tmp_path, rows, [2, 8, 21], tasks))
    result = run(inst, 80)
    assert result.record.schedule_errors == []
    assert result.record.errors == []
    assert result.finished >= 4
    check = lorr.validate(lorr.result_json(result), inst, time_limit=None)
    assert check.ok, check


def test_warehouse_small_50_moves_errands_without_conflict() -> None:
    inst = lorr.read_instance(DATA / "2023/warehouse.domain/warehouse_small_50.json")
    result = run(inst, 150)
    # 50 robots on the 33 x 57 warehouse: about 0.4 errands per step once under way.
    assert result.finished > 30
    check = lorr.validate(lorr.result_json(result), inst, time_limit=None)
    assert check.ok, check
    assert result.record.errors == []


def test_reassign_trades_an_unstarted_task_for_a_much_nearer_one(tmp_path: Path) -> None:
    rows = ["." * 30]
    tasks = [[29, 28], [2, 3], [25, 24]]  # robot at 0: task 1 is by far the nearest
    inst = lorr.read_instance(write_instance(tmp_path, rows, [0], tasks, reveal=3))
    world = World(inst, steps=5)
    world.advance(np.array([lorr.WAIT]), np.array([0]))  # start on the far task
    for trade, expect in ((0, 0), (5, 1)):
        planner = PibtPlanner(Levers(reassign=trade))
        planner.initialize(inst)
        plan = planner.plan(world.view())
        assert plan.schedule is not None
        assert plan.schedule.tolist() == [expect]
    world.advance(np.array([lorr.WAIT]), np.array([1]))
    assert world.record.schedule_errors == []


def test_unstick_frees_a_robot_held_in_a_dead_end(tmp_path: Path) -> None:
    # Cell 0 is a dead end behind cell 1. Robot 0 starts in it and must get out (to 4); robot
    # 1 waits at its mouth to get in. PIBT ranks robots by steps since their goal changed,
    # which keeps one order between the two for good: where robot 1 ranks first it keeps
    # its cell while it waits to enter, robot 0 cannot leave, and neither moves again.
    rows = [".....", "@.@@."]
    errands = [[4], [0], [9], [6], [0], [4]] * 3  # 2023: robot i's k-th errand, line i + 2k
    path = write_instance(tmp_path, rows, [0, 1], errands, edition="2023", name="dead")
    inst = lorr.read_instance(path)

    def errands_done(levers: Levers) -> list[int]:
        runs = [lorr.simulate(inst, PibtPlanner(levers, seed=s), steps=300) for s in range(8)]
        return [r.finished for r in runs]

    locked = errands_done(Levers(highway=2))
    assert sum(f <= 10 for f in locked) >= 4, locked  # most seeds lock within 300 steps
    # Stuck robots rank first, in a random order drawn again while they stay stuck: robot 0
    # ranks first in some draw, pushes robot 1 aside, and both go on.
    assert min(errands_done(Levers(highway=2, unstick=50))) >= 7
    assert min(errands_done(Levers(unstick=10))) >= 25


def test_cycles_finds_rings_and_break_cycles_never_plans_one(tmp_path: Path) -> None:
    from fleetmind.dispatch.lorr import cycles

    # (0,0) E -> (0,1) S -> (1,1) W -> (1,0) N -> (0,0), width 4; robot 4 moves on its own.
    cell, into = np.array([0, 1, 5, 4, 9]), np.array([1, 5, 4, 0, 10])
    assert cycles(cell, into) == [[0, 1, 2, 3]]
    into[2] = -1  # robot 2 stays: a chain, no ring
    assert cycles(cell, into) == []
    # A 2 x 2 block, each robot's errand diagonally across: PIBT turns the block as a ring.
    rows = ["....", "....", "...."]
    starts, goals = [1, 2, 6, 5], [6, 5, 1, 2]
    path = write_instance(tmp_path, rows, starts, [[g] for g in goals] * 10, edition="2023")
    inst = lorr.read_instance(path)

    class Rings(PibtPlanner):
        found = 0

        def plan(self, view, hold=None):  # type: ignore[no-untyped-def]
            p = super().plan(view, hold)
            c = self.dm.cell_of[view.loc]
            ahead = self.dm.nbr[c, view.ori]
            Rings.found += len(cycles(c, np.where(p.actions == lorr.FW, ahead, -1)))
            return p

    for seed in range(3):
        lorr.simulate(inst, Rings(seed=seed), steps=60)
    assert Rings.found > 0  # the 2024 rules allow it
    Rings.found = 0
    for seed in range(3):
        result = lorr.simulate(inst, Rings(Levers(break_cycles=True), seed=seed), steps=60)
        assert result.record.errors == []
    assert Rings.found == 0


def test_a_run_without_a_time_limit_repeats_exactly() -> None:
    inst = lorr.read_instance(DATA / "2023/warehouse.domain/warehouse_small_100.json")
    first, again = run(inst, 80, Levers(highway=2)), run(inst, 80, Levers(highway=2))
    assert np.array_equal(first.record.actions, again.record.actions)
    other = lorr.simulate(inst, PibtPlanner(Levers(highway=2), seed=1), steps=80)
    assert not np.array_equal(first.record.actions, other.record.actions)


@pytest.mark.parametrize("highway", [0.0, 2.0])
def test_distance_maps_equal_scipy_dijkstra_on_a_real_map(highway: float) -> None:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    grid = lorr.read_map(DATA / "maps/warehouse_small.map")
    dm = DistanceMaps(grid, capacity=40, highway=highway)
    # The reference: every move from cell c in heading k, cost 1 or ``highway`` against the way.
    src = np.repeat(np.arange(dm.n_free), 4)
    dst = dm.nbr[:-1].ravel()
    heading = np.tile(np.arange(4), dm.n_free)
    with_way = np.where(
        heading % 2 == 0,
        (dm.rows[src] % 2 == 0) == (heading == 0),
        (dm.cols[src] % 2 == 0) == (heading == 1),
    )
    cost = np.where(with_way | (highway == 0), 1.0, highway)
    keep = dst < dm.n_free
    graph = coo_matrix((cost[keep], (dst[keep], src[keep])), shape=(dm.n_free,) * 2).tocsr()
    goals = np.random.default_rng(3).choice(dm.n_free, 30, replace=False)
    dm.compute(goals.tolist(), set())
    ref = shortest_path(graph, method="D", indices=goals)
    ref = np.where(np.isinf(ref), 30000, ref).astype(np.int16)
    assert np.array_equal(dm.maps[dm.slots(goals)][:, : dm.n_free], ref)


def reference_pibt(
    cell: np.ndarray, cand: np.ndarray, prio: np.ndarray, sentinel: int
) -> np.ndarray:
    """The planner's former PIBT (recursive Python): the reference the kernel must match."""
    import sys

    n = len(cell)
    cur, cands = cell.tolist(), cand.tolist()
    occ_arr = np.full(sentinel + 1, -1, dtype=np.int64)
    occ_arr[cell] = np.arange(n)
    occ = occ_arr.tolist()
    reserved = [-1] * (sentinel + 1)
    nxt = [-1] * n

    def visit(i: int, parent: int) -> bool:
        parent_cell = cur[parent] if parent >= 0 else -1
        for v in cands[i]:
            if v in (sentinel, parent_cell) or reserved[v] != -1:
                continue
            reserved[v] = i
            nxt[i] = v
            k = occ[v]
            if k != -1 and k != i and nxt[k] == -1 and not visit(k, i):
                continue
            return True
        nxt[i] = cur[i]
        reserved[cur[i]] = i
        return False

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * n + 1000))
    try:
        for i in np.argsort(-prio, kind="stable").tolist():
            if nxt[i] == -1:
                visit(i, -1)
    finally:
        sys.setrecursionlimit(limit)
    return np.array(nxt, dtype=np.int64)


class Checked(PibtPlanner):
    """The planner, its every PIBT answer compared with the reference."""

    steps_checked = 0

    def _pibt(self, cell, cand, prio, ban=None, hold=None):  # type: ignore[no-untyped-def]
        got = super()._pibt(cell, cand, prio, ban, hold)
        expected = reference_pibt(cell, cand, prio, self.dm.n_free)
        assert np.array_equal(got, expected)
        Checked.steps_checked += 1
        return got


@pytest.mark.parametrize("name", ["2023/warehouse.domain/warehouse_small_200.json"])
def test_the_compiled_pibt_answers_as_the_recursive_one(name: str) -> None:
    # 200 robots on the small warehouse: crowded enough for long push chains.
    inst = lorr.read_instance(DATA / name)
    result = lorr.simulate(inst, Checked(), steps=120)
    assert Checked.steps_checked == 120
    assert result.record.errors == []


def test_generated_problems_are_seeded_and_compare_levers() -> None:
    from fleetmind.bench import lorr as bench
    from fleetmind.rl.lorr_executor import problems_2024

    a, b = problems_2024(3, 1, size=16, robots=10), problems_2024(3, 1, size=16, robots=10)
    assert np.array_equal(a[0].grid.blocked, b[0].grid.blocked)
    assert np.array_equal(a[0].tasks, b[0].tasks)
    assert not np.array_equal(problems_2024(4, 1, size=16)[0].grid.blocked, a[0].grid.blocked)
    result = bench.generated(
        rules="2024", variants=["highway", "highway+unstick"], seed=3, count=2, steps=60,
        size=16, robots=10,
    )  # fmt: skip
    rows = {r["variant"]: r for r in result["rows"]}
    assert set(rows) == {"highway", "highway+unstick"}
    assert all(len(r["steps"]) == 2 and r["steps_total"] == sum(r["steps"]) for r in rows.values())
    assert rows["highway"]["steps_total"] > 0
    assert "highway+unstick: tasks" in bench.format_generated(result)
    with pytest.raises(ConfigError, match="--variants: unknown 'highway:hold'"):
        bench.generated(rules="2024", variants=["highway:hold"], seed=3, count=1, steps=5)
