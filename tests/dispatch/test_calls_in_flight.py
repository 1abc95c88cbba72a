"""LLM calls still in flight when a run ends count: in ``llm_calls``, apart in
``llm_calls_abandoned``, and as a fallback (issue 12). The hostile server's hang mode makes one."""

from __future__ import annotations

import threading
import time

import pytest

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.dispatch.llm_planner import LLMPlanner
from fleetmind.dispatch.notes.planner import NoteReaderPlanner
from fleetmind.dispatch.notes.readers import make_reader
from fleetmind.llm.chat import ChatResult, Message, TokenUsage
from fleetmind.llm.errors import BudgetExceeded
from fleetmind.llm.usage import CallTally, TalliedClient
from fleetmind.testing.fake_server import FakeChatServer, Reply

from .conftest import make_world

HANG = Reply("{}", delay_s=120)


def _run(planner: object, world: object, steps: int) -> dict:
    loop = ControlLoop(
        world,  # type: ignore[arg-type]
        planner,  # type: ignore[arg-type]
        ShortestPathExecutor(world.grid),  # type: ignore[attr-defined]
        config=LoopConfig(planner_mode="async", tick_period_s=0.005),
    )
    return loop.run(steps)


def test_the_queue_planners_call_in_flight_at_the_end_counts(small) -> None:
    with FakeChatServer([HANG]) as srv:
        world = make_world(small, n=4, rate=0.2, steps=60, seed=5)
        start = time.perf_counter()
        m = _run(LLMPlanner(srv.client(timeout_s=60.0), small, background=True), world, 60)
        assert time.perf_counter() - start < 10.0  # never waited for the hung call
        received = len(srv.requests)
    assert received == 1  # one question, hung past the run
    assert m["llm_calls"] == received
    assert m["llm_calls_abandoned"] == 1
    assert m["planner_fallbacks"] >= 1
    assert m["tasks_completed"] > 0  # the solver served meanwhile


def test_the_note_readers_call_in_flight_at_the_end_counts(small) -> None:
    with FakeChatServer([HANG]) as srv:
        world = make_world(small, n=4, rate=0.3, steps=60, seed=1, text_share=1.0)
        reader = make_reader("llm", srv.client(timeout_s=60.0))
        m = _run(NoteReaderPlanner(reader, small, background=True), world, 60)
        received = len(srv.requests)
    assert received == 1  # the first note's question hangs; the others wait or use the rules
    assert m["llm_calls"] == received
    assert m["llm_calls_abandoned"] == 1
    assert m["plans_abandoned"] == 1
    assert m["planner_fallbacks"] == 1  # the note being read when the run ended
    # The hung reading never holds the process at exit (the interpreter joins only
    # non-daemon threads, as it does a ThreadPoolExecutor's).
    readers = [t for t in threading.enumerate() if t.name.startswith("note-reader")]
    assert readers
    assert all(t.daemon for t in readers)


def test_a_call_abandoned_in_flight_counts_once() -> None:
    tally = CallTally()
    answered, hung = tally.begin(), tally.begin()
    tally.end(answered, ChatResult(text="ok", usage=TokenUsage(3, 2), latency_s=0.1))
    spent = tally.abandon()
    assert (spent.calls, spent.abandoned, spent.tokens_prompt, spent.tokens_completion) == (
        2,
        1,
        3,
        2,
    )
    tally.end(hung, None)  # its answer comes after all: not counted again
    assert tally.drain().calls == 0
    assert tally.in_flight == 0


def test_a_closed_tally_refuses_further_calls() -> None:
    with FakeChatServer(["fine"]) as srv:
        tally = CallTally()
        client = TalliedClient(srv.client(), tally)
        client.chat([Message.user("hi")])
        tally.abandon()
        with pytest.raises(BudgetExceeded, match="abandoned"):
            client.chat([Message.user("again")])
        assert len(srv.requests) == 1
