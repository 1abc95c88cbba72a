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

import functools
import re
import unicodedata
from collections.abc import Mapping, Sequence
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
    "next",
    "exclude",
    "excluded",
    "longer",
    "anymore",
    "restricted",
    "applies",
    "skip",
    "limits",
    "avoid",
    "without",
)
# A token that is an English word this often in the spell checker's frequency list (a corpus of
# tens of millions of words) is a word: never "mended", however close it is to a cue word
# ("that" stays "that", not "than"). Rare entries below it are mostly typos ("robt": 50).
_WORD_MIN_COUNT = 100
# Misspellings of cue words more than one edit away, from general lists of common English
# misspellings (not from any note).
_MISSPELLINGS = {
    "untill": "until",
    "unitl": "until",
    "recieve": "receive",
    "deliever": "deliver",
    "excpet": "except",
    "exept": "except",
    "dont": "don't",
    "cant": "can't",
    "wont": "won't",
    "shouldnt": "shouldn't",
    "mustnt": "mustn't",
    "doesnt": "doesn't",
    "isnt": "isn't",
    "noone": "no one",
    "nobdy": "nobody",
    "dnt": "don't",
    "rbt": "robot",
    "anyoen": "anyone",
}

_CJK = re.compile(r"[\u3400-\u9fff]")
# Written Cantonese's core function words as their Mandarin equivalents (the standard
# correspondences of any Cantonese-Mandarin glossary: negation, give, at, it, possessive,
# perfective, not have), so the Mandarin cue rules read Cantonese notes.
_CANTONESE = (
    ("唔好", "不要"),
    ("唔得", "不行"),
    ("唔", "不"),
    ("冇", "没有"),
    ("俾", "给"),
    ("畀", "给"),
    ("喺", "在"),
    ("佢", "它"),
    ("嘅", "的"),
    ("咗", "了"),
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
    # "tic"/"tics" are words, so the typo mender leaves them; as shorthand they are ticks.
    (re.compile(r"\btic\b"), "tick"),
    (re.compile(r"\btics\b"), "ticks"),
    (re.compile(r"\bb/f\b"), "before"),
    (re.compile(r"\bnt\b"), "not"),
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
_ONE_BEFORE = re.compile(r"(?:robot|bot|r|#|tick|t|step|no\.|number)\s*[_#-]?\s*$")
_ONE_AFTER = re.compile(r"^\s*(?:ticks?|steps?|hundred|thousand)")

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


@functools.cache
def _english() -> Mapping[str, int]:
    """English word counts (pyspellchecker's list), loaded once on first use."""
    from spellchecker import SpellChecker

    counts: Mapping[str, int] = SpellChecker(language="en").word_frequency.dictionary
    return counts


def is_word(token: str) -> bool:
    """Whether ``token`` is an ordinary English word (never rewritten by :func:`normalize`)."""
    return _english().get(token, 0) >= _WORD_MIN_COUNT


def warm() -> None:
    """Load the English word list now (about half a second) rather than on the first note."""
    _english()


@functools.lru_cache(maxsize=8192)
def _mend(token: str) -> str:
    """A misspelt cue word becomes the cue word (``hodl`` -> ``hold``); a real word stays.

    Only tokens that are not English words are candidates: one edit (Damerau-Levenshtein,
    ``jellyfish``) from exactly one cue word, or a listed common misspelling.
    """
    if token in _MISSPELLINGS:
        return _MISSPELLINGS[token]
    if len(token) < 3 or token in _NUMBER_WORDS or not token.isalpha() or is_word(token):
        return token
    close = {
        cue
        for cue in CUE_WORDS
        # A three-letter token is mended only by a dropped letter ("ony" -> "only").
        if (len(cue) - len(token) in (0, 1, -1) if len(token) > 3 else len(cue) == 4)
        and jellyfish.damerau_levenshtein_distance(token, cue) == 1
    }
    # Two cue words equally close ("tics": "tick"/"ticks"): prefer the one of the same length.
    same = {cue for cue in close if len(cue) == len(token)}
    if len(close) == 1:
        return close.pop()
    if len(same) == 1:
        return same.pop()
    return token


# Structured exports ("blocked_agv=2", "due_tick: 820", "禁用车辆=2"): the key's words say the
# field's role, the value is a robot id or a tick. General field vocabulary, not note strings.
_FIELD = re.compile(
    r"(?<![\w=])\"?([a-z]+(?:[_-][a-z]+)*|[\u3400-\u9fff]{1,6})\"?\s*[=:]\s*"
    r"\[?\s*((?:robot|bot|agv|amr|unit|r)?[_#-]?\d+|第\s*\d+\s*个?\s*时刻)\s*(?:号(?:车|机器人)?)?\s*\]?"
    r"(?![\w.]|\s*(?:ticks?|steps?|个|时刻|%))"
)
_KEY_ROBOT = frozenset(
    {"robot", "robots", "bot", "bots", "agv", "agvs", "amr", "unit", "units", "vehicle", "vehicles"}
)
_KEY_NOT = frozenset(
    {"not", "no", "excluded", "exclude", "excl", "blocked", "block", "banned", "ban", "forbidden",
     "disallowed", "blacklist", "blacklisted", "deny", "denied", "avoid", "except", "skip"}
)  # fmt: skip
_KEY_ONLY = frozenset(
    {"only", "allowed", "allow", "permitted", "required", "assigned", "assign", "dedicated",
     "reserved", "whitelist", "exclusive", "designated"}
)  # fmt: skip
_KEY_DEADLINE = frozenset(
    {"due", "deadline", "latest", "cutoff", "sla", "by", "before", "deliver", "delivery"}
)
_KEY_HOLD = frozenset(
    {"hold", "earliest", "release", "ready", "after", "available", "start", "embargo"}
)
_ZH_KEY = (
    (re.compile(r"禁用|禁止|排除|屏蔽|不用|不可用"), "not"),
    (re.compile(r"指定|限定|只用|专用|仅限|限用"), "only"),
    (re.compile(r"最早|放行|不早于|释放|可取"), "hold"),
    (re.compile(r"截止|最晚|最迟|期限|交期|送达"), "deadline"),
)


def _field_role(key: str) -> str | None:
    """The role of a structured field from its key: not/only (a robot), deadline/hold, None."""
    if _CJK.search(key):
        return next((role for pat, role in _ZH_KEY if pat.search(key)), None)
    words = set(re.split(r"[_-]", key))
    robotish = bool(words & _KEY_ROBOT)
    if robotish and words & _KEY_NOT:
        return "not"
    if robotish and words & _KEY_ONLY:
        return "only"
    if robotish:
        return None
    if words & _KEY_HOLD or {"not", "before"} <= words or {"no", "earlier"} <= words:
        return "hold"
    if words & _KEY_DEADLINE:
        return "deadline"
    return None


def _fields(text: str) -> str:
    """Structured fields rewritten as the plain phrases the cue rules read."""

    def field(m: re.Match[str]) -> str:
        role = _field_role(m.group(1))
        number = re.search(r"\d+", m.group(2))
        if role is None or number is None:
            return m.group(0)
        n = number.group(0)
        phrase = {
            "not": f"not robot {n}",
            "only": f"only robot {n}",
            "deadline": f"deliver before tick {n}",
            "hold": f"not before tick {n}",
        }[role]
        return f"{phrase};"

    return _FIELD.sub(field, text)


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
    text = _fields(text)
    text = re.sub(r"[a-z]+", lambda m: _mend(m.group(0)), text)
    for slang, word in _SLANG:
        text = slang.sub(word, text)

    def en(m: re.Match[str]) -> str:
        words = m.group(0)
        if words in ("one", "a", "an"):
            before = text[: m.start()]
            after = text[m.end() :]
            if not (_ONE_BEFORE.search(before) or _ONE_AFTER.match(after)):
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

    text = _ZH_RUN.sub(zh, text)
    # "850点前": a count past any clock hour is a tick ("下午3点" stays a clock time).
    return re.sub(r"(\d{3,})\s*点(?!钟)", r"\1", text)


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
        r"\s*(?:no\.?|number|with id|id|编号)?\s*[_#:-]?\s*(\d+)\s*号?"
    ),
    re.compile(r"(?<![a-z])r\s*[_#-]?\s*(\d+)(?!\d)"),
    re.compile(r"#\s*(\d+)\s*(?:robot|bot)"),
    re.compile(
        r"(\d+)\s*号\s*(?:机器人|车|机|小车|搬运车|agv|robot|bot)?(?!\s*(?:货架|架|通道|仓|箱|门|口|位|区|库|线|台|楼|托|格|层|排|柜|单|件|包|批|站|月|日|房|室|桌|码头))"
    ),
    re.compile(r"(\d+)\s*(?:机器人|小车)"),
)
_ROBOT_RANGE = re.compile(
    r"(?<![a-z])(?:robots?|bots?|units?|agvs?|amrs?)\s*[_#-]?\s*(\d+)\s*(?:through|thru|to|until|-|–)"
    r"\s*(?:robots?\s*|bots?\s*|units?\s*)?[_#-]?\s*(\d+)(?![\d.]|\s*(?:ticks?|steps?|%))"
    r"|(\d+)\s*号\s*(?:车|机器人)?\s*(?:到|至|-|~)\s*(\d+)\s*号\s*(?:车|机器人)?"
)
_ROBOT_LIST = re.compile(
    r"(?<![a-z])(?:robots?|bots?|units?|agvs?|amrs?)\s*[_#-]?\s*\d+"
    r"(?:\s*,\s*[_#-]?\d+)*\s*,?\s*(?:and|or|&|/|nor)\s*[_#-]?\d+"
    r"(?![\d.]|\s*(?:ticks?|steps?|%|个|时刻|号))"
)
_ABS_TIME = re.compile(
    r"(?:(?<![a-z])tick|(?<![a-z])t\s*[=:]|(?<![a-z])t(?=\d)|(?<![a-z])step)"
    r"\s*[=:#-]?\s*(\d+)\s*(?:个)?\s*(?:时刻|tick|步|拍)?"
    # "第300个时刻" is a time; "第4排" (row 4) is not: after 第 the unit is required.
    r"|第\s*(\d+)\s*(?:个)?\s*(?:时刻|tick|步|拍)"
)
_ARRIVAL_PLUS = re.compile(
    r"(?:arrival|arrives?|comes in|came in|receipt|到货|到达|入库|下单)"
    r"\s*(?:time\s*)?(?:\+|plus)\s*(\d+)"
    r"|(?<![a-z])t\s*\+\s*(\d+)"
)
_REL_TIME = re.compile(
    r"(\d+)[\s-]*(?:more\s+|extra\s+)?(?:ticks?|steps?|tks?\b|个\s*(?:时刻|时间步|ticks?|步|拍))"
    # "the 700 tick mark" names a tick, not a duration.
    r"(?!\s*(?:mark|point|cutoff|cut-off|deadline|limit))"
)
# "1800时刻" (no 个): a tick when the number is past the arrival, else a duration.
_ZH_BARE_TIME = re.compile(r"(\d+)\s*(?:时刻|时间步|步|拍)")
_NUMBER = re.compile(r"\d+")
# Bare numbers that are quantities, ordinals or ids, never times.
_NOT_A_TIME = re.compile(
    r"^\s*(?:st|nd|rd|th|kg|g|lb|lbs|kgs|cm|mm|m|%|pcs|pieces|cartons?|boxes|box|items?|units?|"
    r"pallets?|bags?|cases?|公斤|千克|斤|克|件|箱|个箱|盒|袋|托|只|块|米|厘米|%)\b|^\s*(?:件|箱|盒|袋|托|公斤|斤|克)"
    # Clock times and dates ("5 pm", "3点", "12月"): not ticks.
    r"|^\s*(?:am|pm|a\.m\.?|p\.m\.?|o'?clock|hours?|hrs?|点|点钟|月|年)(?![a-z])"
    # "一个客户", "3个箱子": a count of things; "20个时刻" stays a time.
    r"|^\s*个(?!\s*(?:时刻|时间|tick|步|拍|小时|分钟))"
)


