"""Errors raised by the LLM runtime.

Every class here derives from the shared hierarchy in :mod:`fleetmind.errors`, so callers may
catch ``LLMConnectionError`` or ``FleetmindError`` without importing this module.
"""

from __future__ import annotations

from fleetmind.errors import BudgetExceeded, FleetmindError, LLMConnectionError, ModelOutputError

__all__ = [
    "ActionParseError",
    "BudgetExceeded",
    "LLMConnectionError",
    "LLMHTTPError",
    "LLMTimeoutError",
    "ReplayMiss",
]


class LLMHTTPError(LLMConnectionError):
    """The server answered with an HTTP error status.

    Attributes:
        status_code: the HTTP status of the last attempt.
        retryable: whether the status is one the client retries (429 and 5xx).
    """

    def __init__(self, message: str, *, status_code: int) -> None:
        self.status_code = status_code
        self.retryable = status_code == 429 or status_code >= 500
        super().__init__(message)


class LLMTimeoutError(LLMConnectionError):
    """The call did not complete within its time limit."""


class ReplayMiss(FleetmindError):
    """A strict replay was asked for a request that was never recorded."""


class ActionParseError(ModelOutputError):
    """A model reply could not be turned into an action or a structured value.

    Attributes:
        kind: ``"empty"``, ``"parse"`` (not JSON, even after repair), or ``"validation"``
            (JSON of the wrong shape).
        summary: a short, model-facing description of what is wrong (field, expected, got).
    """

    def __init__(self, kind: str, summary: str) -> None:
        self.kind = kind
        self.summary = summary
        super().__init__(f"{kind}: {summary}")
