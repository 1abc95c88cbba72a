"""The note language: constraints that live only in an order's free-text note.

A note carries zero or more :class:`Constraint`:

- ``only_robot`` (``robot``): only that robot may serve the order;
- ``not_robot`` (``robot``): that robot must not serve it;
- ``deadline`` (``tick``): deliver strictly before that tick;
- ``hold`` (``tick``): do not pick up before that tick.

Relative times ("ship inside the next 25 ticks") resolve against the order's arrival tick. The
ground truth of every generated note is kept on the order (``Order.constraints``) so a run can
score it; planners that read only structured fields never see it.

Labelled sets (hand-written, in ``tests/data/notes/``) hold one JSON object a line:
``{"note", "arrival_tick", "robots", "lang", "constraints"}``; :func:`load_labelled` reads them.

Notes are written by :class:`fleetmind.sim.notewriter.NoteWriter`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from fleetmind.sim.jsonl import read_jsonl

ConstraintKind = Literal["only_robot", "not_robot", "deadline", "hold"]
KINDS: tuple[ConstraintKind, ...] = get_args(ConstraintKind)
ROBOT_KINDS = ("only_robot", "not_robot")
TICK_KINDS = ("deadline", "hold")
Lang = Literal["en", "zh"]


@dataclass(frozen=True, order=True)
class Constraint:
    """One constraint a note states.

    Attributes:
        kind: ``only_robot``, ``not_robot``, ``deadline`` or ``hold``.
        robot: for the robot kinds: the robot id (``robot_3``).
        tick: for ``deadline``: deliver strictly before this tick; for ``hold``: do not pick up
            before this tick (absolute ticks: relative times are already resolved).
    """

    kind: ConstraintKind
    robot: str | None = None
    tick: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The label-format object ``{"kind", "robot", "tick"}``."""
        return {"kind": self.kind, "robot": self.robot, "tick": self.tick}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Constraint:
        """Parse one label-format object (validated by :class:`ConstraintModel`)."""
        m = ConstraintModel.model_validate(data)
        return Constraint(m.kind, robot=m.robot, tick=m.tick)


class ConstraintModel(BaseModel):
    """The wire form of a constraint (task files, labelled sets, reader output)."""

    model_config = ConfigDict(extra="forbid")
    kind: ConstraintKind
    robot: str | None = None
    tick: int | None = None


def canonical(constraints: Iterable[Constraint]) -> tuple[Constraint, ...]:
    """A constraint set in canonical form: duplicates dropped, sorted (for exact matching)."""
    return tuple(sorted(set(constraints)))


def broken_by(
    constraints: Sequence[Constraint],
    *,
    robot: str | None,
    picked_tick: int,
    delivered_tick: int,
    now: int,
) -> bool:
    """Whether what happened to an order broke (or made impossible) one of its constraints.

    Args:
        constraints: the order's ground-truth constraints.
        robot: the robot that loaded it (None if never loaded).
        picked_tick: the tick it was loaded (-1: not loaded).
        delivered_tick: the tick it was delivered (-1: not delivered).
        now: the current tick (an undelivered order whose deadline has passed is broken).
    """
    for c in constraints:
        if c.kind == "only_robot" and robot is not None and robot != c.robot:
            return True
        if c.kind == "not_robot" and robot is not None and robot == c.robot:
            return True
        if c.kind == "hold" and c.tick is not None and 0 <= picked_tick < c.tick:
            return True
        if (
            c.kind == "deadline"
            and c.tick is not None
            and (delivered_tick >= c.tick or (delivered_tick < 0 and now >= c.tick))
        ):
            return True
    return False


class LabelledNote(BaseModel):
    """One line of a labelled note set."""

    model_config = ConfigDict(extra="forbid")
    note: str
    arrival_tick: int = Field(ge=0)
    robots: list[str]
    lang: Lang
    constraints: list[ConstraintModel]

    def truth(self) -> tuple[Constraint, ...]:
        """The labelled constraints in canonical form."""
        return canonical(Constraint(c.kind, robot=c.robot, tick=c.tick) for c in self.constraints)


class NoteInput(BaseModel):
    """One input line of ``fleetmind notes read``: other fields are ignored."""

    model_config = ConfigDict(extra="ignore")
    note: str
    arrival_tick: int = Field(0, ge=0)
    robots: list[str] = Field(default_factory=list)


def load_labelled(path: str | Path) -> list[LabelledNote]:
    """Read a labelled note set (one JSON object a line; ``#`` lines are comments).

    Raises:
        TaskFileError: naming the file, line and field at fault.
    """
    return [item for _, item in read_jsonl(path, LabelledNote, what="note file")]


def load_inputs(path: str | Path) -> list[NoteInput]:
    """Read ``notes read`` input lines (``note``, ``arrival_tick``, ``robots``).

    Raises:
        TaskFileError: naming the file, line and field at fault.
    """
    return [item for _, item in read_jsonl(path, NoteInput, what="note file")]