# Bare numbers right after a noun that names a place, a container, a quantity or an id: their
# role is that noun's ("shelf 12", "pallet 3", "order #4412", "单号8801"), never a time.
_ID_NOUN = re.compile(
    r"(?:\b(?:shelf|shelves|bin|bins|aisle|pallet|pallets|dock|zone|row|bay|slot|door|gate|"
    r"order|orders|ref|reference|po|sku|box|boxes|case|carton|cartons|item|items|qty|quantity|"
    r"lot|level|rack|lane|tote|crate|location|loc|priority|prio|floor|section|area|batch|"
    r"line|id|code|customer|client|invoice|room|block|account|ticket|seat|pick list|"
    r"shipment|parcel|package|door|bay|level|pos|position|station|platform|column|col)"
    r"\s*(?:no\.?|number|#)?\s*[#:.=-]?\s*"
    r"|(?:货架|架|单号|编号|订单号?|批次|库位|货位|仓|区|排|托盘|箱号|客户(?:编)?号|工单|通道|站台|门)"
    r"\s*[#:：=-]?\s*)$"
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
    for m in _ROBOT_RANGE.finditer(text):
        # "units 1 through 3", "1号到3号车": every robot of the range, one span for all.
        lo, hi = sorted(int(g) for g in m.groups() if g is not None)
        if hi - lo <= 10 and free(m.start(), m.end()):
            for number in range(lo, hi + 1):
                if f"robot_{number}" in fleet:
                    found_r.append(RobotMention(f"robot_{number}", m.start(), m.end()))
            taken.append((m.start(), m.end()))
    for m in _ROBOT_LIST.finditer(text):
        # "robots 3 and 4", "units 2, 5 or 7": every number of the list is a robot; the first
        # mention starts at the robot word, the others at their number.
        for k, n in enumerate(re.finditer(r"\d+", m.group(0))):
            rid = f"robot_{int(n.group(0))}"
            span = (m.start() if k == 0 else m.start() + n.start(), m.start() + n.end())
            if rid in fleet and free(*span):
                found_r.append(RobotMention(rid, *span))
                taken.append(span)
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
                value = int(next(g for g in m.groups() if g is not None))
                found_t.append(TimeMention(value, relative, True, m.start(), m.end()))
                taken.append((m.start(), m.end()))
    for m in _ZH_BARE_TIME.finditer(text):
        if free(m.start(), m.end()):
            found_t.append(
                TimeMention(int(m.group(1)), False, True, m.start(), m.end(), ambiguous=True)
            )
            taken.append((m.start(), m.end()))
    for m in _NUMBER.finditer(text):
        if (
            free(m.start(), m.end())
            and not _NOT_A_TIME.match(text[m.end() :])
            and not _ID_NOUN.search(text[max(0, m.start() - 24) : m.start()])
        ):
            found_t.append(TimeMention(int(m.group(0)), False, False, m.start(), m.end()))
            taken.append((m.start(), m.end()))
    return Candidates(
        text=text,
        robots=tuple(sorted(found_r, key=lambda r: r.start)),
        times=tuple(sorted(found_t, key=lambda t: t.start)),
    )


def numbers_in(note: str) -> set[int]:
    """Every number the note states, in any form (for the grounding check).

    A robot range ("units 1 through 3", "1号到3号车") states the numbers inside it too.
    """
    text = normalize(note)
    numbers = {int(m.group(0)) for m in _NUMBER.finditer(text)}
    for m in _ROBOT_RANGE.finditer(text):
        lo, hi = sorted(int(g) for g in m.groups() if g is not None)
        if hi - lo <= 10:
            numbers.update(range(lo, hi + 1))
    return numbers
