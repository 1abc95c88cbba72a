"""The control loop: events not ticks, never waiting, stale plans, shield guarantee, faults."""

from __future__ import annotations

import time

import pytest

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.dispatch.faults import parse_fault
from fleetmind.dispatch.planners import AssignmentPlanner, GreedyPlanner
from fleetmind.dispatch.plans import PlanOutcome, Snapshot
from fleetmind.errors import ConfigError

from .conftest import make_world, orders_at


class Events:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.ticks: list[int] = []

    def on_tick(self, tick, columns) -> None:
        self.ticks.append(tick)

    def on_event(self, event) -> None:
        self.events.append(event)

    def snapshot(self, tick, state, *, reason) -> None:
        self.events.append({"tick": tick, "kind": f"snapshot:{reason}"})


class CountingPlanner:
    name = "counting"

    def __init__(self, grid, delay_s: float = 0.0) -> None:
        self.inner = AssignmentPlanner(grid)
        self.delay_s = delay_s
        self.snapshot_ticks: list[int] = []

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        self.snapshot_ticks.append(snapshot.tick)
        time.sleep(self.delay_s)
        return self.inner.plan(snapshot)


def test_no_planner_call_on_quiet_ticks(small) -> None:
    orders = orders_at(small, [0, 0, 40])
    world = make_world(small, n=2, orders=orders)
    planner = CountingPlanner(small)
    sink = Events()
    loop = ControlLoop(
        world,
        planner,
        ShortestPathExecutor(small),
        sink=sink,
        config=LoopConfig(planner_mode="sync"),
    )
    metrics = loop.run(300)
    assert metrics["tasks_completed"] == 3
    # Every call follows an event of the same tick: start, order arrivals (after the batching
    # window), or a robot becoming idle while an order waits.
    assert metrics["planner_calls"] == len(planner.snapshot_ticks) <= 4
    last_delivery = max(e["tick"] for e in sink.events if e["kind"] == "delivered")
    assert all(t <= last_delivery for t in planner.snapshot_ticks)
    # 300 ticks, at most 4 calls: nothing happens on the quiet ticks after the last delivery.
    assert last_delivery < 250


def test_new_orders_are_batched_within_the_window(small) -> None:
    orders = orders_at(small, [5, 6, 7])
    world = make_world(small, n=4, orders=orders)
    planner = CountingPlanner(small)
    loop = ControlLoop(
        world,
        planner,
        ShortestPathExecutor(small),
        config=LoopConfig(planner_mode="sync", order_window=3),
    )
    loop.run(30)
    # One call for the three orders, at tick 5 + 3; events with nothing to decide are skipped.
    assert planner.snapshot_ticks == [8]
    assert loop.stats.events_skipped >= 1  # start, and robots idling with nothing open


def test_loop_never_waits_for_a_slow_planner(small) -> None:
    world = make_world(small, n=6, rate=0.3)
    planner = CountingPlanner(small, delay_s=0.3)
    loop = ControlLoop(
        world, planner, ShortestPathExecutor(small), config=LoopConfig(tick_period_s=0.02)
    )
    metrics = loop.run(60)
    # The planner slept 0.3 s per call (15 ticks); the loop kept ticking meanwhile and applied
    # the plans when they came back: no tick waited for a plan.
    assert metrics["step_latency_ms"]["p99"] < 300
    assert 2 <= metrics["planner_calls"] <= 5
    assert metrics["assignments_applied"] >= 1


def test_stale_plans_are_checked_before_they_apply(small) -> None:
    world = make_world(small, n=4, rate=0.4)
    planner = CountingPlanner(small, delay_s=0.2)
    loop = ControlLoop(
        world,
        planner,
        ShortestPathExecutor(small),
        config=LoopConfig(max_plan_age=2, tick_period_s=0.02),
    )
    metrics = loop.run(40)
    # Plans take 10 ticks to come back, and the age limit is 2: every one is dropped.
    assert metrics["plans_stale"] >= 1
    assert metrics["assignments_applied"] == 0


