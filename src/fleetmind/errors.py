"""The error hierarchy shared by every tier.

This module sits below every package (it imports nothing of fleetmind), so any tier may raise
these. Errors name the file, line, column or field at fault in their message.
"""

from __future__ import annotations


class FleetmindError(Exception):
    """Base class of every error fleetmind raises on purpose."""


class ConfigError(FleetmindError):
    """A configuration value, flag or config file is wrong."""


class MapError(FleetmindError):
    """A map could not be parsed or is unusable.

    Attributes:
        source: the file path or a short name of the map text.
        line: 1-based line number at fault, if known.
        column: 1-based column at fault, if known.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str = "<map>",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.source = source
        self.line = line
        self.column = column
        where = source
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")


class TaskFileError(FleetmindError):
    """An order/task file could not be parsed."""


class ModelOutputError(FleetmindError):
    """A model's output could not be turned into a valid action."""


class BudgetExceeded(FleetmindError):
    """A call, token, retry or time budget ran out."""


class LLMConnectionError(FleetmindError):
    """The LLM backend could not be reached or answered with an error."""
