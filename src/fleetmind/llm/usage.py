"""Usage accounting per decision type and per caller, with hard budget stops.

:class:`Usage` keeps calls, errors, tokens, latencies and (when prices are configured) cost, by
decision type and by caller key. :class:`MeteredClient` charges every call of an inner client to
it and raises :class:`~fleetmind.errors.BudgetExceeded` *before* a call that would pass a hard
limit (calls or tokens; global or per decision type). Token limits are checked against tokens
already spent, so the call that crosses the limit completes and the next one is refused.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetmind.llm.chat import (
    CallContext,
    ChatClient,
    ChatOptions,
    ChatResult,
    ChatWrapper,
    Message,
)
from fleetmind.llm.errors import BudgetExceeded, LLMConnectionError, LLMTimeoutError


@dataclass(frozen=True)
class UsageBudget:
    """Hard limits; None means unlimited.

    Attributes:
        max_calls: most calls.
        max_tokens: most tokens (prompt + completion).
    """

    max_calls: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Prices:
    """Prices in any currency per million tokens.

    Attributes:
        prompt_per_mtok: price of a million prompt tokens.
        completion_per_mtok: price of a million completion tokens.
    """

    prompt_per_mtok: float = 0.0
    completion_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Cost of a call."""
        return (
            prompt_tokens * self.prompt_per_mtok + completion_tokens * self.completion_per_mtok
        ) / 1e6


@dataclass
class _Tally:
    calls: int = 0
    errors: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def summary(self, prices: Prices | None) -> dict[str, Any]:
        lat = np.asarray(self.latencies, dtype=float) * 1000.0
        pct = (
            {f"p{q}": float(np.percentile(lat, q)) for q in (50, 95, 99)}
            if lat.size
            else {"p50": 0.0, "p95": 0.0, "p99": 0.0}
        )
        out: dict[str, Any] = {
            "calls": self.calls,
            "errors": self.errors,
            "cached": self.cached,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_ms": pct,
        }
        if prices is not None:
            out["cost"] = prices.cost(self.prompt_tokens, self.completion_tokens)
        return out


