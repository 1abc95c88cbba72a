"""The LLM task-queue planner: assignments straight from the model, validated, solver fallback.

``llm`` (:class:`LLMPlanner`): the open orders (notes included), each with its nearest idle
capable robots, go to the LLM runtime; the model answers with assignments in JSON,
schema-constrained where the backend allows (the schema enumerates the idle robot ids and open
order ids, at most one pair per order or robot, so constrained decoding cannot invent one). The
pairs are checked against the world (:func:`~fleetmind.dispatch.plans.validate`: a robot given
two tasks, an order given twice, a busy or broken robot, a missing capability); a pair that
cannot be applied is dropped (:func:`repair`) and the ``assignment`` planner plans what the
model left. A reply that does not parse is sent back once within the decision deadline; past
it, or past the re-ask budget, the solver's answer is used for that event and the fallback is
counted and recorded.

Deadline: :meth:`LLMPlanner.warm_up` makes one call on the first snapshot's prompt before the
run (it also puts the system prompt in the server's prompt cache) and sets the decision
deadline to :data:`WARMUP_FACTOR` times its latency (between :data:`MIN_DEADLINE_S` and
:data:`MAX_DEADLINE_S`) unless ``deadline_s`` is given; in a paced run the tick deadline follows
from it.

Two modes:

- ``background=False`` (sync runs, reproducible): each call asks the model and waits for it.
- ``background=True`` (async runs, what users run in real time): no order waits for the model.
  Each call answers at once with the solver's plan, and the model is asked about the same
  decision on a worker thread (one question at a time). Its answer re-plans (``has_news``): where
  it differs from the solver and the order is not loaded yet, the solver's choice is revoked and
  the model's applied. The decision deadline is measured in ticks (``deadline_ticks``: an answer
  later than that is dropped) as well as in seconds (the budgets' ``deadline_s``).

Either way a failed decision (network, HTTP 429/5xx, prose, invalid plan, deadline) is a counted
fallback, and the model is not asked again for a back-off window that doubles on each failure in a
row (``backoff_ticks`` up to ``backoff_max_ticks``, 4 times longer after a server error, the
longest at once after a hang, from the second in a row after a bad answer; the solver plans
meanwhile), so a broken server costs a bounded number of calls. At the end of a run
:meth:`LLMPlanner.abandon` stops a question in flight and reports what it cost so far.

The note-reading planner (``llm-notes``) is :mod:`fleetmind.dispatch.notes.planner`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import KW_ONLY, InitVar, dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from fleetmind.dispatch.planners import (
    ARBITRATION_BOOST,
    AssignmentPlanner,
    arbitrate_by_rule,
    priority_of,
)
from fleetmind.dispatch.plans import Assignment, Plan, PlanOutcome, Snapshot, validate
from fleetmind.llm.budgets import Budgets
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.llm.structured import StructuredOutcome, structured
from fleetmind.llm.usage import CallTally, TalliedClient
from fleetmind.sim.grid import GridMap

PROMPT_VERSION = "planner-v2"

SYSTEM = (
    "You dispatch warehouse robots. Give each open order to one idle robot that has the "
    "capability it needs; a robot takes at most one order. Read each note: it may name the "
    "only robot allowed or a robot to avoid. Prefer urgent orders and a near robot. "
    'Answer with JSON only: {"assignments": [{"robot": "robot_1", "order": "o3"}]}'
)
"""Short on purpose, and the same in every call: the embedded server keeps its state in the
prompt cache, so only the user part is read per call (about 100 tokens a second on one core)."""

NEAREST = 3
NO_DUE = 1 << 30
"""``Order.due`` of an order with no due tick."""
"""Idle robots listed per order (nearest first, by Manhattan distance to the pickup)."""
WARMUP_FACTOR = 3.0
"""The seconds deadline of a decision, in warm-up latencies (``deadline_s`` None)."""
MIN_DEADLINE_S = 2.0
MAX_DEADLINE_S = 20.0
WARMUP_CALLER = "dispatch.planner.warmup"
"""The caller of the warm-up call (left out of a run's answered rate)."""


def auto_deadline(warmup_s: float) -> float:
    """The decision deadline (seconds) from the latency of a warm-up call on the same prompt."""
    return min(MAX_DEADLINE_S, max(MIN_DEADLINE_S, WARMUP_FACTOR * warmup_s))


def _context(snapshot: Snapshot, decision_type: str) -> CallContext:
    """The recording context of one planner call about ``snapshot``."""
    return CallContext(
        caller="dispatch.planner",
        decision_type=decision_type,
        prompt_version=PROMPT_VERSION,
        seed=snapshot.seed,
        tick=snapshot.tick,
    )


def _reply_model(robot_ids: list[str], order_ids: list[str]) -> type[BaseModel]:
    """A pydantic model whose JSON schema enumerates the valid ids.

    At most one pair per order or robot (``maxItems``): with one open order the 135M model
    otherwise gave it to two robots, and repeated that after the veto's re-ask (4 of 4 vetoed
    replies of a 40-tick sync run, 2026-12-06). ``priority`` of planner-v1 replies is accepted
    and ignored (recordings replay).
    """
    robot_t: Any = Literal[tuple(robot_ids)] if robot_ids else str
    order_t: Any = Literal[tuple(order_ids)] if order_ids else str
    item = create_model(
        "LLMAssignment",
        __config__=ConfigDict(extra="ignore"),
        robot=(robot_t, ...),
        order=(order_t, ...),
    )
    most = max(1, min(len(robot_ids), len(order_ids)) if robot_ids and order_ids else 1)
    return create_model(
        "LLMPlan",
        __config__=ConfigDict(extra="forbid"),
        assignments=(list[item], Field(max_length=most)),
    )


def _order_line(o: Any, tick: int, idle: list[Any]) -> str:
    parts = [f"{o.id}: {o.priority}"]
    if o.due < NO_DUE:
        parts[0] += f", due in {o.due - tick} ticks"
    if o.capability:
        parts.append(f"needs {o.capability}")
    able = [r for r in idle if o.capability is None or o.capability in r.capabilities]
    near = sorted(
        able, key=lambda r: (abs(r.cell[0] - o.pickup[0]) + abs(r.cell[1] - o.pickup[1]), r.id)
    )[:NEAREST]
    if near:
        parts.append(
            "near: "
            + ", ".join(
                f"{r.id} ({abs(r.cell[0] - o.pickup[0]) + abs(r.cell[1] - o.pickup[1])})"
                for r in near
            )
        )
    else:
        parts.append("no idle robot can take it")
    if o.note:
        parts.append(f'note: "{o.note}"')
    return "; ".join(parts)


def repair(pairs: list[tuple[str, str]], snapshot: Snapshot) -> tuple[list[tuple[str, str]], int]:
    """The pairs that can be applied, in the model's order; and how many were dropped.

    A robot or order named again, and a pair :func:`validate` rejects, are dropped rather than
    sent back: a re-ask costs a whole call, and the small model repeated the same mistake
    after it. The solver plans what is left.
    """
    kept: list[tuple[str, str]] = []
    for pair in pairs:
        if not validate([*kept, pair], snapshot):
            kept.append(pair)
    return kept, len(pairs) - len(kept)


def _without(snapshot: Snapshot, chosen: Iterable[Assignment]) -> Snapshot:
    """``snapshot`` with the robots and orders of ``chosen`` taken (what the solver may plan)."""
    chosen = list(chosen)
    taken_robots = {a.robot for a in chosen}
    taken_orders = {a.order for a in chosen}
    return replace(
        snapshot,
        robots=tuple(
            replace(r, idle=False) if r.id in taken_robots else r for r in snapshot.robots
        ),
        orders=tuple(o for o in snapshot.orders if o.id not in taken_orders),
    )


@dataclass
class _Decision:
    """What the model decided for one snapshot (``assignments`` None: it failed)."""

    tick: int
    assignments: tuple[Assignment, ...] | None = None
    boosts: tuple[tuple[str, float], ...] = ()
    failure: str | None = None
    errors: tuple[str, ...] = ()


@dataclass
class _Question:
    """A question to the model in flight on a worker thread."""

    tick: int
    stop: threading.Event = field(default_factory=threading.Event)
    answer: _Decision | None = None
    counted: bool = False  # already counted as a late fallback

    @property
    def done(self) -> bool:
        return self.answer is not None


@dataclass(eq=False)
class LLMPlanner:
    """Assignments straight from the LLM, validated, with the solver as fallback.

    Args:
        client: the chat backend (record/replay/metering wrappers welcome).
        grid: the map (for the fallback solver).
        budgets: retry budgets (their ``deadline_s`` is replaced by the planner's own).
        deadline_s: seconds per decision (re-asks included); None: derived from a warm-up
            call (:meth:`warm_up`, :func:`auto_deadline`), :data:`MAX_DEADLINE_S` until then.
        max_orders: the most open orders shown per call (oldest and urgent first).
        max_tokens: completion cap per call.
        temperature: sampling temperature.
        background: answer each call at once with the solver's plan and ask the model on a
            worker thread (async runs); False: wait for the model (sync runs).
        deadline_ticks: in background mode, ticks after its snapshot past which the model's
            answer is dropped (counted as a fallback). None: derived from the seconds deadline
            and ``tick_period_s`` (2 ticks more, so that the seconds deadline ends a late call
            first), or no tick deadline in a run that is not paced.
        tick_period_s: the run's seconds per tick (0: not paced).
        end_tick: the run's last tick, if known: in a paced background run no question is
            started that the model's usual latency (the warm-up call's, then the median of its
            answers) would leave pending at the end, where it could only be abandoned.
        backoff_ticks: ticks the model is left alone after a failed decision; doubles with each
            failure in a row.
        backoff_max_ticks: the longest back-off window.
    """

    name = "llm"

    client: ChatClient
    grid: InitVar[GridMap]
    _: KW_ONLY
    budgets: Budgets | None = None
    deadline_s: float | None = None
    max_orders: int = 4
    max_tokens: int = 64
    temperature: float = 0.2
    background: bool = False
    deadline_ticks: int | None = 20
    tick_period_s: float = 0.0
    end_tick: int | None = None
    backoff_ticks: int = 10
    backoff_max_ticks: int = 320
    warmup_s: float | None = field(init=False, default=None)
    repaired: int = field(init=False, default=0)  # pairs dropped from the model's replies
    not_asked_at_end: int = field(init=False, default=0)  # questions the run's end ruled out
    _answer_s: list[float] = field(init=False, repr=False, default_factory=list)
    fallback: AssignmentPlanner = field(init=False, repr=False)
    _usage: CallTally = field(init=False, repr=False, default_factory=CallTally)
    # The run ended: no more calls.
    _stopped: threading.Event = field(init=False, repr=False, default_factory=threading.Event)
    _question: _Question | None = field(init=False, repr=False, default=None)
    _news: threading.Event = field(init=False, repr=False, default_factory=threading.Event)
    _failures: int = field(init=False, repr=False, default=0)  # failed decisions in a row
    _quiet_until: int = field(init=False, repr=False, default=-1)  # no model call before this tick

    def __post_init__(self, grid: GridMap) -> None:
        self.fallback = AssignmentPlanner(grid)
        if self.budgets is None:
            # No re-ask after a network error: the client has already retried it with back-off.
            self.budgets = Budgets(retries={"veto": 1, "parse": 1, "validation": 1, "network": 0})

    # ------------------------------------------------------------------ deadlines
    def decision_deadline_s(self) -> float:
        """Seconds a decision may take (re-asks included)."""
        return self.deadline_s if self.deadline_s is not None else MAX_DEADLINE_S

    def tick_deadline(self) -> int | None:
        """Ticks after its snapshot past which a background answer is dropped (None: never)."""
        if self.deadline_ticks is not None:
            return self.deadline_ticks
        if self.tick_period_s > 0:
            return math.ceil(self.decision_deadline_s() / self.tick_period_s) + 2
        return None

    def wanted(self, context: CallContext) -> bool:
        """Whether a reply to a call made with ``context`` is still wanted.

        It is while the run goes on and its question was not given up at the tick deadline.
        """
        if self._stopped.is_set():
            return False
        q = self._question
        return not (q is not None and q.tick == context.tick and q.stop.is_set())

    def _too_late(self, tick: int) -> bool:
        """Whether an answer asked for now would come after the run's end (paced runs)."""
        if self.end_tick is None or self.tick_period_s <= 0:
            return False
        recent = sorted(self._answer_s[-9:])
        usual = recent[len(recent) // 2] if recent else self.warmup_s
        if usual is None:
            return False
        return tick + math.ceil(usual / self.tick_period_s) >= self.end_tick

    def warm_up(self, snapshot: Snapshot) -> float | None:
        """One call on the prompt of ``snapshot``, before the run: its latency, in seconds.

        The call reads the system prompt into the server's prompt cache (a cold read is the
        slowest call of a run) and, when ``deadline_s`` is None, sets it from the latency
        measured (:func:`auto_deadline`). Its answer is not used. None: the call failed (the
        deadline stays :data:`MAX_DEADLINE_S`).
        """
        idle = snapshot.idle_robots
        orders = self._shown(snapshot)
        model = _reply_model([r.id for r in idle], [o.id for o in orders])
        out: StructuredOutcome[Any] = structured(
            self.client,
            self._messages(snapshot, orders),
            model,
            budgets=Budgets(
                retries={"parse": 0, "validation": 0, "network": 0},
                deadline_s=MAX_DEADLINE_S / 2,  # a hanging model holds up the run's start less
            ),
            context=replace(_context(snapshot, "warmup"), caller=WARMUP_CALLER),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        if not out.results:
            return None
        self.warmup_s = out.results[-1].latency_s
        if self.deadline_s is None:
            self.deadline_s = auto_deadline(self.warmup_s)
        return self.warmup_s

    # ------------------------------------------------------------------ back-off
    def _backing_off(self, tick: int) -> bool:
        return tick < self._quiet_until

    def _failed(self, tick: int, decision: _Decision | None = None) -> None:
        """Count a failed decision and open the back-off window (``decision`` None: late)."""
        self._failures += 1
        errors = decision.errors if decision is not None else ()
        hung = decision is not None and (decision.failure == "deadline" or "timeout" in errors)
        unwell = hung or "network" in errors or decision is None
        if not unwell and self._failures < 2:
            return  # one bad answer (prose, invalid plan): the next event asks again
        window = min(self.backoff_max_ticks, self.backoff_ticks * 2 ** (self._failures - 1))
        if hung:
            # A model that spent the whole seconds deadline (hung, or far too slow) costs a sync
            # run that deadline on every question: leave it alone for the longest window.
            window = self.backoff_max_ticks
        elif "network" in errors:
            # The server is unwell (5xx, 429, dropped) after the client's own retries: each
            # question costs seconds, so the window starts 4 times longer.
            window = min(self.backoff_max_ticks, 4 * window)
        self._quiet_until = tick + window

    def _succeeded(self) -> None:
        self._failures = 0
        self._quiet_until = -1

    def _shown(self, snapshot: Snapshot) -> list[Any]:
        """The open orders a call shows: urgent first, then the oldest."""
        return sorted(snapshot.orders, key=lambda o: (o.priority != "urgent", o.tick))[
            : self.max_orders
        ]

    def _messages(self, snapshot: Snapshot, orders: list[Any]) -> list[Message]:
        """System prompt and a short user part: per order, its nearest idle capable robots.

        No state description: the 135M model read 430-560-token prompts in 1.6-5.9 s a call
        (2-core machine, 2026-12-06); what it needs to choose is here in a few lines.
        """
        idle = snapshot.idle_robots
        robots = ", ".join(
            r.id + (f" ({','.join(sorted(r.capabilities))})" if r.capabilities else "")
            for r in idle
        )
        lines = "\n".join(_order_line(o, snapshot.tick, idle) for o in orders)
        user = f"Tick {snapshot.tick}. Idle robots: {robots}\nOpen orders:\n{lines}"
        return [Message.system(SYSTEM), Message.user(user)]

    def arbitrate(
        self, snapshot: Snapshot, client: ChatClient | None = None
    ) -> tuple[tuple[tuple[str, float], ...], StructuredOutcome[Any] | None]:
        """Ask the model which deadlocked robot goes first (rule-based when it cannot say)."""
        if len(snapshot.stuck) < 2:
            return (), None
        ids = list(snapshot.stuck)
        robots = {r.id: r for r in snapshot.robots}
        lines = "\n".join(
            f"{rid} at {robots[rid].cell}, "
            + ("carrying " if robots[rid].carrying else "")
            + (robots[rid].order or "no order")
            for rid in ids
            if rid in robots
        )
        first_t: Any = Literal[tuple(ids)]
        model = create_model(
            "Arbitration", __config__=ConfigDict(extra="forbid"), first=(first_t, ...)
        )
        out: StructuredOutcome[Any] = structured(
            client or self.client,
            [
                Message.system(
                    "Robots in a warehouse block each other. Pick the one that should move "
                    'first: prefer a loaded robot and an urgent order. JSON only: {"first": ID}'
                ),
                Message.user(lines),
            ],
            model,
            budgets=Budgets(retries={"parse": 1, "validation": 1}, deadline_s=5.0),
            context=_context(snapshot, "arbitrate"),
            temperature=0.0,
            max_tokens=24,
        )
        if out.value is None:
            return arbitrate_by_rule(snapshot), out
        return ((out.value.first, ARBITRATION_BOOST),), out

    def _decide(self, snapshot: Snapshot, stop: threading.Event) -> _Decision:
        """Ask the model (arbitration, then assignments) for one snapshot."""
        client = TalliedClient(self.client, self._usage, stop)
        boosts, arb = self.arbitrate(snapshot, client)
        arb_errors = tuple(arb.errors) if arb else ()
        if not snapshot.idle_robots or not snapshot.orders:
            # A deadlock report with nothing to assign: only the arbitration.
            return _Decision(snapshot.tick, (), boosts, errors=arb_errors)
        idle = snapshot.idle_robots
        orders = self._shown(snapshot)
        model = _reply_model([r.id for r in idle], [o.id for o in orders])
        assert self.budgets is not None
        outcome: StructuredOutcome[Any] = structured(
            client,
            self._messages(snapshot, orders),
            model,
            budgets=replace(self.budgets, deadline_s=self.decision_deadline_s()),
            context=_context(snapshot, "assign"),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        errors = (*outcome.errors, *arb_errors)
        if outcome.value is None:
            failure = outcome.fallback_reason or "no valid plan"
            return _Decision(snapshot.tick, None, boosts, failure=failure, errors=errors)
        by_id = {o.id: o for o in snapshot.orders}
        pairs, dropped = repair([(a.robot, a.order) for a in outcome.value.assignments], snapshot)
        self.repaired += dropped
        chosen = tuple(
            Assignment(robot, order, priority_of(by_id[order], snapshot.tick))
            for robot, order in pairs
        )
        return _Decision(snapshot.tick, chosen, boosts, errors=errors)

    def _outcome(
        self,
        plan: Plan,
        start: float,
        *,
        fallback: bool = False,
        failure: str | None = None,
        errors: tuple[str, ...] = (),
        abandoned: bool = False,
    ) -> PlanOutcome:
        spent = self._usage.abandon() if abandoned else self._usage.drain()
        return PlanOutcome(
            plan=plan,
            latency_s=time.perf_counter() - start,
            calls=spent.calls,
            tokens_prompt=spent.tokens_prompt,
            tokens_completion=spent.tokens_completion,
            calls_abandoned=spent.abandoned,
            fallback=fallback,
            failure=failure,
            errors=errors,
        )

    def _solver(self, snapshot: Snapshot, boosts: tuple[tuple[str, float], ...]) -> Plan:
        plan = self.fallback.solve(snapshot)
        return Plan(
            tick=plan.tick,
            assignments=plan.assignments,
            source="fallback:assignment",
            wake_at=plan.wake_at,
            boosts=boosts,
        )

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """Plan one event (see the module docstring for the two modes)."""
        if self.background:
            return self._plan_background(snapshot)
        start = time.perf_counter()
        if self._backing_off(snapshot.tick):
            plan = self._solver(snapshot, arbitrate_by_rule(snapshot))
            return self._outcome(plan, start, fallback=True, errors=("backoff",))
        decision = self._decide(snapshot, self._stopped)
        if decision.assignments is None:
            self._failed(snapshot.tick, decision)
            plan = self._solver(snapshot, decision.boosts)
            return self._outcome(
                plan, start, fallback=True, failure=decision.failure, errors=decision.errors
            )
        self._succeeded()
        # The solver plans what the model left (orders it did not give, pairs dropped).
        rest = _without(snapshot, decision.assignments)
        solved = self.fallback.solve(rest) if rest.idle_robots and rest.orders else None
        plan = Plan(
            tick=snapshot.tick,
            assignments=(*decision.assignments, *(solved.assignments if solved else ())),
            source=self.name,
            wake_at=solved.wake_at if solved else None,
            boosts=decision.boosts,
        )
        return self._outcome(plan, start, errors=decision.errors)

    # ------------------------------------------------------------------ background mode
    def has_news(self) -> bool:
        """Whether the model answered since the last plan (the loop re-plans)."""
        return self._news.is_set()

    def _ask(self, snapshot: Snapshot) -> None:
        question = _Question(snapshot.tick)
        self._question = question

        def work() -> None:
            t0 = time.perf_counter()
            try:
                question.answer = self._decide(snapshot, question.stop)
                if question.answer.assignments is not None:
                    self._answer_s.append(time.perf_counter() - t0)
            except Exception as exc:  # a model-side failure must not vanish with the thread
                question.answer = _Decision(snapshot.tick, failure=f"{type(exc).__name__}: {exc}")
            self._news.set()

        threading.Thread(target=work, name="llm-planner", daemon=True).start()

    def _override(
        self, decision: _Decision, snapshot: Snapshot
    ) -> tuple[list[Assignment], list[str]]:
        """The model's assignments still applicable now, and the solver choices they revoke."""
        robots = {r.id: r for r in snapshot.robots}
        orders = {o.id: o for o in (*snapshot.orders, *snapshot.tasks)}
        holders = {r.order: r for r in snapshot.robots if r.order is not None}
        chosen: list[Assignment] = []
        revoke: list[str] = []
        for a in decision.assignments or ():
            robot = robots.get(a.robot)
            order = orders.get(a.order)
            if robot is None or order is None or robot.broken or robot.carrying:
                continue  # gone, loaded or delivered since the model was asked
            if order.capability is not None and order.capability not in robot.capabilities:
                continue
            if robot.order == a.order:
                continue  # the solver chose the same
            holder = holders.get(a.order)
            if holder is not None and holder.carrying:
                continue
            if robot.order is not None:
                revoke.append(robot.order)  # the solver's choice for this robot
            if holder is not None:
                revoke.append(a.order)  # the robot the solver gave this order
            chosen.append(a)
        return chosen, revoke

    def _plan_background(self, snapshot: Snapshot) -> PlanOutcome:
        start = time.perf_counter()
        self._news.clear()
        tick = snapshot.tick
        fallback, failure = False, None
        errors: tuple[str, ...] = ()
        chosen: list[Assignment] = []
        revoke: list[str] = []
        boosts = arbitrate_by_rule(snapshot)
        question = self._question
        if question is not None and (question.done or self._stopped.is_set()):
            self._question = None
            answer = question.answer
            age = tick - question.tick
            if question.counted or answer is None:
                pass  # counted when it went late
            elif answer.assignments is None:
                fallback, failure, errors = True, answer.failure, answer.errors
                self._failed(tick, answer)
            elif (limit := self.tick_deadline()) is not None and age > limit:
                fallback, errors = True, answer.errors
                failure = f"deadline: answered {age} ticks after its snapshot"
                self._failed(tick)
            else:
                self._succeeded()
                chosen, revoke = self._override(answer, snapshot)
                boosts = answer.boosts or boosts
                errors = answer.errors
        elif (
            question is not None
            and not question.counted
            and (limit := self.tick_deadline()) is not None
            and tick - question.tick > limit
        ):
            # Late: the solver's plan stands; the question stops after the call in flight.
            question.counted = True
            question.stop.set()
            fallback = True
            failure = f"deadline: no answer within {limit} ticks"
            self._failed(tick)
        rest = _without(snapshot, chosen)
        solved = self.fallback.solve(rest)
        if self._question is None and not self._stopped.is_set():
            if rest.idle_robots and rest.orders and self._too_late(tick):
                self.not_asked_at_end += 1
            elif rest.idle_robots and rest.orders and not self._backing_off(tick):
                self._ask(rest)  # the same decision the solver just made, for the model to revise
            elif rest.idle_robots and rest.orders:
                errors = (*errors, "backoff")
        plan = Plan(
            tick=tick,
            assignments=(*chosen, *solved.assignments),
            source=self.name if chosen else "assignment",
            wake_at=solved.wake_at,
            boosts=boosts,
            revoke=tuple(dict.fromkeys(revoke)),
        )
        return self._outcome(plan, start, fallback=fallback, failure=failure, errors=errors)

    # ------------------------------------------------------------------ end of run
    def abandon(self) -> PlanOutcome:
        """Stop any question in flight; what it cost so far (``fallback``: one was in flight).

        The calls still running count in ``calls`` and ``calls_abandoned`` (their answer, if it
        ever comes, is not counted again).
        """
        self._stopped.set()
        question, self._question = self._question, None
        in_flight = question is not None and not question.counted
        if question is not None:
            question.stop.set()
        plan = Plan(tick=-1, assignments=(), source=self.name)
        failure = "run ended with the model's answer pending" if in_flight else None
        return self._outcome(
            plan, time.perf_counter(), fallback=in_flight, failure=failure, abandoned=True
        )

    def close(self) -> None:
        """Stop asking the model (never waits for a call in flight)."""
        self._stopped.set()
        if self._question is not None:
            self._question.stop.set()
