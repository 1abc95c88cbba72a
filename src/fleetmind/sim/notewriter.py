"""Writing order notes with their ground truth, seeded: the generator of the note language.

Writing notes (:class:`NoteWriter`, style per :class:`NoteConfig`):

- ``template``: the first wave's three English templates, one constraint a note ("fragile: only
  robot_3 has the soft gripper", "VIP customer, deliver before tick 240", "hold until the truck
  arrives at tick 75"); plain notes are five fixed fillers.
- ``realistic``: notes the way people write them, every choice drawn from the writer's rng (same
  draws, same notes):

  * phrasings: a dozen or more hand-written English and ten or more Chinese phrasings per kind,
    in different word orders, plus phrasings written for two facts at once; ``zh_share`` of the
    notes are Chinese.
  * robots: ``robot_3``, ``robot 3``, ``Robot3``, ``r3``, ``bot #3``, ``robot three``,
    ``3号机器人``, ``3号车``, ``机器人3``, ``三号车`` ... (ids not of the form ``robot_N`` are
    written as they are).
  * numbers: digits, English words (:func:`number_words`: "twenty-five", "a hundred and ten"),
    Chinese numerals (:func:`zh_numeral`: 二十五, 三百零五, 两百) and mixed forms
    (:func:`zh_mixed`: 3百); ticks as ``tick 300``, ``t=300``, ``T300``, ``第三百个时刻`` ...
  * times: absolute ("before tick 300") or relative to the arrival tick ("within 25 ticks", "25
    ticks from now", "二十个时刻内送到", "二十个时刻后才能取"): a relative count ``k`` always
    resolves to ``arrival + k`` (a deadline "within 25 ticks" is ``deadline = arrival + 25``, a
    hold "ready in 25 ticks" is ``hold = arrival + 25``). Inclusive phrasings ("no later than
    tick 299", "by 299", "最晚299送到") show the last allowed tick, so their ground truth is one
    more (``deadline = 300``).
  * values: a deadline leaves room to deliver (``>= arrival + distance + 10``, after the hold
    when the note also holds) and is tighter than the order's due tick when that is possible;
    a hold is 15 to 80 ticks after arrival. Values are often rounded (people write "before tick
    300", not 287). ``only_robot`` names a capable robot; ``not_robot`` any robot of the fleet
    but never the last capable one.
  * two facts in one note (hold + only_robot, not_robot + deadline, hold + deadline, ...); a
    note that holds and has a deadline always gives the deadline as an absolute tick (a relative
    one would be ambiguous: from arrival or from release?).
  * plain notes: fillers ("standard restock", "常规补货") and distractors that mention robots,
    numbers or past ticks without constraining anything ("robot_4 loaded the truck this
    morning", "box 12 of 40", "3号机器人昨天修好了", "ignore the earlier hold, ship whenever").
    Constrained notes may carry a distractor too, but only one that cannot contradict them.
  * noise: typos (swapped, dropped, doubled or neighbouring-key letters, lost apostrophes,
    Chinese homophones and half-width punctuation) and odd capitals. Noise never touches the
    robot, number and tick mentions that carry a value, nor short or negating words ("not",
    "only", "never", "except"), so the ground truth stays true.

  ``difficulty`` sets how often things happen:

  ======================  ======  ======  ======
  share of ...            easy    normal  hard
  ======================  ======  ======  ======
  notes with noise        0       0.25    0.5
  two-fact notes          0       0.2     0.4
  distractors (plain)     0.15    0.4     0.6
  distractor (with facts) 0       0.1     0.3
  relative times          0.15    0.4     0.6
  numbers in words        0.1     0.3     0.4
  ======================  ======  ======  ======
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar, get_args

from fleetmind.sim.notes import (
    KINDS,
    ROBOT_KINDS,
    TICK_KINDS,
    Constraint,
    ConstraintKind,
    Lang,
    canonical,
)
from fleetmind.sim.phrases import (
    _CONNECTORS,
    _EN_ROBOT_FORMS,
    _EN_TICK_FORMS,
    _FILLERS,
    _PAIR_PHRASES,
    _PAIRS,
    _PHRASES,
    _PLAIN_DISTRACTORS,
    _PREFIXES,
    _SAFE_DISTRACTORS,
    _SUFFIXES,
    _TEMPLATE_FILLERS,
    _ZH_ROBOT_FORMS,
    _ZH_TICK_FORMS,
)

NoteStyle = Literal["template", "realistic"]
Difficulty = Literal["easy", "normal", "hard"]


@dataclass(frozen=True)
class NoteConfig:
    """How the order stream writes notes.

    Attributes:
        style: ``template`` (the first wave's three English templates, one constraint a note:
            what three regular expressions read perfectly) or ``realistic`` (notes the way people
            write them: many phrasings, number forms, relative times, English and Chinese,
            negations, distractors, typos, two facts).
        zh_share: share of notes written in Chinese (``realistic`` only).
        difficulty: ``easy``, ``normal`` or ``hard`` (``realistic`` only): how often typos,
            distractors, relative times and two-fact notes appear.
    """

    style: NoteStyle = "template"
    zh_share: float = 0.3
    difficulty: Difficulty = "normal"

    def __post_init__(self) -> None:
        from fleetmind.errors import ConfigError, check_range

        check_range("notes.zh_share", self.zh_share, low=0, high=1)
        if self.style not in get_args(NoteStyle):
            raise ConfigError(f"notes.style: expected template or realistic, got {self.style!r}")
        if self.difficulty not in get_args(Difficulty):
            raise ConfigError(
                f"notes.difficulty: expected easy, normal or hard, got {self.difficulty!r}"
            )


# Numbers ---------------------------------------------------------------------------------------

_EN_ONES_TEXT = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
_EN_ONES = tuple(_EN_ONES_TEXT.split())
_EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def _en_below_hundred(n: int) -> str:
    if n < 20:
        return _EN_ONES[n]
    tens, ones = divmod(n, 10)
    return _EN_TENS[tens] + (f"-{_EN_ONES[ones]}" if ones else "")


def _en_below_thousand(n: int, *, use_and: bool) -> str:
    hundreds, rest = divmod(n, 100)
    words = [f"{_EN_ONES[hundreds]} hundred"] if hundreds else []
    if rest:
        if hundreds and use_and:
            words.append("and")
        words.append(_en_below_hundred(rest))
    return " ".join(words)


def number_words(n: int, *, a_for_one: bool = False, use_and: bool = True) -> str:
    """English words for a whole number, the way people write them.

    Args:
        n: the number, ``0 <= n < 1_000_000``.
        a_for_one: write a leading "one hundred" / "one thousand" as "a hundred" / "a thousand".
        use_and: the British "and" before the tens ("one hundred and ten"); without it "one
            hundred ten".

    Returns:
        For example ``25 -> "twenty-five"``, ``110 -> "one hundred and ten"`` (``"a hundred and
        ten"`` with ``a_for_one``), ``2005 -> "two thousand and five"``.

    Raises:
        ValueError: ``n`` out of range.
    """
    if not 0 <= n < 1_000_000:
        raise ValueError(f"number_words: expected 0 <= n < 1,000,000, got {n}")
    if n == 0:
        return "zero"
    thousands, rest = divmod(n, 1000)
    words: list[str] = []
    if thousands:
        words.append(_en_below_thousand(thousands, use_and=use_and) + " thousand")
    if rest:
        if thousands and rest < 100 and use_and:
            words.append("and")
        words.append(_en_below_thousand(rest, use_and=use_and))
    text = " ".join(words)
    if a_for_one and text.startswith(("one hundred", "one thousand")):
        text = "a" + text[3:]
    return text


_ZH_DIGITS = "零一二三四五六七八九"
_ZH_UNITS = ("千", "百", "十", "")


def zh_numeral(n: int, *, liang: bool = True) -> str:
    """Chinese numerals for ``0 <= n <= 9999``, as written in everyday text.

    One 零 stands for any run of inner zeros, ``10..19`` drop the leading 一 (十二), and with
    ``liang`` a leading 2 of the hundreds or thousands is 两 (两百, 两千) rather than 二.

    Args:
        n: the number.
        liang: write a leading 2 before 百 / 千 as 两.

    Returns:
        For example ``25 -> "二十五"``, ``305 -> "三百零五"``, ``110 -> "一百一十"``, ``2000 ->
        "两千"`` (``"二千"`` without ``liang``).

    Raises:
        ValueError: ``n`` out of range.
    """
    if not 0 <= n <= 9999:
        raise ValueError(f"zh_numeral: expected 0 <= n <= 9999, got {n}")
    if n == 0:
        return "零"
    digits = (n // 1000, n // 100 % 10, n // 10 % 10, n % 10)
    out: list[str] = []
    started = zero_pending = False
    for digit, unit in zip(digits, _ZH_UNITS, strict=True):
        if digit == 0:
            zero_pending = started
            continue
        if zero_pending:
            out.append("零")
            zero_pending = False
        if digit == 1 and unit == "十" and not started:
            out.append("十")
        elif digit == 2 and liang and not started and unit in ("千", "百"):
            out.append("两" + unit)
        else:
            out.append(_ZH_DIGITS[digit] + unit)
        started = True
    return "".join(out)


def zh_mixed(n: int) -> str:
    """A round number in Arabic digits with Chinese units: ``300 -> "3百"``, ``2500 -> "2千5百"``.

    Args:
        n: a multiple of 100 in ``100..9900``.

    Raises:
        ValueError: ``n`` is not such a number.
    """
    if not (100 <= n <= 9900 and n % 100 == 0):
        raise ValueError(f"zh_mixed: expected a multiple of 100 in 100..9900, got {n}")
    thousands, hundreds = divmod(n // 100, 10)
    return (f"{thousands}千" if thousands else "") + (f"{hundreds}百" if hundreds else "")


def _en_words_ok(n: int, *, absolute: bool) -> bool:
    """Whether people would write ``n`` in words: small counts, round absolute ticks."""
    if not absolute:
        return 0 <= n < 1000
    return 0 <= n < 100 or (n < 1000 and n % 10 == 0) or (n < 10000 and n % 100 == 0)


# Phrasings -------------------------------------------------------------------------------------
#
# Slots: {r} a robot; a deadline as {dt} (a tick with its unit: "tick 300", "t=300"), {dn} (a bare
# number: "300", "三百"), {dk} (a count of ticks from arrival); {dti} / {dni} are inclusive forms
# ("no later than", "最晚") and show the deadline minus one; a hold as {ht}, {hn} or {hk}.
# A phrasing is relative when it has {dk} / {hk}, absolute otherwise. Slots are filled with
# protected text that noise never touches.


_ROBOT_ID = re.compile(r"robot_(\d+)")
_SLOT = re.compile(r"\{(\w+)\}")
_WORD = re.compile(r"[A-Za-z]{4,}")
# Words a typo must not touch: they carry the kind of a constraint (short words are never
# touched at all).
_KEEP_WORDS = frozenset({"only", "never", "except", "nobody", "cannot", "must", "dont", "none"})
_QWERTY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS = {
    row[i]: row[max(i - 1, 0) : i] + row[i + 1 : i + 2]
    for row in _QWERTY_ROWS
    for i in range(len(row))
}
# Pinyin-input slips that keep a note readable (never 前/后, 不/别, 只 or numerals).
_ZH_SWAPS = {"的": "得", "在": "再", "再": "在", "已": "以", "做": "作", "那": "哪", "到": "道"}
_NUMERAL_CHARS = frozenset("0123456789零一二两三四五六七八九十百千")
_ZH_PUNCT = {"，": ",", "。": ".", "：": ":", "！": "!", "；": ";", "（": "(", "）": ")"}

_HOLD_MIN, _HOLD_MAX = 15, 80
_DEADLINE_ROOM = 10


@dataclass(frozen=True)
class _Level:
    """How often each realistic-style feature appears (see the module docstring's table)."""

    noise: float  # share of notes with typos (and maybe odd capitals)
    max_edits: int  # typos in a noisy note: 1..max_edits
    two_fact: float  # share of constrained notes stating two facts
    plain_distractor: float  # share of plain notes that are distractors
    extra_distractor: float  # share of constrained notes that also carry a safe distractor
    relative: float  # share of times given relative to arrival
    words: float  # share of numbers written in words / Chinese numerals
    canonical: float  # share of robots written as their id and ticks as "tick N" / "t=N"
    decorate: float  # share of notes with a greeting, "pls", "thanks" ...
    rounding: float  # share of times rounded to 5, 10, 25 or 50


_LEVELS: dict[Difficulty, _Level] = {
    "easy": _Level(0.0, 1, 0.0, 0.15, 0.0, 0.15, 0.1, 0.5, 0.2, 0.7),
    "normal": _Level(0.25, 2, 0.2, 0.4, 0.1, 0.4, 0.3, 0.25, 0.35, 0.6),
    "hard": _Level(0.5, 3, 0.4, 0.6, 0.3, 0.6, 0.4, 0.1, 0.5, 0.5),
}

_Seg = tuple[str, bool]  # (text, protected): protected text carries a value and is never noised
_T = TypeVar("_T")


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def _may_drop(text: str, j: int) -> bool:
    """Whether losing (or half-widthing) ``text[j]`` keeps numbers apart.

    "订单号4412，75个时刻" must not become "订单号441275个时刻" nor "4412,75".

    A character at either end of a segment sits next to text the typo cannot see (maybe a
    number in a protected slot), so it stays.
    """
    if not 0 < j < len(text) - 1:
        return False
    return not (text[j - 1] in _NUMERAL_CHARS or text[j + 1] in _NUMERAL_CHARS)


def _relative(phrase: str, kind: ConstraintKind) -> bool:
    """Whether a phrasing gives this kind's time relative to arrival."""
    return ("{dk}" if kind == "deadline" else "{hk}") in phrase


class NoteWriter:
    """Writes order notes with their ground truth, seeded.

    Every choice comes from ``rng`` (a :class:`numpy.random.Generator`), so the same draws give
    the same notes. See the module docstring for the two styles.

    Args:
        config: style, language mix and difficulty.
        rng: the generator that drives every choice (the order stream's).
    """

    def __init__(self, config: NoteConfig, rng: Any) -> None:
        self.config = config
        self.rng = rng
        self._level = _LEVELS[config.difficulty]
        self._fleet_seen: tuple[tuple[str, ...], int] | None = None

    def plain(self, *, tick: int, robots: Sequence[str]) -> str:
        """A note that states no constraint (filler, or in ``realistic`` style a distractor).

        Args:
            tick: the order's arrival tick (distractors may mention earlier ticks).
            robots: the whole fleet (distractors may mention any robot).
        """
        if self.config.style == "template":
            return _TEMPLATE_FILLERS[int(self.rng.integers(len(_TEMPLATE_FILLERS)))]
        lang = self._lang()
        segs: list[_Seg] | None = None
        if self._chance(self._level.plain_distractor):
            segs = self._distractor(lang, tick=tick, robots=robots, safe_only=False)
        if segs is None:
            segs = [(self._pick(_FILLERS[lang]), False)]
        return self._finish(self._decorate(segs, lang), lang)

    def constrained(
        self,
        *,
        tick: int,
        due: int,
        distance: int,
        capable: Sequence[str],
        robots: Sequence[str],
    ) -> tuple[str, tuple[Constraint, ...]]:
        """A note stating one or more constraints, and its ground truth.

        Args:
            tick: the order's arrival tick (relative times resolve against it).
            due: the order's due tick (a deadline is tighter).
            distance: Manhattan pickup-to-station distance (a deadline leaves room for it).
            capable: robots able to serve the order (an ``only_robot`` names one of them).
            robots: the whole fleet (a ``not_robot`` may name any).

        Returns:
            The note and its constraints (one or, in ``realistic`` style, two; canonical order).
        """
        if self.config.style == "template":
            return self._template_constrained(
                tick=tick, due=due, distance=distance, capable=capable
            )
        lv = self._level
        lang = self._lang()
        only_pool = capable
        # Never exclude the last capable robot (an empty ``capable`` means an empty fleet). With
        # two or more capable robots none is the last: the pool is the fleet, never copied (the
        # fleet may be thousands of robots and every note would pay for it).
        several = any(r != capable[0] for r in capable)  # stops at the first other robot
        not_pool = robots if several else [r for r in robots if set(capable) - {r}]
        feasible = {"only_robot": bool(only_pool), "not_robot": bool(not_pool)}
        kinds: tuple[ConstraintKind, ...]
        if self._chance(lv.two_fact):
            kinds = self._pick([p for p in _PAIRS if all(feasible.get(k, True) for k in p)])
        else:
            kinds = (self._pick([k for k in KINDS if feasible.get(k, True)]),)

        # Absolute or relative times (a deadline next to a hold is always absolute).
        want_rel = {
            "deadline": "deadline" in kinds and "hold" not in kinds and self._chance(lv.relative),
            "hold": "hold" in kinds and self._chance(lv.relative),
        }

        def fits(phrase: str) -> bool:
            return all(_relative(phrase, k) == want_rel[k] for k in kinds if k in TICK_KINDS)

        if len(kinds) == 2 and self._chance(0.5):
            pool = _PAIR_PHRASES[lang][(kinds[0], kinds[1])]
            phrases = [self._pick([p for p in pool if fits(p)] or pool)]
        else:
            phrases = []
            for kind in kinds:
                pool = _PHRASES[lang][kind]
                phrases.append(self._pick([p for p in pool if fits(p)] or pool))
            if self._chance(0.5):
                phrases.reverse()
        text = "".join(phrases)

        truth: list[Constraint] = []
        slots: dict[str, Callable[[], str]] = {}
        hold_delta = 0
        if "hold" in kinds:
            rel = _relative(text, "hold")
            held, shown = self._hold_tick(tick, rel=rel)
            hold_delta = held - tick
            truth.append(Constraint("hold", tick=held))
            slots["ht"] = partial(self._tick_text, shown, lang)
            slots["hn"] = partial(self._number_text, shown, lang, absolute=True)
            slots["hk"] = partial(self._number_text, shown, lang, absolute=False)
        if "deadline" in kinds:
            rel = _relative(text, "deadline")
            inclusive = "{dti}" in text or "{dni}" in text
            room = distance + _DEADLINE_ROOM + hold_delta
            deadline, shown = self._deadline_tick(
                tick, due, room=room, rel=rel, inclusive=inclusive
            )
            truth.append(Constraint("deadline", tick=deadline))
            slots["dt"] = slots["dti"] = partial(self._tick_text, shown, lang)
            slots["dn"] = slots["dni"] = partial(self._number_text, shown, lang, absolute=True)
            slots["dk"] = partial(self._number_text, shown, lang, absolute=False)
        for kind in kinds:
            if kind in ROBOT_KINDS:
                robot = self._pick(only_pool if kind == "only_robot" else not_pool)
                truth.append(Constraint(kind, robot=robot))
                slots["r"] = partial(self._robot_text, robot, lang)

        segs = self._fill(phrases[0], slots, protect=True)
        for phrase in phrases[1:]:
            segs.append((self._pick(_CONNECTORS[lang]), False))
            segs.extend(self._fill(phrase, slots, protect=True))
        if self._chance(lv.extra_distractor):
            extra = self._distractor(lang, tick=tick, robots=robots, safe_only=True)
            if extra is not None:
                glue: list[_Seg] = [(self._pick(_CONNECTORS[lang]), False)]
                segs = extra + glue + segs if self._chance(0.5) else segs + glue + extra
        return self._finish(self._decorate(segs, lang), lang), canonical(truth)

    # Template style (the first wave: keep its draws and outputs exactly) ----------------------

    def _template_constrained(
        self, *, tick: int, due: int, distance: int, capable: Sequence[str]
    ) -> tuple[str, tuple[Constraint, ...]]:
        rng = self.rng
        kind = ("robot", "deadline", "hold")[int(rng.integers(3))]
        if kind == "robot":
            robot = capable[int(rng.integers(len(capable)))]
            return f"fragile: only {robot} has the soft gripper", (
                Constraint("only_robot", robot=robot),
            )
        if kind == "deadline":
            deadline = tick + max(distance + 10, (due - tick) // 2)
            return f"VIP customer, deliver before tick {deadline}", (
                Constraint("deadline", tick=deadline),
            )
        release = tick + int(rng.integers(20, 60))
        return f"hold until the truck arrives at tick {release}", (
            Constraint("hold", tick=release),
        )

    # Realistic style: the helpers of plain() and constrained() -------------------------------

    def _hold_tick(self, tick: int, *, rel: bool) -> tuple[int, int]:
        """A hold 15..80 ticks after arrival: (ground-truth tick, number the note shows)."""
        delta = int(self.rng.integers(_HOLD_MIN, _HOLD_MAX + 1))
        if self._chance(self._level.rounding):
            step = self._pick((5, 10))
            base = 0 if rel else tick  # round the count, or the absolute tick people read
            shown = _round_up(base + delta, step)
            if shown - base > _HOLD_MAX:
                shown -= step
            if _HOLD_MIN <= shown - base <= _HOLD_MAX:
                delta = shown - base
        held = tick + delta
        return held, (delta if rel else held)

    def _deadline_tick(
        self, tick: int, due: int, *, room: int, rel: bool, inclusive: bool
    ) -> tuple[int, int]:
        """A deadline at least ``room`` after arrival, tighter than ``due`` when possible.

        Returns:
            (ground-truth tick, number the note shows): the count for a relative phrasing, the
            tick (minus one for an inclusive phrasing) for an absolute one.
        """
        span = due - tick
        if span - 1 <= room:
            delta = room  # as tight as the room allows (cannot beat ``due`` when span <= room)
        else:
            low = max(room, span // 3)
            high = max(low, min(span - 1, 3 * span // 4))
            delta = int(self.rng.integers(low, high + 1))
        deadline = tick + delta
        off = 1 if inclusive and not rel else 0

        def truth_of(shown: int) -> int:
            return tick + shown if rel else shown + off

        shown = delta if rel else deadline - off
        if self._chance(self._level.rounding):
            rounded = _round_up(shown, self._pick((5, 10, 10, 25, 50)))
            # Rounding only ever loosens: keep it while the deadline stays tighter than due.
            if truth_of(rounded) < due or deadline >= due:
                shown = rounded
        return truth_of(shown), shown

    # Rendering --------------------------------------------------------------------------------

    def _lang(self) -> Lang:
        return "zh" if self._chance(self.config.zh_share) else "en"

    def _chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def _pick(self, items: Sequence[_T]) -> _T:
        return items[int(self.rng.integers(len(items)))]

    def _fill(
        self, phrase: str, slots: dict[str, Callable[[], str]], *, protect: bool
    ) -> list[_Seg]:
        """A phrasing as segments: literal text free, each slot rendered anew (forms vary)."""
        segs: list[_Seg] = []
        pos = 0
        for m in _SLOT.finditer(phrase):
            if m.start() > pos:
                segs.append((phrase[pos : m.start()], False))
            segs.append((slots[m.group(1)](), protect))
            pos = m.end()
        if pos < len(phrase):
            segs.append((phrase[pos:], False))
        return segs

    def _robot_text(self, robot: str, lang: Lang) -> str:
        m = _ROBOT_ID.fullmatch(robot)
        if m is None:
            return robot  # not a robot_N id: write it as it is
        if lang == "zh" and self._chance(self._level.canonical):
            return self._pick((robot, "{n}号机器人")).format(n=int(m.group(1)))
        if self._chance(self._level.canonical):
            return robot
        n = int(m.group(1))
        form = self._pick(_EN_ROBOT_FORMS if lang == "en" else _ZH_ROBOT_FORMS)
        words = number_words(n) if n < 1000 else str(n)
        zh = zh_numeral(n) if n <= 9999 else str(n)
        return form.format(n=n, w=words, z=zh)

    def _number_text(self, n: int, lang: Lang, *, absolute: bool) -> str:
        """A bare number: digits, English words, Chinese numerals or mixed (3百)."""
        words = self._level.words
        if lang == "en":
            if _en_words_ok(n, absolute=absolute) and self._chance(words):
                return number_words(n, a_for_one=self._chance(0.4), use_and=self._chance(0.7))
            return str(n)
        forms = ["digits"]
        weights = [1.0]
        if 0 <= n <= 9999:
            forms.append("numeral")
            weights.append(1.5 * words)
        if 100 <= n <= 9900 and n % 100 == 0:
            forms.append("mixed")
            weights.append(0.5 * words)
        x = float(self.rng.random()) * sum(weights)
        form = forms[-1]
        for name, weight in zip(forms, weights, strict=True):
            if x < weight:
                form = name
                break
            x -= weight
        if form == "numeral":
            return zh_numeral(n, liang=self._chance(0.6))
        if form == "mixed":
            return zh_mixed(n)
        return str(n)

    def _tick_text(self, n: int, lang: Lang) -> str:
        """An absolute tick with its unit: ``tick 300``, ``t=300``, ``T300``, ``第三百个时刻``."""
        lv = self._level
        if lang == "en":
            if _en_words_ok(n, absolute=True) and self._chance(lv.words / 2):
                return "tick " + number_words(n, a_for_one=self._chance(0.4))
            form = "tick {v}" if self._chance(lv.canonical) else self._pick(_EN_TICK_FORMS)
            return form.format(v=n)
        form = "t={v}" if self._chance(lv.canonical) else self._pick(_ZH_TICK_FORMS)
        numeral = n <= 9999 and self._chance(lv.words)
        return form.format(v=n, x=zh_numeral(n) if numeral else n)

    def _distractor(
        self, lang: Lang, *, tick: int, robots: Sequence[str], safe_only: bool
    ) -> list[_Seg] | None:
        """A sentence that mentions robots or numbers but constrains nothing (None: none fits)."""
        pool = _SAFE_DISTRACTORS[lang] + (() if safe_only else _PLAIN_DISTRACTORS[lang])
        fleet, distinct = self._fleet_of(robots)
        two = distinct >= 2
        usable = [p for p in pool if ("{r}" not in p or fleet) and ("{r2}" not in p or two)]
        if not usable:
            return None
        phrase = self._pick(usable)
        k = int(self.rng.integers(len(fleet))) if fleet else -1
        first = fleet[k] if fleet else ""
        if distinct == len(fleet) and len(fleet) >= 2:
            # The same draw as picking from the fleet without ``first``, without building it.
            j = int(self.rng.integers(len(fleet) - 1))
            second = fleet[j if j < k else j + 1]
        else:
            second = self._pick([r for r in fleet if r != first] or [first])
        b = int(self.rng.integers(2, 61))
        a = int(self.rng.integers(1, b + 1))
        past = max(0, tick - int(self.rng.integers(1, 61)))
        slots: dict[str, Callable[[], str]] = {
            "r": partial(self._robot_text, first, lang),
            "r2": partial(self._robot_text, second, lang),
            "a": partial(self._number_text, a, lang, absolute=False),
            "b": partial(self._number_text, b, lang, absolute=False),
            "big": partial(str, int(self.rng.integers(1000, 100_000))),
            "past": partial(self._tick_text, past, lang),
        }
        return self._fill(phrase, slots, protect=False)

    def _fleet_of(self, robots: Sequence[str]) -> tuple[Sequence[str], int]:
        """The fleet and how many distinct ids it has (kept for the last tuple seen)."""
        if isinstance(robots, tuple):
            # A tuple cannot change: the order stream passes the same one for every order.
            if self._fleet_seen is None or self._fleet_seen[0] is not robots:
                self._fleet_seen = (robots, len(set(robots)))
            return robots, self._fleet_seen[1]
        fleet = list(robots)
        return fleet, len(set(fleet))

    def _decorate(self, segs: list[_Seg], lang: Lang) -> list[_Seg]:
        """Maybe a greeting before and / or a "thanks" after."""
        if not self._chance(self._level.decorate):
            return segs
        where = float(self.rng.random())
        out = list(segs)
        if where < 0.6:
            out.insert(0, (self._pick(_PREFIXES[lang]), False))
        if where >= 0.4:
            out.append((self._pick(_SUFFIXES[lang]), False))
        return out

    def _finish(self, segs: list[_Seg], lang: Lang) -> str:
        """Capital first letter, typos and odd capitals (free text only); the note's text."""
        lv = self._level
        if self._chance(0.4) and segs and not segs[0][1] and segs[0][0][:1].islower():
            segs = [(segs[0][0][0].upper() + segs[0][0][1:], False), *segs[1:]]
        if self._chance(lv.noise):
            for _ in range(1 + int(self.rng.integers(lv.max_edits))):
                segs = self._typo(segs, lang)
            if self._chance(0.4):
                segs = self._odd_case(segs)
        return "".join(text for text, _ in segs).strip()

    def _typo(self, segs: list[_Seg], lang: Lang) -> list[_Seg]:
        """One typo in free text: a letter of a long word, an apostrophe, a Chinese slip."""
        spots: list[tuple[int, int, int]] = []  # (segment, char, end of word or -1)
        for i, (text, protected) in enumerate(segs):
            if protected:
                continue
            for m in _WORD.finditer(text):
                if m.group().lower() not in _KEEP_WORDS:
                    spots.extend((i, j, m.end()) for j in range(m.start(), m.end()))
            for j, ch in enumerate(text):
                punct = ch in _ZH_PUNCT and (ch in "（）" or _may_drop(text, j))
                if ch == "'" or (lang == "zh" and (ch in _ZH_SWAPS or punct)):
                    spots.append((i, j, -1))
        if not spots:
            return segs
        i, j, end = self._pick(spots)
        text = segs[i][0]
        ch = text[j]
        if end < 0:  # apostrophe lost, homophone, half-width or lost punctuation
            if ch == "'":
                new = ""
            elif ch in _ZH_SWAPS:
                new = _ZH_SWAPS[ch]
            elif ch in "（）":
                new = _ZH_PUNCT[ch]  # half-width; brackets are never lost
            else:
                new = self._pick((_ZH_PUNCT[ch], ""))
            text = text[:j] + new + text[j + 1 :]
        else:
            op = self._pick(("swap", "drop", "double", "neighbour"))
            if op == "swap" and j + 1 < end:
                text = text[:j] + text[j + 1] + ch + text[j + 2 :]
            elif op == "drop":
                text = text[:j] + text[j + 1 :]
            elif op == "double":
                text = text[:j] + ch + text[j:]
            else:
                near = _NEIGHBOURS.get(ch.lower(), ch.lower())
                sub = self._pick(near)
                text = text[:j] + (sub.upper() if ch.isupper() else sub) + text[j + 1 :]
        return [*segs[:i], (text, False), *segs[i + 1 :]]

    def _odd_case(self, segs: list[_Seg]) -> list[_Seg]:
        """ALL CAPS, all lower, Every Word Capitalised, or a sticky shift key (DEliver)."""
        style = self._pick(("upper", "lower", "title", "sticky"))
        out: list[_Seg] = []
        sticky_done = False
        for text, protected in segs:
            if protected:
                out.append((text, True))
                continue
            if style == "upper":
                text = text.upper()
            elif style == "lower":
                text = text.lower()
            elif style == "title":
                text = re.sub(r"[A-Za-z]+", lambda m: m.group().capitalize(), text)
            elif not sticky_done and (m := re.search(r"[A-Za-z]{3,}", text)):
                k = m.start()
                text = text[:k] + text[k : k + 2].upper() + text[k + 2 :]
                sticky_done = True
            out.append((text, False))
        return out
