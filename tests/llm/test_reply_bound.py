"""The client reads a bounded reply: a huge body is cut, said, and never retried or stored."""

from __future__ import annotations

import pytest

from fleetmind.llm.chat import Message
from fleetmind.llm.errors import LLMConnectionError
from fleetmind.testing.fake_server import FakeChatServer, Reply


def test_a_huge_reply_is_cut_and_the_call_fails_once() -> None:
    with FakeChatServer([Reply("{" + "x" * 2_000_000)]) as srv:
        client = srv.client(max_reply_bytes=64 * 1024)
        with pytest.raises(LLMConnectionError, match="larger than 65,536 bytes: cut"):
            client.chat([Message.user("hi")])
        assert len(srv.requests) == 1  # not retried: the same server would send it again


def test_a_reply_under_the_bound_is_read_whole() -> None:
    text = "y" * 50_000
    with FakeChatServer([Reply(text)]) as srv:
        assert srv.client(max_reply_bytes=64 * 1024).chat([Message.user("hi")]).text == text
