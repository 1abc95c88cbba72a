"""LLM planners against a scripted misbehaving server and the real embedded model."""

from __future__ import annotations

import json

import pytest

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.dispatch.faults import FaultyClient, parse_fault
from fleetmind.dispatch.llm_planner import LLMPlanner
from fleetmind.dispatch.plans import Snapshot
from fleetmind.testing.fake_server import FakeChatServer, Reply

from .conftest import make_world, orders_at


def _snapshot(small, n=3, k=3):
    world = make_world(small, n=n, orders=orders_at(small, [0] * k))
    return world, Snapshot.take(world, events=("start",))


def test_valid_reply_becomes_the_plan(small) -> None:
    _, snap = _snapshot(small)
    reply = json.dumps({"assignments": [{"robot": "robot_0", "order": "o1", "priority": 2}]})
    with FakeChatServer([reply]) as srv:
        out = LLMPlanner(srv.client(), small).plan(snap)
    assert not out.fallback
    assert [(a.robot, a.order) for a in out.plan.assignments] == [("robot_0", "o1")]
    assert out.calls == 1
    assert out.tokens_prompt > 0


def test_double_booking_is_vetoed_then_fixed(small) -> None:
    _, snap = _snapshot(small)
    bad = json.dumps(
        {"assignments": [{"robot": "robot_0", "order": "o0"}, {"robot": "robot_0", "order": "o1"}]}
    )
    good = json.dumps(
        {"assignments": [{"robot": "robot_0", "order": "o0"}, {"robot": "robot_1", "order": "o1"}]}
    )
    with FakeChatServer([bad, good]) as srv:
        out = LLMPlanner(srv.client(), small).plan(snap)
        reask = srv.requests[1].last_user
    assert "given two tasks" in reask
    assert out.errors == ("veto",)
    assert len(out.plan.assignments) == 2
    assert not out.fallback


def test_garbage_forever_falls_back_to_the_solver(small) -> None:
    _, snap = _snapshot(small)
    with FakeChatServer([Reply("{not json at all")]) as srv:
        out = LLMPlanner(srv.client(), small).plan(snap)
    assert out.fallback
    assert out.failure
    assert out.plan.source == "fallback:assignment"
    assert len(out.plan.assignments) == 3


def test_outage_and_malformed_windows_count_fallbacks(small) -> None:
    world = make_world(small, n=4, rate=0.3)
    good = lambda req: Reply(json.dumps({"assignments": []}))  # noqa: E731 - valid but empty
    faults = [parse_fault("llm-outage@0+30")]
    with FakeChatServer(good) as srv:
        client = FaultyClient(srv.client(), faults)
        loop = ControlLoop(
            world,
            LLMPlanner(client, small),
            ShortestPathExecutor(small),
            faults=faults,
            config=LoopConfig(planner_mode="sync"),
        )
        m = loop.run(60)
    assert m["planner_fallbacks"] >= 1
    assert m["planner_failures"] >= 1
    assert m["tasks_completed"] >= 0
    assert m["collisions"] == 0


@pytest.mark.llm
def test_real_embedded_model_plans_within_budget(small, embedded_client) -> None:
    world = make_world(small, n=4, rate=0.1, steps=40)
    loop = ControlLoop(
        world,
        LLMPlanner(embedded_client, small),
        ShortestPathExecutor(small),
        config=LoopConfig(planner_mode="sync"),
    )
    m = loop.run(40)
    assert m["planner_calls"] >= 1
    assert m["llm_calls"] >= m["planner_calls"]
    assert m["llm_tokens_prompt"] > 0
    # Every call ended in a plan: the model's, or the solver's as a counted fallback.
    assert m["assignments_applied"] >= 1
    assert m["collisions"] == 0


def test_deadlock_arbitration_by_the_model_and_by_rule(small) -> None:
    from dataclasses import replace

    from fleetmind.dispatch.planners import AssignmentPlanner

    _, snap = _snapshot(small)
    snap = replace(snap, stuck=("robot_1", "robot_2"))
    with FakeChatServer([json.dumps({"first": "robot_2"}), json.dumps({"assignments": []})]) as srv:
        out = LLMPlanner(srv.client(), small).plan(snap)
        assert srv.requests[0].body["messages"][1]["content"].startswith("robot_1")
    assert out.plan.boosts == (("robot_2", 2.0),)
    # Without a model, the rule picks one robot (loaded first, then one with an order).
    assert len(AssignmentPlanner(small).plan(snap).plan.boosts) == 1
