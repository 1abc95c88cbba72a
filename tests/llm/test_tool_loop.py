from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from fleetmind.llm.budgets import Budgets
from fleetmind.llm.parse import CallTool, Finish
from fleetmind.llm.tool_loop import ToolLoop
from fleetmind.llm.tools import Tool, call_key
from fleetmind.testing.fake_server import FakeChatServer, Reply


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def lookup(key: str) -> str:
    """Look up a value."""
    return {"x": "1", "y": "2"}[key]


def broken(n: int) -> int:
    """Always fails."""
    raise RuntimeError(f"database down for {n}\nstack trace line")


TOOLS = [add, lookup, broken]


def call(tool: str, **args: Any) -> str:
    return json.dumps({"type": "call_tool", "tool": tool, "args": args})


def finish(answer: Any) -> str:
    return json.dumps({"type": "finish", "answer": answer})


def run(script: list[Reply | str], budgets: Budgets | None = None, **kw: Any) -> Any:
    with FakeChatServer(script, repeat_last=True) as srv:
        loop = ToolLoop(srv.client(max_retries=0), TOOLS, budgets=budgets, **kw)
        out = loop.run("compute")
    return out, srv


def test_happy_path_tool_then_finish() -> None:
    out, srv = run([call("add", a=2, b=3), finish("5")])
    assert out.status == "finished"
    assert out.answer == "5"
    assert out.iterations == 2
    assert out.steps[0].result == 5
    assert "Result of add: 5" in srv.requests[1].last_user
    system = srv.requests[0].messages[0]["content"]
    assert "add(a: integer, b: integer)" in system
    schema = srv.requests[0].body["response_format"]["schema"]
    tools = [alt["properties"].get("tool", {}).get("const") for alt in schema["anyOf"]]
    assert tools == ["add", "lookup", "broken", None]
    assert schema["anyOf"][0]["properties"]["args"]["required"] == ["a", "b"]


def test_malformed_json_goes_back_to_model() -> None:
    out, srv = run(["this is not json at all", finish("ok")])
    assert out.status == "finished"
    assert out.errors == ["parse"]
    assert "Invalid action" in srv.requests[1].last_user


def test_malformed_forever_ends_with_parse_budget() -> None:
    out, _ = run(["nope"], budgets=Budgets(retries={"parse": 2}))
    assert out.status == "budget_exhausted"
    assert out.fallback_reason == "parse budget exhausted"
    assert out.calls == 3


def test_wrong_schema_summary_names_field() -> None:
    out, srv = run([call("add", a="two", b=3), finish("x")])
    assert out.errors == ["validation"]
    msg = srv.requests[1].last_user
    assert "args.a" in msg
    assert "two" in msg


def test_unknown_tool_lists_tools() -> None:
    out, srv = run([call("multiply", a=1, b=2), finish("x")])
    assert out.errors == ["unknown_tool"]
    msg = srv.requests[1].last_user
    assert "'multiply' does not exist" in msg
    assert "add, lookup, broken" in msg


def test_unknown_tool_forever_ends_with_its_budget() -> None:
    out, _ = run([call("nope")], budgets=Budgets(retries={"unknown_tool": 1}))
    assert out.status == "budget_exhausted"
    assert out.fallback_reason == "unknown_tool budget exhausted"


def test_tool_exception_is_one_line_and_tool_gets_barred() -> None:
    script = [call("broken", n=1), call("broken", n=2), call("broken", n=3), finish("gave up")]
    out, srv = run(script, budgets=Budgets(retries={"tool_error": 1}))
    assert out.status == "finished"
    assert out.barred_tools == ["broken"]
    first = srv.requests[1].last_user
    assert first == "Tool broken failed: RuntimeError: database down for 1"
    assert "barred" in srv.requests[2].last_user


