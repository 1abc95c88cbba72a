"""The LLM task-queue planner: assignments straight from the model, validated, solver fallback.

``llm`` (:class:`LLMPlanner`): the state description and the open orders, notes included, go to
the LLM runtime; the model answers with assignments in JSON, schema-constrained where the backend
allows (the schema enumerates the idle robot ids and open order ids, so constrained decoding cannot
invent one). The plan is checked against the world (:func:`~fleetmind.dispatch.plans.validate`:
unknown ids, a robot given two tasks, an order given twice, a busy or broken robot, a missing
capability); a rejected plan goes back to the model with the reasons (the runtime's veto hook)
within its budget. When the budget or the decision deadline runs out, the ``assignment`` planner's
answer is used for that event and the fallback is counted and recorded.

The note-reading planner (``llm-notes``) is :mod:`fleetmind.dispatch.notes.planner`.
"""

from __future__ import annotations

import time
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
from fleetmind.llm.core import CallContext, ChatClient, Message
from fleetmind.llm.structured import StructuredOutcome, structured
from fleetmind.sim.grid import GridMap

PROMPT_VERSION = "planner-v1"

SYSTEM = (
    "You dispatch warehouse robots. Give open orders to idle robots. "
    "Rules: only idle robots; each robot at most one order; each order at most once; a robot "
    "must have the capability an order needs; read each note: it may name the only robot "
    "allowed, a deadline, or a tick before which the load must not be picked up. Prefer urgent "
    "and old orders and the nearest robot. "
    'Answer with JSON only: {"assignments": [{"robot": "robot_1", "order": "o3", "priority": 1}]}'
)


def _reply_model(robot_ids: list[str], order_ids: list[str]) -> type[BaseModel]:
    """A pydantic model whose JSON schema enumerates the valid ids."""
    robot_t: Any = Literal[tuple(robot_ids)] if robot_ids else str
    order_t: Any = Literal[tuple(order_ids)] if order_ids else str
    item = create_model(
        "LLMAssignment",
        __config__=ConfigDict(extra="forbid"),
        robot=(robot_t, ...),
        order=(order_t, ...),
        priority=(int, Field(default=0, ge=0, le=9)),
    )
    return create_model(
        "LLMPlan",
        __config__=ConfigDict(extra="forbid"),
        assignments=(list[item], Field(max_length=max(1, len(robot_ids)))),
    )


def _order_line(o: Any, tick: int) -> str:
    parts = [f"{o.id}: {o.priority}, due in {o.due - tick} ticks"]
    if o.capability:
        parts.append(f"needs {o.capability}")
    if o.note:
        parts.append(f'note: "{o.note}"')
    return "; ".join(parts)