class Usage:
    """Usage accounting with hard stops.

    Args:
        budget: global limits.
        per_decision: limits per decision type.
        prices: when given, summaries include cost.
    """

    def __init__(
        self,
        budget: UsageBudget | None = None,
        *,
        per_decision: Mapping[str, UsageBudget] | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.budget = budget or UsageBudget()
        self.per_decision = dict(per_decision or {})
        self.prices = prices
        self._lock = threading.Lock()
        self._total = _Tally()
        self._by_decision: dict[str, _Tally] = defaultdict(_Tally)
        self._by_caller: dict[str, _Tally] = defaultdict(_Tally)

    def check(self, context: CallContext | None) -> None:
        """Raise before a call that a hard limit forbids.

        Args:
            context: the call's context (its decision type selects a per-decision budget).

        Raises:
            BudgetExceeded: naming the limit that stopped the call.
        """
        ctx = context or CallContext()
        with self._lock:
            _check(self.budget, self._total, "total")
            limit = self.per_decision.get(ctx.decision_type)
            if limit is not None:
                _check(limit, self._by_decision[ctx.decision_type], ctx.decision_type)

    def charge(
        self, context: CallContext | None, result: ChatResult | None, latency_s: float
    ) -> None:
        """Record a call (``result`` None for a failed call)."""
        ctx = context or CallContext()
        with self._lock:
            for tally in (
                self._total,
                self._by_decision[ctx.decision_type],
                self._by_caller[ctx.caller],
            ):
                tally.calls += 1
                tally.latencies.append(latency_s)
                if result is None:
                    tally.errors += 1
                else:
                    tally.cached += int(result.cached)
                    tally.prompt_tokens += result.usage.prompt_tokens
                    tally.completion_tokens += result.usage.completion_tokens

    @property
    def calls(self) -> int:
        """Calls so far."""
        return self._total.calls

    @property
    def tokens(self) -> int:
        """Tokens so far."""
        return self._total.tokens

    def report(self) -> dict[str, Any]:
        """Totals, per decision type and per caller (namespaced for metric files).

        Returns:
            ``{"total": {...}, "by_decision_type": {...}, "by_caller": {...}}``, each entry with
            calls, errors, cached, prompt/completion tokens, latency_ms p50/p95/p99 and cost
            when prices are set.
        """
        with self._lock:
            return {
                "total": self._total.summary(self.prices),
                "by_decision_type": {
                    k: v.summary(self.prices) for k, v in sorted(self._by_decision.items())
                },
                "by_caller": {
                    k: v.summary(self.prices) for k, v in sorted(self._by_caller.items())
                },
            }


def _check(limit: UsageBudget, tally: _Tally, name: str) -> None:
    if limit.max_calls is not None and tally.calls >= limit.max_calls:
        raise BudgetExceeded(f"llm call budget of {name} spent ({tally.calls}/{limit.max_calls})")
    if limit.max_tokens is not None and tally.tokens >= limit.max_tokens:
        raise BudgetExceeded(
            f"llm token budget of {name} spent ({tally.tokens}/{limit.max_tokens})"
        )


class MeteredClient(ChatWrapper):
    """A ChatClient that charges every call of an inner client to a :class:`Usage`.

    Args:
        inner: the backend.
        usage: the accounting (and its hard limits).
    """

    def __init__(self, inner: ChatClient, usage: Usage) -> None:
        super().__init__(inner)
        self.usage = usage

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Check the budget, call the inner client, charge the call.

        Raises:
            BudgetExceeded: a hard limit forbids the call (the inner client is not called).
            LLMConnectionError: re-raised from the inner client after charging it.
        """
        context = options.context
        self.usage.check(context)
        start = time.monotonic()
        try:
            result = options.send(self.inner, messages)
        except LLMConnectionError:
            self.usage.charge(context, None, time.monotonic() - start)
            raise
        self.usage.charge(context, result, result.latency_s)
        return result


@dataclass(frozen=True)
class CallCounts:
    """What a :class:`CallTally` counted.

    Attributes:
        calls: calls made (answered, failed on the network, or in flight when abandoned).
        tokens_prompt: prompt tokens of the answered calls.
        tokens_completion: completion tokens of the answered calls.
        abandoned: of ``calls``, those still in flight when the work was abandoned (no answer,
            tokens unknown).
    """

    calls: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    abandoned: int = 0


class CallTally:
    """Calls and tokens of one piece of work, including calls still in flight (thread-safe).

    A call counts when it ends (answered, or failed on the network: the server saw it). When
    the work is abandoned (:meth:`abandon`, e.g. the run ended), calls still in flight count
    then, as ``abandoned``, and their later end is ignored, so no call counts twice or never.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = [0, 0, 0]  # calls, prompt tokens, completion tokens
        self._open: set[int] = set()
        self._next = 0
        self.closed = False  # abandoned: no further calls

    def begin(self) -> int:
        """A call starts; the ticket to end it with."""
        with self._lock:
            self._next += 1
            self._open.add(self._next)
            return self._next

    def end(self, ticket: int, result: ChatResult | None, *, counted: bool = True) -> None:
        """A call ended (``result`` None: failed; ``counted`` False: it never reached a server)."""
        with self._lock:
            if ticket not in self._open:
                return  # counted when the work was abandoned
            self._open.discard(ticket)
            if counted:
                self._counts[0] += 1
            if result is not None:
                self._counts[1] += result.usage.prompt_tokens
                self._counts[2] += result.usage.completion_tokens

    @property
    def in_flight(self) -> int:
        """Calls started and not ended."""
        with self._lock:
            return len(self._open)

    def drain(self) -> CallCounts:
        """The calls ended since the last drain (calls in flight stay open)."""
        with self._lock:
            calls, prompt, completion = self._counts
            self._counts = [0, 0, 0]
        return CallCounts(calls, prompt, completion)

    def abandon(self) -> CallCounts:
        """Close the tally: the calls ended since the last drain plus those in flight now."""
        with self._lock:
            self.closed = True
            calls, prompt, completion = self._counts
            abandoned = len(self._open)
            self._counts = [0, 0, 0]
            self._open.clear()
        return CallCounts(calls + abandoned, prompt, completion, abandoned)


class TalliedClient(ChatWrapper):
    """A ChatClient that counts every call of an inner client into a :class:`CallTally`.

    Args:
        inner: the backend.
        tally: where calls count.
        stop: when set (or the tally is closed), further calls are refused.
    """

    def __init__(
        self, inner: ChatClient, tally: CallTally, stop: threading.Event | None = None
    ) -> None:
        super().__init__(inner)
        self.tally = tally
        self.stop = stop

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Call the inner client, counted.

        Raises:
            BudgetExceeded: the work was abandoned (late, or the run ended); nothing is called.
            LLMConnectionError: re-raised from the inner client after counting it.
        """
        if self.tally.closed or (self.stop is not None and self.stop.is_set()):
            raise BudgetExceeded("abandoned (late, or the run ended)")
        ticket = self.tally.begin()
        try:
            result = options.send(self.inner, messages)
        except LLMConnectionError:
            self.tally.end(ticket, None)
            raise
        except BaseException:
            self.tally.end(ticket, None, counted=False)
            raise
        self.tally.end(ticket, result)
        return result


CALL_OUTCOMES = ("answered", "timed_out", "failed", "abandoned")
"""What became of a model call (:class:`CallLedger`)."""


class CallLedger:
    """What became of every model call, per caller: answered, timed out, failed or abandoned.

    ``answered``: a reply came back within the call's time limit (the caller's deadline is
    that limit: :class:`~fleetmind.llm.budgets.Clock` caps each call by what is left of it)
    while its caller still wanted it; ``timed_out``: the limit passed first; ``failed``: any
    other error (HTTP, connection, an injected outage); ``abandoned``: the reply came after its
    caller had given up on it (a tick deadline passed, the rules took the incident over: see
    :meth:`watch`), or the call was still in flight when :meth:`close` was called (the run
    ended; whatever it does later is not counted). Latencies of answered calls are kept for
    percentiles. Thread-safe.
    """

    def __init__(self) -> None:
        self._wanted: dict[str, Callable[[CallContext], bool]] = {}
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}
        self._latency: list[float] = []
        self._open: dict[int, str] = {}
        self._next = 0
        self.closed = False

    def watch(self, caller: str, wanted: Callable[[CallContext], bool]) -> None:
        """Ask ``wanted(context)`` whether a reply of ``caller`` is still wanted when it comes."""
        self._wanted[caller] = wanted

    def still_wanted(self, context: CallContext | None) -> bool:
        """Whether the caller of ``context`` still wants its reply (True when not watched)."""
        if context is None:
            return True
        wanted = self._wanted.get(context.caller)
        return wanted is None or wanted(context)

    def begin(self, caller: str) -> int:
        """A call of ``caller`` starts; the ticket to end it with."""
        with self._lock:
            self._next += 1
            self._open[self._next] = caller
            return self._next

    def end(self, ticket: int, outcome: str, latency_s: float | None = None) -> None:
        """A call ended with ``outcome`` (one of :data:`CALL_OUTCOMES` but ``abandoned``)."""
        with self._lock:
            caller = self._open.pop(ticket, None)
            if caller is None or self.closed:
                return  # counted as abandoned when the ledger closed
            self._bump(caller, outcome)
            if outcome == "answered" and latency_s is not None:
                self._latency.append(latency_s)

    def _bump(self, caller: str, outcome: str) -> None:
        row = self._counts.setdefault(caller, dict.fromkeys(CALL_OUTCOMES, 0))
        row[outcome] += 1

    def close(self) -> None:
        """Count the calls still in flight as abandoned; later ends are ignored."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for caller in self._open.values():
                self._bump(caller, "abandoned")
            self._open.clear()

    def report(self, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """Totals, the answered rate, per-caller rows and answered latency percentiles (ms).

        Args:
            exclude: callers left out of the totals (still listed per caller), e.g. a warm-up.
        """
        with self._lock:
            rows = {c: dict(r) for c, r in sorted(self._counts.items())}
            lat = list(self._latency)
        total = dict.fromkeys(CALL_OUTCOMES, 0)
        for caller, row in rows.items():
            if caller in exclude:
                continue
            for k in CALL_OUTCOMES:
                total[k] += row[k]
        n = sum(total.values())
        ms = np.asarray(lat, dtype=np.float64) * 1e3
        return {
            **total,
            "calls": n,
            "answered_rate": total["answered"] / n if n else None,
            "by_caller": rows,
            "answered_latency_ms": {
                "p50": float(np.percentile(ms, 50)) if ms.size else None,
                "p95": float(np.percentile(ms, 95)) if ms.size else None,
                "max": float(ms.max()) if ms.size else None,
            },
        }


class LedgerClient(ChatWrapper):
    """A ChatClient that enters every call of an inner client in a :class:`CallLedger`.

    Args:
        inner: the backend.
        ledger: where outcomes count (by ``context.caller``).
    """

    def __init__(self, inner: ChatClient, ledger: CallLedger) -> None:
        super().__init__(inner)
        self.ledger = ledger

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Call the inner client and enter the outcome.

        Raises:
            LLMConnectionError: re-raised from the inner client after entering it.
        """
        caller = options.context.caller if options.context is not None else "default"
        ticket = self.ledger.begin(caller)
        start = time.monotonic()
        try:
            result = options.send(self.inner, messages)
        except LLMTimeoutError:
            self.ledger.end(ticket, "timed_out")
            raise
        except BaseException:  # HTTP, connection, an injected outage
            self.ledger.end(ticket, "failed")
            raise
        if self.ledger.still_wanted(options.context):
            self.ledger.end(ticket, "answered", time.monotonic() - start)
        else:
            self.ledger.end(ticket, "abandoned")
        return result