def test_shield_removes_every_executed_collision(small) -> None:
    results = {}
    for shield in (True, False):
        world = make_world(small, n=16, rate=0.5, seed=3)
        loop = ControlLoop(
            world,
            GreedyPlanner(small),
            ShortestPathExecutor(small),
            config=LoopConfig(shield=shield, planner_mode="sync"),
        )
        results[shield] = loop.run(200)
    assert results[True]["collisions"] == 0
    assert results[False]["collisions"] > 0
    assert results[True]["shield_interventions"] > 0
    assert results[True]["tasks_completed"] > results[False]["tasks_completed"]
    # Commanded conflicts: the executor's first choices, before the shield; without the shield
    # they are exactly what went to the robots (and what the simulator refused).
    assert results[True]["conflicts_commanded"] > 0
    assert results[False]["conflicts_commanded"] == results[False]["collisions"]


def test_oracle_reads_what_the_solver_cannot(small) -> None:
    res = {}
    for use_hidden in (False, True):
        world = make_world(small, n=6, rate=0.2, text_share=1.0, seed=5)
        loop = ControlLoop(
            world,
            AssignmentPlanner(small, use_hidden=use_hidden),
            ShortestPathExecutor(small),
            config=LoopConfig(planner_mode="sync"),
        )
        res[use_hidden] = loop.run(400)
    assert (
        res[True]["constraint_violations"]["text_only"]
        < res[False]["constraint_violations"]["text_only"]
    )
    assert res[False]["constraint_violations"]["structured"] == 0


def test_breakdown_fault_is_recorded_and_recovers(small) -> None:
    world = make_world(small, n=4, rate=0.3)
    sink = Events()
    loop = ControlLoop(
        world,
        AssignmentPlanner(small),
        ShortestPathExecutor(small),
        sink=sink,
        faults=[parse_fault("breakdown:robot_1@10+20")],
        config=LoopConfig(planner_mode="sync"),
    )
    m = loop.run(60)
    kinds = [(e["kind"], e["tick"]) for e in sink.events if e["kind"].startswith("fault")]
    assert kinds == [("fault_start", 10), ("fault_end", 30)]
    assert m["faults"][0]["spec"] == "breakdown:robot_1@10+20"


def test_surge_adds_orders(small) -> None:
    world = make_world(small, n=4, rate=0.01)
    loop = ControlLoop(
        world,
        AssignmentPlanner(small),
        ShortestPathExecutor(small),
        faults=[parse_fault("surge@5:12")],
        config=LoopConfig(planner_mode="sync"),
    )
    m = loop.run(20)
    assert m["orders_arrived"] >= 12


@pytest.mark.parametrize("spec", ["breakdown:robot_1@x+2", "outage@1+2", "surge@3"])
def test_bad_fault_specs_are_named(spec: str) -> None:
    with pytest.raises(ConfigError, match="expected breakdown"):
        parse_fault(spec)


def test_auto_assign_world_is_rejected(small) -> None:
    from fleetmind.sim.warehouse import Warehouse, WarehouseConfig

    with pytest.raises(ConfigError, match="auto_assign"):
        ControlLoop(
            Warehouse(small, WarehouseConfig()), GreedyPlanner(small), ShortestPathExecutor(small)
        )


def test_sync_runs_are_reproducible(small) -> None:
    def run():
        world = make_world(small, n=8, rate=0.3, seed=11)
        sink = Events()
        loop = ControlLoop(
            world,
            AssignmentPlanner(small),
            ShortestPathExecutor(small),
            sink=sink,
            config=LoopConfig(planner_mode="sync"),
        )
        m = loop.run(150)
        return (
            m["tasks_completed"],
            m["shield_interventions"],
            [(e["tick"], e["kind"]) for e in sink.events],
        )

    assert run() == run()


def test_forbidden_cells_are_never_entered(small, tmp_path) -> None:
    from fleetmind.eval.runner import RunConfig, execute
    from fleetmind.eval.store import query

    closed = [(5, 5), (5, 6), (6, 5), (6, 6)]
    cfg = RunConfig(robots=10, steps=120, forbidden=closed, snapshot_every=0)
    m = execute(cfg, tmp_path / "run")
    assert m["collisions"] == 0
    assert m["shield_rules"].get("forbidden", 0) > 0  # someone wanted to go there
    inside = " or ".join(f"(row={r} and col={c})" for r, c in closed)
    count = query(tmp_path / "run", f"select count(*) as n from episode where {inside}")
    assert count.column("n")[0].as_py() == 0
