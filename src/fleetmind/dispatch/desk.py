"""The incident desk: a coordinator and an executor over one LLM backend, on a worker thread.

For each incident (:mod:`fleetmind.dispatch.incidents`) the desk holds a short talk:

1. ``decide`` -- the coordinator (a :class:`~fleetmind.llm.conversation.Conversation` with a
   round limit) reads the incident, a compact state text and the rule handler's proposal, and
   decides what to do;
2. ``act`` -- the executor carries the decision out through the JSON tool loop
   (:class:`~fleetmind.llm.tool_loop.ToolLoop`, its guards included) with tools over the live
   world: ``robot_status``, ``order_status``, ``reassign``, ``hand_over``, ``hold``,
   ``release``, ``send_to_charger``, ``block_zone``, ``unblock_zone``, ``boost``;
3. ``review`` -- when the executor met trouble (errors, or fewer actions than proposed), the
   coordinator reads what it did and has the final word: ``resolved``, ``retry`` (one more act
   round, then the round limit ends the talk) or ``rules`` (hand the incident to the rule
   handler); a clean execution leaves the coordinator's decision as the final word.

The control loop never waits for the desk: a tool checks its action against the latest view,
queues it, and the loop applies it at the next tick boundary after checking it again; the tool
then reports what happened. Every call carries ``role`` (``coordinator``/``executor``) and
``phase`` (``decide``/``act``/``review``) in its :class:`~fleetmind.llm.chat.CallContext`
``extra``; the executor's calls also carry the tool call's name, arguments and validation result
on their ``calls.jsonl`` line (``parsed.tool_call``). A desk that runs past its deadline (seconds
or ticks, checked by the host), spends its budgets, or whose coordinator says ``rules`` leaves the
incident to the rule handler, and that fallback is recorded.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetmind.dispatch.incidents import (
    DeskState,
    DeskWorker,
    Incident,
    IncidentHost,
    Refused,
    check,
    rule_actions,
)
from fleetmind.llm.budgets import Budgets
from fleetmind.llm.chat import (
    CallContext,
    ChatClient,
    ChatOptions,
    ChatResult,
    ChatWrapper,
    Message,
    OutcomeHook,
)
from fleetmind.llm.conversation import Conversation, Role
from fleetmind.llm.errors import BudgetExceeded
from fleetmind.llm.structured import structured
from fleetmind.llm.tool_loop import ToolLoop
from fleetmind.llm.tools import Tool

log = logging.getLogger(__name__)

PROMPT_VERSION = "desk-v1"
APPLY_WAIT_S = 2.0
"""How long a tool waits for the loop to apply its action (the loop answers at a tick boundary)."""

COORDINATOR_PROMPT = (
    "You are the coordinator of a warehouse robot fleet's incident desk. You read an incident "
    "and decide, in one or two short sentences, which actions the executor must take. The rule "
    "handler's proposal is given; take it unless you see a better one. You have the final word."
)
EXECUTOR_PROMPT = (
    "You are the executor of a warehouse incident desk. Carry out the coordinator's decision "
    "with the tools, one call at a time, then finish with a one-line report. Ids look like "
    "robot_3 and o12; cells are [row, col]."
)
REVIEW_FORMAT = (
    'Reply with one JSON object: {"phase": "decide", "verdict": "resolved" or "retry" or '
    '"rules", "content": "..."}. resolved: the actions handle the incident; retry: the executor '
    "must try again (say what to do); rules: leave it to the rule handler."
)


class Review(BaseModel):
    """The coordinator's final word after the executor acted."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["decide"]
    verdict: Literal["resolved", "retry", "rules"]
    content: str = Field(max_length=400)


class _DeskClient(ChatWrapper):
    """Counts tokens and holds each reply's ``calls.jsonl`` annotation until its tool has run.

    The tool loop annotates a reply with the parsed action as soon as it parsed it; the desk
    wants the tool call's validation result on the same line, so the annotation waits for
    :meth:`tool_result` (or the next call).
    """

    def __init__(self, inner: ChatClient, stop: Callable[[], bool] | None = None) -> None:
        super().__init__(inner)
        self.stop = stop or (lambda: False)
        self.calls = 0
        self.tokens = 0
        self.tokens_prompt = 0
        self._held: tuple[OutcomeHook, Any, str | None] | None = None

    def flush(self, extra: dict[str, Any] | None = None) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        hook, parsed, err = held
        if extra is not None:
            parsed = {**(parsed if isinstance(parsed, dict) else {"value": parsed}), **extra}
        hook(parsed, err)

    def tool_result(self, name: str, args: dict[str, Any], validation: str) -> None:
        """Write the held reply's line with the tool call's name, arguments and result."""
        self.flush({"tool_call": {"name": name, "args": args, "validation": validation}})

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        self.flush()
        if self.stop():
            # The rules took the incident over: end the talk now (the loops stop on a budget).
            raise BudgetExceeded("incident closed: the rule handler took it over")
        self.calls += 1
        result = options.send(self.inner, messages)
        self.tokens += result.usage.total_tokens
        self.tokens_prompt += result.usage.prompt_tokens
        inner_hook = result.outcome_hook
        if inner_hook is None:
            return result

        def hold(parsed: Any, err: str | None) -> None:
            self.flush()
            self._held = (inner_hook, parsed, err)

        return replace(result, outcome_hook=hold)


