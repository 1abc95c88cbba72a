"""Note readers: a note, its order's arrival tick and the fleet in; constraints and a status out.

Every reader answers :meth:`NoteReader.read` with a :class:`Reading`: the constraints it found
and ``ok``, or ``needs_review`` when it cannot read the note with confidence (a dispatcher would
rather ask a person than guess; the order is then served as a plain order and counted).

Readers (``make_reader`` names):

- ``template``: the three regular expressions that read the first wave's three note templates;
  the baseline any reader must beat.
- ``rules``: cue rules over deterministic candidates (:mod:`~fleetmind.dispatch.notes.rules`);
  a mention no cue speaks for is taken as no constraint.
- ``rules-review``: the same rules, but a mention no cue speaks for sends the note to review.
- ``llm``: the model judges every candidate the extraction found, one narrow question each
  (``only``/``not``/``none`` for a robot, ``deadline``/``hold``/``none`` for a time), with
  schema-constrained decoding over those options; ids and ticks come from the extraction, never
  from the model.
- ``rules+llm`` (:mod:`~fleetmind.dispatch.notes.additive`): the rules' reading, to which the
  model may only add: a closed question over the whole note per mention the rules left
  unconstrained, answers scored by likelihood, accepted above a margin calibrated on development
  sets; otherwise the model abstains and the rules answer.

All readers pass through :func:`ground`: a constraint whose robot or tick cannot be traced to
the note (the id or its number, a number or number word, or arrival tick plus a stated
duration) is vetoed and the note goes to review (a ``rules+llm`` proposal that fails it is
dropped: the model abstains). Notes with no candidate at all (no fleet robot, no number) cost no
model call. :class:`CachedReader` reads each normalised note once. ``template`` and ``rules``
live in :mod:`~fleetmind.dispatch.notes.reading` with what every reader shares; this module
re-exports them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import RootModel

from fleetmind.dispatch.notes.reading import (
    MAX_HORIZON,
    NoteReader,
    Question,
    Reading,
    RulesReader,
    Status,
    TemplateReader,
    as_constraint,
    consistent,
    elapsed_ms,
    finish,
    ground,
    judge,
    review,
)
from fleetmind.dispatch.notes.text import RobotMention, extract
from fleetmind.errors import ConfigError
from fleetmind.llm.budgets import Budgets
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.llm.structured import structured
from fleetmind.llm.usage import CallCounts, CallTally, TalliedClient
from fleetmind.sim.notes import Constraint, canonical

__all__ = [
    "MAX_HORIZON",
    "MODEL_READERS",
    "READERS",
    "CachedReader",
    "LLMReader",
    "NoteReader",
    "Reading",
    "RulesReader",
    "Status",
    "TemplateReader",
    "consistent",
    "ground",
    "make_reader",
    "review",
]
READERS = ("template", "rules", "rules-review", "llm", "rules+llm")
MODEL_READERS = ("llm", "rules+llm")
PROMPT_VERSION = "note-reader-v2"


_SYSTEM = (
    "You read short warehouse order notes (English or Chinese). You are asked about one robot "
    "or one number in the note. For a robot answer only (only that robot may take the order), "
    "not (that robot must not take it) or none (just mentioned). For a number answer deadline "
    "(deliver before it), hold (do not pick up before it) or none (not a time limit). "
    'Reply with one word in quotes, like "none".'
)
# Few-shot pairs in both languages: small models copy a pattern better than they follow a rule.
_EXAMPLES = (
    ('Note: "only robot_7 may carry this"\nAbout: robot_7', "only"),
    ('Note: "do not send robot_2, its gripper is weak"\nAbout: robot_2', "not"),
    ('Note: "robot_4 loaded the truck this morning"\nAbout: robot_4', "none"),
    ('Note: "deliver before tick 420"\nAbout: 420', "deadline"),
    ('Note: "wait for the supplier, not before t=88"\nAbout: 88', "hold"),
    ('Note: "box 12 of 40"\nAbout: 12', "none"),
    ('Note: "只能由3号机器人搬"\nAbout: robot_3', "only"),
    ('Note: "别让5号车送这个"\nAbout: robot_5', "not"),
    ('Note: "300之前送到"\nAbout: 300', "deadline"),
    ('Note: "20个时刻后才能取"\nAbout: 20', "hold"),
)


# The answer is one quoted word from a closed set (a JSON string enum): a schema-constrained
# decoder can only emit one of them, in about four tokens (an object would take seven).
_ROBOT_ANSWER = RootModel[Literal["only", "not", "none"]]
_TIME_ANSWER = RootModel[Literal["deadline", "hold", "none"]]
_KIND = {"only": "only_robot", "not": "not_robot", "deadline": "deadline", "hold": "hold"}


@dataclass
class _Usage:
    calls: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    errors: list[str] = field(default_factory=list)


class LLMReader:
    """The model judges every extracted candidate, one narrow question each (``llm``).

    Args:
        client: the chat backend.
        budgets: retry budgets and deadline per question.
        max_questions: questions per note at most (more candidates: review).
        backoff_s: after a network failure or timeout, the model is not asked for this long
            (doubling on each further failure up to ``max_backoff_s``; reset on success):
            notes read meanwhile get the fallback, so an outage costs a bounded number of calls.
        max_backoff_s: the longest back-off.
        clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        budgets: Budgets | None = None,
        max_questions: int = 4,
        backoff_s: float = 2.0,
        max_backoff_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.fallback = RulesReader()
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.clock = clock
        self._next_backoff = backoff_s
        self._down_until = -1.0
        self.degraded = False  # an outage with no successful answer since
        self.name = "llm"
        self.budgets = budgets or Budgets(
            retries={"parse": 1, "validation": 1, "network": 1, "timeout": 0}, deadline_s=10.0
        )
        self.max_questions = max_questions
        self._reading: set[CallTally] = set()  # the calls of each reading in progress
        self._lock = threading.Lock()
        self._prefix = [Message.system(_SYSTEM)]
        for q, a in _EXAMPLES:
            self._prefix += [Message.user(q), Message.assistant(f'"{a}"')]

    def _ask(
        self, note: str, q: Question, usage: _Usage, tally: CallTally, tick: int | None
    ) -> str | None:
        m = q.mention
        about = m.robot if isinstance(m, RobotMention) else str(m.value)
        model = _ROBOT_ANSWER if isinstance(m, RobotMention) else _TIME_ANSWER
        out = structured(
            TalliedClient(self.client, tally),
            [*self._prefix, Message.user(f'Note: "{note}"\nAbout: {about}')],
            model,
            budgets=self.budgets,
            context=CallContext(
                caller="dispatch.notes",
                decision_type="read_note",
                prompt_version=PROMPT_VERSION,
                tick=tick,
            ),
            temperature=0.0,
            max_tokens=6,
        )
        spent = tally.drain()
        usage.calls += spent.calls
        usage.tokens_prompt += spent.tokens_prompt
        usage.tokens_completion += spent.tokens_completion
        usage.errors.extend(out.errors)
        if out.value is None:
            if out.errors and out.errors[-1] in ("network", "timeout"):
                # An outage: stop asking for a while, longer each time it repeats.
                self._down_until = self.clock() + self._next_backoff
                self.degraded = True
                self._next_backoff = min(self.max_backoff_s, 2 * self._next_backoff)
            return None
        self._next_backoff = self.backoff_s
        self.degraded = False
        answer: str = out.value.root  # type: ignore[attr-defined]
        return answer

    def _fall_back(
        self, note: str, arrival_tick: int, robots: Sequence[str], why: str, usage: _Usage
    ) -> Reading:
        """The cue rules' reading, marked as what the model could not read."""
        reading = self.fallback.read(note, arrival_tick=arrival_tick, robots=robots)
        return replace(
            reading,
            calls=usage.calls,
            tokens_prompt=usage.tokens_prompt,
            tokens_completion=usage.tokens_completion,
            errors=tuple(usage.errors),
            unreadable=why,
        )

    def read(
        self, note: str, *, arrival_tick: int, robots: Sequence[str], tick: int | None = None
    ) -> Reading:
        """Ask about the candidates; review when the model cannot answer."""
        tally = CallTally()
        with self._lock:
            self._reading.add(tally)
        try:
            return self._read(note, arrival_tick, robots, tick, tally)
        finally:
            with self._lock:
                self._reading.discard(tally)

    def abandon(self) -> CallCounts:
        """Stop the readings in progress (no further calls); what their calls cost so far.

        Their calls still in flight count in ``calls`` and ``abandoned``; a reading stopped
        here makes no further call and its later answer is not counted again.
        """
        with self._lock:
            tallies, self._reading = list(self._reading), set()
        spent = [t.abandon() for t in tallies]
        return CallCounts(
            calls=sum(c.calls for c in spent),
            tokens_prompt=sum(c.tokens_prompt for c in spent),
            tokens_completion=sum(c.tokens_completion for c in spent),
            abandoned=sum(c.abandoned for c in spent),
        )

    def _read(
        self,
        note: str,
        arrival_tick: int,
        robots: Sequence[str],
        tick: int | None,
        tally: CallTally,
    ) -> Reading:
        start = time.perf_counter()
        c = extract(note, robots)
        questions = judge(c, arrival_tick)
        usage = _Usage()
        doubt = next((q.prior.doubt for q in questions if q.prior.doubt), None)
        if doubt is not None:
            # What the rules found under a condition is not for a model to settle alone.
            return review(
                f"the rules cannot read {doubt} with confidence", latency_ms=elapsed_ms(start)
            )
        if len(questions) > self.max_questions:
            return review(f"{len(questions)} mentions to judge", latency_ms=elapsed_ms(start))
        if questions and self.clock() < self._down_until:
            reading = self._fall_back(note, arrival_tick, robots, "model unreachable", usage)
            return replace(reading, latency_ms=elapsed_ms(start))
        found: list[tuple[int, Constraint, bool]] = []
        for q in questions:
            answer = self._ask(note, q, usage, tally, tick)
            if answer is None:
                if usage.errors and usage.errors[-1] in ("network", "timeout"):
                    why = f"model unreachable ({usage.errors[-1]})"
                    reading = self._fall_back(note, arrival_tick, robots, why, usage)
                    return replace(reading, latency_ms=elapsed_ms(start))
                return review(
                    "the model could not answer",
                    latency_ms=elapsed_ms(start),
                    calls=usage.calls,
                    tokens_prompt=usage.tokens_prompt,
                    tokens_completion=usage.tokens_completion,
                    errors=tuple(usage.errors),
                )
            kind = _KIND.get(answer)
            if kind is not None and (k := as_constraint(q, kind, arrival_tick)) is not None:
                found.append((q.mention.start, k, q.prior.sticky))
        reading = finish(
            c,
            found,
            note,
            arrival_tick,
            robots,
            calls=usage.calls,
            tokens_prompt=usage.tokens_prompt,
            tokens_completion=usage.tokens_completion,
            errors=tuple(usage.errors),
        )
        return replace(reading, latency_ms=elapsed_ms(start))

    def needs_model(self, note: str, robots: Sequence[str]) -> bool:
        """Whether any candidate would be asked about (never while the model is backed off)."""
        if self.clock() < self._down_until:
            return False
        return bool(judge(extract(note, robots), None))