class LLMPlanner:
    """Assignments straight from the LLM, validated, with the solver as fallback.

    Args:
        client: the chat backend (record/replay/metering wrappers welcome).
        grid: the map (for the fallback solver).
        budgets: retry budgets and the decision deadline.
        max_orders: the most open orders shown per call (oldest and urgent first).
        max_tokens: completion cap per call.
        temperature: sampling temperature.
    """

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        grid: GridMap,
        *,
        budgets: Budgets | None = None,
        max_orders: int = 8,
        max_tokens: int = 160,
        temperature: float = 0.2,
    ) -> None:
        self.client = client
        self.fallback = AssignmentPlanner(grid)
        self.budgets = budgets or Budgets(
            retries={"veto": 1, "parse": 1, "validation": 1}, deadline_s=20.0
        )
        self.max_orders = max_orders
        self.max_tokens = max_tokens
        self.temperature = temperature

    def _messages(self, snapshot: Snapshot, orders: list[Any]) -> list[Message]:
        idle = ", ".join(
            f"{r.id} at {r.cell}"
            + (f" caps={','.join(sorted(r.capabilities))}" if r.capabilities else "")
            for r in snapshot.idle_robots
        )
        lines = "\n".join(_order_line(o, snapshot.tick) for o in orders)
        user = f"{snapshot.text}\n\nIdle robots: {idle}\nOpen orders:\n{lines}\nAssign now."
        return [Message.system(SYSTEM), Message.user(user)]

    def arbitrate(
        self, snapshot: Snapshot
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
            self.client,
            [
                Message.system(
                    "Robots in a warehouse block each other. Pick the one that should move "
                    'first: prefer a loaded robot and an urgent order. JSON only: {"first": ID}'
                ),
                Message.user(lines),
            ],
            model,
            budgets=Budgets(retries={"parse": 1, "validation": 1}, deadline_s=5.0),
            context=CallContext(
                caller="dispatch.planner",
                decision_type="arbitrate",
                prompt_version=PROMPT_VERSION,
                seed=snapshot.seed,
                tick=snapshot.tick,
            ),
            temperature=0.0,
            max_tokens=24,
        )
        if out.value is None:
            return arbitrate_by_rule(snapshot), out
        return ((out.value.first, ARBITRATION_BOOST),), out

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """Ask the model; fall back to the solver when it cannot produce a valid plan."""
        start = time.perf_counter()
        boosts, arb = self.arbitrate(snapshot)
        if not snapshot.idle_robots or not snapshot.orders:
            # A deadlock report with nothing to assign: only the arbitration.
            return PlanOutcome(
                plan=Plan(tick=snapshot.tick, assignments=(), source=self.name, boosts=boosts),
                latency_s=time.perf_counter() - start,
                calls=arb.attempts if arb else 0,
                tokens_prompt=sum(r.usage.prompt_tokens for r in arb.results) if arb else 0,
                tokens_completion=sum(r.usage.completion_tokens for r in arb.results) if arb else 0,
                errors=tuple(arb.errors) if arb else (),
            )
        idle = snapshot.idle_robots
        orders = sorted(snapshot.orders, key=lambda o: (o.priority != "urgent", o.tick))[
            : self.max_orders
        ]
        model = _reply_model([r.id for r in idle], [o.id for o in orders])

        def veto(value: Any) -> str | None:
            pairs = [(a.robot, a.order) for a in value.assignments]
            reasons = validate(pairs, snapshot)
            if not pairs and idle and orders:
                reasons.append("assignments: empty, but there are idle robots and open orders")
            return "; ".join(reasons[:4]) or None

        outcome: StructuredOutcome[Any] = structured(
            self.client,
            self._messages(snapshot, orders),
            model,
            veto=veto,
            budgets=self.budgets,
            context=CallContext(
                caller="dispatch.planner",
                decision_type="assign",
                prompt_version=PROMPT_VERSION,
                seed=snapshot.seed,
                tick=snapshot.tick,
            ),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        spent = [*outcome.results, *(arb.results if arb else [])]
        tokens_p = sum(r.usage.prompt_tokens for r in spent)
        tokens_c = sum(r.usage.completion_tokens for r in spent)
        by_id = {o.id: o for o in snapshot.orders}
        if outcome.value is not None:
            chosen = tuple(
                Assignment(
                    a.robot, a.order, priority_of(by_id[a.order], snapshot.tick) + a.priority / 10
                )
                for a in outcome.value.assignments
            )
            plan = Plan(tick=snapshot.tick, assignments=chosen, source=self.name, boosts=boosts)
            fallback, failure = False, None
        else:
            plan = self.fallback.solve(snapshot)
            plan = Plan(
                tick=plan.tick,
                assignments=plan.assignments,
                source="fallback:assignment",
                wake_at=plan.wake_at,
                boosts=boosts,
            )
            fallback, failure = True, outcome.fallback_reason or "no valid plan"
        return PlanOutcome(
            plan=plan,
            latency_s=time.perf_counter() - start,
            calls=outcome.attempts + (arb.attempts if arb else 0),
            tokens_prompt=tokens_p,
            tokens_completion=tokens_c,
            fallback=fallback,
            failure=failure,
            errors=tuple(outcome.errors),
        )
