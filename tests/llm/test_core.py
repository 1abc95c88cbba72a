"""The chat signature lives once: backends and wrappers share ChatBase and ChatWrapper."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetmind.llm import (
    CallContext,
    ChatBase,
    ChatOptions,
    ChatResult,
    ChatWrapper,
    Message,
    MeteredClient,
    OpenAICompatClient,
    RecordingClient,
    ReplayClient,
    Usage,
)
from fleetmind.llm.embedded import LlamaClient
from fleetmind.llm.record import CallRecorder


class Echo(ChatBase):
    """A backend that answers with the options it was given."""

    def __init__(self) -> None:
        self.seen: list[ChatOptions] = []

    @property
    def model(self) -> str:
        return "echo"

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        self.seen.append(options)
        return ChatResult(text=messages[-1].content, model=self.model)


@pytest.mark.parametrize(
    "cls", [OpenAICompatClient, LlamaClient, ReplayClient, RecordingClient, MeteredClient]
)
def test_every_client_inherits_the_one_chat(cls: type) -> None:
    assert issubclass(cls, ChatBase)
    assert cls.chat is ChatBase.chat


def test_defaults_are_those_of_the_protocol() -> None:
    echo = Echo()
    echo.chat([Message.user("hi")])
    assert echo.seen == [ChatOptions(0.2, 256, None, None, None)]


def test_wrappers_forward_every_option_unchanged(tmp_path: Path) -> None:
    echo = Echo()
    ctx = CallContext(caller="test", tick=3)
    schema = {"type": "object"}
    recorder = CallRecorder(tmp_path / "calls.jsonl")
    wrapped = MeteredClient(RecordingClient(ChatWrapper(echo), recorder), Usage())
    assert wrapped.model == "echo"
    result = wrapped.chat(
        [Message.user("hello")],
        temperature=0.0,
        max_tokens=7,
        json_schema=schema,
        timeout_s=1.5,
        context=ctx,
    )
    assert result.text == "hello"
    assert echo.seen == [ChatOptions(0.0, 7, schema, 1.5, ctx)]
    assert len(recorder.records) == 1
