"""LLM planners against a scripted misbehaving server and the real embedded model."""

from __future__ import annotations

import json
import math

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
    pairs = [(a.robot, a.order) for a in out.plan.assignments]
    # The model's pair first; the solver plans what it left (2 robots, 2 orders).
    assert pairs[0] == ("robot_0", "o1")
    assert len(pairs) == 3
    assert {r for r, _ in pairs} == {"robot_0", "robot_1", "robot_2"}
    assert out.calls == 1
    assert out.tokens_prompt > 0


def test_double_booking_is_repaired_without_a_reask(small) -> None:
    _, snap = _snapshot(small)
    bad = json.dumps(
        {"assignments": [{"robot": "robot_0", "order": "o0"}, {"robot": "robot_0", "order": "o1"}]}
    )
    with FakeChatServer([bad]) as srv:
        planner = LLMPlanner(srv.client(), small)
        out = planner.plan(snap)
        assert len(srv.requests) == 1
    pairs = [(a.robot, a.order) for a in out.plan.assignments]
    assert pairs[0] == ("robot_0", "o0")
    assert ("robot_0", "o1") not in pairs
    assert planner.repaired == 1
    assert len({r for r, _ in pairs}) == len(pairs) == 3
    assert not out.fallback


def test_prompt_is_short_and_lists_the_nearest_robots(small) -> None:
    _, snap = _snapshot(small, n=6, k=3)
    with FakeChatServer([]) as srv:
        planner = LLMPlanner(srv.client(), small)
        msgs = planner._messages(snap, planner._shown(snap))
    user = msgs[1].content
    assert "near: robot_" in user
    assert "at (" not in user  # no state description
    assert "due in" not in user  # these orders have no due tick
    assert len(msgs[0].content) + len(user) < 1200


def test_schema_allows_one_pair_per_order() -> None:
    from fleetmind.dispatch.llm_planner import _reply_model

    schema = _reply_model(["robot_0", "robot_1"], ["o1"]).model_json_schema()
    assert schema["properties"]["assignments"]["maxItems"] == 1


def test_warm_up_sets_the_deadline_from_its_latency(small) -> None:
    from fleetmind.dispatch.llm_planner import MIN_DEADLINE_S, WARMUP_FACTOR, auto_deadline

    _, snap = _snapshot(small)
    reply = json.dumps({"assignments": []})
    with FakeChatServer([Reply(reply, delay_s=1.0)]) as srv:
        planner = LLMPlanner(srv.client(), small, background=True, tick_period_s=0.1)
        planner.deadline_ticks = None
        took = planner.warm_up(snap)
    assert took is not None
    assert took >= 1.0
    assert planner.decision_deadline_s() == auto_deadline(took) >= WARMUP_FACTOR * 1.0
    assert auto_deadline(0.01) == MIN_DEADLINE_S
    assert planner.tick_deadline() == math.ceil(planner.decision_deadline_s() / 0.1) + 2


def test_no_question_the_run_end_would_abandon(small) -> None:
    _, snap = _snapshot(small)
    with FakeChatServer([json.dumps({"assignments": []})]) as srv:
        planner = LLMPlanner(
            srv.client(), small, background=True, tick_period_s=0.1, end_tick=snap.tick + 5
        )
        planner.warmup_s = 2.0  # 20 ticks at 0.1 s: past the end
        planner.plan(snap)
        assert planner.not_asked_at_end == 1
        assert planner._question is None


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


def test_a_model_reading_notes_off_the_tick_is_paced_like_the_llm_planner() -> None:
    from fleetmind.eval.runner import RunConfig

    cfg = RunConfig(planner="llm-notes", note_reader="rules+llm", steps=120, seed=0)
    assert cfg.planner_mode == "async"
    assert cfg.tick_period_s == 0.1
    assert RunConfig(planner="llm-notes", note_reader="rules", steps=120).tick_period_s == 0.0
    synced = RunConfig(planner="llm-notes", note_reader="rules+llm", planner_mode="sync")
    assert synced.tick_period_s == 0.0  # sync waits for the model: no pacing needed


@pytest.mark.llm
def test_a_paced_async_run_gets_answers_from_the_real_model(embedded_client) -> None:
    from fleetmind.eval.runner import RunConfig, execute

    cfg = RunConfig(planner="llm", steps=120, seed=0)
    assert cfg.planner_mode == "async"
    assert cfg.tick_period_s == 0.1  # paced by default: the model answers in seconds
    m = execute(cfg, None, client=embedded_client)
    out = m["llm_call_outcomes"]
    assert out["calls"] == sum(out[k] for k in ("answered", "timed_out", "failed", "abandoned"))
    assert out["answered"] >= 1
    # The warm-up call set the deadline and is left out of the run's answered rate.
    assert m["llm_planner"]["warmup_s"] is not None
    assert out["by_caller"]["dispatch.planner.warmup"]["answered"] == 1
    assert m["llm_planner"]["deadline_s"] >= 2.0
