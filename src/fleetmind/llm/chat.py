"""The small typed contract every LLM backend and caller shares.

A :class:`ChatClient` takes a list of :class:`Message` and returns a :class:`ChatResult` (text,
token usage, latency). Backends: :class:`fleetmind.llm.client.OpenAICompatClient` (any
OpenAI-compatible server), :class:`fleetmind.llm.embedded.LlamaClient` (in-process llama.cpp),
:class:`fleetmind.llm.record.ReplayClient` (recorded calls). Wrappers add recording, caching and
usage accounting while keeping the same protocol.

The keyword signature of :meth:`ChatClient.chat` is implemented once, by :class:`ChatBase`:
every backend subclasses it and answers :meth:`ChatBase.respond` with the call's options as one
:class:`ChatOptions` value; every wrapper subclasses :class:`ChatWrapper`, which forwards the
same options to its inner client.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the message text.
        name: optional sender name (OpenAI's ``name`` field).
    """

    role: Role
    content: str
    name: str | None = None

    def as_dict(self) -> dict[str, str]:
        """Return the OpenAI wire form of the message."""
        out = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def system(cls, content: str) -> Message:
        """Build a system message."""
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        """Build a user message."""
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str) -> Message:
        """Build an assistant message."""
        return cls("assistant", content)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts of one call.

    Attributes:
        prompt_tokens: tokens in the request.
        completion_tokens: tokens generated.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who is calling and why; recorded with each call and used for accounting.

    Attributes:
        caller: the caller key (a component name such as ``"dispatch.planner"``).
        decision_type: the kind of decision (``"assign"``, ``"arbitrate"``, ``"reward"``...).
        prompt_version: a tag naming the prompt template version.
        seed: the run seed, if any.
        tick: the simulation tick the call belongs to, if any.
        extra: more JSON-serialisable fields to record.
    """

    caller: str = "default"
    decision_type: str = "default"
    prompt_version: str = "unversioned"
    seed: int | None = None
    tick: int | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict of the context."""
        # Not dataclasses.asdict: it would deep-copy ``extra``, a read-only mapping proxy.
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**values, "extra": dict(self.extra)}


OutcomeHook = Callable[[Any, "str | None"], None]


@dataclass(frozen=True, slots=True)
class ChatResult:
    """What a chat call returns.

    Attributes:
        text: the assistant reply (``""`` when the model said nothing).
        usage: token counts.
        latency_s: wall-clock seconds of the call (retries included).
        model: the model that answered.
        finish_reason: the server's finish reason, if given.
        cached: True when the reply came from a cache or a replay, not a model.
        request_hash: the request hash, when a recording wrapper computed it.
        outcome_hook: set by recording wrappers; :func:`report_outcome` calls it so the parsed
            value or parse error lands on the same ``calls.jsonl`` line as the call.
        top_logprobs: per generated position, the most likely tokens and their natural-log
            probabilities, most likely first (empty unless asked for and given by the server).
    """

    text: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    latency_s: float = 0.0
    model: str = ""
    finish_reason: str | None = None
    cached: bool = False
    request_hash: str | None = None
    outcome_hook: OutcomeHook | None = field(default=None, repr=False, compare=False)
    top_logprobs: tuple[tuple[tuple[str, float], ...], ...] = ()


def report_outcome(result: ChatResult, parsed: Any = None, error: str | None = None) -> None:
    """Attach what the caller made of a reply (parsed value or error) to its call record.

    A no-op when the result did not come through a recording wrapper.

    Args:
        result: the chat result the value was parsed from.
        parsed: the parsed value, JSON-serialisable (a pydantic model is dumped).
        error: a short error summary when parsing, validation or a veto failed.
    """
    if result.outcome_hook is not None:
        result.outcome_hook(parsed, error)


@runtime_checkable
class ChatClient(Protocol):
    """Anything that answers chat messages.

    Implementations raise :class:`fleetmind.errors.LLMConnectionError` (or its subclasses
    ``LLMTimeoutError``, ``LLMHTTPError``) when no answer can be had, and
    :class:`fleetmind.errors.BudgetExceeded` when a hard usage budget stops the call. They never
    raise on odd model output: that is the caller's to parse.
    """

    @property
    def model(self) -> str:
        """The model name sent with requests."""
        ...

    def chat(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.2,
        max_tokens: int = 256,
        json_schema: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        context: CallContext | None = None,
        top_logprobs: int = 0,
    ) -> ChatResult:
        """Send messages, return the reply.

        Args:
            messages: the conversation so far.
            temperature: sampling temperature.
            max_tokens: cap on generated tokens.
            json_schema: when given, ask the backend to constrain output to this JSON schema
                (backends that cannot do so ignore it; callers still validate).
            timeout_s: wall-clock limit for the whole call, retries included.
            context: caller context for recording and accounting.
            top_logprobs: when positive, ask for the log-probabilities of this many most likely
                tokens at each generated position (backends that cannot give them return none:
                :attr:`ChatResult.top_logprobs` stays empty).

        Returns:
            The reply.
        """
        ...


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """The keyword arguments of one :meth:`ChatClient.chat` call, as one value.

    Attributes:
        temperature: sampling temperature.
        max_tokens: cap on generated tokens.
        json_schema: schema to constrain the output to, if any.
        timeout_s: wall-clock limit for the whole call (``None``: the client's default).
        context: caller context for recording and accounting.
        top_logprobs: most likely tokens to return with their log-probabilities, per generated
            position (0: none asked).
    """

    temperature: float = 0.2
    max_tokens: int = 256
    json_schema: dict[str, Any] | None = None
    timeout_s: float | None = None
    context: CallContext | None = None
    top_logprobs: int = 0

    def send(self, client: ChatClient, messages: list[Message]) -> ChatResult:
        """Make the same call on ``client`` (what a wrapper does with its inner client)."""
        return client.chat(
            messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            json_schema=self.json_schema,
            timeout_s=self.timeout_s,
            context=self.context,
            top_logprobs=self.top_logprobs,
        )


class ChatBase(ABC):
    """A :class:`ChatClient` whose :meth:`chat` packs its options and calls :meth:`respond`.

    Subclasses implement :attr:`model` and :meth:`respond`. The signature of :meth:`chat` is
    written once, in the :class:`ChatClient` contract; its defaults live in :class:`ChatOptions`.
    """

    @property
    @abstractmethod
    def model(self) -> str:
        """The model name sent with requests."""

    def chat(self, messages: list[Message], **options: Any) -> ChatResult:
        """Send messages, return the reply (the keywords of :meth:`ChatClient.chat`)."""
        return self.respond(messages, ChatOptions(**options))

    @abstractmethod
    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Answer one call.

        Args:
            messages: the conversation so far.
            options: the keyword arguments the caller gave :meth:`chat`.

        Returns:
            The reply.
        """


class ChatWrapper(ChatBase):
    """A client around an inner client: reports its model and forwards calls unchanged.

    Subclasses override :meth:`respond` to act around ``options.send(self.inner, messages)``.

    Args:
        inner: the wrapped client.
    """

    def __init__(self, inner: ChatClient) -> None:
        self.inner = inner

    @property
    def model(self) -> str:
        """The inner client's model."""
        return self.inner.model

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Forward the call to the inner client."""
        return options.send(self.inner, messages)
