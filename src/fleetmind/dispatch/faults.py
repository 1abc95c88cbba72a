"""Fault injection for the recovery-cost signal of FIELD-NOTES §6.

Faults are given as short specs (flags ``--fault``, repeatable, or a config list):

- ``breakdown:ROBOT@T+K``: robot ``ROBOT`` (id or index) stops at tick ``T`` for ``K`` ticks;
- ``llm-outage@T+K``: every LLM call for ticks ``T .. T+K-1`` fails as a connection error;
- ``malformed@T+K``: every LLM reply for ticks ``T .. T+K-1`` is garbage text;
- ``surge@T:N``: ``N`` extra orders arrive at tick ``T``.

The run records when each fault started and ended (events ``fault_start`` / ``fault_end``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from fleetmind.errors import ConfigError, LLMConnectionError
from fleetmind.llm.core import CallContext, ChatClient, ChatResult, Message

FaultKind = Literal["breakdown", "llm-outage", "malformed", "surge"]

_PATTERNS = {
    "breakdown": re.compile(r"^breakdown:(?P<robot>[\w-]+)@(?P<start>\d+)\+(?P<length>\d+)$"),
    "llm-outage": re.compile(r"^llm-outage@(?P<start>\d+)\+(?P<length>\d+)$"),
    "malformed": re.compile(r"^malformed@(?P<start>\d+)\+(?P<length>\d+)$"),
    "surge": re.compile(r"^surge@(?P<start>\d+):(?P<count>\d+)$"),
}


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Attributes:
        kind: ``breakdown``, ``llm-outage``, ``malformed`` or ``surge``.
        start: first tick.
        length: ticks it lasts (1 for a surge).
        robot: the robot of a breakdown.
        count: orders of a surge.
        spec: the text it was parsed from.
    """

    kind: FaultKind
    start: int
    length: int = 1
    robot: str | None = None
    count: int = 0
    spec: str = ""

    @property
    def end(self) -> int:
        """First tick after the fault."""
        return self.start + self.length

    def active(self, tick: int) -> bool:
        """Whether the fault is on at ``tick``."""
        return self.start <= tick < self.end


def parse_fault(spec: str) -> Fault:
    """Parse one fault spec (see the module docstring).

    Raises:
        ConfigError: naming the spec and the forms expected.
    """
    text = spec.strip()
    for kind, pattern in _PATTERNS.items():
        m = pattern.match(text)
        if m is None:
            continue
        start = int(m["start"])
        if kind == "surge":
            return Fault("surge", start, 1, count=int(m["count"]), spec=text)
        length = int(m["length"])
        if length < 1:
            raise ConfigError(f"fault {spec!r}: length must be at least 1 tick")
        robot = m.groupdict().get("robot")
        if robot is not None and robot.isdigit():
            robot = f"robot_{robot}"
        return Fault(kind, start, length, robot=robot, spec=text)  # type: ignore[arg-type]
    raise ConfigError(
        f"fault {spec!r}: expected breakdown:ROBOT@T+K, llm-outage@T+K, malformed@T+K or surge@T:N"
    )


class FaultyClient:
    """A ChatClient that fails or garbles calls whose tick falls in a fault window.

    The tick comes from the call's :class:`~fleetmind.llm.core.CallContext` (the snapshot tick).
    """

    def __init__(self, inner: ChatClient, faults: list[Fault]) -> None:
        self.inner = inner
        self.outages = [f for f in faults if f.kind == "llm-outage"]
        self.garbles = [f for f in faults if f.kind == "malformed"]

    @property
    def model(self) -> str:
        """The inner model name."""
        return self.inner.model

    def chat(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.2,
        max_tokens: int = 256,
        json_schema: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        context: CallContext | None = None,
    ) -> ChatResult:
        """Forward the call unless a fault window covers its tick."""
        tick = context.tick if context is not None and context.tick is not None else -1
        if any(f.active(tick) for f in self.outages):
            raise LLMConnectionError(f"injected LLM outage at tick {tick}")
        result = self.inner.chat(
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            json_schema=json_schema,
            timeout_s=timeout_s,
            context=context,
        )
        if any(f.active(tick) for f in self.garbles):
            return ChatResult(
                text='{"assignments": [ {robot: ??? ' + "#" * 20,
                usage=result.usage,
                latency_s=result.latency_s,
                model=result.model,
            )
        return result
