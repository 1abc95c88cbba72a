from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from fleetmind.errors import BudgetExceeded, ConfigError
from fleetmind.llm.budgets import Budgets
from fleetmind.llm.chat import CallContext, Message
from fleetmind.llm.errors import LLMHTTPError, ReplayMiss
from fleetmind.llm.record import CallRecorder, ReplayClient, request_hash
from fleetmind.llm.structured import structured
from fleetmind.llm.tool_loop import ToolLoop
from fleetmind.llm.usage import MeteredClient, Prices, Usage, UsageBudget
from fleetmind.testing.fake_server import FakeChatServer, Reply

KEY = "sk-live-VERYSECRET-0123456789"
CTX = CallContext(
    caller="dispatch.planner", decision_type="assign", prompt_version="v3", seed=7, tick=42
)


class Pick(BaseModel):
    robot: str


def test_request_hash_covers_model_messages_params() -> None:
    m = [Message.user("a")]
    base = request_hash("m", m, temperature=0.2, max_tokens=5, json_schema=None)
    assert base == request_hash("m", list(m), temperature=0.2, max_tokens=5, json_schema=None)
    assert base != request_hash("m2", m, temperature=0.2, max_tokens=5, json_schema=None)
    assert base != request_hash(
        "m", [Message.user("b")], temperature=0.2, max_tokens=5, json_schema=None
    )
    assert base != request_hash("m", m, temperature=0.3, max_tokens=5, json_schema=None)
    assert base != request_hash("m", m, temperature=0.2, max_tokens=5, json_schema={"a": 1})


