"""The single-agent JSON tool loop (FIELD-NOTES §4.1, §5.3).

The model answers with JSON only: ``{"type": "call_tool", "tool": NAME, "args": {...}}`` or
``{"type": "finish", "answer": ...}``. Every model mistake goes back to the model as one short
line, never as an exception:

* parse or validation failure: what is wrong (field, expected, got);
* unknown tool: it does not exist, and the list of tools;
* tool exception: a one-line summary; past the ``tool_error`` budget the tool is barred;
* loops: a call whose tool + normalised arguments was already made among the last
  ``loop_window`` calls (exact repeats and short cycles such as A→B→A) is not run; the first time
  the model is told to re-read the tool list, the next time that tool is barred for the run;
* veto: an outside checker's reason, as a re-ask with its own budget.

``max_iter`` counts executed actions; each error kind has its own retry budget (see
:class:`~fleetmind.llm.budgets.Budgets`), so the number of model calls is bounded by
``max_iter + sum(retries) + kinds``. A wall-clock deadline caps the run. :meth:`ToolLoop.run`
always returns a :class:`LoopOutcome`; only programming errors raise.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from fleetmind.llm.budgets import Budgets, Clock, ErrorKind
from fleetmind.llm.chat import CallContext, ChatClient, Message, report_outcome
from fleetmind.llm.errors import (
    ActionParseError,
    BudgetExceeded,
    LLMConnectionError,
    LLMTimeoutError,
)
from fleetmind.llm.parse import CallTool, Finish, action_schema, parse_action
from fleetmind.llm.tools import Tool, ToolRegistry, call_key, validation_summary

log = logging.getLogger(__name__)

LoopStatus = Literal["finished", "max_iter", "budget_exhausted", "deadline", "usage_budget"]

RESULT_CHARS = 500
"""Tool results longer than this are truncated before going back to the model."""

SYSTEM_TEMPLATE = """You are an agent that solves a task by calling tools.
Reply with exactly one JSON object and nothing else, in one of these two forms:
{{"type": "call_tool", "tool": "<tool name>", "args": {{<arguments>}}}}
{{"type": "finish", "answer": "<final answer>"}}
Tools:
{tools}"""


@dataclass
class Step:
    """One model turn of a loop run.

    Attributes:
        index: 0-based turn number.
        reply: the raw model reply ("" when the call failed).
        action: the parsed action as a dict, or None.
        error: the error kind of this turn, or None.
        feedback: what was sent back to the model after this turn.
        result: the tool result, when a tool ran successfully.
    """

    index: int
    reply: str = ""
    action: dict[str, Any] | None = None
    error: ErrorKind | None = None
    feedback: str | None = None
    result: Any = None


@dataclass
class LoopOutcome:
    """How a loop run ended.

    Attributes:
        status: ``finished``, ``max_iter``, ``budget_exhausted``, ``deadline`` or
            ``usage_budget``.
        answer: the model's final answer when finished, else None.
        fallback_reason: why it did not finish (None when finished).
        iterations: executed actions (tool runs and the finish).
        calls: model calls made.
        steps: every model turn.
        errors: error kinds in order.
        barred_tools: tools barred during the run.
        messages: the final message list.
        elapsed_s: wall-clock seconds.
        tokens: total tokens of the run.
    """

    status: LoopStatus
    answer: Any = None
    fallback_reason: str | None = None
    iterations: int = 0
    calls: int = 0
    steps: list[Step] = field(default_factory=list)
    errors: list[ErrorKind] = field(default_factory=list)
    barred_tools: list[str] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    elapsed_s: float = 0.0
    tokens: int = 0

    @property
    def finished(self) -> bool:
        """True when the model finished the task."""
        return self.status == "finished"

    @property
    def error_counts(self) -> dict[str, int]:
        """Errors per kind."""
        return dict(Counter(self.errors))


ActionVeto = Callable[[CallTool | Finish], "str | None"]


class ToolLoop:
    """A JSON tool loop over one chat backend.

    Args:
        client: the chat backend.
        tools: tools or annotated functions (the allowlist).
        system_prompt: prompt text placed before the tool list (default: a generic agent prompt).
        budgets: ``max_iter``, retry budgets per error kind, deadline, per-call timeout.
        veto: optional checker of each action; a returned reason is sent back as a re-ask.
        use_schema: send the action JSON schema for constrained decoding.
        temperature: sampling temperature (§4.1: 0.2).
        max_tokens: cap per model turn (§4.1: 256).
        context: caller context for recording and accounting.
        loop_window: how many recent calls a repeat is searched in (2 catches A→B→A).
        may_finish: when given and False, ``finish`` is left out of the schema (the caller
            still has work for the model; pair it with a ``veto`` for backends without
            constrained decoding).
        done: when given, asked after every tool call; a returned text ends the run as
            finished with that answer, without another model turn (the caller knows the work
            is done, so a closing report from the model would only cost time).
        args_schema: when given, each turn's argument schema of a tool (default: the tool's
            own), so a caller can narrow what the next turn may say as work gets done (a small
            model that may only name calls not made yet cannot repeat one).
    """

    def __init__(
        self,
        client: ChatClient,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]],
        *,
        system_prompt: str | None = None,
        budgets: Budgets | None = None,
        veto: ActionVeto | None = None,
        use_schema: bool = True,
        temperature: float = 0.2,
        max_tokens: int = 256,
        context: CallContext | None = None,
        loop_window: int = 4,
        may_finish: Callable[[], bool] | None = None,
        done: Callable[[], str | None] | None = None,
        args_schema: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        self.client = client
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.system_prompt = system_prompt
        self.budgets = budgets or Budgets()
        self.veto = veto
        self.use_schema = use_schema
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.context = context
        self.loop_window = max(1, loop_window)
        self.may_finish = may_finish
        self.done = done
        self.args_schema = args_schema or self.tools.args_schema

    def system_message(self) -> Message:
        """The system message: the prompt, the JSON format and the tool list."""
        text = SYSTEM_TEMPLATE.format(tools=self.tools.describe())
        if self.system_prompt:
            text = self.system_prompt.strip() + "\n\n" + text
        return Message.system(text)

    def run(self, task: str) -> LoopOutcome:
        """Run the loop on a task until the model finishes or a budget ends it.

        Args:
            task: the user's task.

        Returns:
            The outcome (never raises on model, network or budget trouble).
        """
        return _Run(self, task).go()


class _Run:
    """State of one loop run (kept out of ToolLoop so the loop object is reusable)."""

    def __init__(self, loop: ToolLoop, task: str) -> None:
        self.loop = loop
        self.budgets = loop.budgets
        self.clock = Clock(self.budgets.deadline_s)
        self.messages: list[Message] = [loop.system_message(), Message.user(task)]
        self.out = LoopOutcome(status="max_iter")
        self.retries: Counter[ErrorKind] = Counter()
        self.tool_errors: Counter[str] = Counter()
        self.loop_hits: Counter[str] = Counter()
        self.recent: deque[str] = deque(maxlen=loop.loop_window)
        self.barred: list[str] = []

    def stop(self, status: LoopStatus, reason: str) -> None:
        self.out.status = status
        self.out.fallback_reason = reason

    def fail(self, step: Step, kind: ErrorKind, feedback: str) -> bool:
        """Record an error turn and queue the feedback; True when its budget is exhausted."""
        step.error = kind
        step.feedback = feedback
        self.out.errors.append(kind)
        self.retries[kind] += 1
        if step.reply:
            self.messages.append(Message.assistant(step.reply[:RESULT_CHARS]))
        self.messages.append(Message.user(feedback))
        if self.retries[kind] > self.budgets.allowed(kind):
            self.stop("budget_exhausted", f"{kind} budget exhausted")
            return True
        return False

    def available(self) -> list[str]:
        return [n for n in self.loop.tools.names if n not in self.barred]

    def tool_list(self) -> str:
        names = self.available()
        return ", ".join(names) if names else "(none left)"

    def bar(self, tool: str) -> None:
        if tool not in self.barred:
            self.barred.append(tool)
            log.info("tool loop: barring tool %r", tool)

    def go(self) -> LoopOutcome:
        out = self.out
        try:
            self._turns()
        finally:
            out.barred_tools = list(self.barred)
            out.messages = self.messages
            out.elapsed_s = self.clock.elapsed()
        return out

    def _turns(self) -> None:
        loop, out = self.loop, self.out
        while True:
            if out.iterations >= self.budgets.max_iter:
                self.stop("max_iter", f"max_iter ({self.budgets.max_iter}) reached")
                return
            if self.clock.expired():
                self.stop("deadline", "deadline")
                return
            step = Step(index=len(out.steps))
            out.steps.append(step)
            schema = (
                action_schema(
                    {n: loop.args_schema(n) for n in self.available()},
                    finish=loop.may_finish is None or loop.may_finish(),
                )
                if loop.use_schema
                else None
            )
            try:
                result = loop.client.chat(
                    self.messages,
                    temperature=loop.temperature,
                    max_tokens=loop.max_tokens,
                    json_schema=schema,
                    timeout_s=self.clock.call_timeout(self.budgets.call_timeout_s),
                    context=loop.context,
                )
            except BudgetExceeded as exc:
                self.stop("usage_budget", f"usage budget: {exc}")
                return
            except LLMTimeoutError as exc:
                out.calls += 1
                if self.clock.expired():
                    step.error = "timeout"
                    out.errors.append("timeout")
                    self.stop("deadline", "deadline")
                    return
                if self.fail(step, "timeout", f"(call timed out: {exc})"):
                    return
                self.messages.pop()  # nothing to tell the model; just try again
                continue
            except LLMConnectionError as exc:
                out.calls += 1
                if self.fail(step, "network", f"(network error: {exc})"):
                    return
                self.messages.pop()
                continue
            out.calls += 1
            out.tokens += result.usage.total_tokens
            step.reply = result.text
            try:
                action = parse_action(result.text)
            except ActionParseError as exc:
                report_outcome(result, None, f"{exc.kind}: {exc.summary}")
                kind: ErrorKind = exc.kind  # type: ignore[assignment]  # empty/parse/validation
                if kind == "empty":
                    feedback = "Your reply was empty. Reply with one JSON action."
                else:
                    feedback = f"Invalid action: {exc.summary}. Reply with one JSON action only."
                if self.fail(step, kind, feedback):
                    return
                continue
            step.action = action.model_dump(mode="json")
            report_outcome(result, step.action, None)
            if loop.veto is not None:
                reason = loop.veto(action)
                if reason is not None:
                    if self.fail(step, "veto", f"Rejected: {reason}. Choose another action."):
                        return
                    continue
            if isinstance(action, Finish):
                out.iterations += 1
                out.answer = action.answer
                out.status = "finished"
                self.messages.append(Message.assistant(result.text[:RESULT_CHARS]))
                return
            if self._call(step, action, result.text):
                return
            answer = loop.done() if loop.done is not None else None
            if answer is not None:
                out.answer = answer
                out.status = "finished"
                return

    def _call(self, step: Step, action: CallTool, reply: str) -> bool:
        """Handle a tool call; True when the run must stop."""
        name = action.tool
        if name in self.barred:
            msg = (
                f"Tool {name!r} is barred for the rest of this task. "
                f"Use one of: {self.tool_list()}, or finish."
            )
            return self.fail(step, "loop", msg)
        tool = self.loop.tools.get(name)
        if tool is None:
            msg = f"Tool {name!r} does not exist. Available tools: {self.tool_list()}."
            return self.fail(step, "unknown_tool", msg)
        try:
            validated = tool.validate(action.args)
        except ValidationError as exc:
            msg = f"Bad arguments for {name}: {validation_summary(exc)}. Signature: "
            return self.fail(step, "validation", msg + tool.signature())
        key = call_key(name, validated.model_dump(mode="json"))
        if key in self.recent:
            self.loop_hits[name] += 1
            if self.loop_hits[name] == 1:
                msg = (
                    f"You already called {name} with these arguments; repeating it will not help. "
                    f"Re-read the tool list ({self.tool_list()}) and do not call {name} with the "
                    "same arguments again; use another tool or finish."
                )
            else:
                self.bar(name)
                msg = (
                    f"You keep repeating {name}; it is now barred for this task. "
                    f"Use one of: {self.tool_list()}, or finish."
                )
            return self.fail(step, "loop", msg)
        self.recent.append(key)
        self.out.iterations += 1
        self.messages.append(Message.assistant(reply[:RESULT_CHARS]))
        try:
            value = tool.run(validated)
        except Exception as exc:  # a tool's failure goes back to the model
            return self._tool_failed(step, name, exc)
        step.result = value
        text = _render(value)
        step.feedback = f"Result of {name}: {text}"
        self.messages.append(Message.user(step.feedback))
        return False

    def _tool_failed(self, step: Step, name: str, exc: Exception) -> bool:
        first_line = (str(exc).strip().splitlines() or [""])[0][:200]
        summary = f"Tool {name} failed: {type(exc).__name__}: {first_line}"
        self.tool_errors[name] += 1
        step.error = "tool_error"
        self.out.errors.append("tool_error")
        if self.tool_errors[name] > self.budgets.allowed("tool_error"):
            self.bar(name)
            summary += f". {name} is now barred for this task; use one of: {self.tool_list()}"
        step.feedback = summary
        self.messages.append(Message.user(summary))
        if not self.available():
            self.stop("budget_exhausted", "tool_error budget exhausted: every tool is barred")
            return True
        return False


def _render(value: Any) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + "...(truncated)"
    return text
