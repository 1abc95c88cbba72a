"""The run folder: everything a run did, written as it happens, readable after any crash.

A run folder holds::

    config.json          resolved configuration, versions, git revision
    metrics.json         the DESIGN.md metrics, written at every flush (``"partial": true``,
                         ``ticks_recorded``) and at the end (no ``partial`` key)
    episode.parquet/     one row per robot per tick (a Parquet dataset: one part per flush)
    events.parquet/      orders, assignments, planner calls, faults, deadlocks (same layout)
    latency.parquet/     one row per tick: executor, shield, sim and whole-step milliseconds
    calls.jsonl          every LLM call, as the LLM runtime records it
    snapshots/           world snapshots at planner decisions and every ``snapshot_every`` ticks
                         (``tick_*.pkl``; captures need ``base.pkl`` and every earlier capture)

Episode columns (one row per robot per tick ``tick``; cells are (row, col))::

    tick, robot            tick and robot index (``robot_{i}``)
    row, col               the robot's cell before the tick's move
    order                  the order it serves after the tick ("" if none)
    carrying               loaded after the tick
    proposed, executed     the executor's first choice and the move sent (action ids 0..4)
    reward                 the robot's reward for the tick
    shield_override        the shield changed the proposed move
    broken, conflict       out of order; the move conflicted with another
    target_row, target_col the robot's target cell after the tick (its own cell if idle)
    has_task               the robot has a task after the tick
    battery                charge left (``inf`` without a battery model)
    fault                  the fault specs active at the tick that touch this robot: its own
                           breakdown and fleet-wide faults (``llm-outage``, ``malformed``,
                           ``surge``), joined by ``;`` ("" if none)
    done                   the run's last tick (``steps - 1`` of the recorded config); a run
                           killed early has no ``done`` row: its trajectories are truncated

A run folder holds one run. A new recorder refuses a folder that holds an earlier run (any of the
files above) unless asked to overwrite it (``overwrite=True``: the earlier run's files are removed
first, nothing else in the folder); :func:`check_out_dir` says so before anything is written, and
:func:`next_free` picks a fresh folder beside a default one.

Writes are append-and-flush in bounded batches: each flush writes a complete Parquet part to a
hidden temporary name (``.part-00003.parquet.tmp``, which ``pyarrow.dataset``, DuckDB's
``*.parquet`` glob and this package's readers all skip) and renames it into place, then rewrites
``metrics.json`` (atomically, as of that flush), so killing the process at any moment leaves every
file readable up to the last flush, with its metrics (those of the flush before, if the kill
falls between the renames and the metrics). DuckDB reads a folder directly
(``SELECT * FROM 'RUN/episode.parquet/*.parquet'``).

World snapshots are captured incrementally (:class:`WorldCapture`), since at a thousand robots
the planner is asked nearly every tick and a deep copy of every order record per call costs more
than the tick itself. A capture holds the world's fields as one pickle in which each order is a
reference into an append-only log (an order is written once, in the first capture that meets
it) and the static map is a reference into ``snapshots/base.pkl``; the order records go as
columns, for the records not yet delivered only (a delivered record never changes again, so its
last captured row stands). :class:`SnapshotChain` reads captures back in tick order into the
same ``Warehouse.snapshot()`` states a deep copy gives. Two snapshots at one tick keep the later
(its capture then carries what the earlier one logged).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import repeat
from operator import attrgetter, is_
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

if TYPE_CHECKING:
    from fleetmind.dispatch.control import LoopStats
    from fleetmind.dispatch.faults import Fault
    from fleetmind.sim.warehouse import Warehouse

import fleetmind
from fleetmind.errors import ConfigError
from fleetmind.sim.orders import Order


def git_revision() -> str | None:
    """The git revision of the fleetmind checkout, if it is one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def versions() -> dict[str, str]:
    """Versions of fleetmind and the libraries that shape results."""
    import importlib.metadata as md

    out = {"fleetmind": fleetmind.__version__}
    for pkg in ("numpy", "scipy", "torch", "llama-cpp-python", "pyarrow"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return out


class _PartWriter:
    """Buffers rows and writes them as numbered Parquet parts of one dataset folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.parts = len(list(folder.glob("part-*.parquet")))
        self._columns: dict[str, list[NDArray[Any]]] = {}
        self.rows = 0

    def add(self, columns: dict[str, NDArray[Any]]) -> None:
        for key, value in columns.items():
            self._columns.setdefault(key, []).append(np.asarray(value))
        self.rows += len(next(iter(columns.values())))

    def take(self) -> Callable[[], None] | None:
        """The buffered rows as a job that writes them as the next part (None if none)."""
        if not self.rows:
            return None
        columns, folder = self._columns, self.folder
        final = folder / f"part-{self.parts:05d}.parquet"
        self.parts += 1
        self._columns = {}
        self.rows = 0

        def write() -> None:
            folder.mkdir(parents=True, exist_ok=True)
            table = pa.table({k: np.concatenate(v) for k, v in columns.items()})
            # Hidden until whole: readers of the folder skip names starting with "." or "_".
            tmp = folder / f".{final.name}.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, final)  # atomic: a reader sees a whole part or none

        return write

    def flush(self) -> None:
        job = self.take()
        if job is not None:
            job()


# Fields of a Warehouse that never change in an episode (Warehouse.snapshot() leaves them out).
STATIC_FIELDS: tuple[str, ...] = (
    "grid",
    "config",
    "robot_ids",
    "capabilities",
    "_fixed_orders",
    "_start",
)
# Order-record fields that change (the order itself is logged apart); ``assigned_cell`` is a
# cell or None, kept as two columns with -1 for None.
_RECORD_INTS: tuple[str, ...] = ("robot", "assigned_tick", "picked_tick", "delivered_tick")
_RECORD_OBJECTS: tuple[str, ...] = ("order", "assigned_cell")  # compared by identity
_UNSEEN = np.iinfo(np.int64).min  # the previous value of a field never captured (no id is)
CAPTURE_FORMAT = 2
BASE_FILE = "base.pkl"


def _ref(kind: str, key: int) -> None:  # pragma: no cover - resolved by _CaptureUnpickler
    """Stands for a logged object in a capture's pickle (never called)."""
    raise AssertionError("a capture reference was not resolved")


class _CapturePickler(pickle.Pickler):
    """Pickles world fields with orders and the static map as references."""

    def __init__(self, fh: io.BytesIO, capture: WorldCapture, grid: object) -> None:
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._capture = capture
        self._grid = grid

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is Order:
            return _ref, ("order", self._capture.log(obj))
        if obj is self._grid:
            return _ref, ("grid", 0)
        return NotImplemented


class _CaptureUnpickler(pickle.Unpickler):
    """Reads a capture's pickle, resolving references to the order log and the map."""

    def __init__(self, data: bytes, orders: list[Order], grid: object) -> None:
        super().__init__(io.BytesIO(data))
        self._orders = orders
        self._grid = grid

    def _resolve(self, kind: str, key: int) -> object:
        return self._orders[key] if kind == "order" else self._grid

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_ref":
            return self._resolve
        return super().find_class(module, name)


class WorldCapture:
    """Incremental captures of a Warehouse's state: what a snapshot file holds.

    Each :meth:`take` returns a payload that, read in order by :class:`SnapshotChain` after the
    payloads before it, gives the state ``Warehouse.snapshot()`` would have given at that moment.
    Its cost is one pickle of the world's arrays and small fields, C-level passes over the
    fields of the records not yet delivered to find those that changed (no object made per
    record, so no garbage-collector work), and a row for each of those; never a copy of every
    order.
    """

    def __init__(self) -> None:
        self._orders: list[Order] = []  # the log: an order's position is its reference
        self._ref: dict[int, int] = {}  # id(order) -> position (the log keeps the order alive)
        self._records: list[Any] | None = None  # the world's record list seen last
        self._known = 0  # records met so far
        self._live: list[int] = []  # record indices not delivered at the last capture
        # Per record field, each record's value as last captured: the ticks and robot, and the
        # ids of the order and cell objects, which are held (``_held``) so that an id compared
        # later is never that of a freed object's successor.
        self._prev: dict[str, NDArray[np.int64]] = {}
        self._held: dict[str, list[Any]] = {}
        self._size = 0  # records the arrays above cover
        # To undo the last capture: orders logged, records known, live rows, the previous
        # values it overwrote, previous tick.
        self._mark: tuple[int, int, list[int], list[tuple[str, str, Any, Any]], int | None] = (
            0,
            0,
            [],
            [],
            None,
        )
        self._last_tick: int | None = None  # tick of the last capture written
        self.needs_base = True
        self._grow(0, reset=True)

    def _grow(self, size: int, *, reset: bool = False) -> None:
        """Room for ``size`` records in the previous-value arrays (new ones never captured)."""
        if reset:
            self._prev = {k: np.zeros(0, dtype=np.int64) for k in (*_RECORD_INTS, *_RECORD_OBJECTS)}
            self._held = {k: [] for k in _RECORD_OBJECTS}
            self._size = 0
        if size <= self._size:
            return
        cap = max(size, 2 * self._size, 1024)
        for k, old in self._prev.items():
            new = np.full(cap, _UNSEEN, dtype=np.int64)
            new[: len(old)] = old
            self._prev[k] = new
        for held in self._held.values():
            held.extend([None] * (cap - len(held)))
        self._size = cap

    def log(self, order: Order) -> int:
        """The log position of ``order`` (appended the first time it is met)."""
        key = self._ref.get(id(order))
        if key is None:
            key = len(self._orders)
            self._orders.append(order)
            self._ref[id(order)] = key
        return key

    def forget(self, tick: int) -> None:
        """The capture at ``tick`` is being replaced: the next one carries what it logged."""
        if tick != self._last_tick:
            return
        n_orders, self._known, live, undo, self._last_tick = self._mark
        for order in self._orders[n_orders:]:
            del self._ref[id(order)]
        del self._orders[n_orders:]
        self._live = list(live)
        for table, name, where, old in reversed(undo):
            if table == "held":
                self._held[name][where] = old
            else:
                self._prev[name][where] = old
        self._mark = (n_orders, self._known, live, [], self._last_tick)

    def take(self, tick: int, world: Warehouse, *, reason: str) -> dict[str, Any]:
        """A capture of ``world`` now (to pickle as it is: it holds no live references)."""
        self.forget(tick)
        recs = world.records
        if recs is not self._records or len(recs) < self._known:
            # A new episode or a restored world: every record is captured afresh.
            self._records = recs
            self._known = 0
            self._live = []
            self._grow(0, reset=True)
        undo: list[tuple[str, str, Any, Any]] = []
        self._mark = (len(self._orders), self._known, list(self._live), undo, self._last_tick)
        after, self._last_tick = self._last_tick, tick
        start = len(self._orders)
        buf = io.BytesIO()
        fields = {
            k: v for k, v in world.__dict__.items() if k not in (*STATIC_FIELDS, "records", "index")
        }
        _CapturePickler(buf, self, world.grid).dump(fields)
        size = len(recs)
        self._grow(size)
        rows = self._live + list(range(self._known, size))
        at = np.asarray(rows, dtype=np.int64)
        sub = list(map(recs.__getitem__, rows))
        # An order never given to a robot has no assigned cell, and nothing else of its record
        # changes before it is given (the world sets the cell in every assignment and never
        # clears it): a record captured so and still without a cell is skipped. Most open
        # orders are such records.
        cell_now = np.fromiter(
            map(is_, map(attrgetter("assigned_cell"), sub), repeat(None)),
            dtype=bool,
            count=len(sub),
        )
        look = np.flatnonzero(~(cell_now & (self._prev["assigned_cell"][at] == id(None))))
        at = at[look]
        sub = list(map(sub.__getitem__, look.tolist()))
        count = len(sub)
        # Each field of the live records against its last captured value, in C and numpy (no
        # object made per record, so no garbage-collector work): ticks and robot by value, the
        # order and the cell by identity (a new equal cell counts as a change: a row, never a
        # miss).
        cur: dict[str, NDArray[np.int64]] = {}
        objs: dict[str, list[Any]] = {}
        for name in _RECORD_INTS:
            cur[name] = np.fromiter(map(attrgetter(name), sub), dtype=np.int64, count=count)
        for name in _RECORD_OBJECTS:
            objs[name] = list(map(attrgetter(name), sub))
            cur[name] = np.fromiter(map(id, objs[name]), dtype=np.int64, count=count)
        differ = np.zeros(count, dtype=bool)
        for name, values in cur.items():
            differ |= values != self._prev[name][at]
        changed = np.flatnonzero(differ)
        rows_c = at[changed]
        for name, values in cur.items():
            undo.append(("prev", name, rows_c, self._prev[name][rows_c]))
            self._prev[name][rows_c] = values[changed]
        got = {name: [objs[name][j] for j in changed.tolist()] for name in _RECORD_OBJECTS}
        for name, held in self._held.items():
            for i, value in zip(rows_c.tolist(), got[name], strict=True):
                undo.append(("held", name, i, held[i]))
                held[i] = value
        columns: dict[str, NDArray[np.int64]] = {
            "index": rows_c,
            "order": np.asarray([self.log(o) for o in got["order"]], dtype=np.int64),
        }
        for name in _RECORD_INTS:
            columns[name] = cur[name][changed]
        cells = [(-1, -1) if c is None else c for c in got["assigned_cell"]]
        columns["cell"] = np.asarray(cells, dtype=np.int64).reshape(len(changed), 2)
        self._known = size
        # Only a changed row can have been delivered since: delivered records leave for good.
        done = set(rows_c[columns["delivered_tick"] >= 0].tolist())
        self._live = [i for i in rows if i not in done] if done else rows
        return {
            "format": CAPTURE_FORMAT,
            "tick": tick,
            "reason": reason,
            "after": after,
            "first_order": start,
            "orders": self._orders[start:],
            "records": len(recs),
            "columns": columns,
            "fields": buf.getvalue(),
        }


class SnapshotChain:
    """Reads captures (:class:`WorldCapture` payloads) back into ``Warehouse.snapshot()`` states.

    Args:
        folder: the ``snapshots`` folder (for ``base.pkl``).

    Captures must be handed to :meth:`expand` in tick order, each after the ones before it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._grid: object | None = None
        self._orders: list[Order] = []
        self._tick: int | None = None  # the last capture expanded
        self._cols: dict[str, NDArray[np.int64]] = {}

    def _base(self) -> object:
        if self._grid is None:
            path = self.folder / BASE_FILE
            try:
                with path.open("rb") as fh:
                    self._grid = pickle.load(fh)["grid"]  # our own recording
            except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}: not a readable snapshot base ({exc})") from None
        return self._grid

    def expand(self, capture: dict[str, Any]) -> dict[str, Any]:
        """``{"tick", "reason", "state"}`` of one capture (the state restorable as recorded)."""
        from fleetmind.sim.warehouse import OrderRecord

        grid = self._base()
        if capture["after"] != self._tick or capture["first_order"] != len(self._orders):
            raise ConfigError(
                f"capture of tick {capture['tick']} follows tick {capture['after']}, but the "
                f"capture before it is {self._tick} (a snapshot file is missing)"
            )
        self._orders.extend(capture["orders"])
        size = int(capture["records"])
        cols = capture["columns"]
        for name in ("order", *_RECORD_INTS, "cell"):
            have = self._cols.get(name)
            shape = (size, 2) if name == "cell" else (size,)
            if have is None or len(have) < size:
                grown = np.full(shape, -1, dtype=np.int64)
                if have is not None:
                    grown[: len(have)] = have
                self._cols[name] = grown
            self._cols[name][cols["index"]] = cols[name]
        c = {k: v[:size].tolist() for k, v in self._cols.items()}
        orders = self._orders
        records = [
            OrderRecord(
                orders[c["order"][i]],
                robot=c["robot"][i],
                assigned_tick=c["assigned_tick"][i],
                assigned_cell=None if c["cell"][i][0] < 0 else (c["cell"][i][0], c["cell"][i][1]),
                picked_tick=c["picked_tick"][i],
                delivered_tick=c["delivered_tick"][i],
            )
            for i in range(size)
        ]
        state = _CaptureUnpickler(capture["fields"], orders, grid).load()
        state["records"] = records
        state["index"] = {rec.order.id: i for i, rec in enumerate(records)}
        self._tick = capture["tick"]
        return {"tick": capture["tick"], "reason": capture["reason"], "state": state}


class RunRecorder:
    """Records one run into a folder; implements the control loop's ``TickSink``.

    Args:
        out_dir: the run folder (created).
        flush_every: ticks between flushes (the most a crash can lose).
        snapshot_every: ticks between periodic world snapshots (0: only at decisions).
        overwrite: replace an earlier run in ``out_dir`` (else a folder holding one is refused).

    Raises:
        ConfigError: the folder holds an earlier run (and ``overwrite`` is off), or cannot be
            created.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        flush_every: int = 50,
        snapshot_every: int = 100,
        overwrite: bool = False,
    ):
        self.dir = Path(out_dir)
        check_out_dir(self.dir, overwrite=overwrite)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"--out {out_dir}: cannot create the run folder ({exc.strerror})"
            ) from None
        self.flush_every = flush_every
        self.snapshot_every = snapshot_every
        # Parts and partial metrics are written by one background thread, in order, so that
        # a flush (tens of milliseconds at a thousand robots) never stalls the tick.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recorder")
        self._written: list[Future[None]] = []
        self._closed = False
        _clear_run(self.dir)
        self._episode = _PartWriter(self.dir / "episode.parquet")
        self._events = _PartWriter(self.dir / "events.parquet")
        self._event_rows: list[tuple[int, str, str]] = []
        self._latency = _PartWriter(self.dir / "latency.parquet")
        self._latency_done = 0
        self._ticks_since_flush = 0
        self._steps: int | None = None
        self.seed: int | None = None
        # Parquet's first write in a process costs most of a second (codec set-up); pay it now,
        # not on the control loop's first flush.
        pq.write_table(pa.table({"warm": [0]}), pa.BufferOutputStream())
        self._world: Warehouse | None = None
        self._faults: list[Fault] = []
        self._stats: LoopStats | None = None
        self._metrics: Callable[[], dict[str, Any]] | None = None
        self._ticks = 0
        (self.dir / "snapshots").mkdir(exist_ok=True)
        self._capture = WorldCapture()
        # Present even when no tier calls an LLM, so readers need no special case.
        self.calls_path.touch()

    @property
    def calls_path(self) -> Path:
        """Where LLM calls go (``calls.jsonl``)."""
        return self.dir / "calls.jsonl"

    def write_config(self, config: dict[str, Any]) -> None:
        """Write ``config.json`` with versions and the git revision."""
        self.seed = config.get("seed")
        steps = config.get("steps")
        self._steps = int(steps) if isinstance(steps, int) else None
        payload = {"config": config, "versions": versions(), "git_revision": git_revision()}
        _write_json(self.dir / "config.json", payload)

    def attach(
        self,
        world: Warehouse,
        *,
        faults: list[Fault] | None = None,
        stats: LoopStats | None = None,
        metrics: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """Record the per-robot fields the loop does not send, and per-tick tier latencies.

        Args:
            world: the simulator the loop steps (read after each tick: target, task, battery).
            faults: the injected faults (for the per-robot ``fault`` column).
            stats: the loop's counters (their latency lists go to ``latency.parquet``).
            metrics: the run's metrics so far (e.g. ``ControlLoop.metrics``), written to
                ``metrics.json`` at every flush.
        """
        self._world = world
        self._faults = list(faults or [])
        self._stats = stats
        self._metrics = metrics

    def _extra_columns(self, tick: int, n: int) -> dict[str, NDArray[Any]]:
        w = self._world
        if w is None or len(w.robot_ids) != n:
            return {}
        now = [f for f in self._faults if f.active(tick)]
        # Fleet-wide faults touch every robot; a breakdown only the robots it names (few).
        fleet = ";".join(f.spec for f in now if f.kind != "breakdown")
        faults = np.full(n, fleet, dtype=object)
        touched = set()
        for name in {f.robot for f in now if f.kind == "breakdown" and f.robot is not None}:
            if name in w.robot_ids:
                touched.add(w.robot_ids.index(name))
            if name.isdigit() and str(int(name)) == name and int(name) < n:
                touched.add(int(name))
        for i in sorted(touched):
            rid = w.robot_ids[i]
            faults[i] = ";".join(
                f.spec for f in now if f.kind != "breakdown" or f.robot in (rid, str(i))
            )
        return {
            "target_row": w.goal[:, 0].astype(np.int32),
            "target_col": w.goal[:, 1].astype(np.int32),
            "has_task": w.has_task.copy(),
            "battery": w.battery.astype(np.float32),
            "fault": faults.astype(str),
        }

    def on_tick(self, tick: int, columns: dict[str, NDArray[Any]]) -> None:
        """Append one tick's rows (one per robot)."""
        n = len(columns["robot"])
        self._episode.add(
            {
                "tick": np.full(n, tick, dtype=np.int32),
                **columns,
                **self._extra_columns(tick, n),
                "done": np.full(n, self._steps is not None and tick + 1 >= self._steps),
            }
        )
        self._ticks_since_flush += 1
        self._ticks = max(self._ticks, tick + 1)
        if self._ticks_since_flush >= self.flush_every:
            self.flush(wait=False)

    def on_event(self, event: dict[str, Any]) -> None:
        """Append one event; its fields beyond tick and kind go to a JSON column."""
        rest = {k: v for k, v in event.items() if k not in ("tick", "kind")}
        # Kept as Python values until the flush (a plan of thousands of assignments is as many
        # events: three small arrays each would cost more than the event).
        self._event_rows.append(
            (int(event["tick"]), event["kind"], json.dumps(rest, default=_jsonable, sort_keys=True))
        )

    def _take_events(self) -> None:
        """Move the buffered events into the events dataset's buffer, as columns."""
        rows, self._event_rows = self._event_rows, []
        if rows:
            ticks, kinds, data = zip(*rows, strict=True)
            self._events.add(
                {
                    "tick": np.array(ticks, dtype=np.int32),
                    # Python strings: a fixed-width numpy column would pad every row to the
                    # longest (one plan of thousands of assignments: gigabytes).
                    "kind": np.array(kinds, dtype=object),
                    "data": np.array(data, dtype=object),
                }
            )

    def snapshot(self, tick: int, state: dict[str, Any], *, reason: str) -> Path:
        """Write a world snapshot given whole (restorable with ``Warehouse.restore``)."""
        self._capture.forget(tick)
        return self._write_snapshot(
            tick, {"tick": tick, "reason": reason, "state": state}, later=True
        )

    def capture(self, tick: int, world: Warehouse, *, reason: str) -> Path:
        """Write a world snapshot of ``world`` now, incrementally (see :class:`WorldCapture`).

        Read back by :func:`fleetmind.eval.store.load_snapshots` as the state
        ``world.snapshot()`` gives, at a fraction of its cost.
        """
        if self._capture.needs_base:
            self._write_snapshot(None, {"grid": world.grid}, later=True)
            self._capture.needs_base = False
        # The capture holds no live reference (bytes, fresh arrays, immutable orders): the
        # writer thread pickles and writes it, after everything handed to it before.
        payload = self._capture.take(tick, world, reason=reason)
        return self._write_snapshot(tick, payload, later=True)

    def _write_snapshot(
        self, tick: int | None, payload: dict[str, Any], *, later: bool = False
    ) -> Path:
        name = BASE_FILE if tick is None else f"tick_{tick:06d}.pkl"
        path = self.dir / "snapshots" / name

        def write() -> None:
            tmp = path.with_suffix(".tmp")
            with tmp.open("wb") as fh:
                pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)

        if later and not self._closed:
            self._check_written()
            self._written.append(self._writer.submit(write))
        else:
            write()
        return path

    def _collect_latency(self) -> None:
        st = self._stats
        if st is None:
            return
        k = min(len(st.step_ms), len(st.executor_ms), len(st.shield_ms), len(st.sim_ms))
        if k <= self._latency_done:
            return
        sl = slice(self._latency_done, k)
        self._latency.add(
            {
                "tick": np.arange(self._latency_done, k, dtype=np.int32),
                "executor_ms": np.asarray(st.executor_ms[sl], dtype=np.float64),
                "shield_ms": np.asarray(st.shield_ms[sl], dtype=np.float64),
                "sim_ms": np.asarray(st.sim_ms[sl], dtype=np.float64),
                "step_ms": np.asarray(st.step_ms[sl], dtype=np.float64),
            }
        )
        self._latency_done = k

    def flush(self, *, final: bool = False, wait: bool = True) -> None:
        """Write buffered rows as complete Parquet parts, then the metrics so far.

        Args:
            final: the end of the run (its final metrics follow: no partial ones now).
            wait: return once written (else the writer thread writes them, in order, while
                the caller goes on: the control loop's flushes every ``flush_every`` ticks).
        """
        self._check_written()
        self._collect_latency()
        self._take_events()
        jobs = [w.take() for w in (self._episode, self._events, self._latency)]
        self._ticks_since_flush = 0
        partial: dict[str, Any] | None = None
        if self._metrics is not None and not final:
            # As of this flush: what a reader finds if the process dies before the next one.
            # metrics() builds a fresh dict the loop never touches again: safe to write later.
            partial = {**self._metrics(), "partial": True, "ticks_recorded": self._ticks}
            if self.seed is not None:
                partial["seed"] = self.seed
        path = self.dir / "metrics.json"

        def write() -> None:
            for job in jobs:
                if job is not None:
                    job()
            if partial is not None:
                # Unindented: json's C encoder (indenting is pure Python, several times slower,
                # and holds the interpreter the control loop needs meanwhile).
                _write_json(path, partial, indent=None)

        if self._closed:
            write()  # after close: no writer thread any more
            return
        self._written.append(self._writer.submit(write))
        if final or wait:
            self.wait()

    def _check_written(self) -> None:
        """Raise the error of a background write that failed (the disk is full, say)."""
        done = [f for f in self._written if f.done()]
        self._written = [f for f in self._written if not f.done()]
        for f in done:
            f.result()

    def wait(self) -> None:
        """Wait until every flush so far is on disk (raises a write's error)."""
        pending, self._written = self._written, []
        for f in pending:
            f.result()

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        """Write ``metrics.json`` (atomically), after every flush so far."""
        self.wait()
        _write_json(self.dir / "metrics.json", metrics)

    def close(self, metrics: dict[str, Any] | None = None) -> None:
        """Flush everything and write the final metrics (the writer thread stops)."""
        self.flush(final=metrics is not None)
        self.wait()
        if not self._closed:
            self._closed = True
            self._writer.shutdown(wait=True)
        if metrics is not None:
            self.write_metrics(metrics)


