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

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetmind.errors import TaskFileError

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


def _read_jsonl(path: str | Path, model: type[BaseModel]) -> list[Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskFileError(f"{p}: cannot read note file ({exc.strerror})") from None
    out: list[Any] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.append(model.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{p}:{lineno}: not valid JSON ({exc.msg})") from None
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "<line>"
            raise TaskFileError(f"{p}:{lineno}: field {field!r}: {err['msg']}") from None
    return out


def load_labelled(path: str | Path) -> list[LabelledNote]:
    """Read a labelled note set (one JSON object a line; ``#`` lines are comments).

    Raises:
        TaskFileError: naming the file, line and field at fault.
    """
    return _read_jsonl(path, LabelledNote)


def load_inputs(path: str | Path) -> list[NoteInput]:
    """Read ``notes read`` input lines (``note``, ``arrival_tick``, ``robots``).

    Raises:
        TaskFileError: naming the file, line and field at fault.
    """
    return _read_jsonl(path, NoteInput)


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
        from fleetmind.errors import ConfigError

        if not 0.0 <= self.zh_share <= 1.0:
            raise ConfigError(f"notes.zh_share: expected a share in [0, 1], got {self.zh_share}")
        if self.style not in get_args(NoteStyle):
            raise ConfigError(f"notes.style: expected template or realistic, got {self.style!r}")
        if self.difficulty not in get_args(Difficulty):
            raise ConfigError(
                f"notes.difficulty: expected easy, normal or hard, got {self.difficulty!r}"
            )


_TEMPLATE_FILLERS = (
    "standard restock",
    "customer asked for tracking",
    "regular weekly order",
    "pack with the usual care",
    "",
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

_EN_PHRASES: dict[ConstraintKind, tuple[str, ...]] = {
    "only_robot": (
        "fragile: only {r} has the soft gripper",
        "only {r} may take this one",
        "{r} only",
        "must go on {r}",
        "assign to {r}, nobody else",
        "send {r} for this, it has the right tray",
        "reserved for {r}",
        "{r} has the cold box, use it and no other robot",
        "nobody but {r} should carry this",
        "heavy pallet, {r} is the only one rated for it",
        "give this to {r} and only {r}",
        "exclusively {r} please",
        "this one is for {r}, no one else touches it",
        "customer insists on {r}, don't swap it",
    ),
    "not_robot": (
        "not {r}, its gripper is broken",
        "do not use {r}",
        "anyone but {r}",
        "{r} is off limits for this order",
        "keep {r} away from this one",
        "{r} can't take it, sensor fault",
        "any robot except {r}",
        "don't send {r}",
        "never {r} (it scratched the last one)",
        "avoid {r} for this order",
        "no {r} please",
        "{r} must not carry this",
        "skip {r}, it is due for maintenance",
        "{r} dropped the last box, someone else take it",
    ),
    "deadline": (
        "deliver before {dt}",
        "VIP customer, has to arrive before {dt}",
        "must be at the station before {dt}",
        "hard deadline: {dt}",
        "{dt} is the cutoff, get it there before then",
        "no later than {dti}, please",
        "customer is waiting, drop off before {dt}",
        "late after {dti} means a refund",
        "get this one out before {dt} or we miss the truck",
        "has to be delivered by {dti}",
        "rush: before {dt}",
        "before tick {dn} please",
        "the delivery tick must be under {dn}",
        "must reach the station before tick {dn}",
        "deliver within {dk} ticks",
        "has to be there in the next {dk} ticks",
        "customer needs it inside {dk} ticks",
        "drop off within {dk} ticks of arrival",
        "you have {dk} ticks to get it to the station",
        "less than {dk} ticks from now, please",
        "urgent, deliver in under {dk} ticks",
        "should be at the station within the next {dk} ticks",
        "{dk} ticks tops, it's urgent",
        "rush order: {dk} ticks from arrival to drop-off",
    ),
    "hold": (
        "hold until the truck arrives at {ht}",
        "do not pick up before {ht}",
        "not ready until {ht}",
        "wait until {ht} before loading",
        "shelf is being restocked, pickup from {ht} on",
        "don't touch it before {ht}",
        "on hold till tick {hn}",
        "pickup not before tick {hn}",
        "released at {ht}, leave it until then",
        "goods arrive at {ht}, no pickup earlier",
        "keep it on the shelf until {ht}",
        "can be collected from tick {hn}",
        "paint is still drying, earliest pickup {ht}",
        "hold for {hk} ticks",
        "don't pick up for the next {hk} ticks",
        "ready in {hk} ticks",
        "wait {hk} ticks before pickup",
        "{hk} ticks from now it can go, not earlier",
        "pickup no sooner than {hk} ticks from now",
        "still being packed, give it {hk} ticks",
        "leave it alone for {hk} ticks",
    ),
}

_ZH_PHRASES: dict[ConstraintKind, tuple[str, ...]] = {
    "only_robot": (
        "只能由{r}来送",
        "只让{r}送",
        "易碎品，只有{r}有软夹爪",
        "指定{r}",
        "这单给{r}，别的不行",
        "必须用{r}",
        "{r}专送",
        "除了{r}谁都不能碰",
        "只有{r}能搬这么重的",
        "请安排{r}，其他机器人不要接",
        "冷链货，只能{r}送",
        "仅限{r}",
    ),
    "not_robot": (
        "不要用{r}",
        "别派{r}",
        "{r}不行，夹爪坏了",
        "除了{r}都可以",
        "{r}不能送这单",
        "禁止{r}接这单",
        "{r}传感器有问题，换别的",
        "谁都行，就是不要{r}",
        "{r}别碰这个",
        "避开{r}",
        "{r}上次摔坏了东西，这次别用它",
    ),
    "deadline": (
        "请在{dt}之前送到",
        "{dt}前必须送达",
        "客户急用，{dn}之前送到",
        "最晚{dni}送到",
        "不晚于{dti}送达",
        "截止{dt}，过了就不要了",
        "务必在{dt}以前送到工位",
        "加急！{dt}前到",
        "要在第{dn}个时刻前送到",
        "{dt}之前送不到就麻烦了",
        "赶{dt}的车，之前必须送到",
        "时刻{dn}之前完成配送",
        "{dk}个时刻内送到",
        "请在{dk}个时刻之内送达",
        "加急，{dk}个tick内到",
        "从现在起{dk}个时刻内必须送到",
        "{dk}个时刻以内送到工位",
        "限时{dk}个时刻",
        "只给{dk}个时刻，尽快送到",
        "{dk}个时刻之内要到",
    ),
    "hold": (
        "{ht}之前不要取货",
        "{ht}以后才能取",
        "等到{ht}再取",
        "货还没到，{ht}之后再来取",
        "先别动，{ht}之后再取",
        "{hn}之前别取",
        "暂缓取货，至少等到{ht}",
        "卡车{ht}到，之前不能取",
        "从{ht}开始可以取货",
        "第{hn}个时刻以前请勿取货",
        "还在打包，{ht}才能取",
        "{hk}个时刻后才能取",
        "等{hk}个时刻再取",
        "{hk}个时刻之内不要取货",
        "先放{hk}个时刻",
        "过{hk}个tick再来取",
        "现在别取，{hk}个时刻以后再说",
        "还要{hk}个时刻才能好",
    ),
}

_PHRASES: dict[Lang, dict[ConstraintKind, tuple[str, ...]]] = {"en": _EN_PHRASES, "zh": _ZH_PHRASES}

# Two facts: keys are sorted kind pairs. A hold with a deadline gives the deadline absolute.
_Pair = tuple[ConstraintKind, ConstraintKind]
_PAIRS: tuple[_Pair, ...] = (
    ("hold", "only_robot"),
    ("hold", "not_robot"),
    ("deadline", "only_robot"),
    ("deadline", "not_robot"),
    ("deadline", "hold"),
)

_PAIR_PHRASES: dict[Lang, dict[_Pair, tuple[str, ...]]] = {
    "en": {
        ("hold", "only_robot"): (
            "hold until {ht}, then only {r} may take it",
            "{r} only, and not before {ht}",
            "wait {hk} ticks, then send {r} (no other robot)",
            "reserved for {r}; pickup from tick {hn} on",
            "only {r} has the clamp for this, and it isn't ready for {hk} ticks",
        ),
        ("hold", "not_robot"): (
            "not {r}, and don't pick up before {ht}",
            "anyone except {r}, but not before {ht}",
            "hold {hk} ticks; {r} must not carry it",
            "keep {r} off this one and leave it on the shelf until {ht}",
        ),
        ("deadline", "only_robot"): (
            "only {r}, and before {dt}",
            "{r} has to deliver it before {dt}",
            "send {r} only, it must arrive within {dk} ticks",
            "rush for {r}: at the station before tick {dn}",
        ),
        ("deadline", "not_robot"): (
            "any robot but {r}, deliver before {dt}",
            "don't use {r}; the customer needs it within {dk} ticks",
            "before {dt}, and not on {r}",
            "{r} is broken, someone else get this there before {dt}",
        ),
        ("deadline", "hold"): (
            "not before {ht}, and delivered before {dt}",
            "delivery window: pick up from {ht}, deliver before {dt}",
            "wait {hk} ticks, but it must still arrive before {dt}",
            "hold until {ht}; hard deadline {dt}",
        ),
    },
    "zh": {
        ("hold", "only_robot"): (
            "{ht}之后才能取，而且只能{r}送",
            "只让{r}送，{ht}之前别取",
            "等{hk}个时刻再取，指定{r}",
        ),
        ("hold", "not_robot"): (
            "不要用{r}，{ht}之前也别取",
            "{hk}个时刻后再取，别派{r}",
            "{r}不行；等到{ht}再取",
        ),
        ("deadline", "only_robot"): (
            "只能{r}送，{dt}之前送到",
            "{r}专送，{dk}个时刻内到",
            "指定{r}，务必在{dt}前送达",
        ),
        ("deadline", "not_robot"): (
            "别用{r}，{dt}之前送到",
            "{dk}个时刻内送到，但不要派{r}",
            "除了{r}谁都行，{dt}前到",
        ),
        ("deadline", "hold"): (
            "{ht}之后才能取，{dt}之前必须送到",
            "等到{ht}再取，最晚{dni}送到",
            "先放{hk}个时刻，{dt}前送达",
        ),
    },
}

_CONNECTORS: dict[Lang, tuple[str, ...]] = {
    "en": (". ", "; ", ", ", " - ", ". also ", ", and ", " + ", " / "),
    "zh": ("，", "；", "。", "。另外，", "，还有", "，而且", " "),
}

_FILLERS: dict[Lang, tuple[str, ...]] = {
    "en": (
        *_TEMPLATE_FILLERS,
        "nothing special",
        "normal priority",
        "repeat order, same as last week",
        "gift wrap requested",
        "please double-check the label",
        "handle with care",
        "no notes",
        "n/a",
        "bulk order, usual process",
    ),
    "zh": (
        "常规补货",
        "普通订单",
        "每周例行订单",
        "请按常规包装",
        "客户要求提供物流跟踪",
        "轻拿轻放",
        "无特殊要求",
        "正常处理",
        "老客户，按老规矩",
        "补货单",
        "请核对标签",
        "礼品包装",
    ),
}

# Distractors mention robots, numbers or past ticks and constrain nothing. Slots: {r}, {r2} two
# different robots, {a} <= {b} small numbers, {big} an order number, {past} a tick before
# arrival. The safe ones may sit in a constrained note; the others (cancellations, "anyone can
# take it") would contradict a constraint, so they appear in plain notes only.
_SAFE_DISTRACTORS: dict[Lang, tuple[str, ...]] = {
    "en": (
        "{r} loaded the truck this morning",
        "box {a} of {b}",
        "{r} was fixed yesterday",
        "weighs {a} kg",
        "order #{big}, {a} items",
        "customer called at {past}",
        "label printed at {past}",
        "last time {r} did this one, no complaints",
        "{a} pallets on the dock, this is one of them",
        "ref {big}",
    ),
    "zh": (
        "{r}昨天修好了",
        "{r}早上装过车",
        "共{b}箱，这是第{a}箱",
        "重{a}公斤",
        "订单号{big}",
        "客户在{past}打过电话",
        "上次是{r}送的，客户很满意",
        "码头有{a}个托盘，这是其中一个",
        "标签是{past}打印的",
    ),
}
_PLAIN_DISTRACTORS: dict[Lang, tuple[str, ...]] = {
    "en": (
        "the fragile label is wrong, anyone can take it",
        "ignore the earlier hold, ship whenever",
        "the old deadline is cancelled, no rush",
        "any robot is fine, {r} included",
        "previous note said only {r}, that no longer applies",
        "{r} and {r2} are both fine for this",
        "no hold on this one",
        "the deadline was {past}, but it was dropped",
        "not urgent, {a} units",
        "not restricted to {r} anymore",
    ),
    "zh": (
        "易碎标签贴错了，谁送都行",
        "之前说的暂缓取货取消了，随时可以送",
        "原来的截止时间取消了，不急",
        "不限机器人，{r}也可以",
        "之前说只能{r}送，现在不用了",
        "{r}和{r2}都可以送",
        "没有时间要求",
        "不急，共{a}件",
        "{r}的限制已经取消",
    ),
}

_PREFIXES: dict[Lang, tuple[str, ...]] = {
    "en": (
        "pls ",
        "fyi: ",
        "note: ",
        "hi team, ",
        "dispatch: ",
        "re this order: ",
        "heads up - ",
        "from the front desk: ",
    ),
    "zh": ("注意：", "客户要求：", "备注：", "各位，", "提醒一下，", "前台留言："),
}
_SUFFIXES: dict[Lang, tuple[str, ...]] = {
    "en": (
        " thanks",
        " thx!",
        ", thanks!",
        " pls",
        " - Sam",
        " :)",
        "!!",
        ".",
        " (customer request)",
    ),
    "zh": ("，谢谢", "，辛苦了", "！", "。", "～", "，麻烦了", "（客户要求）"),
}

_EN_ROBOT_FORMS = (
    "robot {n}",
    "Robot{n}",
    "Robot {n}",
    "r{n}",
    "R{n}",
    "bot #{n}",
    "bot {n}",
    "robot #{n}",
    "robot-{n}",
    "robot {w}",
    "Robot {w}",
)
_ZH_ROBOT_FORMS = (
    "{n}号机器人",
    "{n}号车",
    "机器人{n}",
    "{z}号机器人",
    "{z}号车",
    "{n}号",
    "机器人{n}号",
    "r{n}",
    "{n}号小车",
    "{z}号",
)
_EN_TICK_FORMS = ("tick {v}", "t={v}", "T{v}", "t{v}", "tick #{v}", "T={v}", "t = {v}", "Tick {v}")
# {x}: the number in digits or Chinese numerals; {v}: digits.
_ZH_TICK_FORMS = ("t={v}", "T{v}", "tick {v}", "T={v}", "时刻{x}", "第{x}个时刻", "第{x}时刻")

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
        return self._realistic_constrained(
            tick=tick, due=due, distance=distance, capable=capable, robots=robots
        )

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

    # Realistic style --------------------------------------------------------------------------

    def _realistic_constrained(
        self,
        *,
        tick: int,
        due: int,
        distance: int,
        capable: Sequence[str],
        robots: Sequence[str],
    ) -> tuple[str, tuple[Constraint, ...]]:
        lv = self._level
        lang = self._lang()
        only_pool = list(capable)
        # Never exclude the last capable robot (an empty ``capable`` means an empty fleet).
        not_pool = [r for r in robots if set(capable) - {r}]
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
        fleet = list(robots)
        usable = [
            p
            for p in pool
            if ("{r}" not in p or fleet) and ("{r2}" not in p or len(set(fleet)) >= 2)
        ]
        if not usable:
            return None
        phrase = self._pick(usable)
        first = self._pick(fleet) if fleet else ""
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
