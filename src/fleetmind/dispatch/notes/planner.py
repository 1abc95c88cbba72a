"""The note-reading planner (``llm-notes``): no order ever waits for the reader.

A reader turns notes into constraints and the solver assigns honouring them.

Per planner call:

1. Every order with a note (open, or assigned and not loaded yet) that has no reading: a reader
   that answers at once (rules; a cached note; a note with nothing a model could be asked
   about) reads it now; otherwise the note goes to a background worker (``background=True``,
   the async mode users run) or is read now (sync mode, reproducible). While the worker is busy
   with another note, or the model is in an outage, the cue rules answer at once and the model's
   reading (or a probe of whether it is back) revises the note later, so at most one order at a
   time waits on the model.
2. The solver assigns every open order with the constraints read so far, so an order whose note
   is still being read is assigned at once; its robot drives to the pickup but may not load
   (a load gate) until the reading arrives or ``max_wait`` ticks pass (counted as
   ``notes_wait_expired`` in the run's metrics).
3. A reading that arrives later re-plans: an assigned order whose robot the note excludes is
   revoked (the solver gives it to an allowed robot), a hold gates the load until its tick, and
   the gate of the note is lifted.

A ``needs_review`` reading serves the order as a plain order and is reported (an event and
``notes_needs_review``). Readers are in :mod:`fleetmind.dispatch.notes.readers`.

:meth:`NoteReaderPlanner.reader_counts` adds up what the model was asked over the run (the
``rules+llm`` reader's closed questions: asked, answered, abstained, timed out, constraints
added); a run with a model reader writes it to ``metrics.json`` as ``note_reader``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace

from fleetmind.dispatch.notes.readers import NoteReader, Reading, RulesReader
from fleetmind.dispatch.planners import AssignmentPlanner
from fleetmind.dispatch.plans import Plan, PlanOutcome, Snapshot
from fleetmind.llm.usage import CallCounts
from fleetmind.sim.grid import GridMap
from fleetmind.sim.notes import Constraint
from fleetmind.sim.orders import Order

UNREAD = "unread"
QUESTION_COUNTS = ("notes_asked", "asked", "answered", "abstained", "timed_out", "added")
"""The keys of :meth:`NoteReaderPlanner.reader_counts` besides ``reader``."""


class _Worker:
    """One daemon thread that runs readings in turn.

    Not a ``ThreadPoolExecutor``: the interpreter joins its threads at exit, so a reading hung
    on a dead model would hold the process for the call's whole time limit after the run ended.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Reading], Callable[[], Reading]] | None] = (
            queue.SimpleQueue()
        )
        self._queued: list[Future[Reading]] = []
        threading.Thread(target=self._serve, name="note-reader", daemon=True).start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, work = job
            if not future.set_running_or_notify_cancel():
                continue  # cancelled by shutdown
            try:
                future.set_result(work())
            except BaseException as exc:  # handed to whoever reads the future
                future.set_exception(exc)

    def submit(self, work: Callable[[], Reading]) -> Future[Reading]:
        """Queue ``work``; its future."""
        future: Future[Reading] = Future()
        self._queued = [f for f in self._queued if not f.done()]
        self._queued.append(future)
        self._jobs.put((future, work))
        return future

    def shutdown(self) -> None:
        """Cancel what has not started and stop after the reading in progress (never waits)."""
        for future in self._queued:
            future.cancel()
        self._jobs.put(None)