RUN_FILES = ("config.json", "metrics.json", "calls.jsonl")
RUN_DATASETS = ("episode.parquet", "events.parquet", "latency.parquet")


def earlier_run(folder: str | Path) -> list[str]:
    """The files of an earlier run in ``folder`` (empty if it holds none, or does not exist)."""
    p = Path(folder)
    if not p.is_dir():
        return []
    found = [name for name in RUN_FILES if (p / name).exists()]
    found += [name for name in RUN_DATASETS if any((p / name).glob("part-*"))]
    if any((p / "snapshots").glob("tick_*")):
        found.append("snapshots")
    return found


def check_out_dir(folder: str | Path, *, overwrite: bool, flag: str = "--out") -> None:
    """Refuse a run folder that holds an earlier run, unless ``overwrite``; touches nothing.

    Raises:
        ConfigError: naming the flag, the folder and the earlier run's files.
    """
    p = Path(folder)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {p}: exists and is not a folder")
    found = earlier_run(p)
    if found and not overwrite:
        raise ConfigError(
            f"{flag} {p}: holds an earlier run ({', '.join(found)}); pass --overwrite to "
            f"replace it, or choose another {flag}"
        )


def next_free(folder: str | Path, holds: Callable[[Path], object] = earlier_run) -> Path:
    """``folder``, or the first free ``folder-2``, ``folder-3``... if it is taken.

    For default folders: a rerun never replaces an earlier run.

    Args:
        folder: the default folder.
        holds: what makes a folder taken (default: an earlier run in it).
    """
    p = Path(folder)
    k = 2
    candidate = p
    while candidate.exists() and (not candidate.is_dir() or holds(candidate)):
        candidate = p.with_name(f"{p.name}-{k}")
        k += 1
    return candidate


def _clear_run(folder: Path) -> None:
    """Remove an earlier run's files from ``folder`` (only the files a run writes)."""
    for name in RUN_DATASETS:
        for part in (*(folder / name).glob("part-*"), *(folder / name).glob(".part-*")):
            part.unlink()
    for pkl in (folder / "snapshots").glob("tick_*"):
        pkl.unlink()
    (folder / "snapshots" / BASE_FILE).unlink(missing_ok=True)
    for name in RUN_FILES:
        (folder / name).unlink(missing_ok=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def _write_json(path: Path, data: Any, *, indent: int | None = 2) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=_jsonable, sort_keys=True))
    os.replace(tmp, path)
