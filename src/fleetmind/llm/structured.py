"""Structured output: get a validated pydantic value out of a model, within budgets.

Order of defences: schema-constrained decoding where the backend supports it (``json_schema``
on the call), then strict parse, ``json_repair``, pydantic validation, and a re-ask that tells the
model in one line what was wrong. An optional ``veto`` hook (e.g. the dispatch tier's plan
validation) may reject a valid value with a reason; that too is a re-ask, with its own budget.
Every outcome is a :class:`StructuredOutcome`; model mistakes, network errors, timeouts and the
deadline never raise out of :func:`structured`.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from fleetmind.llm.budgets import Budgets, Clock, ErrorKind
from fleetmind.llm.chat import CallContext, ChatClient, ChatResult, Message, report_outcome
from fleetmind.llm.errors import (
    ActionParseError,
    BudgetExceeded,
    LLMConnectionError,
    LLMTimeoutError,
)
from fleetmind.llm.parse import decoding_schema, parse_model

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

Veto = Callable[[Any], "str | None"]
"""A checker: returns None to accept a value, or a short reason to reject it."""

ECHO_CHARS = 300
"""How much of a bad reply is echoed back to the model in a re-ask."""


@dataclass
class StructuredOutcome(Generic[T]):
    """What :func:`structured` produced.

    Attributes:
        value: the validated (and not vetoed) value, or None.
        attempts: model calls made.
        errors: error kinds in the order they happened.
        fallback_reason: why no value was produced (None on success), e.g.
            ``"validation budget exhausted"``, ``"deadline"``, ``"usage budget: ..."``.
        last_error: the last error summary.
        elapsed_s: wall-clock seconds spent.
        results: the raw chat results, one per attempt that got a reply.
    """

    value: T | None = None
    attempts: int = 0
    errors: list[ErrorKind] = field(default_factory=list)
    fallback_reason: str | None = None
    last_error: str | None = None
    elapsed_s: float = 0.0
    results: list[ChatResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when a value was produced."""
        return self.value is not None

    @property
    def error_counts(self) -> dict[str, int]:
        """Errors per kind."""
        return dict(Counter(self.errors))

    @property
    def tokens(self) -> int:
        """Total tokens of all attempts."""
        return sum(r.usage.total_tokens for r in self.results)


def reask_message(kind: ErrorKind, summary: str) -> str:
    """The user message sent back after a bad reply.

    Args:
        kind: the error kind.
        summary: the short summary of what was wrong.

    Returns:
        The message text.
    """
    if kind == "veto":
        return f"Rejected: {summary}. Answer again with a corrected JSON object only."
    if kind == "empty":
        return "Your reply was empty. Answer with one JSON object only."
    return f"Invalid reply: {summary}. Answer again with one valid JSON object only."


def structured(
    client: ChatClient,
    messages: list[Message],
    model_cls: type[T],
    *,
    veto: Veto | None = None,
    budgets: Budgets | None = None,
    context: CallContext | None = None,
    use_schema: bool = True,
    temperature: float = 0.2,
    max_tokens: int = 256,
) -> StructuredOutcome[T]:
    """Ask the model for a value of ``model_cls``; re-ask on errors within budgets.

    Args:
        client: the chat backend.
        messages: the prompt (not modified; re-asks extend a copy).
        model_cls: the pydantic model the reply must validate against.
        veto: optional checker of a valid value; a returned reason triggers a re-ask.
        budgets: retry budgets per error kind and the wall-clock deadline.
        context: caller context passed to every call.
        use_schema: send the model's JSON schema for constrained decoding.
        temperature: sampling temperature.
        max_tokens: cap on generated tokens per attempt.

    Returns:
        The outcome; ``value`` is None when a budget, the deadline or the network stopped it.
    """
    budgets = budgets or Budgets()
    clock = Clock(budgets.deadline_s)
    schema = decoding_schema(model_cls.model_json_schema()) if use_schema else None
    convo = list(messages)
    out: StructuredOutcome[T] = StructuredOutcome()
    retries: Counter[ErrorKind] = Counter()

    def fail(kind: ErrorKind, summary: str) -> bool:
        """Count an error; return True when its budget is exhausted."""
        out.errors.append(kind)
        out.last_error = summary
        retries[kind] += 1
        if retries[kind] > budgets.allowed(kind):
            out.fallback_reason = f"{kind} budget exhausted"
            return True
        return False

    while True:
        if clock.expired():
            out.fallback_reason = "deadline"
            break
        try:
            result = client.chat(
                convo,
                temperature=temperature,
                max_tokens=max_tokens,
                json_schema=schema,
                timeout_s=clock.call_timeout(budgets.call_timeout_s),
                context=context,
            )
        except BudgetExceeded as exc:
            out.fallback_reason = f"usage budget: {exc}"
            out.last_error = str(exc)
            break
        except LLMTimeoutError as exc:
            out.attempts += 1
            if clock.expired():
                out.errors.append("timeout")
                out.last_error = str(exc)
                out.fallback_reason = "deadline"
                break
            if fail("timeout", str(exc)):
                break
            continue
        except LLMConnectionError as exc:
            out.attempts += 1
            if fail("network", str(exc)):
                break
            continue
        out.attempts += 1
        out.results.append(result)
        try:
            value = parse_model(result.text, model_cls)
        except ActionParseError as exc:
            kind: ErrorKind = exc.kind  # type: ignore[assignment]  # empty/parse/validation
            summary = exc.summary
            if result.finish_reason == "length":
                summary += " (your reply was cut off at the token limit: keep values short)"
            report_outcome(result, None, f"{exc.kind}: {summary}")
            if fail(kind, summary):
                break
            convo = [
                *convo,
                Message.assistant(result.text[:ECHO_CHARS]),
                Message.user(reask_message(kind, summary)),
            ]
            continue
        reason = veto(value) if veto is not None else None
        if reason is not None:
            report_outcome(result, value.model_dump(mode="json"), f"veto: {reason}")
            if fail("veto", reason):
                break
            convo = [
                *convo,
                Message.assistant(json.dumps(value.model_dump(mode="json"))[:ECHO_CHARS]),
                Message.user(reask_message("veto", reason)),
            ]
            continue
        report_outcome(result, value.model_dump(mode="json"), None)
        out.value = value
        break
    out.elapsed_s = clock.elapsed()
    if out.value is None:
        log.info("structured %s: no value (%s)", model_cls.__name__, out.fallback_reason)
    return out
