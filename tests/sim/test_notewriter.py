"""The note writer: template style kept, realistic style (phrasings, numbers, languages, noise)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.sim import notewriter
from fleetmind.sim.notes import KINDS, Constraint
from fleetmind.sim.notewriter import (
    Difficulty,
    NoteConfig,
    NoteWriter,
    number_words,
    zh_mixed,
    zh_numeral,
)

CJK = re.compile(r"[\u3400-\u9fff]")
FLEET = [f"robot_{i}" for i in range(8)]
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "normal", "hard")


# Independent readers of the number forms (for round trips and for finding values in notes) ----

EN_VALUES = {w: i for i, w in enumerate(notewriter._EN_ONES)} | {
    w: 10 * i for i, w in enumerate(notewriter._EN_TENS) if w
}
EN_NUMBER_TOKENS = {*EN_VALUES, "hundred", "thousand"}


def en_value(words: str) -> int:
    """Read English number words ("a hundred and ten", "twenty-five")."""
    total = current = 0
    for token in words.replace("-", " ").split():
        if token == "and":
            continue
        if token == "a":
            current = 1
        elif token == "hundred":
            current *= 100
        elif token == "thousand":
            total += current * 1000
            current = 0
        else:
            current += EN_VALUES[token]
    return total + current


ZH_DIGIT_VALUES = {ch: i for i, ch in enumerate("零一二三四五六七八九")} | {"两": 2}
ZH_UNIT_VALUES = {"十": 10, "百": 100, "千": 1000}


def zh_value(text: str) -> int:
    """Read Chinese numerals, also mixed with Arabic digits (三百零五, 两千, 3百, 十二)."""
    total = 0
    digit: int | None = None
    for ch in text:
        if ch.isdigit():
            digit = int(ch) if digit is None else digit * 10 + int(ch)
        elif ch in ZH_UNIT_VALUES:
            total += (1 if digit is None else digit) * ZH_UNIT_VALUES[ch]
            digit = None
        elif ch != "零":
            digit = ZH_DIGIT_VALUES[ch]
    return total + (digit or 0)


def numbers_in(note: str) -> set[int]:
    """Every number a note writes, in any form (digits, English words, Chinese numerals)."""
    found = {int(d) for d in re.findall(r"\d+", note)}
    for run in re.findall(r"[0-9零一二两三四五六七八九十百千]+", note):
        if re.search(r"[零一二两三四五六七八九十百千]", run):
            found.add(zh_value(run))
    tokens = re.findall(r"[a-z]+|\S", re.sub(r"(?<=[a-z])-(?=[a-z])", " ", note.lower()))
    group: list[str] = []
    for i, token in enumerate([*tokens, "."]):
        after = tokens[i + 1] if i + 1 < len(tokens) else "."
        if token in EN_NUMBER_TOKENS or (
            (token == "a" and after in ("hundred", "thousand"))
            or (token == "and" and group and after in EN_NUMBER_TOKENS)
        ):
            group.append(token)
            continue
        if group:
            found.add(en_value(" ".join(group)))
            group = []
    return found


def robot_number(robot: str) -> int:
    m = re.fullmatch(r"robot_(\d+)", robot)
    assert m is not None
    return int(m.group(1))


# Helpers ---------------------------------------------------------------------------------------


def writer(seed: int, **config: Any) -> NoteWriter:
    return NoteWriter(NoteConfig(**config), np.random.default_rng(seed))


def draw_constrained(
    w: NoteWriter, n: int, *, arrival: tuple[int, int] = (0, 2000)
) -> list[tuple[str, tuple[Constraint, ...], dict[str, Any]]]:
    """``n`` constrained notes with varied inputs (drawn from a separate generator)."""
    inputs = np.random.default_rng(12345)
    out = []
    for _ in range(n):
        tick = int(inputs.integers(*arrival))
        distance = int(inputs.integers(1, 60))
        due = tick + int(inputs.integers(20, 300))
        capable = FLEET[: int(inputs.integers(1, len(FLEET) + 1))]
        args = {"tick": tick, "due": due, "distance": distance, "capable": capable}
        note, truth = w.constrained(**args, robots=FLEET)
        out.append((note, truth, args))
    return out


def check_truth(
    truth: Sequence[Constraint],
    *,
    tick: int,
    due: int,
    distance: int,
    capable: Sequence[str],
    robots: Sequence[str],
) -> None:
    """The ground-truth rules of the issue, for one note."""
    assert 1 <= len(truth) <= 2
    kinds = [c.kind for c in truth]
    assert len(set(kinds)) == len(kinds)
    assert not {"only_robot", "not_robot"} <= set(kinds)
    assert list(truth) == sorted(truth)
    hold = next((c.tick for c in truth if c.kind == "hold"), None)
    for c in truth:
        if c.kind == "only_robot":
            assert c.robot in capable
            assert c.tick is None
        elif c.kind == "not_robot":
            assert c.robot in robots
            assert set(capable) - {c.robot}, "not_robot excluded the last capable robot"
            assert c.tick is None
        elif c.kind == "hold":
            assert c.tick is not None
            assert c.robot is None
            assert tick + 15 <= c.tick <= tick + 80
        else:
            assert c.tick is not None
            assert c.robot is None
            room = distance + 10 + (hold - tick if hold is not None else 0)
            assert c.tick >= tick + room
            if due - tick - 1 >= room:
                assert c.tick < due, "deadline not tighter than due though it could be"


# Number helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "kwargs", "text"),
    [
        (0, {}, "zero"),
        (7, {}, "seven"),
        (13, {}, "thirteen"),
        (25, {}, "twenty-five"),
        (40, {}, "forty"),
        (99, {}, "ninety-nine"),
        (100, {}, "one hundred"),
        (100, {"a_for_one": True}, "a hundred"),
        (110, {}, "one hundred and ten"),
        (110, {"a_for_one": True}, "a hundred and ten"),
        (110, {"use_and": False}, "one hundred ten"),
        (305, {}, "three hundred and five"),
        (1000, {"a_for_one": True}, "a thousand"),
        (2005, {}, "two thousand and five"),
        (2500, {}, "two thousand five hundred"),
        (21_342, {}, "twenty-one thousand three hundred and forty-two"),
        (999_999, {"use_and": False}, "nine hundred ninety-nine thousand nine hundred ninety-nine"),
    ],
)
def test_number_words_known_values(n: int, kwargs: dict[str, bool], text: str) -> None:
    assert number_words(n, **kwargs) == text


@pytest.mark.parametrize(
    ("n", "liang", "text"),
    [
        (0, True, "零"),
        (2, True, "二"),
        (10, True, "十"),
        (12, True, "十二"),
        (20, True, "二十"),
        (25, True, "二十五"),
        (100, True, "一百"),
        (110, True, "一百一十"),
        (200, True, "两百"),
        (200, False, "二百"),
        (305, True, "三百零五"),
        (1005, True, "一千零五"),
        (1050, True, "一千零五十"),
        (1500, True, "一千五百"),
        (2000, True, "两千"),
        (2000, False, "二千"),
        (2200, True, "两千二百"),
        (9999, True, "九千九百九十九"),
    ],
)
def test_zh_numeral_known_values(n: int, liang: bool, text: str) -> None:
    assert zh_numeral(n, liang=liang) == text


@pytest.mark.parametrize(
    ("n", "text"), [(100, "1百"), (300, "3百"), (1000, "1千"), (2500, "2千5百")]
)
def test_zh_mixed_known_values(n: int, text: str) -> None:
    assert zh_mixed(n) == text


@given(st.integers(0, 999_999), st.booleans(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_number_words_round_trip(n: int, a_for_one: bool, use_and: bool) -> None:
    text = number_words(n, a_for_one=a_for_one, use_and=use_and)
    assert en_value(text) == n
    assert re.fullmatch(r"[a-z]+(?:[ -][a-z]+)*", text)


@given(st.integers(0, 9999), st.booleans())
@settings(max_examples=300, deadline=None)
def test_zh_numeral_round_trip(n: int, liang: bool) -> None:
    text = zh_numeral(n, liang=liang)
    assert zh_value(text) == n
    assert "零零" not in text
    assert not text.endswith("零") or n == 0


def test_zh_numerals_are_distinct_and_round_trip_exhaustively() -> None:
    for liang in (True, False):
        texts = [zh_numeral(n, liang=liang) for n in range(10_000)]
        assert len(set(texts)) == 10_000
        assert all(zh_value(t) == n for n, t in enumerate(texts))
    assert all(zh_value(zh_mixed(n)) == n for n in range(100, 10_000, 100))


@pytest.mark.parametrize(
    ("fn", "n"),
    [(number_words, -1), (number_words, 1_000_000), (zh_numeral, -1), (zh_numeral, 10_000)],
)
def test_number_helpers_reject_out_of_range(fn: Any, n: int) -> None:
    with pytest.raises(ValueError, match="expected"):
        fn(n)


@pytest.mark.parametrize("n", [0, 50, 305, 10_000])
def test_zh_mixed_rejects_non_round_numbers(n: int) -> None:
    with pytest.raises(ValueError, match="multiple of 100"):
        zh_mixed(n)


# Template style (kept exactly) ----------------------------------------------------------------


class FirstWaveWriter:
    """The template writer as the first wave shipped it, for comparison."""

    fillers = (
        "standard restock",
        "customer asked for tracking",
        "regular weekly order",
        "pack with the usual care",
        "",
    )

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def plain(self) -> str:
        return self.fillers[int(self.rng.integers(len(self.fillers)))]

    def constrained(
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


@pytest.mark.parametrize("seed", [0, 7, 2024])
def test_template_style_unchanged(seed: int) -> None:
    ours = NoteWriter(NoteConfig(), np.random.default_rng(seed))
    ref = FirstWaveWriter(np.random.default_rng(seed))
    inputs = np.random.default_rng(seed + 1)
    for _ in range(400):
        tick = int(inputs.integers(0, 1000))
        args = {
            "tick": tick,
            "due": tick + int(inputs.integers(20, 200)),
            "distance": int(inputs.integers(1, 40)),
            "capable": FLEET[: int(inputs.integers(1, 9))],
        }
        if inputs.random() < 0.5:
            assert ours.plain(tick=tick, robots=FLEET) == ref.plain()
        else:
            assert ours.constrained(**args, robots=FLEET) == ref.constrained(**args)
    # The shared generator is left in the same state.
    assert ours.rng.integers(1 << 30) == ref.rng.integers(1 << 30)


def test_template_style_has_three_templates_only() -> None:
    w = writer(3)
    patterns = (
        r"fragile: only robot_\d+ has the soft gripper",
        r"VIP customer, deliver before tick \d+",
        r"hold until the truck arrives at tick \d+",
    )
    used = Counter()
    for note, truth, _ in draw_constrained(w, 600):
        matched = [p for p in patterns if re.fullmatch(p, note)]
        assert len(matched) == 1, note
        assert len(truth) == 1
        used[matched[0]] += 1
    assert len(used) == 3


# Realistic style: determinism, languages -------------------------------------------------------


def stream(seed: int, n: int = 500, **config: Any) -> list[str]:
    """``n`` notes, plain and constrained mixed, the way the order stream asks for them."""
    w = writer(seed, style="realistic", **config)
    out = []
    for i, (note, truth, args) in enumerate(draw_constrained(w, n)):
        out.append(f"{note}|{truth}")
        if i % 3 == 0:
            out.append(w.plain(tick=args["tick"], robots=FLEET))
    return out


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_same_seed_same_notes(difficulty: Difficulty) -> None:
    assert stream(11, difficulty=difficulty) == stream(11, difficulty=difficulty)


def test_different_seeds_differ() -> None:
    a, b = stream(1), stream(2)
    assert sum(x != y for x, y in zip(a, b, strict=True)) > 0.8 * len(a)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_zh_share_zero_writes_no_chinese(difficulty: Difficulty) -> None:
    for note in stream(5, 600, zh_share=0.0, difficulty=difficulty):
        assert not CJK.search(note), note


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_zh_share_one_writes_chinese_only(difficulty: Difficulty) -> None:
    for note in stream(5, 600, zh_share=1.0, difficulty=difficulty):
        assert CJK.search(note.split("|")[0]), note


def test_zh_share_is_the_share_of_chinese_notes() -> None:
    w = writer(8, style="realistic", zh_share=0.3)
    zh = sum(bool(CJK.search(note)) for note, _, _ in draw_constrained(w, 2000))
    assert 0.26 <= zh / 2000 <= 0.34


# Realistic style: ground truth -----------------------------------------------------------------


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_ground_truth_is_sane(difficulty: Difficulty) -> None:
    w = writer(21, style="realistic", difficulty=difficulty)
    for _, truth, args in draw_constrained(w, 1500):
        check_truth(truth, **args, robots=FLEET)


fleets = st.lists(
    st.one_of(st.integers(0, 40).map(lambda i: f"robot_{i}"), st.sampled_from(["amr-a", "x7"])),
    max_size=6,
    unique=True,
)


@given(
    seed=st.integers(0, 2**32 - 1),
    fleet=fleets,
    capable_size=st.integers(1, 6),
    tick=st.integers(0, 20_000),
    distance=st.integers(0, 120),
    slack=st.integers(-10, 500),
    difficulty=st.sampled_from(DIFFICULTIES),
    zh_share=st.sampled_from([0.0, 0.5, 1.0]),
)
@settings(max_examples=200, deadline=None)
def test_ground_truth_invariants(
    seed: int,
    fleet: list[str],
    capable_size: int,
    tick: int,
    distance: int,
    slack: int,
    difficulty: Difficulty,
    zh_share: float,
) -> None:
    w = writer(seed, style="realistic", difficulty=difficulty, zh_share=zh_share)
    capable = fleet[:capable_size]  # the order stream passes the whole fleet if none is capable
    for _ in range(10):
        args = {"tick": tick, "due": tick + slack, "distance": distance, "capable": capable}
        note, truth = w.constrained(**args, robots=fleet)
        check_truth(truth, **args, robots=fleet)
        assert isinstance(note, str)
        assert note
        assert isinstance(w.plain(tick=tick, robots=fleet), str)


def test_not_robot_never_names_the_only_capable_robot() -> None:
    w = writer(4, style="realistic", difficulty="hard")
    named = Counter()
    for _ in range(1500):
        _, truth = w.constrained(tick=50, due=200, distance=10, capable=["robot_2"], robots=FLEET)
        for c in truth:
            if c.kind == "only_robot":
                assert c.robot == "robot_2"
            if c.kind == "not_robot":
                assert c.robot != "robot_2"
                named[c.robot] += 1
    assert len(named) == len(FLEET) - 1  # any other robot of the fleet


def test_fleet_of_one_gets_no_not_robot() -> None:
    w = writer(4, style="realistic", difficulty="hard")
    kinds = Counter()
    for _ in range(400):
        _, truth = w.constrained(
            tick=50, due=200, distance=10, capable=["robot_0"], robots=["robot_0"]
        )
        kinds.update(c.kind for c in truth)
    assert kinds["not_robot"] == 0
    assert set(kinds) == {"only_robot", "deadline", "hold"}


def test_empty_fleet_gets_time_constraints_only() -> None:
    w = writer(4, style="realistic", difficulty="hard")
    for _ in range(200):
        _, truth = w.constrained(tick=50, due=200, distance=10, capable=[], robots=[])
        assert {c.kind for c in truth} <= {"deadline", "hold"}
        assert w.plain(tick=50, robots=[]) is not None


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("zh_share", [0.0, 1.0])
def test_notes_write_the_values_of_their_ground_truth(
    difficulty: Difficulty, zh_share: float
) -> None:
    """Each value is in the note (noise never touches it): a robot's number, a tick, a count."""
    w = writer(31, style="realistic", difficulty=difficulty, zh_share=zh_share)
    for note, truth, args in draw_constrained(w, 800):
        found = numbers_in(note)
        for c in truth:
            if c.robot is not None:
                assert robot_number(c.robot) in found, (note, c)
            elif c.kind == "hold":
                assert found & {c.tick, c.tick - args["tick"]}, (note, c)
            else:
                assert c.tick is not None
                assert found & {c.tick, c.tick - 1, c.tick - args["tick"]}, (note, c)


