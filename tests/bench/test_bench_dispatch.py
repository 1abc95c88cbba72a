"""Smoke runs of the dispatch benchmark cases (structure and invariants, never timings)."""

from __future__ import annotations

import pytest

from fleetmind.bench import dispatch


def test_planner_case_reports_the_gap() -> None:
    out = dispatch.planners_case(None, steps=80, seeds=[0], robots=4, modes=("sync",))
    planners = out["modes"]["sync"]
    assert set(planners) == {"assignment", "oracle", "notes:template", "notes:rules"}
    assert (
        planners["oracle"]["violations_text_only"] <= planners["assignment"]["violations_text_only"]
    )


def test_executor_case_compares_against_the_bound() -> None:
    out = dispatch.executors_case("warehouse-small", 8, steps=120)  # type: ignore[arg-type]
    for name in ("shortest-path", "shortest-path-random", "rl"):
        assert out[name]["collisions"] == 0
        assert 0.0 <= out[name]["congestion_free_share"] <= 1.0
    assert out["rl_vs_shortest_path"] is not None
    spr = out["shortest-path-random"]["throughput"]
    assert out["rl_vs_shortest_path_random"] == pytest.approx(out["rl"]["throughput"] / spr)


def test_slow_llm_case_runs_the_loop_without_waiting() -> None:
    out = dispatch.slow_llm_case(steps=30, robots=6, delay_s=0.2)
    assert out["llm-2s"]["planner_calls"] >= 1
    assert out["p99_ratio"] is not None
    # The slow model's plans are valid and used: the fleet works while it thinks.
    assert out["llm-2s"]["assignments_applied"] >= 1


def test_valid_plan_reads_the_prompt() -> None:
    prompt = (
        "Idle robots: robot_0 at (1, 2), robot_2 at (3, 4) caps=cold\n"
        "Open orders:\n"
        "o3: normal, due in 5 ticks; needs cold\n"
        "o4: urgent, due in 9 ticks\n"
        "o5: normal, due in 9 ticks\n"
    )
    assert dispatch.valid_plan(prompt) == [
        {"robot": "robot_2", "order": "o3", "priority": 0},
        {"robot": "robot_0", "order": "o4", "priority": 0},
    ]


def test_scaling_case_rows() -> None:
    out = dispatch.scaling_case([4, 16], steps=10, map_path="warehouse-medium")
    assert [r["robots"] for r in out["rows"]] == [4, 16]
    assert all(r["collisions"] == 0 for r in out["rows"])


def test_llm_direct_case_against_a_scripted_model() -> None:
    import json

    from fleetmind.testing.fake_server import FakeChatServer, Reply

    def reply(received) -> Reply:
        return Reply(json.dumps({"moves": [{"robot": "robot_0", "move": "wait"}]}))

    with FakeChatServer(reply) as srv:
        out = dispatch.llm_direct_case(srv.client(), steps=80, robots=3)
    assert out["llm-direct"]["llm_calls"] >= 1
    assert out["llm-direct"]["collisions"] == 0
    assert out["shortest-path"]["llm_calls"] == 0
