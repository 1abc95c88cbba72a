"""What every note reader answers, and the readers that need no model.

:class:`Reading` (constraints and a status), the :class:`NoteReader` protocol, the grounding
and consistency checks every reader's constraints pass, the rules' judgement of each extracted
mention (:func:`judge`), and the two readers with no model: ``template`` (three regular
expressions) and ``rules`` (:class:`RulesReader`). The model readers are in
:mod:`~fleetmind.dispatch.notes.readers` (``llm``) and :mod:`~fleetmind.dispatch.notes.additive`
(``rules+llm``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from fleetmind.dispatch.notes import rules
from fleetmind.dispatch.notes.text import (
    Candidates,
    RobotMention,
    TimeMention,
    extract,
    numbers_in,
    warm,
)
from fleetmind.sim.notes import Constraint, canonical

Status = Literal["ok", "needs_review"]
MAX_HORIZON = 100_000
"""Ticks after arrival beyond which a note's time is implausible (sent to review)."""


@dataclass(frozen=True)
class Reading:
    """What a reader made of one note.

    Attributes:
        constraints: the constraints, canonical order (empty when ``needs_review``).
        status: ``ok`` or ``needs_review``.
        reason: why the note needs review (None when ``ok``).
        latency_ms: wall-clock milliseconds of the reading.
        calls: model calls made.
        tokens_prompt: prompt tokens used.
        tokens_completion: completion tokens used.
        cached: answered from the note cache.
        errors: model error kinds met on the way.
        unreadable: why the model could not read the note (network, timeout, budget), when the
            reader's fallback (the cue rules) answered instead; counted as ``notes_unreadable``.
        questions: closed questions put to the model (``rules+llm``).
        answered: of those, answered before their deadline.
        timed_out: of those, not answered in time (or the server unreachable).
        added: constraints the model added to the rules' reading.
    """

    constraints: tuple[Constraint, ...]
    status: Status = "ok"
    reason: str | None = None
    latency_ms: float = 0.0
    calls: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    cached: bool = False
    errors: tuple[str, ...] = ()
    unreadable: str | None = None
    questions: int = 0
    answered: int = 0
    timed_out: int = 0
    added: int = 0

    def as_line(self) -> dict[str, Any]:
        """The ``notes read`` output line."""
        return {
            "constraints": [c.as_dict() for c in self.constraints],
            "status": self.status,
            "latency_ms": round(self.latency_ms, 3),
        }


class NoteReader(Protocol):
    """Turns a note into constraints."""

    name: str

    def read(self, note: str, *, arrival_tick: int, robots: Sequence[str]) -> Reading:
        """Read one note of an order that arrived at ``arrival_tick``, for this fleet."""
        ...

    def needs_model(self, note: str, robots: Sequence[str]) -> bool:
        """Whether reading ``note`` may call a model (slow); False: it answers at once."""
        ...


def review(reason: str, **usage: Any) -> Reading:
    """A ``needs_review`` reading (no constraints)."""
    return Reading((), "needs_review", reason, **usage)


def ground(c: Constraint, note: str, arrival_tick: int, robots: Sequence[str]) -> str | None:
    """Why ``c`` cannot be traced to ``note`` (None when it can).

    A robot must be a fleet id whose number the note states; a tick must be a number the note
    states (in any form) or the arrival tick plus one.
    """
    numbers = numbers_in(note)
    if c.robot is not None:
        if c.robot not in robots:
            return f"robot {c.robot!r} is not in the fleet"
        if int(c.robot.rsplit("_", 1)[-1]) not in numbers:
            return f"robot {c.robot!r} is not named in the note"
    if c.tick is not None and c.tick not in numbers and c.tick - arrival_tick not in numbers:
        return f"tick {c.tick} is neither stated nor arrival {arrival_tick} plus a stated duration"
    if c.kind in ("deadline", "hold") and c.tick is None:
        return f"{c.kind} without a tick"
    if c.kind in ("only_robot", "not_robot") and c.robot is None:
        return f"{c.kind} without a robot"
    return None


def consistent(constraints: Sequence[Constraint], arrival_tick: int) -> str | None:
    """Why a set of constraints cannot all hold (None when it can)."""
    only = {c.robot for c in constraints if c.kind == "only_robot"}
    nots = {c.robot for c in constraints if c.kind == "not_robot"}
    if len(only) > 1:
        return f"two robots are each the only one allowed: {', '.join(sorted(map(str, only)))}"
    if only & nots:
        return "the same robot is required and excluded"
    for c in constraints:
        if c.tick is not None and c.tick <= arrival_tick:
            return f"{c.kind} tick {c.tick} is not after the order's arrival ({arrival_tick})"
        if c.tick is not None and c.tick - arrival_tick > MAX_HORIZON:
            # A hold 10^9 ticks away would park the order for good: ask a person instead.
            return f"{c.kind} tick {c.tick} is more than {MAX_HORIZON} ticks after arrival"
    deadlines = [c.tick for c in constraints if c.kind == "deadline" and c.tick is not None]
    holds = [c.tick for c in constraints if c.kind == "hold" and c.tick is not None]
    if len(set(deadlines)) > 1 or len(set(holds)) > 1:
        return "two different ticks for one kind"
    if deadlines and holds and max(holds) >= min(deadlines):
        return "the hold ends after the deadline"
    return None


_CORRECTION = re.compile(
    r"\b(?:now|instead|changed?|updated?|correction|actually|rather|make it|no -|no,)\b"
    r"|改成|改为|现在|更正|改一下|应该是"
)