def test_inclusive_phrasings_show_the_last_allowed_tick() -> None:
    w = writer(9, style="realistic", difficulty="easy", zh_share=0.5)
    seen = 0
    for note, truth, _ in draw_constrained(w, 3000, arrival=(300, 500)):
        if not re.search(r"no later than|delivered by|late after|最晚|不晚于", note):
            continue
        (deadline,) = (c.tick for c in truth if c.kind == "deadline")
        assert deadline is not None
        found = numbers_in(note)
        assert deadline - 1 in found, note
        assert deadline not in found, note
        seen += 1
    assert seen > 30


def test_ids_not_of_the_robot_n_form_are_written_as_they_are() -> None:
    w = writer(6, style="realistic", difficulty="hard", zh_share=0.5)
    fleet = ["amr-north", "amr-south"]
    for _ in range(300):
        note, truth = w.constrained(tick=5, due=100, distance=5, capable=fleet, robots=fleet)
        for c in truth:
            if c.robot is not None:
                assert c.robot in note


# Realistic style: shares by difficulty ---------------------------------------------------------


@pytest.mark.parametrize(("difficulty", "two_share"), [("normal", 0.2), ("hard", 0.4)])
def test_kind_and_two_fact_shares(difficulty: Difficulty, two_share: float) -> None:
    w = writer(17, style="realistic", difficulty=difficulty)
    drawn = draw_constrained(w, 2000)
    singles = Counter(truth[0].kind for _, truth, _ in drawn if len(truth) == 1)
    pairs = Counter(tuple(c.kind for c in truth) for _, truth, _ in drawn if len(truth) == 2)
    n_pairs = sum(pairs.values())
    assert abs(n_pairs / 2000 - two_share) < 0.04
    n_singles = sum(singles.values())
    for kind in KINDS:
        assert abs(singles[kind] / n_singles - 0.25) < 0.04, (kind, singles)
    assert len(pairs) == 5  # hold + deadline and each time kind with each robot kind
    for pair, count in pairs.items():
        assert abs(count / n_pairs - 0.2) < 0.06, (pair, pairs)


