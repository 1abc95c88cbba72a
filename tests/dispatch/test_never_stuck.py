"""Runs that never block: no wait for a plan in flight at the end, no lost wake-up, and an LLM
queue planner whose solver serves orders while the model thinks (deadline in ticks)."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.dispatch.llm_planner import LLMPlanner
from fleetmind.dispatch.planners import AssignmentPlanner
from fleetmind.dispatch.plans import Plan, PlanOutcome, Snapshot
from fleetmind.testing.fake_server import FakeChatServer, Reply

from .conftest import make_world, orders_at


class SlowPlanner:
    name = "slow"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        time.sleep(self.delay_s)
        return PlanOutcome(plan=Plan(tick=snapshot.tick, assignments=(), source=self.name))


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.events: list[tuple[int, tuple[str, ...]]] = []

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        self.events.append((snapshot.tick, snapshot.events))
        return PlanOutcome(plan=Plan(tick=snapshot.tick, assignments=(), source=self.name))


class Sink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def on_tick(self, tick, columns) -> None:
        pass

    def on_event(self, event) -> None:
        self.events.append(event)

    def snapshot(self, tick, state, *, reason) -> None:
        pass


def test_run_never_waits_for_a_plan_in_flight_at_the_end(small) -> None:
    sink = Sink()
    world = make_world(small, n=3, orders=orders_at(small, [0, 0]))
    loop = ControlLoop(world, SlowPlanner(30.0), ShortestPathExecutor(small), sink=sink)
    start = time.perf_counter()
    m = loop.run(20)
    assert time.perf_counter() - start < 5.0  # not the 30 s the plan would take
    assert m["plans_abandoned"] == 1
    assert m["planner_fallbacks"] == 1
    assert m["planner_latency_ms"]["p50"] > 0  # its time so far counts
    assert [e["reason"] for e in sink.events if e["kind"] == "plan_abandoned"] == ["run ended"]


def test_a_wake_up_due_while_a_plan_is_in_flight_stays_pending(small) -> None:
    world = make_world(small, n=2, orders=orders_at(small, [0, 0, 0]))
    planner = Recording()
    loop = ControlLoop(
        world, planner, ShortestPathExecutor(small), config=LoopConfig(planner_mode="sync")
    )
    for _ in range(4):
        loop.step()  # orders arrive; the planner assigns nothing, so robots stay idle
    calls = len(planner.events)
    loop._pending.clear()
    loop._wake_at = world.tick  # a hold released now...
    loop._future = Future()  # ...while a plan is in flight
    loop._maybe_plan()
    assert len(planner.events) == calls
    assert loop._wake_at == world.tick  # kept, not dropped
    loop._future = None  # the plan landed
    loop._maybe_plan()
    assert "timer" in planner.events[-1][1]
    assert loop._wake_at is None


def _solver_alone(small, steps: int) -> int:
    world = make_world(small, n=4, rate=0.2, steps=steps, seed=5)
    loop = ControlLoop(
        world,
        AssignmentPlanner(small),
        ShortestPathExecutor(small),
        config=LoopConfig(planner_mode="sync"),
    )
    return int(loop.run(steps)["tasks_completed"])


def _llm_run(small, srv: FakeChatServer, steps: int, **planner: object) -> dict:
    world = make_world(small, n=4, rate=0.2, steps=steps, seed=5)
    loop = ControlLoop(
        world,
        LLMPlanner(srv.client(), small, background=True, **planner),  # type: ignore[arg-type]
        ShortestPathExecutor(small),
        config=LoopConfig(planner_mode="async", tick_period_s=0.005),
    )
    return loop.run(steps)


def test_the_solver_serves_orders_while_a_slow_model_thinks(small) -> None:
    steps = 200
    baseline = _solver_alone(small, steps)
    # Every answer takes 30 s, far past the 20-tick deadline and the whole 1 s run: a loop that
    # waited for the model would take 30 s or more, so a loose bound holds on a loaded machine.
    with FakeChatServer([Reply('{"assignments": []}', delay_s=30.0)]) as srv:
        start = time.perf_counter()
        m = _llm_run(small, srv, steps, deadline_ticks=20)
        wall = time.perf_counter() - start
    assert m["tasks_completed"] >= 0.9 * baseline
    assert m["planner_fallbacks"] >= 1  # each late answer counted
    assert m["collisions"] == 0
    assert wall < 15.0  # never waited for the model


def test_a_model_answer_in_time_revises_the_solver_plan(small) -> None:
    world = make_world(small, n=3, orders=orders_at(small, [0, 0, 0]))
    snap = Snapshot.take(world, events=("start",))
    reply = json.dumps({"assignments": [{"robot": "robot_2", "order": "o0"}]})
    with FakeChatServer([reply]) as srv:
        planner = LLMPlanner(srv.client(), small, background=True)
        first = planner.plan(snap)  # the solver's plan, at once
        assert first.plan.source == "assignment"
        solver = {a.order: a.robot for a in first.plan.assignments}
        for a in first.plan.assignments:
            world.assign(world.robot_index(a.robot), a.order)
        deadline = time.monotonic() + 5
        while not planner.has_news() and time.monotonic() < deadline:
            time.sleep(0.01)
        out = planner.plan(Snapshot.take(world, events=("notes",)))
    assert out.plan.source == "llm"
    assert [(a.robot, a.order) for a in out.plan.assignments][:1] == [("robot_2", "o0")]
    if solver.get("o0") != "robot_2":
        assert "o0" in out.plan.revoke  # the solver gave o0 to another robot: taken back
    assert out.calls == 1
    assert not out.fallback


def test_a_broken_server_costs_a_bounded_number_of_calls(small) -> None:
    for mode in ("sync", "async"):
        with FakeChatServer([Reply(status=500)]) as srv:
            world = make_world(small, n=4, rate=0.2, steps=300, seed=5)
            loop = ControlLoop(
                world,
                LLMPlanner(srv.client(max_retries=1), small, background=mode == "async"),
                ShortestPathExecutor(small),
                # Async at 5 ms a tick: flat out, even the solver's plans land ticks late.
                config=LoopConfig(
                    planner_mode=mode,  # type: ignore[arg-type]
                    tick_period_s=0.005 if mode == "async" else 0.0,
                ),
            )
            m = loop.run(300)
            requests = len(srv.requests)
        # Back-off doubles from 10 ticks: at most ~6 questions in 300 ticks, 2 calls of 2
        # requests each (one retry in the client), however many events there were.
        assert requests <= 6 * 2 * 2, (mode, requests)
        assert m["planner_fallbacks"] >= 1
        assert m["tasks_completed"] >= 0.9 * _solver_alone(small, 300)
