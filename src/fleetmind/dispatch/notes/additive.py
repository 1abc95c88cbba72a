"""The ``rules+llm`` reader: the cue rules read the note, the model may only add to them.

The rules' reading stands as it is: a model never removes or changes a constraint, and a note
the rules send to review stays there. Every mention the rules left unconstrained (a fleet robot
or a future time the extraction found and no constraint of the rules names) becomes one CLOSED
question over the whole note: ``exclude`` / ``only`` / ``none`` for a robot, ``deadline`` /
``hold`` / ``none`` for a number. The answer is not generated but scored: one token is asked
for with the log-probabilities of the most likely first tokens (llama.cpp's and OpenAI's
``top_logprobs``); each answer's score is the log-sum of the tokens that begin it (an answer
missing from the list gets the list's lowest log-probability, an upper bound, so the margin is
never overstated). The model's choice is added only when it is a constraint, its margin (best
minus second log-probability) reaches the margin calibrated for that model on development sets
(``fleetmind notes calibrate``, stored in ``fleetmind/data/note_margins.json``), the grounding
check traces it to the note and it is consistent with the rules' constraints. Anything else:
the model abstains and the rules' reading is the answer. A model with no calibrated margin
never adds.

Deadlines: the first question reads the few-shot prefix (cold; then cached by the server), a
second one about another note measures a warm question, and every later question's deadline is
:data:`DEADLINE_FACTOR` times that latency, within [:data:`MIN_DEADLINE_S`,
:data:`MAX_DEADLINE_S`]. A question that times out, or a server that cannot be reached,
counts as timed out and the rules answer (the model is then left alone for a back-off).
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetmind.dispatch.notes.reading import (
    Question,
    Reading,
    RulesReader,
    as_constraint,
    consistent,
    elapsed_ms,
    ground,
    judge,
    review,
)
from fleetmind.dispatch.notes.text import RobotMention, extract
from fleetmind.errors import FleetmindError
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.sim.notes import Constraint, canonical

log = logging.getLogger(__name__)

PROMPT_VERSION = "note-closed-v1"
CALLER = "dispatch.notes"
WARMUP_CALLER = "dispatch.notes.warmup"
"""The warm-up's two calls: listed apart in a run's ``llm_call_outcomes``, not in its totals."""
TOP_LOGPROBS = 10
"""First tokens asked for with their log-probabilities (the answers' tokens lead the list)."""
DEADLINE_FACTOR = 5.0
"""A question's deadline: this many times the measured warm question latency."""
MIN_DEADLINE_S = 2.0
MAX_DEADLINE_S = 30.0
WARMUP_LIMIT_S = 120.0
"""The cold first question (the whole few-shot prefix read once) may take this long."""
MARGINS = "note_margins.json"
"""Margins per model in ``fleetmind/data``, written by ``fleetmind notes calibrate --save``."""

ROBOT_ANSWERS = ("exclude", "only", "none")
TIME_ANSWERS = ("deadline", "hold", "none")
_KIND = {"exclude": "not_robot", "only": "only_robot", "deadline": "deadline", "hold": "hold"}

_SYSTEM = (
    "You read warehouse order notes (English or Chinese). You are asked about one robot or "
    "one number in a note. Robot: exclude (it must not take this order), only (only it may "
    "take this order) or none. Number: deadline (deliver this order before it), hold (no "
    "pickup before it) or none. Answer with one word."
)
# Few-shot turns in both languages: a small model copies an answer format better than it
# follows a rule, and the server caches this prefix, so after the first question only the
# note itself is read.
_EXAMPLES = (
    ("only robot_7 may carry this", "robot_7", "only"),
    ("do not send robot_2, its gripper is weak", "robot_2", "exclude"),
    ("robot_4 loaded the truck this morning", "robot_4", "none"),
    ("deliver before tick 420", "420", "deadline"),
    ("wait for the supplier, not before t=88", "88", "hold"),
    ("box 12 of 40", "12", "none"),
    ("只能由3号机器人搬", "robot_3", "only"),
    ("别让5号车送这个", "robot_5", "exclude"),
    ("300之前送到", "300", "deadline"),
    ("20个时刻后才能取", "20", "hold"),
)

_WARM_QUESTION = ("the pallet for aisle 14 came in with robot_1 at 350, label it", "350")


@dataclass(frozen=True)
class Verdict:
    """The model's scored answer to one closed question.

    Attributes:
        scores: log-probability of each answer (empty when the model gave none).
        best: the most likely answer (None: no reply, or no answer among its likely tokens).
        margin: best minus second log-probability (0.0 without an answer).
        latency_s: seconds the question took.
        error: ``timeout`` or ``network`` when no reply came.
        tokens: prompt plus completion tokens.
    """

    scores: dict[str, float]
    best: str | None
    margin: float
    latency_s: float
    error: str | None = None
    tokens: tuple[int, int] = (0, 0)


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def answer_scores(
    tops: Sequence[tuple[str, float]], answers: Sequence[str]
) -> dict[str, float] | None:
    """Each answer's log-probability from the first position's most likely tokens.

    A token counts for the answer it begins (``no`` for ``none``, ``ex`` for ``exclude``; case,
    spaces and quotes ignored); an answer with no token in the list gets the list's lowest
    log-probability (an upper bound on its own). None when no listed token begins any answer.
    """
    found: dict[str, list[float]] = {a: [] for a in answers}
    for token, lp in tops:
        t = token.strip().strip("\"'`").lower()
        if not t:
            continue
        for a in answers:
            if a.startswith(t):
                found[a].append(lp)
                break
    if not any(found.values()):
        return None
    floor = min(lp for _, lp in tops)
    return {a: _logsumexp(v) if v else floor for a, v in found.items()}


def verdict_of(scores: dict[str, float] | None, latency_s: float, **kw: Any) -> Verdict:
    """The best answer and its margin over the second."""
    if not scores:
        return Verdict({}, None, 0.0, latency_s, **kw)
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    margin = ranked[0][1] - ranked[1][1] if len(ranked) > 1 else math.inf
    return Verdict(dict(scores), ranked[0][0], margin, latency_s, **kw)


@dataclass(frozen=True)
class Calibration:
    """A model's calibrated margins (see :func:`load_margins`).

    Attributes:
        add_margin: the smallest margin at which an added constraint is accepted (None: never).
        review_margin: a confident disagreement at or above this margin but below
            ``add_margin`` sends the note to review (None: never).
    """

    add_margin: float | None = None
    review_margin: float | None = None


def load_margins(model: str) -> Calibration:
    """The calibrated margins of ``model`` from the shipped data file (none: never add).

    Raises:
        FleetmindError: the data file is not valid JSON.
    """
    res = importlib.resources.files("fleetmind") / "data" / MARGINS
    if not res.is_file():
        return Calibration()
    try:
        data = json.loads(res.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FleetmindError(f"{MARGINS}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    entry = data.get("models", {}).get(model)
    if not isinstance(entry, dict):
        return Calibration()
    return Calibration(entry.get("add_margin"), entry.get("review_margin"))


@dataclass
class _Counts:
    calls: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    questions: int = 0
    answered: int = 0
    timed_out: int = 0
    added: int = 0


class AdditiveReader:
    """``rules+llm``: the rules' reading plus what the model confidently adds.

    Args:
        client: the chat backend (its ``model`` names the calibration entry).
        calibration: margins to use (default: the shipped calibration of ``client.model``).
        max_questions: questions per note at most (further mentions are not asked about).
        backoff_s: after a timeout or network failure the model is not asked for this long.
        clock: seconds, monotonic (tests pass a fake one).
    """

    name = "rules+llm"

    def __init__(
        self,
        client: ChatClient,
        *,
        calibration: Calibration | None = None,
        max_questions: int = 4,
        backoff_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.rules = RulesReader()
        self.calibration = calibration if calibration is not None else load_margins(client.model)
        self.max_questions = max_questions
        self.backoff_s = backoff_s
        self.clock = clock
        self.deadline_s: float | None = None  # set by warm_up()
        self.warmup_s: float | None = None
        self.question_s: float | None = None
        self._down_until = -1.0
        self.degraded = False
        self._lock = threading.Lock()
        self._warm_spent: tuple[int, int, int] | None = None  # calls, tokens: not yet reported
        self._prefix = [Message.system(_SYSTEM)]
        for note, about, answer in _EXAMPLES:
            self._prefix += [Message.user(self._question(note, about)), Message.assistant(answer)]

    @staticmethod
    def _question(note: str, about: str) -> str:
        return f'Note: "{note}"\nAbout: {about}'

    def _call(
        self,
        note: str,
        about: str,
        answers: Sequence[str],
        limit_s: float,
        *,
        caller: str = CALLER,
    ) -> Verdict:
        start = time.perf_counter()
        try:
            result = self.client.chat(
                [*self._prefix, Message.user(self._question(note, about))],
                temperature=0.0,
                max_tokens=1,
                timeout_s=limit_s,
                top_logprobs=TOP_LOGPROBS,
                context=CallContext(
                    caller=caller,
                    decision_type="read_note_closed",
                    prompt_version=PROMPT_VERSION,
                ),
            )
        except FleetmindError as exc:
            kind = "timeout" if "timeout" in type(exc).__name__.lower() else "network"
            return Verdict({}, None, 0.0, time.perf_counter() - start, error=kind)
        tops = result.top_logprobs[0] if result.top_logprobs else ()
        return verdict_of(
            answer_scores(tops, answers) if tops else None,
            time.perf_counter() - start,
            tokens=(result.usage.prompt_tokens, result.usage.completion_tokens),
        )

    def warm_up(self) -> float:
        """Read the prefix once, time a warm question, set the deadline; the deadline (s).

        Raises nothing: a model that cannot answer the warm-up is backed off like an outage.
        """
        with self._lock:
            if self.deadline_s is not None:
                return self.deadline_s
            note, about, _ = _EXAMPLES[2]
            first = self._call(note, about, ROBOT_ANSWERS, WARMUP_LIMIT_S, caller=WARMUP_CALLER)
            # A different note: the server reads it after the cached prefix, as it will each
            # note (the same question again would be read from the cache whole, and timed
            # too short: the first real questions then missed their deadline).
            second = self._call(*_WARM_QUESTION, TIME_ANSWERS, WARMUP_LIMIT_S, caller=WARMUP_CALLER)
            self.warmup_s = first.latency_s
            self.question_s = second.latency_s
            self._warm_spent = (
                2,
                first.tokens[0] + second.tokens[0],
                first.tokens[1] + second.tokens[1],
            )
            deadline = min(MAX_DEADLINE_S, max(MIN_DEADLINE_S, DEADLINE_FACTOR * second.latency_s))
            if first.error or second.error:
                self._down_until = self.clock() + self.backoff_s
                self.degraded = True
                deadline = MAX_DEADLINE_S
            self.deadline_s = deadline
            log.info(
                "rules+llm warm-up: prefix %.2f s, question %.2f s, deadline %.1f s",
                first.latency_s,
                second.latency_s,
                deadline,
            )
            return deadline

    def questions(
        self, note: str, *, arrival_tick: int, robots: Sequence[str], reading: Reading
    ) -> list[Question]:
        """The mentions the rules left unconstrained, in note order (none for a review)."""
        if reading.status != "ok":
            return []
        have_robots = {k.robot for k in reading.constraints if k.robot is not None}
        have_ticks = {k.tick for k in reading.constraints if k.tick is not None}
        out = []
        seen: set[str | int] = set()
        for q in judge(extract(note, robots), arrival_tick):
            m = q.mention
            # One question per robot or tick: the model reads the whole note either way.
            key: str | int = m.robot if isinstance(m, RobotMention) else m.resolve(arrival_tick)
            if key in have_robots or key in have_ticks or key in seen:
                continue
            seen.add(key)
            if q.prior.kind is None:
                out.append(q)
        return out[: self.max_questions]

    def ask(self, note: str, q: Question) -> Verdict:
        """The model's scored answer to one question (after the warm-up)."""
        deadline = self.warm_up()
        m = q.mention
        if isinstance(m, RobotMention):
            return self._call(note, m.robot, ROBOT_ANSWERS, deadline)
        return self._call(note, str(m.value), TIME_ANSWERS, deadline)

    @staticmethod
    def proposal(q: Question, v: Verdict, arrival_tick: int) -> Constraint | None:
        """The constraint the verdict's best answer would add (None for ``none``)."""
        if v.best is None or v.best == "none":
            return None
        return as_constraint(q, _KIND[v.best], arrival_tick)

    def read(self, note: str, *, arrival_tick: int, robots: Sequence[str]) -> Reading:
        """The rules' reading, plus the model's confident, grounded, consistent additions."""
        start = time.perf_counter()
        base = self.rules.read(note, arrival_tick=arrival_tick, robots=robots)
        asked = self.questions(note, arrival_tick=arrival_tick, robots=robots, reading=base)
        if not asked:
            return replace(base, latency_ms=elapsed_ms(start))
        if self.clock() < self._down_until:
            return replace(base, latency_ms=elapsed_ms(start), unreadable="model unreachable")
        n = _Counts()
        verdicts = []
        errors: list[str] = []
        for q in asked:
            v = self.ask(note, q)
            n.questions += 1
            n.calls += 1
            n.tokens_prompt += v.tokens[0]
            n.tokens_completion += v.tokens[1]
            if v.error is not None:
                n.timed_out += 1
                errors.append(v.error)
                self._down_until = self.clock() + self.backoff_s
                self.degraded = True
                break
            n.answered += 1
            self.degraded = False
            verdicts.append((q, v))
        with self._lock:
            # The warm-up's two calls are reported with the first reading that asked.
            if self._warm_spent is not None:
                n.calls += self._warm_spent[0]
                n.tokens_prompt += self._warm_spent[1]
                n.tokens_completion += self._warm_spent[2]
                self._warm_spent = None
        out = list(base.constraints)
        disagreement = None
        add, rev = self.calibration.add_margin, self.calibration.review_margin
        # The most confident proposal first: a later one inconsistent with it is dropped.
        for q, v in sorted(verdicts, key=lambda qv: -qv[1].margin):
            k = self.proposal(q, v, arrival_tick)
            if k is None or ground(k, note, arrival_tick, robots) is not None:
                continue
            if add is not None and v.margin >= add:
                if consistent([*out, k], arrival_tick) is None:
                    out.append(k)
                    n.added += 1
            elif rev is not None and v.margin >= rev and disagreement is None:
                disagreement = f"the model reads {k.kind} {k.robot or k.tick}, the rules none"
        usage: dict[str, Any] = {
            "calls": n.calls,
            "tokens_prompt": n.tokens_prompt,
            "tokens_completion": n.tokens_completion,
            "questions": n.questions,
            "answered": n.answered,
            "timed_out": n.timed_out,
            "added": n.added,
            "latency_ms": elapsed_ms(start),
            "errors": tuple(errors),
        }
        if n.timed_out:
            # Not an answer about the note: the cache must not keep it.
            usage["unreadable"] = f"model {errors[-1]}"
        if disagreement is not None and n.added == 0:
            return review(disagreement, **usage)
        return Reading(canonical(out), "ok", **usage)

    def needs_model(self, note: str, robots: Sequence[str]) -> bool:
        """Whether the rules leave a mention the model would be asked about."""
        if self.clock() < self._down_until:
            return False
        # The arrival tick is unknown here: a time the rules leave open may turn out past.
        reading = self.rules.read(note, arrival_tick=0, robots=robots)
        return bool(self.questions(note, arrival_tick=0, robots=robots, reading=reading))