def test_same_failing_call_forever_nudge_then_bar_then_stop() -> None:
    out, srv = run([call("broken", n=1)], budgets=Budgets(max_iter=10))
    assert out.status == "budget_exhausted"
    assert "broken" in out.barred_tools
    texts = [r.last_user for r in srv.requests[1:]]
    assert any("Re-read the tool list" in t for t in texts)
    assert any("now barred" in t for t in texts)
    assert out.calls <= 10


def test_abab_cycle_detected() -> None:
    script = [
        call("lookup", key="x"),
        call("lookup", key="y"),
        call("lookup", key=" X "),  # same call as the first after normalisation
        call("add", a=1, b=1),
        finish("2"),
    ]
    out, srv = run(script)
    assert out.status == "finished"
    assert out.errors == ["loop"]
    assert "already called lookup" in srv.requests[3].last_user
    assert out.iterations == 4  # the repeated call was not run


def test_cycle_twice_bars_tool() -> None:
    script = [
        call("lookup", key="x"),
        call("add", a=1, b=2),
        call("lookup", key="x"),
        call("lookup", key="x"),
        call("lookup", key="y"),
        finish("z"),
    ]
    out, srv = run(script, budgets=Budgets(retries={"loop": 3}))
    assert out.barred_tools == ["lookup"]
    assert "barred for the rest" in srv.requests[5].last_user
    assert out.status == "finished"
    # the schema offered to the model no longer names the barred tool
    schema = srv.requests[-1].body["response_format"]["schema"]
    tools = [alt["properties"].get("tool", {}).get("const") for alt in schema["anyOf"]]
    assert tools == ["add", "broken", None]


def test_empty_replies() -> None:
    out, _ = run(["", ""], budgets=Budgets(retries={"empty": 1}))
    assert out.status == "budget_exhausted"
    assert out.errors == ["empty", "empty"]


def test_huge_reply() -> None:
    # 200 KB of broken JSON: under the client's reply bound (256 KiB, tests/llm/test_reply_bound.py
    # covers a larger one), so it reaches the parser and goes back to the model as a parse error.
    out, _ = run(["{" + '"a": 1, ' * 25_000, finish("ok")])
    assert out.status == "finished"
    assert out.errors == ["parse"]


def test_slow_replies_hit_deadline() -> None:
    t0 = time.monotonic()
    out, _ = run([Reply(finish("late"), delay_s=2.0)], budgets=Budgets(deadline_s=0.3))
    assert out.status == "deadline"
    assert time.monotonic() - t0 < 2.5  # includes server shutdown with the sleeping handler


@pytest.mark.parametrize(
    "bad",
    [Reply(status=500), Reply(status=429), Reply(reset=True)],
    ids=["500", "429", "reset"],
)
def test_transport_failures_end_in_network_budget(bad: Reply) -> None:
    out, _ = run([bad], budgets=Budgets(retries={"network": 2}))
    assert out.status == "budget_exhausted"
    assert out.fallback_reason == "network budget exhausted"
    assert out.errors == ["network"] * 3


def test_transient_failure_then_success() -> None:
    out, _ = run([Reply(status=500), finish("ok")])
    assert out.status == "finished"
    assert out.errors == ["network"]


def test_max_iter_counts_actions_only() -> None:
    script = [call("add", a=i, b=i) for i in range(10)]
    out, _ = run(script, budgets=Budgets(max_iter=3))
    assert out.status == "max_iter"
    assert out.iterations == 3


def test_veto_has_its_own_budget() -> None:
    def veto(action: CallTool | Finish) -> str | None:
        return "answer must be numeric" if isinstance(action, Finish) else None

    out, srv = run([finish("five")], budgets=Budgets(retries={"veto": 2}), veto=veto)
    assert out.status == "budget_exhausted"
    assert out.fallback_reason == "veto budget exhausted"
    assert "answer must be numeric" in srv.requests[1].last_user