def state_text(state: DeskState, *, robots: tuple[str, ...] = (), max_orders: int = 4) -> str:
    """A compact text of the state: the robots involved, idle robots, a few open orders."""
    lines = [f"tick {state.tick}"]
    for r in state.robots.values():
        if r.id not in robots and not r.idle:
            continue
        what = (
            "broken"
            if r.broken
            else "out of charge"
            if r.battery <= 0
            else "to charger"
            if r.errand
            else f"carrying {r.order}"
            if r.carrying
            else f"going to {r.order}"
            if r.order
            else "idle"
        )
        bat = "" if r.battery == float("inf") else f", battery {r.battery:.0f}"
        lines.append(f"{r.id} at {list(r.cell)}: {what}{bat}")
    opened = [o for o in state.orders.values() if o.state == "open"]
    held = [o for o in state.orders.values() if o.state == "parked"]
    lines.append(
        f"open orders ({len(opened)}): "
        + ", ".join(f"{o.id} {o.priority} pickup {list(o.pickup)}" for o in opened[:max_orders])
        + (" ..." if len(opened) > max_orders else "")
    )
    if held:
        lines.append("on hold: " + ", ".join(f"{o.id} until {o.parked_until}" for o in held))
    if state.closed:
        lines.append(f"closed cells: {len(state.closed)} (until tick {state.zone_until})")
    return "\n".join(lines)