def test_easy_has_no_two_fact_notes() -> None:
    w = writer(17, style="realistic", difficulty="easy")
    assert all(len(truth) == 1 for _, truth, _ in draw_constrained(w, 2000))


def relative_share(difficulty: Difficulty) -> float:
    """Share of times a note gives relative to arrival (neither the tick nor tick - 1 shown)."""
    w = writer(23, style="realistic", difficulty=difficulty, zh_share=0.5)
    relative = total = 0
    for note, truth, _ in draw_constrained(w, 2000, arrival=(300, 500)):
        if {c.kind for c in truth} >= {"deadline", "hold"}:
            continue  # the deadline is absolute by design there
        found = numbers_in(note)
        for c in truth:
            if c.tick is not None:
                total += 1
                relative += not found & {c.tick, c.tick - 1}
    return relative / total


@pytest.mark.parametrize(("difficulty", "share"), [("easy", 0.15), ("normal", 0.4), ("hard", 0.6)])
def test_relative_time_shares(difficulty: Difficulty, share: float) -> None:
    assert abs(relative_share(difficulty) - share) < 0.06


def vocabulary() -> set[str]:
    """Every English word the phrase tables, fillers, forms and number words can produce."""
    texts: list[str] = [
        *notewriter._FILLERS["en"],
        *notewriter._SAFE_DISTRACTORS["en"],
        *notewriter._PLAIN_DISTRACTORS["en"],
        *notewriter._PREFIXES["en"],
        *notewriter._SUFFIXES["en"],
        *notewriter._CONNECTORS["en"],
        *notewriter._EN_ROBOT_FORMS,
        *notewriter._EN_TICK_FORMS,
        *notewriter._ZH_TICK_FORMS,
        *notewriter._ZH_ROBOT_FORMS,
        " ".join(EN_NUMBER_TOKENS),
        "a and robot",
    ]
    for lang in ("en", "zh"):
        for phrases in (
            *notewriter._PHRASES[lang].values(),
            *notewriter._PAIR_PHRASES[lang].values(),
        ):
            texts.extend(phrases)
    words = {w for text in texts for w in re.findall(r"[a-z]+", _SLOTS.sub(" ", text.lower()))}
    return words


