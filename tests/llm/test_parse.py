from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from fleetmind.llm.errors import ActionParseError
from fleetmind.llm.parse import CallTool, Finish, parse_action, parse_json, parse_model


def test_strict_call_tool() -> None:
    a = parse_action('{"type": "call_tool", "tool": "add", "args": {"a": 1, "b": 2}}')
    assert isinstance(a, CallTool)
    assert a.tool == "add"
    assert a.args == {"a": 1, "b": 2}


def test_finish_in_code_fence() -> None:
    a = parse_action('```json\n{"type": "finish", "answer": "42"}\n```')
    assert isinstance(a, Finish)
    assert a.answer == "42"


def test_repair_truncated_and_single_quotes() -> None:
    a = parse_action("{'type': 'call_tool', 'tool': 'add', 'args': {'a': 1, 'b': 2}")
    assert isinstance(a, CallTool)
    assert a.args == {"a": 1, "b": 2}
    _, repaired = parse_json('{"a": 1,}')
    assert repaired


def test_prose_around_json_is_repaired() -> None:
    a = parse_action('Sure! Here it is: {"type": "finish", "answer": "done"} Hope it helps.')
    assert isinstance(a, Finish)


def test_empty_reply_kind() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("   \n")
    assert info.value.kind == "empty"


def test_not_json_kind() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("I think the answer is probably blue")
    assert info.value.kind in ("parse", "validation")


def test_wrong_type_names_the_field() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action('{"type": "explode", "tool": "x"}')
    assert info.value.kind == "validation"
    assert "'type'" in info.value.summary
    assert "explode" in info.value.summary


def test_validation_summary_field_expected_got() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action('{"type": "call_tool", "tool": "add", "args": "not a dict"}')
    s = info.value.summary
    assert "args" in s
    assert "string" in s


def test_extra_field_is_named() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action('{"type": "finish", "answer": 1, "why": "because"}')
    assert "why" in info.value.summary


def test_huge_reply_rejected_quickly() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("{" + "x" * 100_000)
    assert "characters" in info.value.summary


class Point(BaseModel):
    row: int
    col: int


def test_parse_model_missing_field() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_model('{"row": 1}', Point)
    assert "'col' is missing" in info.value.summary
    assert parse_model('{"row": 1, "col": 2}', Point) == Point(row=1, col=2)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_string_gives_action_or_typed_error(text: str) -> None:
    result: object
    try:
        result = parse_action(text)
    except ActionParseError as exc:
        result = exc
    if isinstance(result, ActionParseError):
        assert result.kind in ("empty", "parse", "validation")
        assert result.summary
    else:
        assert isinstance(result, CallTool | Finish)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["call_tool", "finish", "other"])},
        optional={"tool": json_values, "args": json_values, "answer": json_values},
    ),
    st.integers(min_value=0, max_value=60),
)
def test_jsonish_and_truncated_inputs(obj: dict[str, object], cut: int) -> None:
    import json

    text = json.dumps(obj)
    for candidate in (text, text[: max(0, len(text) - cut)]):
        kind = "ok"
        try:
            parse_action(candidate)
        except ActionParseError as exc:
            kind = exc.kind
        assert kind in ("ok", "empty", "parse", "validation")


def test_decoding_schema_drops_big_bounds_only() -> None:
    from fleetmind.llm.parse import decoding_schema

    schema = {
        "title": "T",
        "properties": {
            "title": {"type": "string", "maxLength": 2000, "title": "Title"},
            "code": {"type": "string", "maxLength": 4},
        },
    }
    out = decoding_schema(schema)
    assert out == {
        "properties": {"title": {"type": "string"}, "code": {"type": "string", "maxLength": 4}}
    }


def test_action_schema_finish_only_when_no_tools() -> None:
    from fleetmind.llm.parse import action_schema

    assert action_schema([])["properties"]["type"] == {"const": "finish"}
    assert len(action_schema(["a", "b"])["anyOf"]) == 2


def test_a_root_model_takes_one_bare_json_value() -> None:
    from typing import Literal

    from pydantic import RootModel

    from fleetmind.llm.errors import ActionParseError
    from fleetmind.llm.parse import parse_model

    word = RootModel[Literal["only", "not", "none"]]
    assert parse_model(' "not" ', word).root == "not"
    with pytest.raises(ActionParseError, match="validation"):
        parse_model('"maybe"', word)
    with pytest.raises(ActionParseError, match="parse"):
        parse_model('{"a": [1, 2', word)
    with pytest.raises(ActionParseError, match="empty"):
        parse_model("  ", word)


SHAPES = (
    '"{w}"',
    ' "{w}"\n',
    "{w}",
    "'{w}'",
    '```json\n"{w}"\n```',
    "```\n{w}\n```",
    '{{"answer": "{w}"}}',
    '{{"label": "{w}"}}\n',
)


@given(w=st.sampled_from(["only", "not", "none"]), shape=st.sampled_from(SHAPES))
def test_a_root_model_takes_the_shapes_servers_answer_in(w: str, shape: str) -> None:
    from typing import Literal

    from pydantic import RootModel

    from fleetmind.llm.parse import parse_model

    word = RootModel[Literal["only", "not", "none"]]
    assert parse_model(shape.format(w=w), word).root == w


@given(text=st.text(max_size=200))
def test_a_root_model_reply_fails_only_as_a_parse_error(text: str) -> None:
    from typing import Literal

    from pydantic import RootModel

    from fleetmind.llm.errors import ActionParseError
    from fleetmind.llm.parse import parse_model

    word = RootModel[Literal["only", "not", "none"]]
    with contextlib.suppress(ActionParseError):
        assert parse_model(text, word).root in ("only", "not", "none")
