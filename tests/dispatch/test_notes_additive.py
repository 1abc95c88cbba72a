"""The ``rules+llm`` reader: the model only adds, abstains below its margin, answers in time."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetmind.dispatch.notes.additive import (
    ROBOT_ANSWERS,
    AdditiveReader,
    Calibration,
    answer_scores,
    load_margins,
)
from fleetmind.dispatch.notes.readers import CachedReader, RulesReader, make_reader
from fleetmind.eval.notes import choose_margin
from fleetmind.llm.chat import ChatBase, ChatOptions, ChatResult, Message
from fleetmind.llm.errors import LLMTimeoutError
from fleetmind.sim.notes import Constraint, load_labelled
from fleetmind.testing.fake_server import FakeChatServer, Reply

DATA = Path(__file__).resolve().parents[1] / "data" / "notes"
FLEET = [f"robot_{i}" for i in range(8)]
Answer = Callable[[str], tuple[str, float]]


class Scripted(ChatBase):
    """A model that answers each closed question with a word and a margin, as log-probs."""

    def __init__(self, answer: Answer, model: str = "scripted") -> None:
        self.answer = answer
        self.asked: list[str] = []
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        question = messages[-1].content
        self.asked.append(question)
        word, margin = self.answer(question)
        others = [w for w in ("exclude", "only", "none", "deadline", "hold") if w != word]
        tops = ((word, -0.1), *((w, -0.1 - margin - k) for k, w in enumerate(others)))
        return ChatResult(word, top_logprobs=(tops,) if options.top_logprobs else ())


def _reader(answer: Answer, add: float | None = 2.0, review: float | None = None):
    client = Scripted(answer)
    return AdditiveReader(client, calibration=Calibration(add, review)), client


def _constraints(reader, note: str, arrival: int = 100):
    r = reader.read(note, arrival_tick=arrival, robots=FLEET)
    return r, set(r.constraints)


def test_scores_map_first_tokens_to_answers_with_a_conservative_floor() -> None:
    tops = [("no", -0.5), ("None", -1.0), (" ex", -2.0), ("The", -3.0)]
    s = answer_scores(tops, ROBOT_ANSWERS)
    assert s is not None
    assert s["none"] == pytest.approx(math.log(math.exp(-0.5) + math.exp(-1.0)))
    assert s["exclude"] == -2.0
    assert s["only"] == -3.0  # not listed: the lowest listed log-probability, an upper bound
    assert answer_scores([("The", -1.0), ("这", -2.0)], ROBOT_ANSWERS) is None


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["no", "none", "ex", "only", "o", '"', "The", "", "hold", "不"]),
            st.floats(-20, 0),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_scores_never_exceed_what_the_server_listed(tops) -> None:
    s = answer_scores(tops, ROBOT_ANSWERS)
    if s is None:
        return
    assert set(s) == set(ROBOT_ANSWERS)
    floor = min(lp for _, lp in tops)
    for v in s.values():
        assert v >= floor - 1e-9
        assert v <= math.log(len(tops)) + 1e-9


def test_choose_margin_is_the_lowest_cut_that_keeps_the_precision() -> None:
    props = [(5.0, True), (4.0, True), (3.0, False), (2.0, True), (1.0, False)]
    assert choose_margin(props, 0.97) == 4.0
    assert choose_margin(props, 0.6) == 1.0
    assert choose_margin([(5.0, False), (4.0, True)], 0.97) is None
    assert choose_margin([], 0.97) is None
    # Equal margins cannot be split: the wrong one would come in with the right one.
    assert choose_margin([(3.0, True), (3.0, False)], 0.97) is None


def test_the_model_cannot_remove_or_change_what_the_rules_read() -> None:
    # A model that reads every robot as excluded and every number as a hold, very confidently.
    reader, client = _reader(
        lambda q: ("hold", 9.0) if "About: robot" not in q else ("exclude", 9.0)
    )
    rules = RulesReader()
    note = "only robot_5 may take it; robot_2 brought the pallet"
    base = set(rules.read(note, arrival_tick=100, robots=FLEET).constraints)
    assert base == {Constraint("only_robot", robot="robot_5")}
    r, got = _constraints(reader, note)
    # robot_5 is the rules' own: never asked about; robot_2 is asked, the exclusion added.
    assert all("About: robot_5" not in q for q in client.asked)
    assert any("About: robot_2" in q for q in client.asked)
    assert got == base | {Constraint("not_robot", robot="robot_2")}
    assert (r.added, r.questions, r.answered, r.timed_out) == (1, 1, 1, 0)
    assert r.calls == 3  # the warm-up's two calls are reported with the first reading
    again = reader.read("robot_6 packed the box", arrival_tick=100, robots=FLEET)
    assert (again.calls, again.questions) == (1, 1)


def test_one_question_per_robot_however_often_the_note_names_it() -> None:
    reader, client = _reader(lambda q: ("none", 3.0))
    r, _ = _constraints(reader, "robot_2 brought it, then robot_2 left; robot_3 waved")
    asked = client.asked[2:]  # after the two warm-up questions
    assert len(asked) == r.questions == 2
    assert sum("About: robot_2" in q for q in asked) == 1


def test_a_confident_proposal_that_contradicts_the_rules_is_dropped() -> None:
    reader, _ = _reader(lambda q: ("only", 9.0))
    r, got = _constraints(reader, "only robot_5 may take it; robot_2 brought the pallet")
    assert r.status == "ok"
    assert got == {Constraint("only_robot", robot="robot_5")}  # two "only" robots: dropped
    assert r.added == 0
    assert r.answered == 1


def test_below_the_margin_the_model_abstains() -> None:
    note = "robot_2 brought the pallet"
    low, _ = _reader(lambda q: ("exclude", 1.5), add=2.0)
    high, _ = _reader(lambda q: ("exclude", 2.5), add=2.0)
    never, client = _reader(lambda q: ("exclude", 50.0), add=None)
    assert _constraints(low, note)[1] == set()
    assert _constraints(high, note)[1] == {Constraint("not_robot", robot="robot_2")}
    r, got = _constraints(never, note)  # uncalibrated model: asked, never trusted
    assert got == set()
    assert (r.questions, r.answered, r.added) == (1, 1, 0)
    assert client.asked


def test_a_confident_disagreement_goes_to_review_only_when_calibrated_so() -> None:
    note = "robot_2 brought the pallet"
    with_review, _ = _reader(lambda q: ("exclude", 1.0), add=2.0, review=0.5)
    without, _ = _reader(lambda q: ("exclude", 1.0), add=2.0, review=None)
    r, _ = _constraints(with_review, note)
    assert r.status == "needs_review"
    assert "robot_2" in (r.reason or "")
    assert _constraints(without, note)[0].status == "ok"


def test_a_note_the_rules_send_to_review_stays_there_without_a_call() -> None:
    reader, client = _reader(lambda q: ("exclude", 9.0))
    note = "use robot 4 if it is free"
    assert RulesReader().read(note, arrival_tick=0, robots=FLEET).status == "needs_review"
    r, _ = _constraints(reader, note, arrival=0)
    assert r.status == "needs_review"
    assert client.asked == []


class _Slow(Scripted):
    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        if len(self.asked) < 2:  # the warm-up answers
            return super().respond(messages, options)
        self.asked.append(messages[-1].content)
        raise LLMTimeoutError("no reply within 2 s")


def test_a_timed_out_question_leaves_the_rules_reading_and_is_asked_again_later() -> None:
    now = [0.0]
    client = _Slow(lambda q: ("exclude", 9.0))
    inner = AdditiveReader(client, calibration=Calibration(0.0), clock=lambda: now[0])
    reader = CachedReader(inner)
    r = reader.read("deliver before 500; robot_2 brought the pallet", arrival_tick=0, robots=FLEET)
    assert r.status == "ok"
    assert set(r.constraints) == {Constraint("deadline", tick=500)}
    assert (r.questions, r.answered, r.timed_out) == (1, 0, 1)
    assert r.unreadable is not None
    assert inner.deadline_s is not None
    assert 2.0 <= inner.deadline_s <= 30.0
    # Backed off: the rules answer without a call; after the back-off the note is asked again.
    calls = len(client.asked)
    assert not reader.needs_model("robot_2 brought the pallet", FLEET)
    reader.read("deliver before 500; robot_2 brought the pallet", arrival_tick=0, robots=FLEET)
    assert len(client.asked) == calls
    now[0] = 100.0
    reader.read("deliver before 500; robot_2 brought the pallet", arrival_tick=0, robots=FLEET)
    assert len(client.asked) == calls + 1


def test_on_a_development_set_a_wild_model_only_ever_adds() -> None:
    # Seeded random answers at random margins, all above an accept-everything margin: the
    # rules' reading of every note must survive inside the hybrid's.
    rng = np.random.default_rng(0)
    words = ("exclude", "only", "none", "deadline", "hold")
    reader, _ = _reader(lambda q: (str(rng.choice(words)), float(rng.uniform(0, 5))), add=0.0)
    rules = RulesReader()
    added = 0
    for item in load_labelled(DATA / "dev2.jsonl")[:150]:
        base = rules.read(item.note, arrival_tick=item.arrival_tick, robots=item.robots)
        got = reader.read(item.note, arrival_tick=item.arrival_tick, robots=item.robots)
        assert got.status == base.status
        assert set(base.constraints) <= set(got.constraints)
        added += len(got.constraints) - len(base.constraints)
        assert got.added == len(got.constraints) - len(base.constraints)
    assert added > 0  # the wild model did add: the check above was not vacuous


def test_the_client_sends_and_reads_log_probabilities() -> None:
    body = {
        "model": "m",
        "choices": [
            {
                "message": {"role": "assistant", "content": "no"},
                "finish_reason": "length",
                "logprobs": {
                    "content": [
                        {
                            "token": "no",
                            "logprob": -0.2,
                            "top_logprobs": [
                                {"token": "no", "logprob": -0.2},
                                {"token": "exclude", "logprob": -3.0},
                            ],
                        }
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 1},
    }
    with FakeChatServer([Reply(body=json.dumps(body))] * 3) as srv:
        reader = AdditiveReader(srv.client(), calibration=Calibration(1.0))
        r = reader.read("robot_2 brought the pallet", arrival_tick=0, robots=FLEET)
        sent = srv.requests[-1].body
    assert sent["logprobs"] is True
    assert sent["top_logprobs"] >= 5
    assert sent["max_tokens"] == 1
    assert r.answered == 1
    assert r.constraints == ()  # "none" by 2.8 nats: nothing to add


def test_without_log_probabilities_the_model_abstains() -> None:
    with FakeChatServer([Reply("exclude")] * 3) as srv:
        reader = AdditiveReader(srv.client(), calibration=Calibration(0.0))
        r = reader.read("robot_2 brought the pallet", arrival_tick=0, robots=FLEET)
    assert (r.answered, r.added, r.constraints) == (1, 0, ())


def test_make_reader_gives_the_additive_reader_and_unknown_models_never_add() -> None:
    reader = make_reader("rules+llm", Scripted(lambda q: ("none", 1.0), model="no-such-model"))
    assert reader.name == "rules+llm"
    assert isinstance(reader, CachedReader)
    assert isinstance(reader.inner, AdditiveReader)
    assert reader.inner.calibration == Calibration()
    assert load_margins("no-such-model") == Calibration()


@pytest.mark.llm
def test_the_embedded_model_answers_its_closed_questions_in_time(embedded_client) -> None:
    reader = AdditiveReader(embedded_client, calibration=Calibration(0.0))
    deadline = reader.warm_up()
    assert reader.question_s is not None
    assert reader.question_s < deadline
    notes = [
        "robot_2 brought the pallet",
        "keep robot 3 away from this order; robot_6 packed it",
        "pallet came with robot 5 at 400, deliver before 900",
    ]
    rules = RulesReader()
    answered = 0
    for note in notes:
        base = rules.read(note, arrival_tick=100, robots=FLEET)
        r = reader.read(note, arrival_tick=100, robots=FLEET)
        assert r.timed_out == 0, r.errors
        answered += r.answered
        assert set(base.constraints) <= set(r.constraints)
    assert answered >= 1
    # The server's log-probabilities name the answers: the first token is one of them.
    q = reader.questions(
        "robot_1 brought the previous pallet",
        arrival_tick=0,
        robots=FLEET,
        reading=rules.read("robot_1 brought the previous pallet", arrival_tick=0, robots=FLEET),
    )
    v = reader.ask("robot_1 brought the previous pallet", q[0])
    assert v.best in ROBOT_ANSWERS
    assert set(v.scores) == set(ROBOT_ANSWERS)


def test_the_shipped_margins_were_calibrated_on_development_sets_only() -> None:
    import importlib.resources

    from fleetmind.eval.notes import set_role

    path = importlib.resources.files("fleetmind") / "data" / "note_margins.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert "smollm2-135m-instruct" in data["models"]
    for model, entry in data["models"].items():
        assert "fleetmind notes calibrate" in entry["command"], model
        assert entry["target_precision"] >= 0.97
        for name in entry["sets"]:
            assert set_role(DATA / name)["role"] == "development", (model, name)
        assert load_margins(model) == Calibration(entry["add_margin"], entry["review_margin"])


# --------------------------------------------------------------------------- a run's counts


def _run_counts(metrics: dict) -> tuple[dict, dict]:
    """The run's ``note_reader`` counts, checked to add up, and the ledger's reader row."""
    q = metrics["note_reader"]
    assert q["reader"] == "rules+llm"
    assert q["asked"] == q["answered"] + q["timed_out"]
    assert q["answered"] == q["added"] + q["abstained"]
    assert min(v for k, v in q.items() if k != "reader") >= 0
    assert q["notes_asked"] <= metrics["notes_read"]
    outcomes = metrics["llm_call_outcomes"]
    row = outcomes["by_caller"].get("dispatch.notes", dict.fromkeys(("answered", "timed_out"), 0))
    return q, row


def test_a_run_reports_what_the_reader_asked_and_what_became_of_it(monkeypatch) -> None:
    """A scripted model sure about one robot, unsure about the others: added and abstained."""
    from fleetmind.dispatch.notes import additive
    from fleetmind.eval.runner import RunConfig, execute

    monkeypatch.setattr(additive, "load_margins", lambda model: Calibration(2.0))
    client = Scripted(lambda q: ("exclude", 5.0 if q.endswith("About: robot_7") else 1.0))
    cfg = RunConfig(
        planner="llm-notes", note_reader="rules+llm", planner_mode="sync",
        executor="shortest-path", steps=150, seed=0,
    )  # fmt: skip
    m = execute(cfg, None, client=client)
    q, row = _run_counts(m)
    assert q["asked"] >= 2
    assert q["added"] == 1  # robot_7, left open by the rules, excluded above the margin
    assert q["abstained"] == q["answered"] - 1 >= 1  # below the margin: nothing added
    assert q["timed_out"] == 0
    # Beside the ledger: every question is one call of the reader; the warm-up is listed apart.
    assert row["answered"] == q["answered"]
    assert m["llm_call_outcomes"]["by_caller"]["dispatch.notes.warmup"]["answered"] == 2
    assert m["llm_call_outcomes"]["calls"] == q["asked"]
    # Every call the model got is counted once (a note read again comes from the cache).
    assert len(client.asked) == q["asked"] + 2
    from fleetmind.cli.common import _kpi

    assert _kpi(m, "note_reader") == f"{q['asked']}/{q['answered']}/{q['abstained']}/0"
    assert _kpi(m, "note_reader_added") == str(q["added"])
    rules = execute(cfg.model_copy(update={"note_reader": "rules"}), None, client=None)
    assert "note_reader" not in rules
    assert _kpi(rules, "note_reader") == "-"


@pytest.mark.llm
def test_a_run_with_the_embedded_model_reports_its_note_questions(embedded_client) -> None:
    from fleetmind.eval.runner import RunConfig, execute

    cfg = RunConfig(
        planner="llm-notes", note_reader="rules+llm", planner_mode="sync",
        executor="shortest-path", steps=120, seed=0,
    )  # fmt: skip
    m = execute(cfg, None, client=embedded_client)  # seed 0: 3 questions by tick 120
    q, row = _run_counts(m)
    assert q["asked"] >= 1
    assert q["added"] == 0  # SmolLM2 has no calibrated margin: it never adds
    assert row["answered"] == q["answered"]
    assert row["timed_out"] + row.get("failed", 0) == q["timed_out"]


def test_the_planner_warms_the_reader_before_the_first_tick(small) -> None:
    """The cold prefix is read before the run, not while the first order waits on its note."""
    from fleetmind.dispatch.notes.planner import NoteReaderPlanner

    client = Scripted(lambda q: ("none", 5.0))
    planner = NoteReaderPlanner(CachedReader(AdditiveReader(client)), small)
    planner.warm_up(None)  # type: ignore[arg-type]  # the snapshot is not read
    assert len(client.asked) == 2  # the prefix, then a timed question
    assert planner.reader.inner.deadline_s is not None  # type: ignore[attr-defined]
    planner.warm_up(None)  # type: ignore[arg-type]
    assert len(client.asked) == 2  # once
    # A reader without a warm-up (the rules) is left alone.
    NoteReaderPlanner(make_reader("rules"), small).warm_up(None)  # type: ignore[arg-type]