_SLOTS = re.compile(r"\{\w+\}")


def typo_share(difficulty: Difficulty) -> float:
    """Share of notes with a word no phrasing has (a typo)."""
    words = vocabulary()
    w = writer(29, style="realistic", difficulty=difficulty, zh_share=0.0)
    drawn = [note for note, _, _ in draw_constrained(w, 1000)]
    drawn += [w.plain(tick=100, robots=FLEET) for _ in range(1000)]
    odd = [n for n in drawn if set(re.findall(r"[a-z]+", n.lower())) - words]
    return len(odd) / len(drawn)


def test_easy_has_no_typos() -> None:
    assert typo_share("easy") == 0.0


def test_typos_grow_with_difficulty() -> None:
    normal, hard = typo_share("normal"), typo_share("hard")
    assert 0.12 <= normal <= 0.3
    assert 0.3 <= hard <= 0.55
    assert hard > normal + 0.1


def test_odd_capitals_appear_at_hard_only() -> None:
    def shouting(difficulty: Difficulty) -> int:
        w = writer(2, style="realistic", difficulty=difficulty, zh_share=0.0)
        texts = [note for note, _, _ in draw_constrained(w, 1500)]
        return sum(bool(re.search(r"\b[A-Z]{2}[a-z]|\b(?!VIP\b)[A-Z]{4,}\b", t)) for t in texts)

    assert shouting("easy") == 0
    assert shouting("hard") > 30