def test_mixed_misbehaviour_never_raises() -> None:
    script: list[Reply | str] = [
        "",
        "garbage",
        Reply(status=500),
        call("nope"),
        call("add", a="x", b=1),
        call("broken", n=1),
        call("add", a=1, b=1),
        call("add", a=1, b=1),
        finish(2),
    ]
    out, _ = run(script, budgets=Budgets(max_iter=10))
    assert out.status == "finished"
    assert out.answer == 2
    assert set(out.error_counts) == {
        "empty",
        "parse",
        "network",
        "unknown_tool",
        "validation",
        "tool_error",
        "loop",
    }


def test_call_key_normalises() -> None:
    assert call_key("t", {"a": 1, "b": " Hello  World"}) == call_key(
        "t", {"b": "hello world", "a": 1.0}
    )
    assert call_key("t", {"a": 1}) != call_key("u", {"a": 1})


def test_tool_needs_annotations() -> None:
    from fleetmind.errors import ConfigError

    def bad(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(ConfigError, match="no type"):
        Tool.from_function(bad)


def test_a_narrowed_tool_offers_only_its_values_and_refuses_others() -> None:
    narrow = Tool.from_function(lookup).narrowed({"key": ["y"]})
    schema = narrow.args_model.model_json_schema()
    assert schema["properties"]["key"]["enum"] == ["y"]
    assert (
        Tool.from_function(lookup).args_model.model_json_schema()["properties"]["key"].get("enum")
        is None
    )  # the original is unchanged
    script = [call("lookup", key="x"), call("lookup", key="y"), finish("2")]
    with FakeChatServer(script, repeat_last=True) as srv:
        out = ToolLoop(srv.client(max_retries=0), [narrow]).run("compute")
    assert out.finished
    assert out.answer == "2"
    assert out.errors
    assert "must be one of y" in (out.steps[0].feedback or "")
    sent = srv.requests[0].body["response_format"]
    assert '"enum": ["y"]' in json.dumps(sent)
    assert '"x"' not in json.dumps(sent)


def test_each_turn_can_narrow_what_the_next_turn_may_say() -> None:
    """``args_schema`` is asked every turn: values already used drop out of the next schema."""
    tool = Tool.from_function(lookup)
    used: list[str] = []

    def remember(key: str) -> str:
        used.append(key)
        return lookup(key)

    def args_schema(name: str) -> dict[str, Any]:
        left = [k for k in ("x", "y") if k not in used] or ["x", "y"]
        return tool.narrowed({"key": left}).args_model.model_json_schema()

    script = [call("lookup", key="x"), call("lookup", key="y"), finish("done")]
    live = Tool.from_function(remember).narrowed({"key": ["x", "y"]})
    live = dataclasses.replace(live, name="lookup")
    with FakeChatServer(script, repeat_last=True) as srv:
        out = ToolLoop(srv.client(max_retries=0), [live], args_schema=args_schema).run("both")
    assert out.finished
    assert used == ["x", "y"]
    first, second = (json.dumps(r.body["response_format"]) for r in srv.requests[:2])
    assert '"enum": ["x", "y"]' in first
    assert '"enum": ["y"]' in second


def test_tools_of_one_signature_share_their_argument_models() -> None:
    # A caller that builds the same tools for every task (the incident desk) pays for each
    # pydantic model once.
    def lookup_again(key: str) -> str:
        return key

    first, again = Tool.from_function(lookup), Tool.from_function(lookup_again, name="lookup")
    assert first.args_model is again.args_model
    narrow = first.narrowed({"key": ["y", "x", "y"]})
    assert narrow.args_model is again.narrowed({"key": ["y", "x"]}).args_model
    other = first.narrowed({"key": ["x"]})
    assert other.args_model is not narrow.args_model
    assert other.args_model.model_json_schema()["properties"]["key"]["enum"] == ["x"]
    with pytest.raises(Exception, match="one of"):
        other.validate({"key": "y"})

    # An unhashable default still builds its own model.
    def listed(keys: list[str] = []) -> list[str]:  # noqa: B006
        return keys

    assert Tool.from_function(listed).validate({}).model_dump() == {"keys": []}