class NoteReaderPlanner:
    """The solver assigns; a note reader supplies the constraints it honours.

    Args:
        reader: the note reader (cached readers read each note text once).
        grid: the map.
        background: read notes that need a model on a worker thread (never blocking a plan).
        max_wait: ticks a robot at the pickup waits for a note still being read, at most.
    """

    name = "llm-notes"
    preempts = True  # it knows note deadlines: the loop asks it even when every robot is busy

    def __init__(
        self, reader: NoteReader, grid: GridMap, *, background: bool = True, max_wait: int = 40
    ) -> None:
        self.reader = reader
        self.solver = AssignmentPlanner(grid)
        self.background = background
        self.max_wait = max_wait
        self._readings: dict[str, Reading] = {}
        self._fallback = RulesReader()
        self._gated_at: dict[str, int] = {}  # order -> tick its unread-note gate was first set
        self._reported: set[str] = set()
        self._pending: dict[str, Future[Reading]] = {}
        self._lock = threading.Lock()
        self._news = threading.Event()
        self._usage = [0, 0, 0, 0, 0]  # calls, prompt, completion tokens, notes read, unreadable
        # Over the whole run (never reset): the model's questions and what became of them.
        self._questions = dict.fromkeys(QUESTION_COUNTS, 0)
        self._pool = _Worker() if background else None

    def warm_up(self, snapshot: Snapshot) -> None:
        """Before the first tick: a reader with a warm-up (``rules+llm``) reads its prompt once.

        Otherwise the first note that needs the model waits on the cold prefix (SmolLM2: about
        6 s, the whole of a flat-out run) and its order on the load gate. The snapshot is not
        read: the reader's warm-up questions are its own.
        """
        warm = getattr(getattr(self.reader, "inner", self.reader), "warm_up", None)
        if callable(warm):
            warm()

    def has_news(self) -> bool:
        """Whether a background reading arrived since the last plan (the loop re-plans)."""
        return self._news.is_set()

    def _count(self, reading: Reading, *, probe: bool = False) -> None:
        with self._lock:
            self._usage[0] += reading.calls
            self._usage[1] += reading.tokens_prompt
            self._usage[2] += reading.tokens_completion
            # A probe re-reads a note the fallback already answered (and counted).
            self._usage[3] += not reading.cached and not probe
            self._usage[4] += reading.unreadable is not None and not probe
            # Probes count here: their questions went to the model like any other.
            q = self._questions
            q["notes_asked"] += reading.questions > 0
            q["asked"] += reading.questions
            q["answered"] += reading.answered
            q["abstained"] += reading.answered - reading.added
            q["timed_out"] += reading.timed_out
            q["added"] += reading.added

    def reader_counts(self) -> dict[str, int | str]:
        """The run's questions to the model so far (``metrics.json``'s ``note_reader``).

        Returns:
            ``reader`` (its name); ``notes_asked`` (readings that asked the model at least
            once); of the closed questions, ``asked``, ``answered`` (before their deadline),
            ``timed_out`` (no answer in time, or the server unreachable), ``added`` (answers
            that became a constraint) and ``abstained`` (answered, nothing added: ``none``, a
            margin below the calibrated one, a proposal not traced to the note or inconsistent
            with the rules). ``asked = answered + timed_out`` and ``answered = added +
            abstained``. A reading still in progress when the run ends is not counted.
        """
        with self._lock:
            return {"reader": self.reader.name, **self._questions}

    def _read_now(self, order: Order, robots: list[str], *, probe: bool = False) -> Reading:
        reading = self.reader.read(order.note, arrival_tick=order.tick, robots=robots)
        self._count(reading, probe=probe)
        return reading

    def _read_later(self, order: Order, robots: list[str], *, probe: bool = False) -> None:
        assert self._pool is not None

        def work() -> Reading:
            reading = self._read_now(order, robots, probe=probe)
            with self._lock:
                self._readings[order.id] = reading
            self._news.set()
            return reading

        self._pending[order.id] = self._pool.submit(work)

    def _busy(self) -> bool:
        """Whether a background reading is still in flight."""
        return any(not f.done() for f in self._pending.values())

    def readings(self, snapshot: Snapshot) -> dict[str, Reading]:
        """Read (or queue) every note of the snapshot's orders; the readings known now."""
        robots = [r.id for r in snapshot.robots]
        for o in (*snapshot.orders, *snapshot.tasks):
            if not o.note or o.id in self._readings or o.id in self._pending:
                continue
            if self._pool is None or not self.reader.needs_model(o.note, robots):
                self._readings[o.id] = self._read_now(o, robots)
            elif getattr(self.reader, "degraded", False):
                # The model is down: the cue rules answer now (no order waits on an outage);
                # one background probe at a time finds out when the model is back.
                reading = self._fallback.read(o.note, arrival_tick=o.tick, robots=robots)
                reading = replace(reading, unreadable="model unreachable (outage)")
                self._count(reading)
                self._readings[o.id] = reading
                if not self._busy():
                    self._read_later(o, robots, probe=True)
            elif self._busy():
                # The model is busy with another note: the cue rules answer now, and the model's
                # reading revises this one when it comes (before pickup, if it is in time), so
                # at most one order at a time waits at its pickup for the model.
                with self._lock:
                    self._readings[o.id] = self._fallback.read(
                        o.note, arrival_tick=o.tick, robots=robots
                    )
                self._read_later(o, robots, probe=True)
            else:
                self._read_later(o, robots)
        with self._lock:
            return dict(self._readings)

    def plan(self, snapshot: Snapshot) -> PlanOutcome:
        """Read what can be read, then solve with the constraints known so far."""
        start = time.perf_counter()
        self._news.clear()
        known = self.readings(snapshot)
        constraints: dict[str, tuple[Constraint, ...]] = {
            oid: r.constraints for oid, r in known.items() if r.status == "ok" and r.constraints
        }
        reviews = tuple(
            (oid, r.reason or "needs review")
            for oid, r in known.items()
            if r.status == "needs_review" and oid not in self._reported
        )
        self._reported.update(oid for oid, _ in reviews)
        gates: list[tuple[str, int | None, str]] = []
        ungates: list[str] = []
        revoke: list[str] = []
        robots = {r.order: r for r in snapshot.robots if r.order is not None}
        for o in (*snapshot.orders, *snapshot.tasks):
            if not o.note:
                continue
            if o.id not in known:
                # Being read: assign it anyway, but no loading until the note is read, or
                # max_wait ticks after the gate was first set (never renewed: the wait is bounded).
                first = self._gated_at.setdefault(o.id, snapshot.tick)
                gates.append((o.id, first + self.max_wait, UNREAD))
                continue
            ungates.append(o.id)
            holder = robots.get(o.id)
            for c in constraints.get(o.id, ()):
                if holder is not None and (
                    (c.kind == "only_robot" and holder.id != c.robot)
                    or (c.kind == "not_robot" and holder.id == c.robot)
                ):
                    revoke.append(o.id)
                elif c.kind == "hold" and c.tick is not None and holder is not None:
                    gates.append((o.id, c.tick, "hold"))
        plan = self.solver.solve(snapshot, constraints)
        with self._lock:
            calls, tok_p, tok_c, read, unreadable = self._usage
            self._usage = [0, 0, 0, 0, 0]
        plan = replace(
            plan,
            source=self.name,
            revoke=tuple(dict.fromkeys([*revoke, *plan.revoke])),
            # Lifting first, then gating: a hold replaces the gate of an unread note.
            ungates=tuple(ungates),
            gates=tuple(gates),
        )
        return PlanOutcome(
            plan=plan,
            latency_s=time.perf_counter() - start,
            calls=calls,
            tokens_prompt=tok_p,
            tokens_completion=tok_c,
            reviews=reviews,
            notes_read=read,
            notes_unreadable=unreadable,
        )

    def abandon(self) -> PlanOutcome:
        """The run ended: what was spent since the last plan, readings in progress included.

        A reading still in progress is stopped (its model makes no further call); its calls so
        far count, those in flight in ``calls_abandoned`` too, and the note it was reading
        counts as a fallback (``fallback``: the order was served without the model's reading).
        """
        in_flight = self._busy()
        spent = getattr(self.reader, "abandon", None)
        counts = spent() if callable(spent) else None
        with self._lock:
            calls, tok_p, tok_c, read, unreadable = self._usage
            self._usage = [0, 0, 0, 0, 0]
        if isinstance(counts, CallCounts):
            calls += counts.calls
            tok_p += counts.tokens_prompt
            tok_c += counts.tokens_completion
        return PlanOutcome(
            plan=Plan(tick=-1, assignments=(), source=self.name),
            calls=calls,
            tokens_prompt=tok_p,
            tokens_completion=tok_c,
            calls_abandoned=counts.abandoned if isinstance(counts, CallCounts) else 0,
            notes_read=read,
            notes_unreadable=unreadable,
            fallback=in_flight,
            failure="run ended with a note being read" if in_flight else None,
        )

    def close(self) -> None:
        """Stop the background reader without waiting for a reading in flight."""
        if self._pool is not None:
            self._pool.shutdown()