def _call_text(name: str, args: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{name}({inner})"


class LLMDesk(DeskWorker):
    """The LLM incident desk on its own daemon thread (one incident at a time, in order).

    Args:
        client: the chat backend (recorded by the caller when a run folder is kept).
        deadline_s: seconds per incident from when the desk takes it up.
        max_rounds: act rounds (each reviewed by the coordinator); the limit ends the talk.
        max_iter: executed tool calls per act round.
        seed: the run seed (recorded in each call's context).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        deadline_s: float = 20.0,
        max_rounds: int = 2,
        max_iter: int = 3,
        seed: int | None = None,
    ) -> None:
        self.client = client
        self.deadline_s = deadline_s
        self.max_rounds = max_rounds
        self.max_iter = max_iter
        self.seed = seed
        self.host: IncidentHost | None = None
        self._inbox: queue.Queue[Incident | None] = queue.Queue()
        self._outbox: queue.Queue[tuple[str, str, dict[str, Any], Any]] = queue.Queue()
        self._abandoned: set[str] = set()
        self._spent: dict[str, _DeskClient] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="incident-desk", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ host side
    def attach(self, host: IncidentHost) -> None:
        """The host whose views the desk reads and to which it queues actions."""
        self.host = host

    def submit(self, incident: Incident) -> None:
        """Queue an incident (returns at once)."""
        self._inbox.put(incident)

    def poll(self) -> list[tuple[str, str, dict[str, Any], Any]]:
        """What the desk queued since the last poll (never blocks)."""
        out = []
        while True:
            try:
                out.append(self._outbox.get_nowait())
            except queue.Empty:
                return out

    def spent(self, incident_id: str) -> tuple[int, int, int]:
        """Calls, tokens and prompt tokens spent on an incident so far (calls in flight too)."""
        c = self._spent.get(incident_id)
        return (0, 0, 0) if c is None else (c.calls, c.tokens, c.tokens_prompt)

    def abandon(self, incident_id: str) -> None:
        """The rules took the incident over: drop the desk's further actions for it."""
        self._abandoned.add(incident_id)

    def close(self) -> None:
        """Stop taking incidents; a call in flight is left to its daemon thread."""
        self._closed = True
        self._inbox.put(None)

    # ------------------------------------------------------------------ worker side
    def _serve(self) -> None:
        while True:
            inc = self._inbox.get()
            if inc is None or self._closed:
                return
            if inc.id in self._abandoned:
                continue
            inc.started_s = time.perf_counter()
            client = _DeskClient(self.client, stop=functools.partial(self._stopped, inc.id))
            self._spent[inc.id] = client
            try:
                payload = self._handle(inc, client)
            except Exception as exc:  # a desk bug must not kill the worker: the rules act
                log.exception("incident desk failed on %s", inc.id)
                payload = {"fallback": f"desk error: {type(exc).__name__}: {exc}"}
            with contextlib.suppress(ValueError):  # the run ended and closed calls.jsonl
                client.flush()
            payload.update(
                calls=client.calls, tokens=client.tokens, tokens_prompt=client.tokens_prompt
            )
            self._outbox.put(("done", inc.id, payload, None))

    def _stopped(self, incident_id: str) -> bool:
        return incident_id in self._abandoned or self._closed

    def _view(self, wait_s: float = 1.0) -> DeskState | None:
        """A view of the world taken at a tick boundary after this call (or the last one)."""
        host = self.host
        if host is None:
            return None
        old = host.view
        host.view_wanted = True
        end = time.perf_counter() + wait_s
        while host.view is old and time.perf_counter() < end and not self._closed:
            time.sleep(0.002)
        return host.view

    def _context(self, inc: Incident, role: str, phase: str) -> CallContext:
        return CallContext(
            caller="dispatch.desk",
            decision_type=f"incident.{inc.kind}",
            prompt_version=PROMPT_VERSION,
            seed=self.seed,
            tick=inc.tick,
            extra={"role": role, "phase": phase, "incident": inc.id},
        )

    def _queue(self, inc: Incident, name: str, args: dict[str, Any]) -> str:
        """Queue an action for the loop and wait (on this thread) for what it did."""
        done = threading.Event()
        box: list[str] = []

        def reply(result: str) -> None:
            box.append(result)
            done.set()

        self._outbox.put(("action", inc.id, {"tool": name, "args": args}, reply))
        if not done.wait(APPLY_WAIT_S):
            return "queued; not applied yet (the loop applies it at a tick boundary)"
        return box[0]

    def _tools(self, inc: Incident, client: _DeskClient, applied: list[str]) -> list[Tool]:
        def act(name: str, args: dict[str, Any]) -> str:
            if inc.id in self._abandoned or self._closed:
                client.tool_result(name, args, "refused: incident closed")
                raise Refused("the incident is closed: the rules took it over; finish")
            view = self._view()
            if view is not None:
                try:
                    check(name, args, view)
                except Refused as exc:
                    client.tool_result(name, args, f"refused: {exc}")
                    raise
            result = self._queue(inc, name, args)
            client.tool_result(name, args, result)
            if result.startswith("refused"):
                raise Refused(result.removeprefix("refused: "))
            applied.append(_call_text(name, args))
            return result

        def robot_status(robot: str) -> dict[str, Any]:
            """Where a robot is and what it does."""
            view = self._view()
            if view is None:
                raise Refused("no view of the world yet")
            try:
                r = view.robot(robot)
            except Refused as exc:
                client.tool_result("robot_status", {"robot": robot}, f"refused: {exc}")
                raise
            out = {
                "robot": r.id,
                "cell": list(r.cell),
                "broken": r.broken,
                "battery": None if r.battery == float("inf") else r.battery,
                "carrying": r.carrying,
                "order": r.order,
                "to_charger": r.errand,
                "capabilities": sorted(r.capabilities),
            }
            client.tool_result("robot_status", {"robot": robot}, "ok")
            return out

        def order_status(order: str) -> dict[str, Any]:
            """Where an order is and who serves it."""
            view = self._view()
            if view is None:
                raise Refused("no view of the world yet")
            try:
                o = view.order(order)
            except Refused as exc:
                client.tool_result("order_status", {"order": order}, f"refused: {exc}")
                raise
            client.tool_result("order_status", {"order": order}, "ok")
            return {
                "order": o.id,
                "state": o.state,
                "robot": o.robot,
                "pickup": list(o.pickup),
                "station": list(o.station),
                "priority": o.priority,
                "due": o.due,
                "on_hold_until": o.parked_until,
            }

        def reassign(order: str, robot: str) -> str:
            """Give an order to an idle robot (a broken robot's load is handed over)."""
            return act("reassign", {"order": order, "robot": robot})

        def hand_over(order: str) -> str:
            """Set a broken or low robot's load down for the planner to give to another."""
            return act("hand_over", {"order": order})

        def hold(order: str, until: int) -> str:
            """Take an unloaded order away from planners until a tick."""
            return act("hold", {"order": order, "until": until})

        def release(order: str) -> str:
            """Put an order on hold back on the open list."""
            return act("release", {"order": order})

        def send_to_charger(robot: str) -> str:
            """Send an unloaded robot to the nearest charger (its order goes back)."""
            return act("send_to_charger", {"robot": robot})

        def block_zone(cells: list[list[int]]) -> str:
            """Close cells [[row, col], ...] to robots."""
            return act("block_zone", {"cells": cells})

        def unblock_zone(cells: list[list[int]]) -> str:
            """Open cells the desk closed."""
            return act("unblock_zone", {"cells": cells})

        def boost(robot: str) -> str:
            """Give a robot right of way for 20 ticks."""
            return act("boost", {"robot": robot})

        return [
            Tool.from_function(f)
            for f in (
                robot_status,
                order_status,
                reassign,
                hand_over,
                hold,
                release,
                send_to_charger,
                block_zone,
                unblock_zone,
                boost,
            )
        ]

    def _left(self, inc: Incident) -> float:
        started = inc.started_s if inc.started_s is not None else time.perf_counter()
        return max(0.05, self.deadline_s - (time.perf_counter() - started))

    def _handle(self, inc: Incident, client: _DeskClient) -> dict[str, Any]:
        view = self._view()
        if view is None:
            return {"fallback": "no view of the world"}
        proposal = rule_actions(inc, view)
        proposal_text = (
            "; ".join(_call_text(n, a) for n, a in proposal) if proposal else "no action"
        )
        task = (
            f"Incident {inc.id} ({inc.kind}) at tick {inc.tick}: {inc.summary}.\n"
            f"State:\n{state_text(view, robots=inc.robots)}\n"
            f"Rule handler's proposal: {proposal_text}."
        )
        convo: list[dict[str, Any]] = []
        talk = Conversation(
            client,
            Role("coordinator", "coordinator", COORDINATOR_PROMPT),
            [],
            max_rounds=1,
            default_decision=lambda _t: f"Do what the rule handler proposes: {proposal_text}.",
            deadline_s=self._left(inc),
            max_tokens=96,
            context=self._context(inc, "coordinator", "decide"),
        )
        transcript = talk.run(task)
        decision = transcript.decision or f"Do what the rule handler proposes: {proposal_text}."
        for m in transcript.messages:
            convo.append({"role": m.role, "phase": m.phase, "content": m.content})
        if transcript.decided_by == "default":
            convo.append({"role": "coordinator", "phase": "decide", "content": decision})
        applied: list[str] = []
        instruction = decision
        fallback: str | None = None
        for rnd in range(1, self.max_rounds + 1):
            if inc.id in self._abandoned:
                return {"conversation": convo, "fallback": "abandoned"}
            loop = ToolLoop(
                client,
                self._tools(inc, client, applied),
                system_prompt=EXECUTOR_PROMPT,
                budgets=Budgets(max_iter=self.max_iter, deadline_s=self._left(inc)),
                max_tokens=96,
                context=self._context(inc, "executor", "act"),
                loop_window=4,
            )
            out = loop.run(
                f"{task}\nCoordinator's decision: {instruction}\n"
                f"Proposed calls: {proposal_text}. Make the calls, then finish."
            )
            for step in out.steps:
                convo.append(
                    {
                        "role": "executor",
                        "phase": "act",
                        "content": step.reply[:300],
                        "error": step.error,
                        "feedback": (step.feedback or "")[:300],
                    }
                )
            report = (
                f"status {out.status}; actions applied: {', '.join(applied) or 'none'}; "
                f"answer: {str(out.answer)[:200] if out.answer is not None else '-'}"
            )
            convo.append({"role": "executor", "phase": "report", "content": report})
            if not out.finished and not applied:
                fallback = f"executor {out.status}: {out.fallback_reason}"
                break
            if out.finished and proposal and len(applied) >= len(proposal) and not out.errors:
                # The decision was carried out cleanly: the coordinator's decision stands as its
                # final word; a review is held only when the executor met trouble.
                break
            review = structured(
                client,
                [
                    Message.system(COORDINATOR_PROMPT + "\n" + REVIEW_FORMAT),
                    Message.user(
                        f"Incident: {inc.summary}.\nYour decision: {instruction}\n"
                        f"Executor's report: {report}"
                    ),
                ],
                Review,
                budgets=Budgets(
                    retries={"parse": 1, "validation": 1, "empty": 1, "network": 1},
                    deadline_s=self._left(inc),
                ),
                context=self._context(inc, "coordinator", "review"),
                max_tokens=96,
            )
            if review.value is None:
                # No final word: what was applied stands; nothing applied goes to the rules.
                convo.append(
                    {"role": "coordinator", "phase": "error", "content": review.last_error or ""}
                )
                fallback = None if applied else f"review: {review.fallback_reason}"
                break
            v = review.value
            convo.append(
                {"role": "coordinator", "phase": "decide", "content": f"{v.verdict}: {v.content}"}
            )
            if v.verdict == "resolved":
                break
            if v.verdict == "rules":
                fallback = "coordinator chose the rule handler"
                break
            instruction = v.content
            if rnd == self.max_rounds:
                fallback = None if applied else "round limit with no action applied"
        return {"conversation": convo, "fallback": fallback, "applied": applied}


DeskFactory = Callable[[ChatClient], LLMDesk]
