"""Deterministic groundwork for every note reader: normalise a note, find its candidates.

Readers differ in how they decide what a mention means; they share what is certain: which robot
ids and which times a note mentions. :func:`extract` finds them in English and Chinese:

- robots: ``robot_3``, ``robot 3``, ``Robot3``, ``r3``, ``bot #3``, ``robot three``, ``3号机器人``,
  ``3号车``, ``机器人3`` (only ids of the fleet count);
- times: ``tick 300``, ``t=300``, ``T300``, ``step 300``, ``第300个时刻`` (absolute), ``25 ticks``,
  ``二十个时刻`` (a duration: relative to the order's arrival), and bare numbers (absolute, kept
  for the readers' cue rules);
- number forms: digits, English number words (``twenty-five``, ``a hundred and ten``) and Chinese
  numerals (``二十五``, ``三百零五``, ``两百``, ``3百``; converted with ``cn2an``).

:func:`normalize` also mends small typos in the words readers key on (``hodl`` -> ``hold``,
``befor`` -> ``before``), by Damerau-Levenshtein distance 1 (``jellyfish``), so a reader's cue
rules see one spelling. It is also the cache key: a note is read once per normalised text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import cn2an
import jellyfish
import zhconv

# Words the cue rules of the readers key on; a token one edit away from one is mended.
CUE_WORDS = (
    "robot",
    "robots",
    "only",
    "before",
    "after",
    "until",
    "hold",
    "wait",
    "deliver",
    "delivered",
    "delivery",
    "within",
    "inside",
    "except",
    "never",
    "ticks",
    "tick",
    "pickup",
    "pick",
    "picked",
    "release",
    "released",
    "earlier",
    "later",
    "latest",
    "earliest",
    "deadline",
    "exclusively",
    "reserved",
    "anyone",
    "nobody",
    "ignore",
    "cancel",
    "cancelled",
    "should",
    "must",
    "allowed",
    "assign",
    "assigned",
    "steps",
    "other",
    "keep",
    "leave",
    "give",
    "from",
    "else",
    "send",
    "ready",
    "cutoff",
    "touch",
    "someone",
    "station",
    "insists",
    "insist",
    "than",
    "ready",
    "next",
)
# Real words one edit away from a cue word: never "mended" into it.
_KEEP = frozenset(
    {
        "hole",
        "holt",
        "bold",
        "cold",
        "gold",
        "told",
        "sold",
        "fold",
        "mold",
        "wail",
        "waist",
        "pack",
        "pick",
        "rick",
        "kick",
        "lick",
        "nick",
        "sick",
        "wick",
        "tack",
        "tuck",
        "tics",
        "steep",
        "stops",
        "step",
        "anyway",
        "mist",
        "must",
        "bust",
        "dust",
        "gust",
        "just",
        "lust",
        "rust",
        "ones",
        "onto",
        "ugly",
        "holy",
        "hood",
        "mother",
        "otter",
        "either",
        "withing",
        "rabbit",
        "robin",
        "reboot",
        "after",
        "alter",
        "inside",
        "later",
        "layer",
        "latter",
        "water",
        "hater",
        "pickup",
        "picked",
        "ticket",
        "tickets",
        "dead",
        "allow",
        "allows",
        "should",
        "would",
        "could",
        "assign",
        "assigns",
        "cancels",
        "never",
        "fever",
        "lever",
        "clever",
        "sever",
        "except",
        "expect",
        "accept",
        "earlier",
        "early",
        "steps",
        "form",
        "late",
        "rate",
        "date",
        "gate",
        "frog",
        "give",
        "live",
        "love",
        "lose",
        "else",
        "elsa",
        "sent",
        "send",
        "sand",
        "seed",
        "lend",
        "read",
        "keep",
        "kept",
        "peep",
        "deep",
        "weep",
        "leaf",
        "lease",
        "ready",
        "touch",
        "tough",
        "couch",
        "pouch",
        "often",
        "sender",
        "given",
    }
)

_CJK = re.compile(r"[\u3400-\u9fff]")
# Cantonese words the cue rules would not know, as their Mandarin equivalents.
_CANTONESE = (
    ("唔好", "不要"),
    ("唔可以", "不可以"),
    ("唔得", "不行"),
    ("唔该", "请"),
    ("唔使", "不用"),
    ("唔", "不"),
    ("俾", "给"),
    ("喺", "在"),
    ("先好", "才"),
    ("先可以", "才可以"),
    ("执货", "取货"),
    ("等多", "再等"),
    ("呢", "这"),
    ("佢", "它"),
    ("嘅", "的"),
    ("同埋", "而且"),
)
# Shorthand people type; rewritten before the cue rules look.
_SLANG = (
    (re.compile(r"\bb4\b"), "before"),
    (re.compile(r"\b(?:til|till|untill)\b"), "until"),
    (re.compile(r"\bpls\b|\bplz\b"), "please"),
    (re.compile(r"\bw/o\b"), "without"),
    (re.compile(r"\bmins?\b"), "ticks"),
    (re.compile(r"\bdead line\b"), "deadline"),
    (re.compile(r"\bnlt\b"), "no later than"),
    (re.compile(r"\bnet\b(?= t)"), "no earlier than"),
    (re.compile(r"\bdlvr\b|\bdelv\b|\bdeliv\b"), "deliver"),
    (re.compile(r"\bpik\b|\bpck\b"), "pick"),
    (re.compile(r"\b(?:tic|tik|tck)\b"), "tick"),
    (re.compile(r"\b(?:tics|tiks|tcks|ticls|tikcs|tickss)\b"), "ticks"),
    (re.compile(r"\bb/f\b"), "before"),
)

_EN_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fourty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_EN_SCALES = {"hundred": 100, "thousand": 1000}
_NUMBER_WORDS = frozenset([*_EN_UNITS, *_EN_TENS, *_EN_SCALES])
_EN_WORD = "|".join(sorted([*_EN_UNITS, *_EN_TENS, *_EN_SCALES], key=len, reverse=True))
# A run of number words ("a hundred and twenty-five", "two thousand three hundred").
_EN_RUN = re.compile(
    rf"\b(?:(?:a|an)\s+(?=hundred|thousand))?(?:{_EN_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{_EN_WORD}))*\b"
)
# "one" is a pronoun far more often than a number ("no one else", "this one"): it counts only
# next to a robot word or a time unit.
_ONE_AS_NUMBER = re.compile(
    r"(?:robot|bot|r|#|tick|t|step|no\.|number)\s*[_#-]?\s*$|^\s*(?:ticks?|steps?|hundred|thousand)"
)

_ZH_DIGITS = "零〇一二两三四五六七八九十百千万"
# A run of Chinese numerals, possibly mixed with Arabic digits ("3百", "1百2十").
_ZH_RUN = re.compile(rf"[0-9]*[{_ZH_DIGITS}][0-9{_ZH_DIGITS}]*")
_ZH_UNIT_AFTER = re.compile(r"^\s*(?:号|个|時|时|tick|步|拍|分钟|秒)")


def _en_value(words: str) -> int | None:
    """The value of a run of English number words, or None if it does not parse."""
    total = current = 0
    seen = False
    for w in re.split(r"[\s-]+", words.strip()):
        if w in ("and", "a", "an"):
            if w != "and":
                current = max(current, 1)
            continue
        if w in _EN_UNITS:
            current += _EN_UNITS[w]
        elif w in _EN_TENS:
            current += _EN_TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w == "thousand":
            total += max(current, 1) * 1000
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


def _zh_value(run: str) -> int | None:
    """The value of a Chinese (or mixed) numeral run, or None."""
    try:
        value = cn2an.cn2an(run, "smart")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def _mend(token: str) -> str:
    """A token one edit away from a cue word becomes the cue word (typos like ``hodl``)."""
    if (
        len(token) < 4
        or token in _KEEP
        or token in CUE_WORDS
        or token in _NUMBER_WORDS
        or not token.isalpha()
    ):
        return token
    for cue in CUE_WORDS:
        if (
            abs(len(cue) - len(token)) <= 1
            and jellyfish.damerau_levenshtein_distance(token, cue) == 1
        ):
            return cue
    return token


def normalize(note: str) -> str:
    """Canonical text of a note: NFKC, lower case, one space, typos mended, numbers as digits.

    The result is what every reader's rules look at and the key of the note cache.
    """
    text = unicodedata.normalize("NFKC", note).lower()
    text = text.replace("’", "'").replace("‘", "'")
    if _CJK.search(text):
        # Traditional characters to simplified, then common Cantonese function words.
        text = zhconv.convert(text, "zh-cn")
        for yue, mandarin in _CANTONESE:
            text = text.replace(yue, mandarin)
    text = re.sub(r"(?<=[a-z0-9])'s\b", " is", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"[a-z]+", lambda m: _mend(m.group(0)), text)
    for slang, word in _SLANG:
        text = slang.sub(word, text)

    def en(m: re.Match[str]) -> str:
        words = m.group(0)
        if words in ("one", "a", "an"):
            before = text[: m.start()]
            after = text[m.end() :]
            if not (_ONE_AS_NUMBER.search(before) or _ONE_AS_NUMBER.match(after)):
                return words
        value = _en_value(words)
        return words if value is None else str(value)

    text = _EN_RUN.sub(en, text)

    def zh(m: re.Match[str]) -> str:
        run = m.group(0)
        # A lone "一" is mostly a word part ("一定", "一下"): a number only before a unit.
        if run in ("一", "两") and not _ZH_UNIT_AFTER.match(text[m.end() :]):
            return run
        value = _zh_value(run)
        return run if value is None else str(value)

    return _ZH_RUN.sub(zh, text)


@dataclass(frozen=True)
class RobotMention:
    """A robot id the note mentions.

    Attributes:
        robot: the canonical id (``robot_3``).
        start: start offset in the normalised text.
        end: end offset in the normalised text.
    """

    robot: str
    start: int
    end: int


@dataclass(frozen=True)
class TimeMention:
    """A number the note mentions, read as a time.

    Attributes:
        value: the number.
        relative: a duration ("25 ticks", "二十个时刻"): resolves to arrival tick + value.
        explicit: written as a time (``tick 300``, ``t=300``, a unit); bare numbers are not.
        start: start offset in the normalised text.
        end: end offset in the normalised text.
        ambiguous: ``1800时刻`` (no 个): a tick if past the arrival tick, else a duration.
    """

    value: int
    relative: bool
    explicit: bool
    start: int
    end: int
    ambiguous: bool = False

    def resolve(self, arrival_tick: int) -> int:
        """The absolute tick this time names for an order arriving at ``arrival_tick``."""
        relative = self.relative or (self.ambiguous and self.value <= arrival_tick)
        return arrival_tick + self.value if relative else self.value


@dataclass(frozen=True)
class Candidates:
    """What a note mentions, found deterministically.

    Attributes:
        text: the normalised note.
        robots: robot mentions (fleet ids only), in text order.
        times: time mentions, in text order.
    """

    text: str
    robots: tuple[RobotMention, ...]
    times: tuple[TimeMention, ...]

    @property
    def empty(self) -> bool:
        """Nothing in the note could carry a constraint (no fleet robot, no number)."""
        return not self.robots and not self.times


_ROBOT_PATTERNS = (
    re.compile(
        r"(?:robots?|bots?|agvs?|amrs?|units?|機器人|机器人)"
        r"\s*(?:no\.?|number|with id|id|编号)?\s*[_#-]?\s*(\d+)\s*号?"
    ),
    re.compile(r"(?<![a-z])r\s*[_#-]?\s*(\d+)(?!\d)"),
    re.compile(r"#\s*(\d+)\s*(?:robot|bot)"),
    re.compile(
        r"(\d+)\s*号\s*(?:机器人|车|机|小车|搬运车|agv|robot|bot)?(?!\s*(?:货架|架|通道|仓|箱|门|口|位|区|库|线|台|楼))"
    ),
    re.compile(r"(\d+)\s*(?:机器人|小车)"),
)
_ABS_TIME = re.compile(
    r"(?:(?<![a-z])tick|(?<![a-z])t\s*[=:]|(?<![a-z])t(?=\d)|(?<![a-z])step|第)"
    r"\s*[=:#-]?\s*(\d+)\s*(?:个)?\s*(?:时刻|tick|步|拍)?"
)
_ARRIVAL_PLUS = re.compile(
    r"(?:arrival|arrives?|comes in|came in|receipt|到货|到达|入库|下单)"
    r"\s*(?:time\s*)?(?:\+|plus)\s*(\d+)"
    r"|(?<![a-z])t\s*\+\s*(\d+)"
)
_REL_TIME = re.compile(
    r"(\d+)[\s-]*(?:more\s+|extra\s+)?(?:ticks?|steps?|tks?\b|个\s*(?:时刻|时间步|ticks?|步|拍))"
)
# "1800时刻" (no 个): a tick when the number is past the arrival, else a duration.
_ZH_BARE_TIME = re.compile(r"(\d+)\s*(?:时刻|时间步|步|拍)")
_NUMBER = re.compile(r"\d+")
# Bare numbers that are quantities, ordinals or ids, never times.
_NOT_A_TIME = re.compile(
    r"^\s*(?:st|nd|rd|th|kg|g|lb|lbs|kgs|cm|mm|m|%|pcs|pieces|cartons?|boxes|box|items?|units?|"
    r"pallets?|bags?|cases?|公斤|千克|斤|克|件|箱|个箱|盒|袋|托|只|块|米|厘米|%)\b|^\s*(?:件|箱|盒|袋|托|公斤|斤|克)"
)


def extract(note: str, robots: Sequence[str]) -> Candidates:
    """Normalise ``note`` and find the fleet robots and times it mentions.

    Args:
        note: the raw note.
        robots: the fleet's ids (``robot_i``); mentions of other robots are ignored.
    """
    text = normalize(note)
    fleet = set(robots)
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    found_r: list[RobotMention] = []
    for pat in _ROBOT_PATTERNS:
        for m in pat.finditer(text):
            rid = f"robot_{int(m.group(1))}"
            if rid in fleet and free(m.start(), m.end()):
                found_r.append(RobotMention(rid, m.start(), m.end()))
                taken.append((m.start(), m.end()))
    found_t: list[TimeMention] = []
    for m in _ARRIVAL_PLUS.finditer(text):
        if free(m.start(), m.end()):
            value = int(m.group(1) or m.group(2))
            found_t.append(TimeMention(value, True, True, m.start(), m.end()))
            taken.append((m.start(), m.end()))
    for pat, relative in ((_ABS_TIME, False), (_REL_TIME, True)):
        for m in pat.finditer(text):
            if free(m.start(), m.end()):
                found_t.append(TimeMention(int(m.group(1)), relative, True, m.start(), m.end()))
                taken.append((m.start(), m.end()))
    for m in _ZH_BARE_TIME.finditer(text):
        if free(m.start(), m.end()):
            found_t.append(
                TimeMention(int(m.group(1)), False, True, m.start(), m.end(), ambiguous=True)
            )
            taken.append((m.start(), m.end()))
    for m in _NUMBER.finditer(text):
        if free(m.start(), m.end()) and not _NOT_A_TIME.match(text[m.end() :]):
            found_t.append(TimeMention(int(m.group(0)), False, False, m.start(), m.end()))
            taken.append((m.start(), m.end()))
    return Candidates(
        text=text,
        robots=tuple(sorted(found_r, key=lambda r: r.start)),
        times=tuple(sorted(found_t, key=lambda t: t.start)),
    )


def numbers_in(note: str) -> set[int]:
    """Every number the note states, in any form (for the grounding check)."""
    return {int(m.group(0)) for m in _NUMBER.finditer(normalize(note))}
