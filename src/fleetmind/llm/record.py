"""Record every call, replay recordings strictly, and cache on the same store.

The store is a ``calls.jsonl`` file, one JSON object per call::

    {"schema": 1, "call_id": 3, "request_hash": "…", "prompt_version": "planner-v2",
     "context": {"caller": …, "decision_type": …, "seed": …, "tick": …, "extra": {…}},
     "model": …, "messages": […], "params": {"temperature": …, "max_tokens": …,
     "json_schema": …}, "output": "…", "finish_reason": …, "parsed": …, "error": null,
     "parse_error": null, "latency_s": …, "prompt_tokens": …, "completion_tokens": …,
     "cached": false, "time": …}

The request hash covers model + messages + parameters (not the context), so a replay finds a call
whatever tick it happens at. No header is ever recorded, and every text field passes through
:func:`~fleetmind.llm.redact.redact`, so neither API keys nor Authorization headers reach a file.

A record waits in memory until its caller reports what it made of the reply (via
:func:`~fleetmind.llm.chat.report_outcome`), the same thread makes its next call, or the recorder
is flushed or closed; then it is written, so parsed values and parse errors share the line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleetmind.errors import ConfigError, read_input
from fleetmind.llm.chat import (
    CallContext,
    ChatBase,
    ChatClient,
    ChatOptions,
    ChatResult,
    ChatWrapper,
    Message,
    TokenUsage,
)
from fleetmind.llm.errors import (
    LLMConnectionError,
    LLMHTTPError,
    LLMTimeoutError,
    ReplayMiss,
)
from fleetmind.llm.redact import redact

log = logging.getLogger(__name__)

RECORD_SCHEMA = 1
RECORDING_LIMIT = 1 << 30
"""The largest ``calls.jsonl`` loaded (1 GiB; replies are bounded by the client)."""


def request_hash(
    model: str,
    messages: list[Message],
    *,
    temperature: float,
    max_tokens: int,
    json_schema: dict[str, Any] | None,
) -> str:
    """SHA-256 of the canonical JSON of model, messages and parameters.

    Args:
        model: the model name.
        messages: the conversation.
        temperature: sampling temperature.
        max_tokens: cap on generated tokens.
        json_schema: the schema, if any.

    Returns:
        64 hex digits.
    """
    canon = json.dumps(
        {
            "model": model,
            "messages": [m.as_dict() for m in messages],
            "params": {
                "temperature": float(temperature),
                "max_tokens": int(max_tokens),
                "json_schema": json_schema,
            },
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canon.encode()).hexdigest()


def _clean(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: _clean(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v, secrets) for v in value]
    return value


class CallRecorder:
    """An append-only ``calls.jsonl`` store of LLM calls, with an index by request hash.

    Args:
        path: the JSONL file; existing lines are loaded (so a cache survives restarts).
        prompt_version: default prompt-version tag for calls whose context gives none.
        secrets: extra strings that must never be written (API keys are masked anyway).

    Raises:
        ConfigError: an existing line is not valid JSON (names file and line).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        prompt_version: str | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self.path = Path(path)
        self.prompt_version = prompt_version
        self._secrets = [s for s in secrets if s]
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._by_hash: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._pending: dict[int, dict[str, Any]] = {}
        self._pending_by_thread: dict[int, int] = {}
        self._next_id = 0
        # Calls that ended after close() (a worker's call outliving its run): not written.
        self.after_close = 0
        if self.path.exists():
            self._load()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    def _load(self) -> None:
        for rec in _read_records(self.path):
            self._index(rec)
            try:
                self._next_id = max(self._next_id, int(rec.get("call_id", -1)) + 1)
            except (TypeError, ValueError):
                raise ConfigError(f"{self.path}: field 'call_id' is not a number") from None

    def _index(self, rec: dict[str, Any]) -> None:
        self._records.append(rec)
        self._by_hash[rec["request_hash"]].append(rec)

    @property
    def records(self) -> list[dict[str, Any]]:
        """All records (loaded, written and pending), oldest first."""
        with self._lock:
            return list(self._records)

    def lookup(self, request_hash: str) -> list[dict[str, Any]]:
        """Records with this request hash, oldest first."""
        with self._lock:
            return list(self._by_hash.get(request_hash, ()))

    def add(self, record: dict[str, Any], *, pending: bool = False) -> int:
        """Add one record (secrets masked); returns its call id.

        Args:
            record: the call record (without ``call_id``).
            pending: hold the line until :meth:`annotate`, the thread's next call, or flush.

        Returns:
            The call id.
        """
        rec = _clean(record, self._secrets)
        thread = threading.get_ident()
        with self._lock:
            previous = self._pending_by_thread.pop(thread, None)
            if previous is not None:
                self._write(self._pending.pop(previous))
            call_id = self._next_id
            self._next_id += 1
            rec = {"schema": RECORD_SCHEMA, "call_id": call_id, **rec}
            self._index(rec)
            if pending:
                self._pending[call_id] = rec
                self._pending_by_thread[thread] = call_id
            else:
                self._write(rec)
        return call_id

    def annotate(self, call_id: int, parsed: Any = None, error: str | None = None) -> None:
        """Attach the caller's parsed value or parse error to a pending record and write it."""
        with self._lock:
            rec = self._pending.pop(call_id, None)
            if rec is None:
                return
            for thread, cid in list(self._pending_by_thread.items()):
                if cid == call_id:
                    del self._pending_by_thread[thread]
            rec["parsed"] = _clean(parsed, self._secrets)
            rec["parse_error"] = None if error is None else redact(error, self._secrets)
            self._write(rec)

    def _write(self, rec: dict[str, Any]) -> None:
        if self._file.closed:
            # The run is over and its record closed; a call still in flight then is not the
            # run's (and a worker thread must not die on it).
            self.after_close += 1
            return
        self._file.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def flush(self) -> None:
        """Write every pending record."""
        with self._lock:
            for call_id in sorted(self._pending):
                self._write(self._pending[call_id])
            self._pending.clear()
            self._pending_by_thread.clear()

    def close(self) -> None:
        """Flush and close the file."""
        self.flush()
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> CallRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wrap(self, client: ChatClient, *, cache: bool = False) -> RecordingClient:
        """Wrap a client so each of its calls is recorded here.

        Args:
            client: the backend.
            cache: serve repeated requests from this store instead of calling the backend.

        Returns:
            The recording client.
        """
        return RecordingClient(client, self, cache=cache)


