"""Retry budgets per error kind, kept apart from iteration counts, and a wall-clock deadline."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

ErrorKind = Literal[
    "empty",
    "parse",
    "validation",
    "unknown_tool",
    "tool_error",
    "veto",
    "loop",
    "network",
    "timeout",
]
"""What went wrong with one model turn. Each kind has its own retry budget."""

ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)

DEFAULT_RETRIES: Mapping[ErrorKind, int] = {
    "empty": 2,
    "parse": 2,
    "validation": 2,
    "unknown_tool": 2,
    "tool_error": 2,
    "veto": 2,
    "loop": 2,
    "network": 1,
    "timeout": 0,
}


@dataclass(frozen=True)
class Budgets:
    """Limits of one structured call or tool-loop run.

    Attributes:
        retries: re-asks allowed per error kind (missing kinds use :data:`DEFAULT_RETRIES`).
            For ``tool_error`` the count is per tool: past it the tool is barred.
        deadline_s: wall-clock seconds for the whole run (None: no deadline).
        max_iter: model turns of a tool loop (ignored by :func:`structured`).
        call_timeout_s: time limit of a single model call (capped by the deadline).
    """

    retries: Mapping[ErrorKind, int] = field(default_factory=dict)
    deadline_s: float | None = None
    max_iter: int = 5
    call_timeout_s: float | None = None

    def allowed(self, kind: ErrorKind) -> int:
        """Re-asks allowed for an error kind."""
        return self.retries.get(kind, DEFAULT_RETRIES[kind])


class Clock:
    """A deadline measured on ``time.monotonic``.

    Args:
        deadline_s: seconds from now, or None for no deadline.
    """

    def __init__(self, deadline_s: float | None) -> None:
        self.start = time.monotonic()
        self.deadline = None if deadline_s is None else self.start + deadline_s

    def remaining(self) -> float | None:
        """Seconds left (may be negative), or None without a deadline."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def expired(self) -> bool:
        """True when the deadline has passed."""
        left = self.remaining()
        return left is not None and left <= 0

    def elapsed(self) -> float:
        """Seconds since the clock started."""
        return time.monotonic() - self.start

    def call_timeout(self, per_call: float | None) -> float | None:
        """Time limit of the next call: the per-call limit capped by what is left."""
        left = self.remaining()
        if left is None:
            return per_call
        return left if per_call is None else min(per_call, left)
