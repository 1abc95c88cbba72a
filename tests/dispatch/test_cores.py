"""The control loop's core: its thread alone on the CPUs an embedded server leaves free."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fleetmind.dispatch import cores
from fleetmind.dispatch.cores import LoopCores, loop_cpus
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.llm.embedded import EmbeddedServer

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity")
    or len(os.sched_getaffinity(0)) < 2
    or not Path("/proc/self/task").is_dir(),
    reason="needs thread affinities and two CPUs",
)


def _parked() -> tuple[threading.Thread, int, threading.Event]:
    """A thread that waits until told, and its native id."""
    stop, ready = threading.Event(), threading.Event()
    tid: list[int] = []

    def work() -> None:
        tid.append(threading.get_native_id())
        ready.set()
        stop.wait(10)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    ready.wait(5)
    return t, tid[0], stop


def test_the_loop_thread_is_alone_on_its_cpus_and_gets_them_back() -> None:
    mine = frozenset(os.sched_getaffinity(0))
    loop = frozenset({max(mine)})
    before, before_tid, stop_before = _parked()
    with LoopCores(loop) as kept:
        assert kept.active
        assert os.sched_getaffinity(0) == loop
        assert os.sched_getaffinity(before_tid) == mine - loop
        # A thread started by the loop inherits its CPUs until the loop's next look.
        later, later_tid, stop_later = _parked()
        assert os.sched_getaffinity(later_tid) == loop
        kept.check()
        assert os.sched_getaffinity(later_tid) == mine - loop
    assert os.sched_getaffinity(0) == mine
    assert os.sched_getaffinity(before_tid) == mine
    assert os.sched_getaffinity(later_tid) == mine
    for stop, t in ((stop_before, before), (stop_later, later)):
        stop.set()
        t.join(5)


def test_nothing_moves_without_a_server_or_without_a_cpu_to_spare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine = frozenset(os.sched_getaffinity(0))
    assert loop_cpus() == frozenset()  # no embedded server runs in this process
    monkeypatch.setattr(EmbeddedServer, "cpus_in_use", classmethod(lambda cls: mine))
    assert loop_cpus() == frozenset()  # the servers have every CPU: nothing left to keep
    server = frozenset({min(mine)})
    monkeypatch.setattr(EmbeddedServer, "cpus_in_use", classmethod(lambda cls: server))
    assert loop_cpus() == mine - server
    with LoopCores(mine) as kept:  # the others would have no CPU
        assert not kept.active
        assert os.sched_getaffinity(0) == mine


def test_a_run_beside_a_server_ticks_on_the_free_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    mine = frozenset(os.sched_getaffinity(0))
    server = frozenset({min(mine)})
    monkeypatch.setattr(EmbeddedServer, "cpus_in_use", classmethod(lambda cls: server))
    seen: list[frozenset[int]] = []
    real_check = cores.LoopCores.check

    def check(self: LoopCores) -> None:
        seen.append(frozenset(os.sched_getaffinity(0)))
        real_check(self)

    monkeypatch.setattr(cores.LoopCores, "check", check)
    m = execute(RunConfig(robots=4, steps=20, seed=0), None)
    assert m["steps"] == 20
    assert seen
    assert set(seen) == {mine - server}
    assert os.sched_getaffinity(0) == mine
