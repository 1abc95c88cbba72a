"""The incident desk: a coordinator and an executor over one LLM backend, on a worker thread.

For each incident (:mod:`fleetmind.dispatch.incidents`) the desk holds a short talk:

1. ``decide`` -- the coordinator (a :class:`~fleetmind.llm.conversation.Conversation` with a
   round limit) reads the incident, a compact state text and the rule handler's proposal, and
   decides what to do;
2. ``act`` -- the executor carries the decision out through the JSON tool loop
   (:class:`~fleetmind.llm.tool_loop.ToolLoop`, its guards included) with tools over the live
   world: ``robot_status``, ``order_status``, ``reassign``, ``hand_over``, ``hold``,
   ``release``, ``send_to_charger``, ``block_zone``, ``unblock_zone``, ``boost``;
3. ``review`` -- when the executor met trouble (errors, or fewer actions than chosen), the
   coordinator reads its report and the options on the fresh state and has the final word:
   another option (one more act round, then the round limit ends the talk), waiting (what was
   done stands) or ``R`` (hand the incident to the rule handler); a clean execution leaves the
   coordinator's choice as the final word.

The coordinator chooses among courses of action (:func:`~fleetmind.dispatch.incidents.rule_options`:
the rule handler's proposal first, alternatives, and waiting), and the executor's tools are
narrowed to the chosen calls (:meth:`~fleetmind.llm.tools.Tool.narrowed`): the schema lets a
small model say only what can be carried out, and the world still checks every call. The
executor's run ends as soon as every chosen call has been tried, without a closing turn.

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
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from fleetmind.dispatch.incidents import (
    Call,
    DeskState,
    DeskWorker,
    Incident,
    IncidentHost,
    Refused,
    check,
    rule_actions,
    rule_options,
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
from fleetmind.llm.parse import Finish
from fleetmind.llm.tool_loop import ToolLoop
from fleetmind.llm.tools import Tool

log = logging.getLogger(__name__)

PROMPT_VERSION = "desk-v3"
APPLY_WAIT_S = 2.0
"""How long a tool waits for the loop to apply its action (the loop answers at a tick boundary)."""

COORDINATOR_PROMPT = (
    "You are the coordinator of a warehouse robot fleet's incident desk. You read an incident "
    "and choose which course of action the executor must take. Option A is the rule handler's "
    "proposal when it can be carried out; take it unless you see a better one. You have the "
    "final word."
)
EXECUTOR_PROMPT = (
    "You are the executor of a warehouse incident desk. Carry out the coordinator's decision "
    "with the tools, one call at a time, then finish with a one-line report. Ids look like "
    "robot_3 and o12; cells are [row, col]."
)
NOTHING_TO_CHOOSE = "nothing to choose: waiting is the only option"
"""The fallback of an incident with no choice (no model call is made)."""
RULES = "R"
WARMUP_CALLER = "dispatch.desk.warmup"
"""The caller of the warm-up call (left out of a run's answered rate)."""
"""The review's extra option: hand the incident to the rule handler."""
URGENCY = {"deadlock": 0, "breakdown": 1, "battery": 1, "block": 2, "surge": 2}
"""The order in which queued incidents are taken up (lowest first; ties by arrival).

A deadlock changes within ticks (most clear by themselves, a jam spreads), so it goes before
work that can wait a few seconds; a stranded load or a robot running flat before aisles and
surges, whose orders the planner keeps serving meanwhile. Before 2026-12-03 the desk took
incidents in arrival order, and in a jam most deadlock reports cleared while they waited behind
a breakdown's talk (11 of 15 in one seed of the bench).
"""


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


def state_text(state: DeskState, *, robots: Iterable[str] = ()) -> str:
    """A compact text of the state: the robots named, the open orders, the closed cells.

    Short on purpose: the 135M model reads a prompt at about 100 tokens a second on one core,
    so every line here costs the desk time before its deadline; the options already name the
    robots and orders that matter, and this says where they are and what they do.
    """
    named = set(robots)
    lines = [f"tick {state.tick}"]
    for r in state.robots.values():
        if r.id not in named:
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
    opened = sum(1 for o in state.orders.values() if o.state == "open")
    held = [o for o in state.orders.values() if o.state == "parked"]
    lines.append(f"open orders: {opened}")
    if held:
        lines.append("on hold: " + ", ".join(f"{o.id} until {o.parked_until}" for o in held))
    if state.closed:
        lines.append(f"closed cells: {len(state.closed)} (until tick {state.zone_until})")
    return "\n".join(lines)


def feasible(options: list[list[Call]], state: DeskState) -> list[list[Call]]:
    """The options whose every call the world would accept now (waiting always is).

    Offering a course of action the world then refuses costs the desk a wasted act round and
    a review (seconds, with a small local model) while the incident waits.
    """
    return [opt for opt in options if refusal(opt, state) is None]


def refusal(calls: list[Call], state: DeskState) -> str | None:
    """Why the world would refuse ``calls`` now (the first refused call and its reason), or None."""
    for name, args in calls:
        try:
            check(name, args, state)
        except Refused as exc:
            return f"{_call_text(name, args)}: {exc}"
    return None


def _named(inc: Incident, options: list[list[Call]]) -> list[str]:
    """The robots an incident involves and its options name, in that order."""
    out = list(inc.robots)
    out += [str(a["robot"]) for opt in options for _, a in opt if "robot" in a]
    return list(dict.fromkeys(out))


def _values(calls: list[Call], name: str) -> dict[str, list[str | int]]:
    """The values each argument of tool ``name`` takes in ``calls`` (a narrowed schema's enums)."""
    out: dict[str, list[str | int]] = {}
    for n, args in calls:
        if n == name:
            for k, v in args.items():
                if isinstance(v, (str, int)):
                    out.setdefault(k, []).append(v)
    return out


def _call_text(name: str, args: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{name}({inner})"


class LLMDesk(DeskWorker):
    """The LLM incident desk on its own daemon thread (one incident at a time, most urgent first).

    Queued incidents are taken up by :data:`URGENCY` of their kind, then in arrival order.

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
        self.warmup_s: float | None = None
        self.host: IncidentHost | None = None
        # (urgency, arrival, incident); the close sentinel (-1, 0, None) goes before all.
        self._inbox: queue.PriorityQueue[tuple[int, int, Incident | None]] = queue.PriorityQueue()
        self._arrivals = itertools.count()
        self._outbox: queue.Queue[tuple[str, str, dict[str, Any], Any]] = queue.Queue()
        self._abandoned: set[str] = set()
        self._spent: dict[str, _DeskClient] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="incident-desk", daemon=True)
        self._thread.start()

    def warm_up(self) -> float | None:
        """One coordinator call on a made-up incident before the run: its latency, in seconds.

        It puts the coordinator's system prompt in the server's prompt cache: a cold read cost
        the first incident of a run 5 s of its deadline (2026-12-06, 2-core machine). None: the
        call failed.
        """
        task = (
            "Incident i0 (breakdown) at tick 0: robot_0 broke down at (4, 5), carrying o1.\n"
            "State:\ntick 0\nrobot_0 at [4, 5]: broken\nrobot_1 at [6, 5]: idle\n"
            "open orders: 3\nOptions:\nA: reassign(order='o1', robot='robot_1')\n"
            "B: hand_over(order='o1')\nC: no action for now"
        )
        talk = Conversation(
            self.client,
            Role("coordinator", "coordinator", COORDINATOR_PROMPT),
            [],
            max_rounds=1,
            default_decision=lambda _t: "A",
            deadline_s=self.deadline_s / 2,  # a hanging model holds up the run's start less
            max_tokens=24,
            context=CallContext(
                caller=WARMUP_CALLER, decision_type="warmup", prompt_version=PROMPT_VERSION
            ),
            choices=["A", "B", "C"],
        )
        t0 = time.perf_counter()
        transcript = talk.run(task)
        if transcript.decided_by == "default":
            return None
        self.warmup_s = time.perf_counter() - t0
        return self.warmup_s

    # ------------------------------------------------------------------ host side
    def attach(self, host: IncidentHost) -> None:
        """The host whose views the desk reads and to which it queues actions."""
        self.host = host

    def submit(self, incident: Incident) -> None:
        """Queue an incident (returns at once); see :data:`URGENCY` for the order."""
        self._inbox.put((URGENCY.get(incident.kind, 3), next(self._arrivals), incident))

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
        self._inbox.put((-1, 0, None))

    # ------------------------------------------------------------------ worker side
    def _serve(self) -> None:
        while True:
            _, _, inc = self._inbox.get()
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

    def wanted(self, context: CallContext) -> bool:
        """Whether a reply to a desk call made with ``context`` is still wanted.

        It is while its incident is still the desk's (the rules have not taken it over).
        """
        return not self._stopped(str(context.extra.get("incident", "")))

    def _stopped(self, incident_id: str) -> bool:
        return incident_id in self._abandoned or self._closed

    def _view(self, wait_s: float = 1.0) -> DeskState | None:
        """A view of the world taken at a tick boundary after this call (or the last one)."""
        host = self.host
        if host is None:
            return None
        host.view_served.clear()
        host.view_wanted = True
        host.view_served.wait(wait_s)
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

    def _reserve(self, inc: Incident, calls: list[Call]) -> None:
        """Hold the helpers ``calls`` name (and free the incident's others) until the desk acts.

        See :meth:`IncidentHost.reserved_robots`.
        """
        robots = sorted({str(a["robot"]) for n, a in calls if n == "reassign"})
        self._outbox.put(("reserve", inc.id, {"robots": robots}, None))

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

    def _tools(
        self,
        inc: Incident,
        client: _DeskClient,
        applied: list[str],
        calls: list[Call],
        tried: list[str] | None = None,
    ) -> list[Tool]:
        """The executor's tools for carrying out ``calls``: those tools, limited to their values.

        Grounding the schema in the chosen option keeps a small model from inventing ids or
        actions; every call is still checked against the world when it runs.
        """
        allowed: dict[str, dict[str, list[str | int]]] = {}
        for name, _ in calls:
            allowed[name] = _values(calls, name)
        return [
            t.narrowed(allowed.get(t.name, {}))
            for t in self._all_tools(inc, client, applied, tried)
            if t.name in allowed or (not calls and t.name in ("robot_status", "order_status"))
        ]

    def _all_tools(
        self,
        inc: Incident,
        client: _DeskClient,
        applied: list[str],
        tried: list[str] | None = None,
    ) -> list[Tool]:
        def act(name: str, args: dict[str, Any]) -> str:
            if tried is not None:
                tried.append(_call_text(name, args))
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

        def look(tool: str, args: dict[str, Any], read: Callable[[Any], Any]) -> Any:
            """What a status tool reads off the world view; a refusal goes to the desk's log."""
            view = self._view()
            if view is None:
                raise Refused("no view of the world yet")
            try:
                found = read(view)
            except Refused as exc:
                client.tool_result(tool, args, f"refused: {exc}")
                raise
            client.tool_result(tool, args, "ok")
            return found

        def robot_status(robot: str) -> dict[str, Any]:
            """Where a robot is and what it does."""
            r = look("robot_status", {"robot": robot}, lambda view: view.robot(robot))
            return {
                "robot": r.id,
                "cell": list(r.cell),
                "broken": r.broken,
                "battery": None if r.battery == float("inf") else r.battery,
                "carrying": r.carrying,
                "order": r.order,
                "to_charger": r.errand,
                "capabilities": sorted(r.capabilities),
            }

        def order_status(order: str) -> dict[str, Any]:
            """Where an order is and who serves it."""
            o = look("order_status", {"order": order}, lambda view: view.order(order))
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

    def _choose(
        self,
        inc: Incident,
        client: _DeskClient,
        options: list[list[Call]],
        view: DeskState,
        phase: str,
        report: str = "",
    ) -> tuple[str, list[Call], list[dict[str, Any]], str | None]:
        """The coordinator's choice among ``options`` (the rule options on ``view``).

        ``decide`` offers the options; ``review`` (after trouble in the executor) offers the
        options on the fresh state, plus ``R``: leave the incident to the rule handler.

        Returns:
            The label chosen, its calls, the messages of the talk, and why the coordinator
            gave no decision (None when it decided).
        """
        labels = [chr(ord("A") + i) for i in range(len(options))]
        texts = {
            lab: "; ".join(_call_text(n, a) for n, a in opt) if opt else "no action for now"
            for lab, opt in zip(labels, options, strict=True)
        }
        if phase == "review":
            texts[RULES] = "leave it to the rule handler"
        task = (
            f"Incident {inc.id} ({inc.kind}) at tick {inc.tick}: {inc.summary}.\n"
            + (f"Executor's report: {report}\n" if report else "")
            + f"State:\n{state_text(view, robots=_named(inc, options))}\n"
            + "Options:\n"
            + "\n".join(f"{lab}: {txt}" for lab, txt in texts.items())
        )
        # Without a word from the coordinator: the rules' option at first, and after trouble
        # what was done stands (waiting, the last option).
        fallback_label = labels[0] if phase == "decide" else labels[-1]
        talk = Conversation(
            client,
            Role("coordinator", "coordinator", COORDINATOR_PROMPT),
            [],
            max_rounds=1,
            default_decision=lambda _t: fallback_label,
            deadline_s=self._left(inc),
            max_tokens=24,
            context=self._context(inc, "coordinator", phase),
            choices=list(texts),
        )
        transcript = talk.run(task)
        choice = transcript.decision if transcript.decision in texts else fallback_label
        convo = [
            {
                "role": m.role,
                "phase": m.phase if m.phase == "error" else phase,
                "content": f"Option {m.content}: {texts[m.content]}"
                if m.content in texts
                else m.content,
            }
            for m in transcript.messages
        ]
        if transcript.decided_by == "default":
            convo.append(
                {
                    "role": "coordinator",
                    "phase": phase,
                    "content": f"Option {choice}: {texts[choice]} (default: {transcript.ended_by})",
                }
            )
        calls = [] if choice == RULES else options[labels.index(choice)]
        undecided = None if transcript.decided_by != "default" else transcript.ended_by
        return choice, calls, convo, undecided

    def _handle(self, inc: Incident, client: _DeskClient) -> dict[str, Any]:
        view = self._view()
        if view is None:
            return {"fallback": "no view of the world"}
        if inc.kind == "deadlock" and inc.recovered_tick is not None:
            # The stuck robots move again (most deadlocks clear while queued): deciding now would
            # only hold up the incidents behind it. (Other kinds recover as soon as the orders
            # move, which is before their trouble is over: a low robot still moves.)
            return {"fallback": f"{NOTHING_TO_CHOOSE} (it recovered before the desk took it up)"}
        options = feasible(rule_options(inc, view), view)
        if options == [[]]:
            # Only waiting is on the table: a model call would decide nothing, and would hold
            # up the incidents queued behind this one.
            return {"fallback": NOTHING_TO_CHOOSE}
        self._reserve(inc, [c for opt in options for c in opt])
        choice, calls, convo, undecided = self._choose(inc, client, options, view, "decide")
        self._reserve(inc, calls)
        if undecided is not None:
            # No decision from the coordinator: the rule handler acts, and that is a fallback.
            return {
                "conversation": convo,
                "fallback": f"coordinator gave no decision ({undecided})",
            }
        rules = rule_actions(inc, view)
        decision = {
            "chosen": [_call_text(n, a) for n, a in calls],
            "rules": [_call_text(n, a) for n, a in rules],
            "deviates": calls != rules,
        }
        applied: list[str] = []
        fallback: str | None = None
        for rnd in range(1, self.max_rounds + 1):
            if not calls:
                # Waiting is a decision too: there is nothing for the executor to carry out.
                break
            if inc.id in self._abandoned:
                return {"conversation": convo, "fallback": "abandoned", "decision": decision}
            fresh = self._view()
            moot = refusal(calls, fresh) if fresh is not None else None
            if moot is not None:
                # The world moved on while the coordinator decided (a low robot delivered its
                # load, a helper took other work): the executor's calls would only be refused,
                # and its round costs seconds the incident may not have. Straight to review.
                report = f"not carried out, the world moved on: {moot}"
                convo.append({"role": "executor", "phase": "report", "content": report})
            else:
                out, tried = self._act(inc, client, applied, calls, f"option {choice}.")
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
                    f"status {out.status}; tried: {', '.join(tried) or 'none'}; "
                    f"applied: {', '.join(applied) or 'none'}"
                )
                convo.append({"role": "executor", "phase": "report", "content": report})
                if out.finished and len(applied) >= len(calls) and not out.errors:
                    # Carried out cleanly: the coordinator's choice stands as its final word.
                    break
                if not out.finished and not applied:
                    fallback = f"executor {out.status}: {out.fallback_reason}"
                    break
            if rnd == self.max_rounds:
                fallback = None if applied else "round limit with no action applied"
                break
            view = fresh if moot is not None else self._view()
            if view is None:
                break
            options = feasible(rule_options(inc, view), view)
            self._reserve(inc, [c for opt in options for c in opt])
            choice, calls, said, undecided = self._choose(
                inc, client, options, view, "review", report
            )
            self._reserve(inc, calls)
            convo += said
            if undecided is not None:
                fallback = None if applied else f"review gave no decision ({undecided})"
                break
            if choice == RULES:
                fallback = "coordinator chose the rule handler"
                break
        return {
            "conversation": convo,
            "fallback": fallback,
            "applied": applied,
            "decision": decision,
        }

    def _act(
        self,
        inc: Incident,
        client: _DeskClient,
        applied: list[str],
        calls: list[Call],
        decision: str,
    ) -> tuple[Any, list[str]]:
        """The executor carries ``calls`` out through the tool loop; returns its outcome."""
        tried: list[str] = []
        wanted = "; ".join(_call_text(n, a) for n, a in calls)

        def all_tried() -> bool:
            return len(set(tried)) >= len(calls)

        def veto(action: Any) -> str | None:
            if isinstance(action, Finish) and not all_tried():
                return f"make the calls first: {wanted}"
            return None

        tools = {t.name: t for t in self._tools(inc, client, applied, calls, tried)}

        def args_schema(name: str) -> dict[str, Any]:
            # Each turn may name only the calls not tried yet: a small model otherwise repeats
            # the first of several (boost robot_3, robot_3, ...) until the loop guard bars it.
            left = [(n, a) for n, a in calls if _call_text(n, a) not in tried]
            allowed = _values(left, name) or _values(calls, name)
            return tools[name].narrowed(allowed).args_model.model_json_schema()

        loop = ToolLoop(
            client,
            list(tools.values()),
            system_prompt=EXECUTOR_PROMPT,
            budgets=Budgets(max_iter=self.max_iter, deadline_s=self._left(inc)),
            max_tokens=96,
            context=self._context(inc, "executor", "act"),
            loop_window=4,
            may_finish=all_tried,
            veto=veto,
            done=lambda: f"made {len(set(tried))} of {len(calls)} calls" if all_tried() else None,
            args_schema=args_schema,
        )
        # Short: the executor's tools are already narrowed to these calls, and every prompt
        # token costs the desk about 10 ms on one core.
        out = loop.run(
            f"Incident {inc.id} ({inc.kind}). Coordinator's decision: {decision}\n"
            f"Make these calls, then finish: {wanted}."
        )
        return out, tried


DeskFactory = Callable[[ChatClient], LLMDesk]
