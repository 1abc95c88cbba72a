"""An OpenAI-compatible chat client over httpx.

Talks to any server speaking ``POST {base_url}/chat/completions`` (vLLM, Ollama, llama.cpp server,
hosted APIs). Retries connection errors, 429 and 5xx with exponential backoff and seeded jitter
inside the call's time limit; a 4xx raises :class:`LLMHTTPError` at once with the server's message.
A reply body is read up to ``max_reply_bytes`` (256 KiB by default) within the call's time limit:
a larger one is cut there and the call fails with that said (so it is recorded as such, never
stored whole), and a server that drips bytes cannot hold a call past its limit.
The API key is sent as a bearer token and never appears in a log line, an error or a ``repr``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Self

import httpx

from fleetmind.llm.chat import ChatBase, ChatOptions, ChatResult, Message, TokenUsage
from fleetmind.llm.errors import LLMConnectionError, LLMHTTPError, LLMTimeoutError
from fleetmind.llm.redact import redact
from fleetmind.llm.settings import AUTO_ORDER, LLMSettings, SchemaMode

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 256 * 1024
"""The largest reply body the client reads (a planner's reply is a few hundred bytes)."""

_RETRYABLE_EXC = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
    httpx.PoolTimeout,
)


def response_format(json_schema: dict[str, Any], mode: SchemaMode) -> dict[str, Any] | None:
    """Build the ``response_format`` request field for a schema.

    Args:
        json_schema: the JSON schema the reply must follow.
        mode: how the server wants it (see :data:`fleetmind.llm.settings.SchemaMode`; ``auto``
            is resolved by the client before this is called).

    Returns:
        The field value, or None when the mode sends no schema.
    """
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": json_schema}
    if mode == "json_schema":
        name = str(json_schema.get("title", "reply"))[:64] or "reply"
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": json_schema, "strict": True},
        }
    return None