def _record_fields(
    model: str,
    messages: list[Message],
    *,
    temperature: float,
    max_tokens: int,
    json_schema: dict[str, Any] | None,
    context: CallContext | None,
    default_version: str | None,
) -> dict[str, Any]:
    ctx = context or CallContext()
    version = ctx.prompt_version
    if version == "unversioned" and default_version:
        version = default_version
    return {
        "request_hash": request_hash(
            model,
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            json_schema=json_schema,
        ),
        "prompt_version": version,
        "context": ctx.as_dict(),
        "model": model,
        "messages": [m.as_dict() for m in messages],
        "params": {
            "temperature": temperature,
            "max_tokens": max_tokens,
            "json_schema": json_schema,
        },
    }


class RecordingClient(ChatWrapper):
    """A ChatClient that records every call of an inner client (and optionally caches).

    Args:
        inner: the backend.
        recorder: the store.
        cache: when True, a request whose hash has a successful record is served from it
            (``cached=True``) and recorded as a cache hit.
    """

    def __init__(self, inner: ChatClient, recorder: CallRecorder, *, cache: bool = False) -> None:
        super().__init__(inner)
        self.recorder = recorder
        self.cache = cache

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Call the inner client (or the cache) and record the call.

        Raises:
            LLMConnectionError: re-raised from the inner client after recording it.
        """
        fields = _record_fields(
            self.inner.model,
            messages,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            json_schema=options.json_schema,
            context=options.context,
            default_version=self.recorder.prompt_version,
        )
        h = fields["request_hash"]
        if self.cache:
            hits = [r for r in self.recorder.lookup(h) if r.get("error") is None]
            if hits:
                start = time.monotonic()
                hit = hits[-1]
                result = _result_from(hit, cached=True, latency_s=time.monotonic() - start)
                return self._log(fields, result, None)
        start = time.monotonic()
        try:
            result = options.send(self.inner, messages)
        except LLMConnectionError as exc:
            self._log(fields, None, exc, latency_s=time.monotonic() - start)
            raise
        return self._log(fields, result, None)

    def _log(
        self,
        fields: dict[str, Any],
        result: ChatResult | None,
        error: LLMConnectionError | None,
        latency_s: float = 0.0,
    ) -> ChatResult:
        rec = dict(fields)
        if result is not None:
            rec.update(
                output=result.text,
                finish_reason=result.finish_reason,
                error=None,
                latency_s=result.latency_s,
                prompt_tokens=result.usage.prompt_tokens,
                completion_tokens=result.usage.completion_tokens,
                cached=result.cached,
            )
        else:
            assert error is not None
            rec.update(
                output=None,
                finish_reason=None,
                error={
                    "type": type(error).__name__,
                    "message": str(error),
                    "status_code": getattr(error, "status_code", None),
                },
                latency_s=latency_s,
                prompt_tokens=0,
                completion_tokens=0,
                cached=False,
            )
        rec.update(parsed=None, parse_error=None, time=time.time())
        call_id = self.recorder.add(rec, pending=result is not None)
        if result is None:
            return ChatResult(text="")  # unused: the caller re-raises
        recorder = self.recorder

        def hook(parsed: Any, err: str | None) -> None:
            recorder.annotate(call_id, parsed, err)

        return dataclasses.replace(result, request_hash=fields["request_hash"], outcome_hook=hook)


def _result_from(
    rec: dict[str, Any], *, cached: bool, latency_s: float | None = None
) -> ChatResult:
    return ChatResult(
        text=str(rec.get("output") or ""),
        usage=TokenUsage(
            int(rec.get("prompt_tokens") or 0), int(rec.get("completion_tokens") or 0)
        ),
        latency_s=float(rec.get("latency_s") or 0.0) if latency_s is None else latency_s,
        model=str(rec.get("model") or ""),
        finish_reason=rec.get("finish_reason"),
        cached=cached,
        request_hash=rec.get("request_hash"),
    )


def _error_from(rec: dict[str, Any]) -> LLMConnectionError:
    err = rec["error"]
    message = f"(replayed) {err.get('message', '')}"
    if err.get("type") == "LLMTimeoutError":
        return LLMTimeoutError(message)
    if err.get("status_code") is not None:
        return LLMHTTPError(message, status_code=int(err["status_code"]))
    return LLMConnectionError(message)


class ReplayClient(ChatBase):
    """A strict ChatClient that serves recorded responses and never touches the network.

    Identical requests are served their recorded responses in recorded order (so three samples
    of one prompt replay as the three recorded samples; a call the recorder answered from its
    cache counts as one more). One request more than were recorded fails with
    :class:`ReplayMiss`: a replay that asks more than the run did has diverged, and repeating
    the last answer would hide it (``strict=False`` repeats it). A recorded error is raised
    again (same class and status).

    Args:
        source: a ``calls.jsonl`` path or a :class:`CallRecorder`.
        model: the model name whose requests are replayed (default: the first record's model).
        replay_latency: report recorded latencies instead of the (near zero) lookup time.
        strict: fail when a request's recorded responses run out (False: repeat the last).

    Raises:
        ConfigError: the file is missing or malformed.
    """

    def __init__(
        self,
        source: str | Path | CallRecorder,
        *,
        model: str | None = None,
        replay_latency: bool = True,
        strict: bool = True,
    ) -> None:
        if isinstance(source, CallRecorder):
            records = source.records
        else:
            path = Path(source)
            if not path.exists():
                raise ConfigError(f"{path}: no such recording")
            records = _read_records(path)
        self._by_hash: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._last: dict[str, dict[str, Any]] = {}
        for rec in records:
            # A cache hit is a call the run made: it is served again, in its place.
            self._by_hash[rec["request_hash"]].append(rec)
        self.strict = strict
        self._served: dict[str, int] = defaultdict(int)
        self._model = model or (str(records[0].get("model")) if records else "replay")
        self.replay_latency = replay_latency
        self._lock = threading.Lock()
        self.hits = 0

    @property
    def model(self) -> str:
        """The replayed model name."""
        return self._model

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Serve the recorded response of this request.

        Raises:
            ReplayMiss: the request was never recorded.
            LLMConnectionError: the recorded call failed (replayed as the same error class).
        """
        h = request_hash(
            self._model,
            messages,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            json_schema=options.json_schema,
        )
        with self._lock:
            queue = self._by_hash.get(h)
            if queue:
                rec = queue.popleft()
                self._last[h] = rec
                self._served[h] += 1
            elif h in self._last and not self.strict:
                rec = self._last[h]
            elif h in self._last:
                raise ReplayMiss(
                    f"recording ran out: request hash {h[:12]}… was recorded "
                    f"{self._served[h]} time(s) and is asked once more (the replay diverged)"
                )
            else:
                last = messages[-1].content[:80] if messages else ""
                raise ReplayMiss(
                    f"no recorded call with request hash {h[:12]}… (model {self._model!r}, "
                    f"last message {last!r})"
                )
            self.hits += 1
        if rec.get("error"):
            raise _error_from(rec)
        return _result_from(rec, cached=True, latency_s=None if self.replay_latency else 0.0)


def _read_records(path: Path) -> list[dict[str, Any]]:
    out = []
    text = read_input(path, what="call recording", limit=RECORDING_LIMIT)
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("request_hash"), str):
            raise ConfigError(f"{path}:{lineno}: missing field 'request_hash'")
        out.append(rec)
    return out