class CachedReader:
    """Reads each normalised note once per fleet; relative times re-resolve per order.

    Args:
        inner: the reader to cache.
    """

    def __init__(self, inner: NoteReader) -> None:
        self.inner = inner
        self.name = inner.name
        self._lock = threading.Lock()
        # key -> (reading with ticks relative to arrival, arrival tick it was read at)
        self._cache: dict[tuple[str, tuple[str, ...]], tuple[Reading, int]] = {}
        self.hits = 0
        self.misses = 0

    def _key(self, note: str, robots: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        return extract(note, robots).text, tuple(robots)

    def lookup(self, note: str, *, arrival_tick: int, robots: Sequence[str]) -> Reading | None:
        """The cached reading for this order, or None if the note was never read."""
        with self._lock:
            hit = self._cache.get(self._key(note, robots))
        if hit is None:
            return None
        reading, read_at = hit
        c = extract(note, robots)
        relative = {t.value for t in c.times if t.relative}
        moved = tuple(
            replace(k, tick=k.tick - read_at + arrival_tick)
            if k.tick is not None
            and (k.tick - read_at) in relative
            and k.tick not in {t.value for t in c.times if not t.relative}
            else k
            for k in reading.constraints
        )
        self.hits += 1
        return replace(
            reading,
            constraints=canonical(moved),
            latency_ms=0.0,
            calls=0,
            tokens_prompt=0,
            tokens_completion=0,
            cached=True,
            errors=(),
            questions=0,
            answered=0,
            timed_out=0,
            added=0,  # nothing was asked: a run's counts would count the note's additions twice
        )

    def read(self, note: str, *, arrival_tick: int, robots: Sequence[str]) -> Reading:
        """A cache hit, or the inner reader's reading (then cached)."""
        start = time.perf_counter()
        hit = self.lookup(note, arrival_tick=arrival_tick, robots=robots)
        if hit is not None:
            return replace(hit, latency_ms=elapsed_ms(start))
        reading = self.inner.read(note, arrival_tick=arrival_tick, robots=robots)
        self.misses += 1
        # A reading lost to the network is not an answer about the note: ask again later.
        if reading.unreadable is None:
            with self._lock:
                self._cache[self._key(note, robots)] = (reading, arrival_tick)
        return reading

    @property
    def degraded(self) -> bool:
        """Whether the inner reader's model is in an outage (no answer since it failed)."""
        return bool(getattr(self.inner, "degraded", False))

    def abandon(self) -> CallCounts:
        """The inner reader's :meth:`LLMReader.abandon` (nothing for a reader without a model)."""
        abandon = getattr(self.inner, "abandon", None)
        spent = abandon() if callable(abandon) else None
        return spent if isinstance(spent, CallCounts) else CallCounts()

    def needs_model(self, note: str, robots: Sequence[str]) -> bool:
        """False for a cached note, else the inner reader's answer."""
        with self._lock:
            if self._key(note, robots) in self._cache:
                return False
        return self.inner.needs_model(note, robots)


def make_reader(name: str, client: ChatClient | None = None) -> NoteReader:
    """The reader called ``name`` (see :data:`READERS`), cached.

    Raises:
        ConfigError: unknown name, or a model reader without a client.
    """
    inner: NoteReader
    if name == "template":
        inner = TemplateReader()
    elif name in ("rules", "rules-review"):
        inner = RulesReader(strict=name == "rules-review")
    elif name in ("llm", "rules+llm"):
        if client is None:
            raise ConfigError(f"reader {name!r} needs an LLM client")
        if name == "llm":
            inner = LLMReader(client)
        else:
            # Imported here: the additive reader builds on this module's rules reader.
            from fleetmind.dispatch.notes.additive import AdditiveReader

            inner = AdditiveReader(client)
    else:
        raise ConfigError(f"reader {name!r}: expected one of {', '.join(READERS)}")
    return CachedReader(inner)
