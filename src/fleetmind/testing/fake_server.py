"""A scripted, misbehaving OpenAI-compatible server on 127.0.0.1, for tests.

Each request to ``POST /v1/chat/completions`` is answered by the next :class:`Reply` of a script
(or by a function of the request). A reply can carry any text (malformed JSON, wrong schema,
unknown tools, huge or empty text), a delay, an HTTP status, a raw body, or a connection reset.
Other tiers use it to simulate a bad or slow model::

    from fleetmind.testing.fake_server import FakeChatServer, Reply

    finish = '{"type": "finish", "answer": 1}'
    with FakeChatServer([Reply(status=500), Reply(finish)]) as srv:
        client = srv.client()
        ...
        assert len(srv.requests) == 2

The server runs in a daemon thread; ``GET /v1/models`` and ``GET /health`` answer 200 for
readiness checks.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fleetmind.llm.client import LocalServer, OpenAICompatClient


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        content: the assistant message text (``None`` sends ``"content": null``).
        status: the HTTP status; with a status >= 400 the body is an OpenAI-style error.
        delay_s: seconds to wait before answering.
        body: a raw body sent verbatim instead of a chat completion (e.g. broken JSON).
        reset: close the connection with a TCP reset instead of answering.
        headers: extra response headers (e.g. ``{"Retry-After": "0"}``).
        prompt_tokens: reported prompt tokens (default: a rough count of the request).
        completion_tokens: reported completion tokens (default: words in ``content``).
        finish_reason: the reported finish reason (``"length"`` simulates a cut-off reply).
    """

    content: str | None = ""
    status: int = 200
    delay_s: float = 0.0
    body: str | None = None
    reset: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"


@dataclass
class Received:
    """A request the server received.

    Attributes:
        body: the parsed JSON body (``{}`` if it was not JSON).
        headers: the request headers, lower-cased names.
        time: ``time.monotonic()`` on arrival.
    """

    body: dict[str, Any]
    headers: dict[str, str]
    time: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's messages."""
        return list(self.body.get("messages", []))

    @property
    def last_user(self) -> str:
        """The content of the last user message, or ``""``."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return str(m.get("content", ""))
        return ""


Script = Sequence[Reply | str] | Callable[[Received], Reply | str]


class _Server(ThreadingHTTPServer):
    """The HTTP server, quiet when a client drops its connection (clients that time out do)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Print a handler's traceback, except for a connection the client closed."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeChatServer(LocalServer):
    """A scripted OpenAI-compatible server.

    Args:
        script: a list of replies served in order (strings are shorthand for ``Reply(text)``),
            or a function from the received request to a reply.
        repeat_last: when a list script runs out, keep serving its last reply (else 500).
        model: the model name reported in replies.
    """

    def __init__(
        self, script: Script = (), *, repeat_last: bool = True, model: str = "fake-model"
    ) -> None:
        self._script = script
        self._repeat_last = repeat_last
        self.model = model
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._index = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The ``http://127.0.0.1:PORT/v1`` base URL (after start)."""
        if self._server is None:
            raise RuntimeError("FakeChatServer is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def client(self, **kwargs: Any) -> OpenAICompatClient:
        """Return a client for this server (fast backoff unless overridden).

        Args:
            **kwargs: constructor arguments of :class:`OpenAICompatClient`.

        Returns:
            The client.
        """
        kwargs.setdefault("backoff_s", 0.01)
        kwargs.setdefault("backoff_max_s", 0.05)
        kwargs.setdefault("timeout_s", 10.0)
        # The embedded server's way (llama.cpp); pass schema_mode="auto" to test the probing.
        kwargs.setdefault("schema_mode", "json_object_schema")
        return OpenAICompatClient(self.base_url, self.model, **kwargs)

    def start(self) -> FakeChatServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        handler = _make_handler(self)
        server = _Server(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def next_reply(self, received: Received) -> Reply:
        """Record a request and pick its reply from the script."""
        with self._lock:
            self.requests.append(received)
            script = self._script
            if callable(script):
                reply: Reply | str = script(received)
            elif self._index < len(script):
                reply = script[self._index]
            elif self._repeat_last and len(script) > 0:
                reply = script[-1]
            else:
                reply = Reply(status=500, body='{"error": {"message": "script exhausted"}}')
            self._index += 1
        return Reply(reply) if isinstance(reply, str) else reply


def _completion(server: FakeChatServer, reply: Reply, received: Received) -> bytes:
    content = reply.content
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = sum(len(str(m.get("content", "")).split()) for m in received.messages)
    completion = reply.completion_tokens
    if completion is None:
        completion = len((content or "").split())
    data = {
        "id": f"chatcmpl-fake-{len(server.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": server.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return json.dumps(data).encode()


def _make_handler(server: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes; without NODELAY, Nagle plus the client's
            # delayed ACK adds ~40 ms to some replies.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (e.g. its timeout passed)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/health", "/models"):
                body = {"object": "list", "data": [{"id": server.model, "object": "model"}]}
                self._send(200, json.dumps(body).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    body = {}
            except ValueError:
                body = {}
            received = Received(
                body=body,
                headers={k.lower(): v for k, v in self.headers.items()},
                time=time.monotonic(),
            )
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            reply = server.next_reply(received)
            if reply.delay_s > 0:
                time.sleep(reply.delay_s)
            if reply.reset:
                # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True
                self.connection.close()
                return
            if reply.body is not None:
                self._send(reply.status, reply.body.encode(), reply.headers)
            elif reply.status >= 400:
                msg = json.dumps({"error": {"message": f"scripted {reply.status}"}})
                self._send(reply.status, msg.encode(), reply.headers)
            else:
                self._send(reply.status, _completion(server, reply, received), reply.headers)

    return Handler
