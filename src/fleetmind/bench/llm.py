"""``fleetmind bench llm``: the LLM runtime's own figures.

* overhead per call of :class:`OpenAICompatClient` against a raw ``httpx`` POST of the same bytes
  to the same server (interleaved pairs, medians): in memory (``httpx.MockTransport``: only
  the runtime's Python cost), on the scripted fake server (loopback HTTP, no model), and on the
  embedded llama.cpp server (``max_tokens=1``; noisy on a shared machine); target: at most 5 %
  or at most 1 ms on the embedded server;
* embedded model tokens/s (SmolLM2-135M, llama.cpp), with 1 and 2 threads, idle and with the
  other core busy (full run only);
* valid-JSON rate with and without schema-constrained decoding over a fixed prompt set of 10
  (5 with ``quick``): strict JSON, lenient JSON (raw newlines in strings) and after repair,
  each validated against a pydantic model.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from fleetmind.llm.chat import Message
from fleetmind.llm.client import OpenAICompatClient
from fleetmind.llm.embedded import EmbeddedServer
from fleetmind.llm.errors import ActionParseError
from fleetmind.llm.parse import decoding_schema, parse_model
from fleetmind.testing.fake_server import FakeChatServer

log = logging.getLogger(__name__)


class Assignment(BaseModel):
    """The fixed target shape of the valid-JSON benchmark."""

    robot: str
    order_id: int
    priority: int


PROMPTS: tuple[str, ...] = (
    "Assign order 4 to robot_1 with priority 2.",
    "robot_0 should take order 9; it is urgent (priority 3).",
    "Order 12 waits at shelf B. robot_3 is idle next to it. Priority 1.",
    "Which robot should serve order 5? robot_2 is free, robot_4 is charging. Priority 2.",
    "Plan: order 30 to robot_7, low priority.",
    "Order 8 is late. robot_1 just delivered and is free. Make it priority 3.",
    "Give the assignment for order 21: robot_5, normal priority 2.",
    "robot_6 is closest to order 14. Assign it with priority 1.",
    "Order 2 needs a robot that can lift heavy items: robot_9 can. Priority 2.",
    "Two orders wait; take order 11 first with robot_0, priority 3.",
)

SYSTEM = (
    "You assign warehouse orders to robots. Answer with one JSON object with the fields "
    '"robot" (string), "order_id" (integer) and "priority" (integer 1-3).'
)


def _raw_call(http: httpx.Client, url: str, payload: bytes) -> str:
    resp = http.post(url, content=payload)
    resp.raise_for_status()
    return str(resp.json()["choices"][0]["message"]["content"] or "")


_CANNED = json.dumps(
    {
        "choices": [{"message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        "model": "mock",
    }
).encode()


def _mock_transport() -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(200, content=_CANNED))


def measure_overhead(
    base_url: str, model: str, *, pairs: int, mock: bool = False
) -> dict[str, float]:
    """Median latency of the runtime client vs a raw httpx POST of the same bytes, interleaved.

    Args:
        base_url: the server base URL.
        model: the model name.
        pairs: how many (raw, client) pairs to time, after one warm-up pair.
        mock: answer both from an in-memory ``httpx.MockTransport`` (no network at all, so
            only the runtime's own Python cost is left).

    Returns:
        ``raw_ms``, ``client_ms``, ``overhead_ms`` (median of per-pair differences),
        ``overhead_pct`` and ``pairs``.
    """
    transport = _mock_transport() if mock else None
    client = OpenAICompatClient(base_url, model, max_retries=0, transport=transport)
    msgs = [Message.user("Say OK.")]
    body = client.request_body(msgs, temperature=0.0, max_tokens=1, json_schema=None)
    payload = json.dumps(body).encode()
    url = f"{client.base_url}/chat/completions"
    raw_t, cli_t, diff = [], [], []
    headers = {"Content-Type": "application/json"}
    transport = _mock_transport() if mock else None
    with httpx.Client(timeout=60.0, headers=headers, transport=transport) as http:
        for i in range(pairs + 1):
            # Alternate which goes first: a server may be slower right after a reply.
            raw_first = i % 2 == 0
            t0 = time.perf_counter()
            if raw_first:
                _raw_call(http, url, payload)
            else:
                client.chat(msgs, temperature=0.0, max_tokens=1)
            t1 = time.perf_counter()
            if raw_first:
                client.chat(msgs, temperature=0.0, max_tokens=1)
            else:
                _raw_call(http, url, payload)
            t2 = time.perf_counter()
            if i == 0:
                continue  # warm-up: connection set-up, prompt cache
            raw_s, cli_s = (t1 - t0, t2 - t1) if raw_first else (t2 - t1, t1 - t0)
            raw_t.append(raw_s)
            cli_t.append(cli_s)
            diff.append(cli_s - raw_s)
    client.close()
    raw_ms = statistics.median(raw_t) * 1e3
    over_ms = statistics.median(diff) * 1e3
    return {
        "raw_ms": raw_ms,
        "client_ms": statistics.median(cli_t) * 1e3,
        "overhead_ms": over_ms,
        "overhead_pct": 100.0 * over_ms / raw_ms if raw_ms > 0 else 0.0,
        "pairs": float(pairs),
    }


def measure_tokens_per_s(server: EmbeddedServer, *, runs: int, max_tokens: int) -> float:
    """Completion tokens per second of free-text generation (prompt processing included)."""
    client = server.client(max_retries=0)
    tokens = 0
    seconds = 0.0
    for i in range(runs + 1):
        r = client.chat(
            [Message.user(f"Write a long story about warehouse robot number {i}.")],
            temperature=0.0,
            max_tokens=max_tokens,
        )
        if i == 0:
            continue  # warm-up
        tokens += r.usage.completion_tokens
        seconds += r.latency_s
    client.close()
    return tokens / seconds if seconds > 0 else 0.0


def measure_valid_json(client: OpenAICompatClient, prompts: tuple[str, ...]) -> dict[str, Any]:
    """Valid-JSON rates with and without schema constraints over a prompt set.

    Three levels per mode: ``strict`` (``json.loads`` as the JSON spec says, then pydantic
    validation), ``lenient`` (control characters allowed inside strings) and ``repaired``
    (the runtime's full parse: lenient, then ``json_repair``), each a fraction in [0, 1].

    Args:
        client: a client of the embedded server.
        prompts: the fixed prompt set.

    Returns:
        ``{"with_schema": {...}, "without_schema": {...}}``.
    """
    schema = decoding_schema(Assignment.model_json_schema())
    out: dict[str, Any] = {}
    for mode, sch in (("with_schema", schema), ("without_schema", None)):
        counts = {"strict": 0, "lenient": 0, "repaired": 0}
        for prompt in prompts:
            msgs = [Message.system(SYSTEM), Message.user(prompt)]
            r = client.chat(msgs, temperature=0.2, max_tokens=64, json_schema=sch)
            counts["strict"] += _valid(r.text, strict=True)
            counts["lenient"] += _valid(r.text, strict=False)
            try:
                parse_model(r.text, Assignment)
                counts["repaired"] += 1
            except ActionParseError:
                pass
        out[mode] = {k: v / len(prompts) for k, v in counts.items()}
    return out


def _valid(text: str, *, strict: bool) -> int:
    try:
        Assignment.model_validate(json.loads(text, strict=strict))
    except (ValueError, ValidationError):
        return 0
    return 1


def _busy_core() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run(*, quick: bool) -> dict[str, object]:
    """Measure the LLM runtime's figures.

    Args:
        quick: fewer pairs, prompts and generations (a smoke run of well under a minute).

    Returns:
        A JSON-serialisable dict of figures under ``llm/`` keys, plus the settings used.
    """
    pairs = 20 if quick else 60
    prompts = PROMPTS[:5] if quick else PROMPTS
    gen_tokens = 32 if quick else 96
    runs = 2 if quick else 3
    out: dict[str, object] = {"quick": quick, "cpu_count": os.cpu_count()}

    out["llm/overhead_mock_transport"] = measure_overhead(
        "http://mock/v1", "mock", pairs=pairs * 50, mock=True
    )
    with FakeChatServer(["OK"]) as fake:
        over = measure_overhead(fake.base_url, fake.model, pairs=pairs * 5)
    out["llm/overhead_fake_server"] = over

    with EmbeddedServer(n_threads=1) as server:
        out["llm/embedded_startup_s"] = server.startup_s
        over = measure_overhead(server.base_url, server.model_alias, pairs=pairs)
        out["llm/overhead_embedded"] = over
        out["llm/tokens_per_s"] = {
            "threads_1_idle": measure_tokens_per_s(server, runs=runs, max_tokens=gen_tokens)
        }
        valid = measure_valid_json(server.client(max_retries=0), prompts)
        out["llm/valid_json_rate"] = {**valid, "prompts": len(prompts)}
        if not quick:
            busy = _busy_core()
            try:
                tps = out["llm/tokens_per_s"]
                assert isinstance(tps, dict)
                tps["threads_1_busy"] = measure_tokens_per_s(
                    server, runs=runs, max_tokens=gen_tokens
                )
            finally:
                busy.kill()
                busy.wait()
    if not quick:
        with EmbeddedServer(n_threads=2) as server2:
            tps = out["llm/tokens_per_s"]
            assert isinstance(tps, dict)
            tps["threads_2_idle"] = measure_tokens_per_s(server2, runs=runs, max_tokens=gen_tokens)
            busy = _busy_core()
            try:
                tps["threads_2_busy"] = measure_tokens_per_s(
                    server2, runs=runs, max_tokens=gen_tokens
                )
            finally:
                busy.kill()
                busy.wait()
    emb = out["llm/overhead_embedded"]
    assert isinstance(emb, dict)
    out["llm/overhead_target_met"] = bool(emb["overhead_ms"] <= 1.0 or emb["overhead_pct"] <= 5.0)
    return out


def _rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MB (None where /proc is not there)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def measure_memory(
    model_path: str | None = None, *, prompts: int = 10, bounded: bool = True
) -> dict[str, Any]:
    """The embedded server's resident memory as it reads ``prompts`` distinct prompts.

    Each prompt is about 440 tokens (a filler list and a number that makes it new), answered
    with 4 tokens: what a note reader or planner sending new text every call does to the
    server's prompt cache.

    Args:
        model_path: a GGUF file (default: the shipped SmolLM2).
        prompts: distinct prompts sent.
        bounded: the launcher's bounded prompt cache (False: llama-cpp-python's as it is).

    Returns:
        ``ready_mb``, ``rss_mb`` (after each prompt), ``peak_mb``, ``seconds``.
    """
    filler = " ".join(f"item{j}" for j in range(120))
    out: dict[str, Any] = {"bounded": bounded, "prompts": prompts}
    with EmbeddedServer.beside_loop(model_path, bounded_cache=bounded) as server:
        proc = server._proc
        assert proc is not None
        out["model"] = str(server.model_path)
        out["ready_mb"] = _rss_mb(proc.pid)
        client = server.client()
        rss: list[float | None] = []
        t0 = time.perf_counter()
        for i in range(prompts):
            client.chat(
                [
                    Message.system("You answer briefly."),
                    Message.user(f"Note {i}: {filler} {i}. Summarise note {i}."),
                ],
                max_tokens=4,
                temperature=0.0,
            )
            rss.append(_rss_mb(proc.pid))
        out["seconds"] = time.perf_counter() - t0
    out["rss_mb"] = rss
    known = [x for x in rss if x is not None]
    out["peak_mb"] = max(known) if known else None
    return out


def run_memory(model_path: str | None = None, *, prompts: int = 10) -> dict[str, Any]:
    """``fleetmind bench llm-memory``: the bounded cache against llama-cpp-python's own."""
    bounded = measure_memory(model_path, prompts=prompts, bounded=True)
    unbounded = measure_memory(model_path, prompts=prompts, bounded=False)
    return {"bounded": bounded, "unbounded (llama-cpp-python as it is)": unbounded}


def format_memory(result: dict[str, Any]) -> str:
    """The memory figures as text, one line per setting."""
    lines = []
    for name, r in result.items():
        every = ", ".join("-" if x is None else f"{x:.0f}" for x in r["rss_mb"])
        lines.append(
            f"{name}: {r['model']}: ready {r['ready_mb']:.0f} MB; after each of {r['prompts']} "
            f"distinct prompts: {every} MB ({r['seconds']:.0f} s)"
        )
    return "\n".join(lines)