def test_distractors_grow_with_difficulty() -> None:
    def mentions(difficulty: Difficulty) -> float:
        w = writer(3, style="realistic", difficulty=difficulty, zh_share=0.3)
        texts = [w.plain(tick=100, robots=FLEET) for _ in range(2000)]
        return sum(bool(numbers_in(t)) for t in texts) / len(texts)

    easy, normal, hard = mentions("easy"), mentions("normal"), mentions("hard")
    assert 0.03 < easy < normal < hard < 0.7


def test_constrained_notes_carry_distractors_at_hard_only() -> None:
    marks = r"loaded the truck|box \d+ of|was fixed yesterday|weighs|order #|called at|printed at"

    def share(difficulty: Difficulty) -> float:
        w = writer(3, style="realistic", difficulty=difficulty, zh_share=0.0)
        notes_ = [note for note, _, _ in draw_constrained(w, 1500)]
        return sum(bool(re.search(marks, n, re.IGNORECASE)) for n in notes_) / len(notes_)

    assert share("easy") == 0.0
    assert 0.1 < share("hard") < 0.35


# Realistic style: variety ----------------------------------------------------------------------


def test_many_distinct_notes() -> None:
    w = writer(13, style="realistic")
    texts = {note for note, _, _ in draw_constrained(w, 300)}
    assert len(texts) >= 100