class LocalServer(ABC):
    """A chat server this process starts and stops; as a context manager, started inside.

    Subclasses give :meth:`start` (returning the server) and :meth:`stop`.
    """

    @abstractmethod
    def start(self) -> Self:
        """Start serving; the server itself."""

    @abstractmethod
    def stop(self) -> None:
        """Stop serving."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OpenAICompatClient(ChatBase):
    """Chat client for an OpenAI-compatible HTTP server.

    Args:
        base_url: server base URL including ``/v1`` (e.g. ``http://127.0.0.1:8080/v1``).
        model: model name sent with each request.
        api_key: bearer token, or None.
        timeout_s: default time limit of a call (retries included) when the call gives none.
        max_retries: retries after the first attempt on connection errors, 429 and 5xx.
        backoff_s: first backoff delay; doubles each retry.
        backoff_max_s: cap on one backoff delay.
        jitter_seed: seed of the jitter generator (full jitter in [0.5, 1.0] of the delay).
        schema_mode: how JSON schemas are sent (``auto``: found on the first call with a
            schema, see :data:`fleetmind.llm.settings.SchemaMode`).
        extra_body: extra JSON fields merged into every request (e.g. ``{"seed": 0}``).
        transport: an httpx transport (tests use it to inject faults).
        max_reply_bytes: the largest reply body read; a larger one fails the call (not retried).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        backoff_max_s: float = 4.0,
        jitter_seed: int = 0,
        schema_mode: SchemaMode = "auto",
        extra_body: dict[str, Any] | None = None,
        transport: httpx.BaseTransport | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_reply_bytes = max_reply_bytes
        self._model = model
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.schema_mode: SchemaMode = schema_mode
        self.extra_body = dict(extra_body or {})
        self._rng = random.Random(jitter_seed)
        self._rng_lock = threading.Lock()
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(headers=headers, transport=transport, timeout=timeout_s)

    @classmethod
    def from_settings(cls, settings: LLMSettings, **kwargs: Any) -> OpenAICompatClient:
        """Build a client from resolved settings.

        Args:
            settings: settings with a ``base_url``.
            **kwargs: more constructor arguments.

        Returns:
            The client.

        Raises:
            LLMConnectionError: the settings name no base URL (use the embedded model instead).
        """
        if settings.base_url is None:
            raise LLMConnectionError(
                "no LLM base URL configured (FLEETMIND_LLM_BASE_URL / OPENAI_BASE_URL); "
                "use fleetmind.llm.EmbeddedServer for the local model"
            )
        kwargs.setdefault("timeout_s", settings.timeout_s)
        kwargs.setdefault("max_retries", settings.max_retries)
        kwargs.setdefault("schema_mode", settings.schema_mode)
        return cls(settings.base_url, settings.model, settings.api_key, **kwargs)

    def __repr__(self) -> str:
        return f"OpenAICompatClient(base_url={self.base_url!r}, model={self._model!r})"

    @property
    def model(self) -> str:
        """The model name sent with requests."""
        return self._model

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> OpenAICompatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_body(
        self,
        messages: list[Message],
        *,
        temperature: float,
        max_tokens: int,
        json_schema: dict[str, Any] | None,
        mode: SchemaMode | None = None,
        top_logprobs: int = 0,
    ) -> dict[str, Any]:
        """Build the JSON body of a chat completion request.

        Args:
            messages: the conversation.
            temperature: sampling temperature.
            max_tokens: cap on generated tokens.
            json_schema: optional schema for constrained output.
            mode: the schema mode (default: the client's; ``auto`` sends the first it tries).
            top_logprobs: when positive, ask for this many most likely tokens per position.

        Returns:
            The request body.
        """
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [m.as_dict() for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if json_schema is not None:
            mode = mode or self.schema_mode
            fmt = response_format(json_schema, AUTO_ORDER[0] if mode == "auto" else mode)
            if fmt is not None:
                body["response_format"] = fmt
        if top_logprobs > 0:
            body["logprobs"] = True
            body["top_logprobs"] = top_logprobs
        body.update(self.extra_body)
        return body

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Send a chat completion request; see :class:`fleetmind.llm.chat.ChatClient`.

        With ``schema_mode="auto"`` and a schema, a 400 or 422 answer moves on to the next mode
        of :data:`~fleetmind.llm.settings.AUTO_ORDER` within the call's time limit; the first
        mode the server accepts is kept.

        Raises:
            LLMHTTPError: a 4xx status (at once) or a 429/5xx status after the retries.
            LLMTimeoutError: the time limit passed.
            LLMConnectionError: the server could not be reached after the retries, or answered
                with something that is not a chat completion.
        """
        limit = self.timeout_s if options.timeout_s is None else options.timeout_s
        start = time.monotonic()
        deadline = start + limit
        if self.schema_mode != "auto" or options.json_schema is None:
            return self._send(messages, options, start, deadline, limit)
        first: LLMHTTPError | None = None
        for mode in AUTO_ORDER:
            try:
                result = self._send(messages, options, start, deadline, limit, mode=mode)
            except LLMHTTPError as exc:
                if exc.status_code not in (400, 422):
                    raise
                first = first or exc
                log.info("schema mode %s refused (%s); trying the next", mode, exc)
                continue
            with self._rng_lock:
                if self.schema_mode == "auto":
                    self.schema_mode = mode
                    log.info("schema mode for %s: %s", self.base_url, mode)
            return result
        assert first is not None
        raise first

    def _send(
        self,
        messages: list[Message],
        options: ChatOptions,
        start: float,
        deadline: float,
        limit: float,
        *,
        mode: SchemaMode | None = None,
    ) -> ChatResult:
        """One request (retried on 429/5xx and connection errors) with the schema in ``mode``."""
        body = self.request_body(
            messages,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            json_schema=options.json_schema,
            mode=mode,
            top_logprobs=options.top_logprobs,
        )
        payload = json.dumps(body).encode()
        url = f"{self.base_url}/chat/completions"
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LLMTimeoutError(f"POST {url}: no reply within {limit:.3g} s")
            retry_after: float | None = None
            try:
                resp = self._post(url, payload, remaining, deadline)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                    err: LLMConnectionError = LLMConnectionError(
                        f"POST {url}: {type(exc).__name__}"
                    )
                else:
                    raise LLMTimeoutError(
                        f"POST {url}: no reply within {limit:.3g} s ({type(exc).__name__})"
                    ) from None
            except _RETRYABLE_EXC as exc:
                err = LLMConnectionError(
                    f"POST {url}: {type(exc).__name__}: {self._clean(str(exc))}"
                )
            except httpx.HTTPError as exc:
                raise LLMConnectionError(
                    f"POST {url}: {type(exc).__name__}: {self._clean(str(exc))}"
                ) from None
            else:
                if resp.status_code < 400:
                    return self._result(resp, url, start)
                detail = self._clean(resp.text[:300])
                err = LLMHTTPError(
                    f"POST {url}: HTTP {resp.status_code}: {detail}",
                    status_code=resp.status_code,
                )
                if not err.retryable:
                    raise err
                retry_after = _retry_after(resp)
            if attempt >= self.max_retries:
                raise err
            delay = self._backoff(attempt, retry_after)
            remaining = deadline - time.monotonic()
            if delay >= remaining:
                raise LLMTimeoutError(
                    f"POST {url}: no reply within {limit:.3g} s; last error: {err}"
                ) from None
            attempt += 1
            log.info("llm retry %d/%d after %.3fs: %s", attempt, self.max_retries, delay, err)
            time.sleep(delay)

    def _post(self, url: str, payload: bytes, timeout: float, deadline: float) -> httpx.Response:
        """POST and read the body, at most ``max_reply_bytes`` of it and never past ``deadline``.

        Raises:
            LLMConnectionError: the body is larger than ``max_reply_bytes`` (cut there).
            httpx.ReadTimeout: the deadline passed while reading.
        """
        request = self._http.build_request("POST", url, content=payload, timeout=timeout)
        resp = self._http.send(request, stream=True)
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in resp.iter_bytes():  # decoded: a compressed bomb is cut too
                size += len(chunk)
                if size > self.max_reply_bytes:
                    raise LLMConnectionError(
                        f"POST {url}: reply body larger than {self.max_reply_bytes:,} bytes: "
                        f"cut there, not read (HTTP {resp.status_code})"
                    )
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("reply still arriving at the deadline", request=request)
        finally:
            resp.close()
        headers = {
            k: v
            for k, v in resp.headers.items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        }
        return httpx.Response(
            resp.status_code, headers=headers, content=b"".join(chunks), request=request
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        base = min(self.backoff_max_s, self.backoff_s * 2.0**attempt)
        with self._rng_lock:
            delay = base * (0.5 + 0.5 * self._rng.random())
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max_s))
        return delay

    def _clean(self, text: str) -> str:
        return redact(text, [self._api_key])

    def _result(self, resp: httpx.Response, url: str, start: float) -> ChatResult:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
            return ChatResult(
                text=str(text),
                usage=TokenUsage(
                    int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
                ),
                latency_s=time.monotonic() - start,
                model=str(data.get("model") or self._model),
                finish_reason=choice.get("finish_reason"),
                top_logprobs=_top_logprobs(choice.get("logprobs")),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMConnectionError(
                f"POST {url}: reply is not a chat completion ({type(exc).__name__}): "
                f"{self._clean(resp.text[:200])!r}"
            ) from None


def _top_logprobs(logprobs: Any) -> tuple[tuple[tuple[str, float], ...], ...]:
    """The ``top_logprobs`` of a chat choice's ``logprobs`` field (OpenAI's shape), or ()."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return ()
    out = []
    for position in logprobs["content"]:
        tops = position.get("top_logprobs") if isinstance(position, dict) else None
        out.append(
            tuple(
                (str(t["token"]), float(t["logprob"]))
                for t in tops or ()
                if isinstance(t, dict) and "token" in t and "logprob" in t
            )
        )
    return tuple(out)


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
