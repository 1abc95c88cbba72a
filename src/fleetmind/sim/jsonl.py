"""JSON-lines input files validated line by line: task files, labelled note sets, note inputs."""

from __future__ import annotations

import json
import os
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from fleetmind.errors import FleetmindError, TaskFileError, read_input

T = TypeVar("T", bound=BaseModel)


def read_jsonl(
    path: str | os.PathLike[str],
    model: type[T],
    *,
    what: str,
    error: type[FleetmindError] = TaskFileError,
) -> list[tuple[int, T]]:
    """Every non-empty, non-``#`` line of a JSON-lines file, validated, with its line number.

    Args:
        path: the file.
        model: the pydantic model each line must match.
        what: what the file is, for messages (``"task file"``).
        error: the error class to raise.

    Raises:
        FleetmindError: (``error``) one line naming the file, line and field at fault.
    """
    text = read_input(path, what=what, error=error)
    out: list[tuple[int, T]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.append((lineno, model.model_validate(json.loads(line))))
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise error(f"{path}:{lineno}: JSON nested too deeply") from None
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "<line>"
            raise error(f"{path}:{lineno}: field {field!r}: {err['msg']}") from None
    return out