def test_plain_notes_state_nothing_but_vary() -> None:
    w = writer(13, style="realistic", difficulty="hard", zh_share=0.5)
    texts = [w.plain(tick=200, robots=FLEET) for _ in range(2000)]
    assert len(set(texts)) > 300
    for needle in (
        "loaded the truck this morning",
        "anyone can take it",
        "ignore the earlier hold",
        "常规补货",
        "昨天修好了",
        "standard restock",
    ):
        assert any(needle in t.lower() for t in texts), needle
    assert any(re.search(r"box \S+ of \S+", t) for t in texts)


@pytest.mark.parametrize("kind", KINDS)
def test_phrase_tables(kind: str) -> None:
    en, zh = notewriter._PHRASES["en"][kind], notewriter._PHRASES["zh"][kind]
    assert len(set(en)) == len(en) >= 12
    assert len(set(zh)) == len(zh) >= 10
    allowed = {
        "only_robot": {"r"},
        "not_robot": {"r"},
        "deadline": {"dt", "dn", "dti", "dni", "dk"},
        "hold": {"ht", "hn", "hk"},
    }[kind]
    for phrase in (*en, *zh):
        slots = set(re.findall(r"\{(\w+)\}", phrase))
        assert slots, phrase
        assert slots <= allowed, phrase
        assert not ("dk" in slots and slots & {"dt", "dn", "dti", "dni"}), phrase
    assert all(not CJK.search(p) and p.isascii() for p in en)
    assert all(CJK.search(_SLOTS.sub("", p)) for p in zh)
    # Both absolute and relative phrasings for the time kinds.
    if kind in ("deadline", "hold"):
        k = "{dk}" if kind == "deadline" else "{hk}"
        for table in (en, zh):
            assert sum(k in p for p in table) >= 5
            assert sum(k not in p for p in table) >= 8


