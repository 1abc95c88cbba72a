from __future__ import annotations

import time

from pydantic import BaseModel

from fleetmind.llm.budgets import Budgets
from fleetmind.llm.chat import Message
from fleetmind.llm.structured import structured
from fleetmind.testing.fake_server import FakeChatServer, Reply

PROMPT = [Message.user("assign")]


class Assign(BaseModel):
    robot: str
    order: int


def test_valid_first_time() -> None:
    with FakeChatServer(['{"robot": "robot_0", "order": 3}']) as srv:
        out = structured(srv.client(), PROMPT, Assign)
    assert out.value == Assign(robot="robot_0", order=3)
    assert out.attempts == 1
    assert out.errors == []
    # the schema went to the server for constrained decoding
    fmt = srv.requests[0].body["response_format"]
    assert fmt["type"] == "json_object"
    assert set(fmt["schema"]["properties"]) == {"robot", "order"}


def test_malformed_json_is_repaired_without_reask() -> None:
    with FakeChatServer(["{'robot': 'robot_1', 'order': 2,"]) as srv:
        out = structured(srv.client(), PROMPT, Assign)
    assert out.value == Assign(robot="robot_1", order=2)
    assert out.attempts == 1


def test_wrong_schema_reasks_with_field_summary() -> None:
    script = ['{"robot": "robot_0", "order": "soon"}', '{"robot": "robot_0", "order": 1}']
    with FakeChatServer(script) as srv:
        out = structured(srv.client(), PROMPT, Assign)
    assert out.value == Assign(robot="robot_0", order=1)
    assert out.errors == ["validation"]
    reask = srv.requests[1].last_user
    assert "order" in reask
    assert "soon" in reask


def test_validation_budget_exhausted_gives_none() -> None:
    with FakeChatServer(['{"robot": 5}']) as srv:
        out = structured(srv.client(), PROMPT, Assign, budgets=Budgets(retries={"validation": 2}))
    assert out.value is None
    assert out.attempts == 3
    assert out.fallback_reason == "validation budget exhausted"


def test_empty_replies_have_their_own_budget() -> None:
    with FakeChatServer(["", "  ", '{"robot": "r", "order": 0}']) as srv:
        out = structured(srv.client(), PROMPT, Assign, budgets=Budgets(retries={"empty": 2}))
    assert out.value is not None
    assert out.errors == ["empty", "empty"]


def test_veto_reasks_with_reason_then_accepts() -> None:
    script = ['{"robot": "robot_9", "order": 1}', '{"robot": "robot_1", "order": 1}']

    def veto(v: Assign) -> str | None:
        return None if v.robot != "robot_9" else "robot_9 does not exist; robots: robot_0, robot_1"

    with FakeChatServer(script) as srv:
        out = structured(srv.client(), PROMPT, Assign, veto=veto)
    assert out.value is not None
    assert out.value.robot == "robot_1"
    assert out.errors == ["veto"]
    assert "robot_9 does not exist" in srv.requests[1].last_user


def test_veto_budget_is_separate() -> None:
    with FakeChatServer(['{"robot": "robot_9", "order": 1}']) as srv:
        out = structured(
            srv.client(),
            PROMPT,
            Assign,
            veto=lambda v: "no",
            budgets=Budgets(retries={"veto": 1, "validation": 0}),
        )
    assert out.value is None
    assert out.errors == ["veto", "veto"]
    assert out.fallback_reason == "veto budget exhausted"


def test_deadline_is_honoured_with_slow_server() -> None:
    with FakeChatServer([Reply('{"robot": "r", "order": 1}', delay_s=3.0)]) as srv:
        t0 = time.monotonic()
        out = structured(srv.client(), PROMPT, Assign, budgets=Budgets(deadline_s=0.4))
        took = time.monotonic() - t0
    assert out.value is None
    assert out.fallback_reason == "deadline"
    assert took < 1.2


def test_network_errors_end_in_outcome_not_exception() -> None:
    with FakeChatServer([Reply(status=500)]) as srv:
        out = structured(
            srv.client(max_retries=0), PROMPT, Assign, budgets=Budgets(retries={"network": 1})
        )
    assert out.value is None
    assert out.errors == ["network", "network"]
    assert out.fallback_reason == "network budget exhausted"


def test_no_schema_mode_sends_no_response_format() -> None:
    with FakeChatServer(['{"robot": "r", "order": 1}']) as srv:
        structured(srv.client(), PROMPT, Assign, use_schema=False)
    assert "response_format" not in srv.requests[0].body


def test_cut_off_reply_reask_says_so() -> None:
    script = [
        Reply('{"robot": "a very long na', finish_reason="length"),
        '{"robot": "r", "order": 1}',
    ]
    with FakeChatServer(script) as srv:
        out = structured(srv.client(), PROMPT, Assign)
    assert out.value is not None
    assert "cut off" in srv.requests[1].last_user
