"""Turning model text into JSON values and typed actions, with short model-facing errors.

The pipeline is: strip code fences, strict ``json.loads``, then ``json_repair`` (truncated
objects, single quotes, trailing commas, prose around the JSON), then pydantic validation. Every
failure becomes an :class:`~fleetmind.llm.errors.ActionParseError` whose ``summary`` names the
field, what was expected and what was got, short enough to send back to the model. Nothing here
raises any other exception for any input string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

import json_repair
from pydantic import BaseModel, ConfigDict, Field, RootModel, TypeAdapter, ValidationError

from fleetmind.llm.errors import ActionParseError

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

MAX_REPLY_CHARS = 20_000
"""Replies longer than this are rejected unparsed (repairing them costs too much)."""

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)


class CallTool(BaseModel):
    """Ask to run a tool: ``{"type": "call_tool", "tool": NAME, "args": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["call_tool"]
    tool: str = Field(min_length=1, max_length=128)
    args: dict[str, Any] = Field(default_factory=dict)


class Finish(BaseModel):
    """End the task: ``{"type": "finish", "answer": ...}``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["finish"]
    answer: Any


Action = Annotated[CallTool | Finish, Field(discriminator="type")]
ACTION_ADAPTER: TypeAdapter[CallTool | Finish] = TypeAdapter(Action)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "dict": "an object",
    "list": "an array",
    "NoneType": "null",
}


def summarize_validation(exc: ValidationError, *, limit: int = 3) -> str:
    """Summarise a pydantic validation error for the model: field, expected, got.

    Args:
        exc: the validation error.
        limit: at most this many errors are listed.

    Returns:
        One line such as ``field 'args.qty': Input should be a valid integer, got a string 'x'``.
    """
    parts = []
    errors = exc.errors(include_url=False)
    for err in errors[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        got = err.get("input")
        kind = _TYPE_NAMES.get(type(got).__name__, type(got).__name__)
        if err.get("type") == "missing":
            parts.append(f"field '{loc}' is missing")
        elif err.get("type") == "extra_forbidden":
            parts.append(f"field '{loc}' is not allowed")
        else:
            parts.append(f"field '{loc}': {err.get('msg', 'invalid')}, got {kind} {_short(got)}")
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)


def parse_json(text: str, *, max_chars: int = MAX_REPLY_CHARS) -> tuple[Any, bool]:
    """Parse a model reply as JSON, repairing it if strict parsing fails.

    Args:
        text: the reply.
        max_chars: longer replies are rejected.

    Returns:
        ``(value, repaired)``: the JSON value and whether ``json_repair`` was needed.

    Raises:
        ActionParseError: kind ``empty`` for a blank reply, ``parse`` when no JSON can be had.
    """
    if not isinstance(text, str):
        raise ActionParseError("parse", f"expected text, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ActionParseError("empty", "the reply was empty; answer with one JSON object")
    if len(stripped) > max_chars:
        raise ActionParseError(
            "parse", f"the reply is {len(stripped)} characters long; answer with one short JSON"
        )
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped), False
    except (ValueError, RecursionError):
        pass
    # Raw control characters (newlines) inside strings: grammar-constrained llama.cpp emits them.
    try:
        return json.loads(stripped, strict=False), True
    except (ValueError, RecursionError):
        pass
    try:
        value = json_repair.loads(stripped)
    except Exception:  # json_repair may raise anything on hostile input
        value = None
    if value is None or value == "" or isinstance(value, str):
        raise ActionParseError(
            "parse", f"not valid JSON: {_short(stripped, 60)}; answer with one JSON object only"
        )
    return value, True


def parse_model(text: str, model_cls: type[T], *, max_chars: int = MAX_REPLY_CHARS) -> T:
    """Parse and validate a reply against a pydantic model.

    Args:
        text: the reply.
        model_cls: the pydantic model the JSON must match.
        max_chars: longer replies are rejected.

    Returns:
        The validated model instance.

    Raises:
        ActionParseError: kind ``empty``, ``parse`` or ``validation``.
    """
    if issubclass(model_cls, RootModel):
        # A bare JSON value (one quoted word from an enum): the shortest answer a small model
        # can give, a few tokens instead of an object's scaffolding.
        value = root_value(text, max_chars=max_chars)
        try:
            return model_cls.model_validate(value)
        except ValidationError as exc:
            raise ActionParseError("validation", summarize_validation(exc)) from None
    return _validated(model_cls.model_validate, _json_object(text, max_chars=max_chars))


def root_value(text: str, *, max_chars: int = MAX_REPLY_CHARS) -> Any:
    """The one value of a reply meant to be a bare JSON value, in the shapes servers give.

    ``"none"`` as asked; and as served models answer it: in a code fence, with a newline or
    prose-free padding, unquoted (``none``), single-quoted, or wrapped in a one-field object
    (``{"answer": "none"}``: a server in JSON-object mode cannot answer a bare string).

    Raises:
        ActionParseError: kind ``empty`` or ``parse``.
    """
    t = text.strip()
    if not t:
        raise ActionParseError("empty", "empty reply")
    if len(t) > max_chars:
        raise ActionParseError("parse", f"reply longer than {max_chars} characters")
    fenced = re.fullmatch(r"```[a-zA-Z]*\s*(.*?)\s*```", t, flags=re.DOTALL)
    if fenced:
        t = fenced.group(1).strip()
    try:
        value = json.loads(t)
    except ValueError:
        word = t.strip("'\"` ").strip()
        if not word or "\n" in word or len(word) > 80 or word[0] in "{[":
            raise ActionParseError("parse", f"not a JSON value: {_short(text, 60)}") from None
        return word
    if isinstance(value, dict) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, str | int | float | bool) or inner is None:
            return inner
    return value


def _json_object(text: str, *, max_chars: int) -> dict[str, Any]:
    """The one JSON object of a reply (repaired if need be), or a ``validation`` error."""
    value, _ = parse_json(text, max_chars=max_chars)
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        value = value[0]  # repair sometimes wraps the object (e.g. two objects in a row)
    if not isinstance(value, dict):
        raise ActionParseError(
            "validation", f"expected a JSON object, got {type(value).__name__} {_short(value)}"
        )
    return value


def _validated(validate: Callable[[Any], V], value: Any) -> V:
    """``validate(value)``, every failure turned into one short ``validation`` error."""
    try:
        return validate(value)
    except ValidationError as exc:
        raise ActionParseError("validation", summarize_validation(exc)) from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise ActionParseError("validation", f"{type(exc).__name__}: {exc}"[:200]) from None


def parse_action(text: str, *, max_chars: int = MAX_REPLY_CHARS) -> CallTool | Finish:
    """Parse a tool-loop action.

    Accepts ``{"type": "call_tool", "tool": ..., "args": {...}}`` and
    ``{"type": "finish", "answer": ...}``, possibly inside code fences or needing repair.

    Args:
        text: the model reply.
        max_chars: longer replies are rejected.

    Returns:
        The action.

    Raises:
        ActionParseError: kind ``empty``, ``parse`` or ``validation``, with a short summary.
    """
    value = _json_object(text, max_chars=max_chars)
    kind = value.get("type")
    if kind not in ("call_tool", "finish"):
        raise ActionParseError(
            "validation",
            f'field \'type\' must be "call_tool" or "finish", got {_short(kind)}',
        )
    return _validated(ACTION_ADAPTER.validate_python, value)


_BIG_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems")
DECODING_BOUND_LIMIT = 32
"""Length/item bounds above this are dropped from schemas sent for constrained decoding."""


def decoding_schema(schema: Any) -> Any:
    """A copy of a JSON schema that grammar-based decoders can compile.

    llama.cpp unrolls length bounds into its grammar: ``maxLength: 2000`` makes a grammar so
    large that the server crashes. Bounds above :data:`DECODING_BOUND_LIMIT` are dropped, as are
    ``title`` and ``description`` (noise for the decoder). Validation still uses the full model.

    Args:
        schema: a JSON schema (any JSON value is walked).

    Returns:
        The cleaned copy.
    """
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key in _BIG_BOUNDS and isinstance(value, int) and value > DECODING_BOUND_LIMIT:
                continue
            if key in ("title", "description") and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {k: decoding_schema(v) for k, v in value.items()}
                continue
            out[key] = decoding_schema(value)
        return out
    if isinstance(schema, list):
        return [decoding_schema(v) for v in schema]
    return schema


def action_schema(
    tools: Mapping[str, dict[str, Any]] | Sequence[str] | None = None,
    *,
    finish: bool = True,
) -> dict[str, Any]:
    """JSON schema of a tool-loop action, for constrained decoding.

    Args:
        tools: tool names, or tool names mapped to their argument schemas (then each tool's
            ``args`` is constrained to its own schema). An empty collection allows only
            ``finish``; None allows any tool name and any arguments.
        finish: whether ``finish`` is allowed (it always is when there is no tool to call).

    Returns:
        A JSON schema (``anyOf`` of the action shapes, no ``$ref``).
    """
    done = {
        "type": "object",
        "properties": {"type": {"const": "finish"}, "answer": {"type": "string"}},
        "required": ["type", "answer"],
    }
    if tools is None:
        calls: list[dict[str, Any]] = [_call_schema({"type": "string"}, {"type": "object"})]
    elif isinstance(tools, Mapping):
        calls = [
            _call_schema({"const": name}, decoding_schema(args)) for name, args in tools.items()
        ]
    else:
        calls = (
            [_call_schema({"type": "string", "enum": list(tools)}, {"type": "object"})]
            if tools
            else []
        )
    if not calls:
        return done
    return {"anyOf": [*calls, done] if finish else calls}


def _call_schema(tool: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"const": "call_tool"}, "tool": tool, "args": args},
        "required": ["type", "tool", "args"],
    }
