"""The error hierarchy shared by every tier.

This module sits below every package (it imports nothing of fleetmind), so any tier may raise
these. Errors name the file, line, column or field at fault in their message; :func:`read_input`
reads a user's input file (bounded, UTF-8) or raises one such error.
"""

from __future__ import annotations

import os


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


def range_message(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    below: float | None = None,
) -> str:
    """The one wording of a value outside its range, for every tier's errors.

    ``name must be at least LOW, got VALUE``, ``... at most HIGH ...`` or ``... between LOW and
    HIGH ...``; an open bound reads ``above LOW`` / ``below HIGH`` (``above 0 and at most 1``).
    The caller prefixes the file or command where that helps (``path: ...``).

    Args:
        name: the setting or field at fault, as the user wrote it.
        value: the value given.
        low: the smallest value allowed, if bounded below.
        high: the largest value allowed, if bounded above.
        above: the value must be greater than this (an open lower bound; not with ``low``).
        below: the value must be less than this (an open upper bound; not with ``high``).
    """
    if (low is not None and above is not None) or (high is not None and below is not None):
        raise ValueError("range_message takes one lower and one upper bound")
    if low is not None and high is not None:
        bound = f"between {low} and {high}"
    else:
        parts = [
            f"{word} {limit}"
            for word, limit in (
                ("at least", low),
                ("above", above),
                ("at most", high),
                ("below", below),
            )
            if limit is not None
        ]
        if not parts:
            raise ValueError("range_message needs low or high")
        bound = " and ".join(parts)
    return f"{name} must be {bound}, got {value}"


def check_range(
    name: str,
    value: float,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    below: float | None = None,
    error: type[FleetmindError] = ConfigError,
    where: str = "",
) -> None:
    """Raise one ``error`` in the house wording when ``value`` lies outside its range.

    The range is ``[low, high]``, with ``above`` / ``below`` for open bounds (``(0, 1]``:
    ``above=0, high=1``). A NaN lies outside every range.

    Args:
        name: the setting or field at fault.
        value: the value given.
        low: the smallest value allowed, if bounded below.
        high: the largest value allowed, if bounded above.
        above: the value must be greater than this, if bounded below by an open bound.
        below: the value must be less than this, if bounded above by an open bound.
        error: the error class to raise.
        where: a prefix naming the file, command or component (``"race"``, ``"map.json:3"``).

    Raises:
        FleetmindError: ``error`` with :func:`range_message`'s text, ``where: `` first.
    """
    inside = (
        (low is None or value >= low)
        and (high is None or value <= high)
        and (above is None or value > above)
        and (below is None or value < below)
    )
    if not inside:
        message = range_message(name, value, low=low, high=high, above=above, below=below)
        raise error(f"{where}: {message}" if where else message)


MAX_INPUT_BYTES = 64 * 1024 * 1024
"""The largest text input file fleetmind reads (task files, configs, recordings): 64 MiB."""


def read_input(
    path: str | os.PathLike[str],
    *,
    what: str,
    limit: int = MAX_INPUT_BYTES,
    error: type[FleetmindError] = ConfigError,
) -> str:
    """The text of a user's input file, or one ``error`` naming the file and what is wrong.

    Reads at most ``limit`` bytes (``/dev/zero`` or a huge file is refused, never loaded) and
    decodes UTF-8 (a BOM is dropped).

    Args:
        path: the file.
        what: what the file is, for the message (``"task file"``).
        limit: the most bytes accepted.
        error: the error class to raise.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except IsADirectoryError:
        raise error(f"{path}: cannot read {what} (is a folder)") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{path}: {what} larger than {limit // (1024 * 1024)} MiB; refused")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{path}:{line}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
            f"offset {exc.start})"
        ) from None
