"""CallLedger: what became of each model call (metrics.json ``llm_call_outcomes``)."""

from __future__ import annotations

import threading
import time

import pytest

from fleetmind.llm.chat import CallContext, Message
from fleetmind.llm.errors import LLMConnectionError, LLMTimeoutError
from fleetmind.llm.usage import CallLedger, LedgerClient
from fleetmind.testing.fake_server import FakeChatServer, Reply

MSGS = [Message.user("hi")]


def test_each_outcome_is_counted_once_per_caller() -> None:
    ledger = CallLedger()
    a, b = CallContext(caller="a"), CallContext(caller="b")
    script = [Reply("ok"), Reply("late", delay_s=1.0), Reply(status=500), Reply("ok")]
    with FakeChatServer(script) as srv:
        client = LedgerClient(srv.client(max_retries=0), ledger)
        client.chat(MSGS, context=a)
        with pytest.raises(LLMTimeoutError):
            client.chat(MSGS, context=a, timeout_s=0.2)
        with pytest.raises(LLMConnectionError):
            client.chat(MSGS, context=b)
        client.chat(MSGS, context=b)
    report = ledger.report()
    assert report["by_caller"]["a"] == {"answered": 1, "timed_out": 1, "failed": 0, "abandoned": 0}
    assert report["by_caller"]["b"] == {"answered": 1, "timed_out": 0, "failed": 1, "abandoned": 0}
    assert report["calls"] == 4
    assert report["answered_rate"] == 0.5
    assert report["answered_latency_ms"]["p50"] is not None
    assert ledger.report(exclude=("b",))["calls"] == 2


def test_a_reply_its_caller_gave_up_on_and_a_call_in_flight_are_abandoned() -> None:
    ledger = CallLedger()
    wanted = {"yes": True}
    ledger.watch("w", lambda ctx: wanted["yes"])
    ctx = CallContext(caller="w")
    with FakeChatServer([Reply("ok"), Reply("slow", delay_s=1.0)]) as srv:
        client = LedgerClient(srv.client(), ledger)
        wanted["yes"] = False  # the tick deadline passed while it was answering
        client.chat(MSGS, context=ctx)
        wanted["yes"] = True
        t = threading.Thread(target=lambda: client.chat(MSGS, context=ctx))
        t.start()
        while not ledger._open:
            time.sleep(0.01)
        ledger.close()  # the run ended with it in flight
        t.join()
    row = ledger.report()["by_caller"]["w"]
    assert row == {"answered": 0, "timed_out": 0, "failed": 0, "abandoned": 2}