def finish(
    c: Candidates,
    found: list[tuple[int, Constraint, bool]],
    note: str,
    arrival_tick: int,
    robots: Sequence[str],
    **usage: Any,
) -> Reading:
    """Cancellations, corrections, grounding and consistency, then the reading."""
    kept = [
        (pos, k) for pos, k, sticky in found if not rules.cancelled(c, k.kind, pos, sticky=sticky)
    ]
    if _CORRECTION.search(c.text) and len(kept) > 1:
        # A corrected note: the later statement of a kind (or about a robot) wins.
        latest: dict[str, tuple[int, Constraint]] = {}
        for pos, k in sorted(kept, key=lambda pk: pk[0]):
            key = "robot" if k.robot is not None and k.kind == "only_robot" else k.kind
            if k.robot is not None:
                latest = {kk: v for kk, v in latest.items() if v[1].robot != k.robot or kk == key}
            latest[key if k.kind != "not_robot" else f"not:{k.robot}"] = (pos, k)
        kept = list(latest.values())
    out = canonical(k for _, k in kept)
    for k in out:
        why = ground(k, note, arrival_tick, robots)
        if why is not None:
            return review(f"grounding: {why}", **usage)
    why = consistent(out, arrival_tick)
    if why is not None:
        return review(why, **usage)
    return Reading(out, "ok", **usage)


class TemplateReader:
    """The three regular expressions of the first wave's templates (the weakest baseline)."""

    name = "template"
    _ROBOT = re.compile(r"only (robot_\d+)")
    _DEADLINE = re.compile(r"deliver before tick (\d+)")
    _HOLD = re.compile(r"hold until .*?tick (\d+)")

    def read(self, note: str, *, arrival_tick: int, robots: Sequence[str]) -> Reading:
        """Match the three templates."""
        start = time.perf_counter()
        found: list[Constraint] = []
        if (m := self._ROBOT.search(note)) and m.group(1) in robots:
            found.append(Constraint("only_robot", robot=m.group(1)))
        if m := self._DEADLINE.search(note):
            found.append(Constraint("deadline", tick=int(m.group(1))))
        if m := self._HOLD.search(note):
            found.append(Constraint("hold", tick=int(m.group(1))))
        return Reading(canonical(found), latency_ms=(time.perf_counter() - start) * 1e3)

    def needs_model(self, note: str, robots: Sequence[str]) -> bool:
        """Never."""
        return False


@dataclass(frozen=True)
class Question:
    """One narrow question about one mention."""

    mention: RobotMention | TimeMention
    prior: rules.Judgement


def as_constraint(q: Question, kind: str, arrival_tick: int) -> Constraint | None:
    """The constraint of ``kind`` about ``q``'s mention (None when the kind does not fit it)."""
    m = q.mention
    if isinstance(m, RobotMention):
        return Constraint(kind, robot=m.robot) if kind in ("only_robot", "not_robot") else None  # type: ignore[arg-type]
    return Constraint(kind, tick=m.resolve(arrival_tick)) if kind in ("deadline", "hold") else None  # type: ignore[arg-type]


def judge(c: Candidates, arrival_tick: int | None) -> list[Question]:
    """The rules' judgement of every mention (bare numbers that cannot be times left out)."""
    out = []
    for m, j in rules.scoped(c, rules.judge_all(c)):
        # A bare number no cue speaks for is a quantity, an aisle, an order number; one not after
        # the arrival tick cannot be a time limit of this order.
        if (
            isinstance(m, TimeMention)
            and not m.explicit
            and (
                (j.kind is None and j.certain)
                or (arrival_tick is not None and m.value <= arrival_tick)
            )
        ):
            continue
        if (
            isinstance(m, TimeMention)
            and arrival_tick is not None
            and m.resolve(arrival_tick) <= arrival_tick
        ):
            # A time already past when the order arrives is the note's story ("delivered the
            # last one before tick 300"), never a limit on this order.
            continue
        out.append(Question(m, j))
    return out


class RulesReader:
    """Cue rules over the extracted candidates.

    Args:
        strict: send a note to review when a mention has no cue (instead of ignoring it).
    """

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self.name = "rules-review" if strict else "rules"
        # The normaliser's word list loads here, not inside the first planner call.
        warm()

    def read(self, note: str, *, arrival_tick: int, robots: Sequence[str]) -> Reading:
        """Judge each mention by its cues."""
        start = time.perf_counter()
        c = extract(note, robots)
        questions = judge(c, arrival_tick)
        if self.strict and any(not q.prior.certain for q in questions):
            return review("a mention no rule can read", latency_ms=elapsed_ms(start))
        doubt = next((q.prior.doubt for q in questions if q.prior.doubt), None)
        placed = any(isinstance(q.mention, TimeMention) and q.prior.kind for q in questions)
        unplaced = [
            q.mention
            for q in questions
            if isinstance(q.mention, TimeMention)
            and not q.prior.certain
            and q.mention.resolve(arrival_tick) > arrival_tick
        ]
        if doubt is None and unplaced and not placed and rules.TIME_TALK.search(c.text):
            # A future time no cue places, in a note that talks about time limits and sets
            # none ("now there is one: tick 4980"): a guess either way, so a person reads it.
            # (Beside a placed limit, an unplaced time is the note's story: "label printed at
            # tick 489".)
            doubt = "a time"
        if doubt is not None:
            return review(
                f"the rules cannot read {doubt} with confidence", latency_ms=elapsed_ms(start)
            )
        found = [
            (q.mention.start, k, q.prior.sticky)
            for q in questions
            if q.prior.kind is not None
            and (k := as_constraint(q, q.prior.kind, arrival_tick)) is not None
        ]
        reading = finish(c, found, note, arrival_tick, robots)
        return replace(reading, latency_ms=elapsed_ms(start))

    def needs_model(self, note: str, robots: Sequence[str]) -> bool:
        """Never."""
        return False


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - start) * 1e3