def test_record_line_has_everything_and_no_key(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    script = ['{"robot": 1}', '{"robot": "robot_1"}']
    with FakeChatServer(script) as srv, CallRecorder(path) as rec:
        client = rec.wrap(srv.client(api_key=KEY))
        msgs = [Message.system("you plan"), Message.user(f"my key is {KEY}, pick a robot")]
        out = structured(client, msgs, Pick, context=CTX)
    assert out.value == Pick(robot="robot_1")
    text = path.read_text()
    assert KEY not in text
    assert "VERYSECRET" not in text
    assert "authorization" not in text.lower()
    lines = [json.loads(x) for x in text.splitlines()]
    assert len(lines) == 2
    first, second = lines
    assert first["context"]["seed"] == 7
    assert first["context"]["tick"] == 42
    assert first["context"]["decision_type"] == "assign"
    assert first["prompt_version"] == "v3"
    assert first["output"] == '{"robot": 1}'
    assert first["parsed"] is None
    assert "robot" in first["parse_error"]
    assert second["parsed"] == {"robot": "robot_1"}
    assert second["parse_error"] is None
    assert second["completion_tokens"] >= 1
    assert second["latency_s"] > 0
    assert len(first["request_hash"]) == 64
    assert first["params"]["json_schema"]["properties"]["robot"]["type"] == "string"


def test_errors_are_recorded_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    msgs = [Message.user("hi")]
    with FakeChatServer([Reply(status=400), Reply("fine")]) as srv, CallRecorder(path) as rec:
        client = rec.wrap(srv.client())
        with pytest.raises(LLMHTTPError):
            client.chat(msgs)
        assert client.chat(msgs).text == "fine"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["error"]["status_code"] == 400
    replay = ReplayClient(path)
    with pytest.raises(LLMHTTPError) as info:
        replay.chat(msgs)
    assert info.value.status_code == 400
    assert replay.chat(msgs).text == "fine"


def test_replay_reproduces_a_tool_loop_offline(tmp_path: Path) -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    path = tmp_path / "calls.jsonl"
    script = [
        "garbage",
        '{"type": "call_tool", "tool": "add", "args": {"a": 2, "b": 2}}',
        '{"type": "finish", "answer": "4"}',
    ]
    with FakeChatServer(script) as srv, CallRecorder(path) as rec:
        live = ToolLoop(rec.wrap(srv.client()), [add], context=CTX).run("2+2")
    # the server is gone: replay must not need it
    replayed = ToolLoop(ReplayClient(path), [add], context=CTX).run("2+2")
    assert replayed.status == live.status == "finished"
    assert replayed.answer == live.answer == "4"
    assert [s.reply for s in replayed.steps] == [s.reply for s in live.steps]
    assert replayed.errors == live.errors == ["parse"]


def test_replay_is_strict_on_miss(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with FakeChatServer(["a"]) as srv, CallRecorder(path) as rec:
        rec.wrap(srv.client()).chat([Message.user("recorded")])
    replay = ReplayClient(path)
    with pytest.raises(ReplayMiss, match="no recorded call"):
        replay.chat([Message.user("not recorded")])
    with pytest.raises(ReplayMiss):
        replay.chat([Message.user("recorded")], temperature=0.9)


def test_strict_replay_fails_when_the_recording_runs_out(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    msgs = [Message.user("score")]
    with FakeChatServer(["1", "0"]) as srv, CallRecorder(path) as rec:
        c = rec.wrap(srv.client())
        live = [c.chat(msgs, temperature=0.0).text for _ in range(2)]
    replay = ReplayClient(path)
    assert [replay.chat(msgs, temperature=0.0).text for _ in range(2)] == live
    with pytest.raises(ReplayMiss, match="recording ran out"):
        replay.chat(msgs, temperature=0.0)
    lenient = ReplayClient(path, strict=False)
    assert [lenient.chat(msgs, temperature=0.0).text for _ in range(3)] == ["1", "0", "0"]


def test_replay_serves_repeated_samples_in_order(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    msgs = [Message.user("score")]
    with FakeChatServer(["1", "0", "1"]) as srv, CallRecorder(path) as rec:
        c = rec.wrap(srv.client())
        live = [c.chat(msgs, temperature=0.0).text for _ in range(3)]
    replay = ReplayClient(path)
    assert [replay.chat(msgs, temperature=0.0).text for _ in range(3)] == live == ["1", "0", "1"]


def test_cache_on_same_store_survives_restart(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    msgs = [Message.user("same question")]
    with FakeChatServer(["answer"]) as srv:
        with CallRecorder(path) as rec:
            c = rec.wrap(srv.client(), cache=True)
            r1 = c.chat(msgs)
            r2 = c.chat(msgs)
        with CallRecorder(path) as rec2:
            r3 = rec2.wrap(srv.client(), cache=True).chat(msgs)
    assert len(srv.requests) == 1
    assert not r1.cached
    assert r2.cached
    assert r3.cached
    assert r1.text == r2.text == r3.text == "answer"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["cached"] for x in lines] == [False, True, True]


def test_bad_recording_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text('{"request_hash": "x", "output": "a"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"calls.jsonl:2"):
        ReplayClient(path)


def test_usage_per_decision_and_caller_with_cost() -> None:
    usage = Usage(prices=Prices(prompt_per_mtok=1.0, completion_per_mtok=2.0))
    with FakeChatServer([Reply("x", prompt_tokens=10, completion_tokens=5)]) as srv:
        c = MeteredClient(srv.client(), usage)
        c.chat([Message.user("a")], context=CTX)
        c.chat([Message.user("a")], context=CTX)
        c.chat([Message.user("a")], context=CallContext(caller="eval", decision_type="reward"))
    rep = usage.report()
    assert rep["total"]["calls"] == 3
    assert rep["by_decision_type"]["assign"]["calls"] == 2
    assert rep["by_decision_type"]["assign"]["prompt_tokens"] == 20
    assert rep["by_caller"]["eval"]["completion_tokens"] == 5
    assert rep["total"]["cost"] == pytest.approx((30 * 1.0 + 15 * 2.0) / 1e6)
    lat = rep["total"]["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"]


def test_hard_budget_stops_calls_and_tokens() -> None:
    with FakeChatServer([Reply("x", prompt_tokens=10, completion_tokens=5)]) as srv:
        calls = MeteredClient(srv.client(), Usage(UsageBudget(max_calls=2)))
        calls.chat([Message.user("a")])
        calls.chat([Message.user("a")])
        with pytest.raises(BudgetExceeded, match="call budget"):
            calls.chat([Message.user("a")])
        tokens = MeteredClient(srv.client(), Usage(UsageBudget(max_tokens=20)))
        tokens.chat([Message.user("a")])
        tokens.chat([Message.user("a")])  # 30 tokens spent now
        with pytest.raises(BudgetExceeded, match="token budget"):
            tokens.chat([Message.user("a")])
        per = MeteredClient(srv.client(), Usage(per_decision={"assign": UsageBudget(max_calls=1)}))
        per.chat([Message.user("a")], context=CTX)
        per.chat([Message.user("a")])  # other decision types are not limited
        with pytest.raises(BudgetExceeded, match="assign"):
            per.chat([Message.user("a")], context=CTX)
    assert len(srv.requests) == 6  # refused calls never reached the server


def test_budget_stop_ends_structured_and_loop_cleanly() -> None:
    with FakeChatServer(["not json"]) as srv:
        c = MeteredClient(srv.client(), Usage(UsageBudget(max_calls=2)))
        out = structured(c, [Message.user("x")], Pick, budgets=Budgets(retries={"parse": 5}))
        assert out.value is None
        assert out.fallback_reason is not None
        assert out.fallback_reason.startswith("usage budget")
        assert out.attempts == 2
        loop = ToolLoop(c, [], budgets=Budgets(retries={"parse": 5})).run("t")
        assert loop.status == "usage_budget"


def test_a_call_ending_after_the_run_closed_its_record_is_dropped_not_raised(
    tmp_path: Path,
) -> None:
    path = tmp_path / "calls.jsonl"
    with FakeChatServer(['{"robot": "robot_1"}', '{"robot": "robot_2"}']) as srv:
        rec = CallRecorder(path)
        client = rec.wrap(srv.client())
        structured(client, [Message.user("pick a robot")], Pick, context=CTX)
        rec.close()
        # A desk worker's call that was in flight when the run ended.
        out = structured(client, [Message.user("pick again")], Pick, context=CTX)
    assert out.value == Pick(robot="robot_2")
    assert rec.after_close == 1
    assert len(path.read_text().splitlines()) == 1
