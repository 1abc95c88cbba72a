"""Fault injection for the recovery-cost signal of FIELD-NOTES §6.

Faults are given as short specs (flags ``--fault``, repeatable, or a config list):

- ``breakdown:ROBOT@T+K``: robot ``ROBOT`` (id or index) stops at tick ``T`` for ``K`` ticks;
- ``llm-outage@T+K``: every LLM call for ticks ``T .. T+K-1`` fails as a connection error;
- ``malformed@T+K``: every LLM reply for ticks ``T .. T+K-1`` is garbage text;
- ``surge@T:N``: ``N`` extra orders arrive at tick ``T`` (at most :data:`MAX_SURGE`: a larger
  surge is cut to it, the cut recorded in the ``fault_start`` event and the run's ``faults``).

Ticks and lengths are at most :data:`MAX_TICKS`. :func:`check_faults` checks every fault against
the world before tick 0 (a breakdown names a robot of the fleet) and says which faults cannot
happen in the run. The run records when each fault started and ended (events ``fault_start`` /
``fault_end``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fleetmind.errors import ConfigError, LLMConnectionError
from fleetmind.llm.chat import CallContext, ChatClient, ChatResult, Message

log = logging.getLogger(__name__)

MAX_TICKS = 10**9
"""The largest tick or length a fault spec may give (larger ones are refused)."""
MAX_SURGE = 1000
"""The most orders one surge injects (a larger surge is cut to this, and the cut recorded)."""

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
        count: orders of a surge (after the cut to :data:`MAX_SURGE`).
        spec: the text it was parsed from.
        cut: orders of a surge dropped by the cut (0 if none).
    """

    kind: FaultKind
    start: int
    length: int = 1
    robot: str | None = None
    count: int = 0
    spec: str = ""
    cut: int = 0

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
        ConfigError: naming ``--fault``, the spec and the forms expected, or the number out of
            range.
    """
    text = spec.strip()
    for kind, pattern in _PATTERNS.items():
        m = pattern.match(text)
        if m is None:
            continue
        numbers = {k: v for k, v in m.groupdict().items() if k != "robot"}
        for name, digits in numbers.items():
            # Check the digits before int(): a 10,000-digit number is slow to convert.
            if len(digits) > 10 or int(digits) > MAX_TICKS:
                raise ConfigError(
                    f"--fault {spec!r}: {name} {digits[:20]}{'...' if len(digits) > 20 else ''}"
                    f" is too large (at most {MAX_TICKS:,})"
                )
        start = int(m["start"])
        if kind == "surge":
            asked = int(m["count"])
            count = min(asked, MAX_SURGE)
            if asked > count:
                log.warning(
                    "--fault %r: a surge injects at most %d orders; %d cut",
                    text,
                    MAX_SURGE,
                    asked - count,
                )
            return Fault("surge", start, 1, count=count, spec=text, cut=asked - count)
        length = int(m["length"])
        if length < 1:
            raise ConfigError(f"--fault {spec!r}: length must be at least 1 tick")
        robot = m.groupdict().get("robot")
        if robot is not None and robot.isdigit():
            robot = f"robot_{robot}"
        return Fault(kind, start, length, robot=robot, spec=text)  # type: ignore[arg-type]
    raise ConfigError(
        f"--fault {spec!r}: expected breakdown:ROBOT@T+K, llm-outage@T+K, malformed@T+K or "
        "surge@T:N"
    )


def check_faults(
    faults: Sequence[Fault], *, robots: Sequence[str], steps: int, uses_llm: bool
) -> list[str]:
    """Check faults against the world before tick 0; returns warnings (also logged).

    Args:
        faults: the parsed faults.
        robots: the fleet's robot ids.
        steps: ticks of the run.
        uses_llm: whether a tier calls an LLM (LLM faults do nothing otherwise).

    Raises:
        ConfigError: a breakdown names a robot that is not in the fleet (names ``--fault``).
    """
    warnings: list[str] = []
    for f in faults:
        if f.kind == "breakdown" and f.robot not in robots:
            last = f"robot_0..{robots[-1]}" if robots else "no robots"
            raise ConfigError(
                f"--fault {f.spec!r}: no robot {f.robot!r} in a fleet of {len(robots)} ({last})"
            )
        if f.start >= steps:
            warnings.append(
                f"--fault {f.spec!r}: starts at tick {f.start}, after the run's last "
                f"tick ({steps - 1}): it never happens"
            )
        elif f.kind in ("llm-outage", "malformed") and not uses_llm:
            warnings.append(
                f"--fault {f.spec!r}: no tier of this run calls an LLM: it does nothing"
            )
    for w in warnings:
        log.warning("%s", w)
    return warnings


class FaultyClient:
    """A ChatClient that fails or garbles calls whose tick falls in a fault window.

    The tick comes from the call's :class:`~fleetmind.llm.chat.CallContext` (the snapshot tick).
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
