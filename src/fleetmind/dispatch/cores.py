"""The control loop's core: its thread alone on the CPUs an embedded model server leaves free.

An embedded model server started beside the loop (``EmbeddedServer.beside_loop``) is kept on
all CPUs but the last; this module keeps the loop's thread on that last one, and every other
thread of the process (the incident desk, the recorder's writer, planner workers) off it.

Why both halves. With the server alone kept off the loop's core, the loop's thread still wandered
onto the server's core, and the scheduler let the model preempt it mid-tick; kept on its own
core, it was preempted there by the process's other threads instead (a parquet write of the
recorder, the desk). Measured on the desk bench's seed 1 (2 cores, embedded model, 0.2 s ticks,
the world capture of each planner decision, about 0.5 ms of CPU): its wall time p95 / max
3.1 / 5.5 ms with the loop free (every slow one one involuntary switch, on the server's core),
4.6 / 5.5 ms with the loop's thread pinned alone, 0.65 / 0.69 ms with the loop's thread pinned
and the others moved off its core.
"""

from __future__ import annotations

import logging
import os
import threading
from types import TracebackType

from fleetmind.llm.embedded import EmbeddedServer

log = logging.getLogger(__name__)

TASKS = "/proc/self/task"


def loop_cpus() -> frozenset[int]:
    """The CPUs for the loop's thread: those of ours no running embedded server is kept on.

    Empty (leave the threads as they are) when no server was given CPUs, when the servers have
    every CPU of ours, or where the platform has no thread affinities.
    """
    if not hasattr(os, "sched_getaffinity"):
        return frozenset()
    busy = EmbeddedServer.cpus_in_use()
    free = frozenset(os.sched_getaffinity(0)) - busy
    return free if busy and free else frozenset()


class LoopCores:
    """Keep the calling thread alone on ``cpus`` and the process's other threads off them.

    A context manager around a run of the loop; on exit every thread gets back the affinity the
    caller had. Threads started meanwhile inherit the affinity of the thread that starts them (the
    loop's, for planner workers and the recorder's writer), so :meth:`check` moves them off; the
    loop calls it every tick, and it costs a thread count unless the count changed. Does nothing
    with an empty ``cpus``, or one that would leave the other threads no CPU.

    Args:
        cpus: the loop's CPUs (see :func:`loop_cpus`).
    """

    def __init__(self, cpus: frozenset[int]) -> None:
        self.cpus = cpus
        self.active = False
        self._mine: frozenset[int] = frozenset()
        self._others: frozenset[int] = frozenset()
        self._tid = 0
        self._count = 0
        self._moved: set[int] = set()

    def __enter__(self) -> LoopCores:
        if not self.cpus or not os.path.isdir(TASKS) or not hasattr(os, "sched_setaffinity"):
            return self
        self._mine = frozenset(os.sched_getaffinity(0))
        self._others = self._mine - self.cpus
        if not self._others or not self.cpus <= self._mine:
            return self
        self._tid = threading.get_native_id()
        os.sched_setaffinity(0, self.cpus)
        self.active = True
        self._sweep()
        log.info("control loop kept on CPUs %s, its other threads on %s", self.cpus, self._others)
        return self

    def _sweep(self) -> None:
        """Move every thread but the loop's onto the other CPUs."""
        self._count = threading.active_count()
        try:
            tids = [int(name) for name in os.listdir(TASKS)]
        except OSError:
            return
        for tid in tids:
            if tid == self._tid:
                continue
            try:
                os.sched_setaffinity(tid, self._others)
            except OSError:  # the thread ended meanwhile
                continue
            self._moved.add(tid)

    def check(self) -> None:
        """Move threads started since the last look off the loop's CPUs."""
        if self.active and threading.active_count() != self._count:
            self._sweep()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.active:
            return
        self.active = False
        os.sched_setaffinity(0, self._mine)
        for tid in self._moved:
            try:
                os.sched_setaffinity(tid, self._mine)
            except OSError:
                continue
        self._moved.clear()


__all__ = ["LoopCores", "loop_cpus"]
