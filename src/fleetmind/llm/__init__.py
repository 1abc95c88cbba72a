"""fleetmind.llm: an LLM runtime that survives bad model output.

A general runtime (it imports nothing of ``sim``, ``rl``, ``envs`` or ``safety``):

* :class:`ChatClient` protocol, implemented once by :class:`ChatBase` (backends) and
  :class:`ChatWrapper` (wrappers); :class:`OpenAICompatClient` for any OpenAI-compatible server;
  :class:`LLMSettings` (flags > ``FLEETMIND_LLM_*`` > ``OPENAI_*``);
* the embedded SmolLM2-135M model: :class:`EmbeddedServer` (managed llama.cpp server) and
  :class:`LlamaClient` (in-process);
* :func:`structured` output with schema-constrained decoding, repair, re-ask and a veto hook;
* :class:`ToolLoop` (JSON tool loop), :class:`Conversation` (multi-role talk),
  :class:`LLMReward` (LLM as reward);
* :class:`CallRecorder` / :class:`ReplayClient` (record, strict replay, cache) and
  :class:`Usage` / :class:`MeteredClient` (accounting with hard budget stops).

The scripted misbehaving server for tests is :mod:`fleetmind.testing.fake_server`.
"""

from __future__ import annotations

from fleetmind.llm.budgets import Budgets, ErrorKind
from fleetmind.llm.chat import (
    CallContext,
    ChatBase,
    ChatClient,
    ChatOptions,
    ChatResult,
    ChatWrapper,
    Message,
    TokenUsage,
    report_outcome,
)
from fleetmind.llm.client import OpenAICompatClient
from fleetmind.llm.conversation import Conversation, Role, TalkMessage, Transcript
from fleetmind.llm.embedded import EmbeddedServer, LlamaClient, find_model_path
from fleetmind.llm.errors import (
    ActionParseError,
    LLMHTTPError,
    LLMTimeoutError,
    ReplayMiss,
)
from fleetmind.llm.parse import CallTool, Finish, parse_action, parse_model
from fleetmind.llm.record import CallRecorder, RecordingClient, ReplayClient, request_hash
from fleetmind.llm.reward import LLMReward
from fleetmind.llm.settings import LLMSettings
from fleetmind.llm.structured import StructuredOutcome, structured
from fleetmind.llm.tool_loop import LoopOutcome, ToolLoop
from fleetmind.llm.tools import Tool, ToolRegistry
from fleetmind.llm.usage import MeteredClient, Prices, Usage, UsageBudget

__all__ = [
    "ActionParseError",
    "Budgets",
    "CallContext",
    "CallRecorder",
    "CallTool",
    "ChatBase",
    "ChatClient",
    "ChatOptions",
    "ChatResult",
    "ChatWrapper",
    "Conversation",
    "EmbeddedServer",
    "ErrorKind",
    "Finish",
    "LLMHTTPError",
    "LLMReward",
    "LLMSettings",
    "LLMTimeoutError",
    "LlamaClient",
    "LoopOutcome",
    "Message",
    "MeteredClient",
    "OpenAICompatClient",
    "Prices",
    "RecordingClient",
    "ReplayClient",
    "ReplayMiss",
    "Role",
    "StructuredOutcome",
    "TalkMessage",
    "TokenUsage",
    "Tool",
    "ToolLoop",
    "ToolRegistry",
    "Transcript",
    "Usage",
    "UsageBudget",
    "find_model_path",
    "parse_action",
    "parse_model",
    "report_outcome",
    "request_hash",
    "structured",
]