def test_pair_phrase_tables() -> None:
    slot_kind: dict[str, tuple[str, ...]] = {"r": ("only_robot", "not_robot")}
    slot_kind |= dict.fromkeys(("dt", "dn", "dti", "dni", "dk"), ("deadline",))
    slot_kind |= dict.fromkeys(("ht", "hn", "hk"), ("hold",))
    for lang in ("en", "zh"):
        assert set(notewriter._PAIR_PHRASES[lang]) == set(notewriter._PAIRS)
        for pair, phrases in notewriter._PAIR_PHRASES[lang].items():
            assert len(phrases) >= 3
            for phrase in phrases:
                kinds = {k for s in re.findall(r"\{(\w+)\}", phrase) for k in slot_kind[s]}
                assert set(pair) <= kinds, phrase
                if set(pair) == {"deadline", "hold"}:
                    assert "{dk}" not in phrase  # absolute deadline next to a hold


def forms_seen(zh_share: float) -> str:
    w = writer(19, style="realistic", difficulty="hard", zh_share=zh_share)
    return "\n".join(note for note, _, _ in draw_constrained(w, 3000, arrival=(0, 3000)))


def test_english_forms_appear() -> None:
    text = forms_seen(0.0)
    for form in (
        r"\brobot_\d",
        r"\brobot \d",
        r"\bRobot\d",
        r"\br\d",
        r"\bbot #\d",
        r"\brobot (?:zero|one|two|three|four|five|six|seven)\b",
        r"\bt=\d",
        r"\bT\d",
        r"\btick \d",
        r"\b(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-[a-z]+",
        r"\ba hundred and",
        r"\bwithin \S+ ticks",
        r"ticks from now",
    ):
        assert re.search(form, text), form


def test_chinese_forms_appear() -> None:
    text = forms_seen(1.0)
    for form in (
        r"\d号机器人",
        r"\d号车",
        r"机器人\d",
        r"[零一二三四五六七]号",
        r"[二三四五六七八九]十[一二三四五六七八九]",
        r"百零[一二三四五六七八九]",
        r"两百|两千",
        r"\d百",
        r"个时刻内送到",
        r"个时刻后才能取",
        r"第\S+个时刻",
        r"t=\d",
    ):
        assert re.search(form, text), form


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"zh_share": 1.5}, "zh_share"),
        ({"zh_share": -0.1}, "zh_share"),
        ({"style": "fancy"}, "style"),
        ({"difficulty": "brutal"}, "difficulty"),
    ],
)
def test_config_names_the_bad_field(config: dict[str, Any], field: str) -> None:
    from fleetmind.errors import ConfigError

    with pytest.raises(ConfigError, match=f"notes.{field}"):
        NoteConfig(**config)
