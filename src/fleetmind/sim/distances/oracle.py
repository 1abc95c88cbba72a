"""The distance oracle: maps cached in an LRU slab, computed ahead by a background worker."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable
from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

from fleetmind.sim.distances.chains import Chains, chain_dial, contract
from fleetmind.sim.distances.gather import cell_flats, gather_after_moves
from fleetmind.sim.distances.repair import repair_held
from fleetmind.sim.distances.search import (
    U16_NONE,
    UNREACHABLE,
    grid_bfs,
    grid_dial,
    incoming_weights,
)
from fleetmind.sim.grid import Cell, GridMap

_IDLE_EXIT_S = 2.0  # a background worker with nothing to do for this long stops
_SPARE_SLOTS = 16  # empty slab slots kept for the background worker to write maps into
_SPARE = np.iinfo(np.int64).max  # the last use of a spare slot: never the least recent
# Counters an oracle hands on to the one that replaces it (``DistanceOracle.rerouted``).
_COUNTS = ("computed", "computed_ahead", "computed_s", "computed_ahead_s", "adopted", "kept")


_PAIR = numba.types.UniTuple(numba.int64, 2)  # type: ignore[no-untyped-call]


@numba.njit(
    _PAIR(
        numba.int64[::1],
        numba.int64[::1],
        numba.int64[::1],
        numba.int64,
        numba.int64[::1],
        numba.int64[::1],
    ),
    cache=True,
    nogil=True,
)
def _touch(
    targets: NDArray[np.int64],
    slot_of: NDArray[np.int64],
    used: NDArray[np.int64],
    clock: int,
    missing: NDArray[np.int64],
    slots: NDArray[np.int64],
) -> tuple[int, int]:
    """Mark the held maps of ``targets`` used at ``clock``; list the distinct missing ones.

    ``slots[j]``: the slot of ``targets[j]``'s map, -1 where it is missing. Returns
    ``(held, k)``: how many distinct targets have a map, and how many distinct ones do not
    (written to ``missing[:k]`` in first-seen order). No sort: a tick reads one target per
    robot, almost all of them held.
    """
    held = 0
    k = 0
    for j in range(targets.shape[0]):
        t = targets[j]
        s = slot_of[t]
        slots[j] = s
        if s >= 0:
            if used[s] != clock:
                used[s] = clock
                held += 1
            continue
        for q in range(k):
            if missing[q] == t:
                break
        else:
            missing[k] = t
            k += 1
    return held, k


_CHAIN_SHARE = 0.25
"""The share of free cells in chains from which an oracle searches on chains."""
_CHAIN_TOP = 1 << 12
"""The dearest chain an oracle searches on: Dial's queue holds a bucket per unit of it."""


def _route_bound(blocked: NDArray[np.bool_], top: int) -> int:
    """An upper bound on any finite route cost with move weights at most ``top``.

    The cheapest route costs at most its fewest-moves route, so at most ``top`` times the
    diameter in moves; a component's diameter is at most twice any cell's eccentricity (one
    search from a cell of each component of more than one cell), and never more than its cells.
    """
    free = ~blocked.ravel()
    n_free = int(free.sum())
    if n_free * top < U16_NONE:
        return n_free * top
    h, w = blocked.shape
    flat = np.ascontiguousarray(blocked.ravel(), dtype=np.bool_)
    seen = ~free
    out = np.empty(h * w, dtype=np.int32)
    worst = 0
    for start in np.flatnonzero(free).tolist():
        if seen[start]:
            continue
        grid_bfs(flat, w, start, out, UNREACHABLE)
        reached = out < UNREACHABLE
        seen |= reached
        worst = max(worst, min(2 * int(out[reached].max()), int(reached.sum())))
    return worst * top


class RouteReader(NamedTuple):
    """What :func:`gather_after_moves` reads for some targets, but for the cells and the output.

    Attributes:
        slab: the oracle's maps, a row per target.
        slots: ``(M,)`` the row of each target's map.
        none: the value of "no path" in ``slab``.
        blocked: ``(H * W,)`` walls.
        width: the map's width.
        step: ``(H * W, 5)`` each action's own weight (weighted oracle; else unread).
        stepped: whether a move's weight is added to the map value.
    """

    slab: NDArray[np.integer]
    slots: NDArray[np.int64]
    none: int
    blocked: NDArray[np.bool_]
    width: int
    step: NDArray[np.uint16]
    stepped: bool


class DistanceOracle:
    """Cached distance maps for one grid: moves, or the costs of a weighted guidance graph.

    Args:
        grid: the map.
        max_cached: the most distance maps kept; default: as many as fit in ``memory_mb``, at
            most 4096. :meth:`reserve` raises it (a fleet needs one map per robot target).
        memory_mb: the cache's memory budget when ``max_cached`` is not given.
        weights: ``(H * W, 5)`` whole cost >= 1 of each action from each cell (``sim.grid``
            action ids; the ``WAIT`` column is unread): maps then hold the cheapest route cost
            (:func:`grid_dial`, or :func:`chain_dial` when a quarter of the free cells or more
            lie in chains and no chain costs more than ``_CHAIN_TOP``) instead of moves. None:
            every move costs 1.

    Raises:
        ValueError: ``weights`` of the wrong shape, or a move weight below 1.
    """

    def __init__(
        self,
        grid: GridMap,
        *,
        max_cached: int | None = None,
        memory_mb: int = 768,
        weights: NDArray[np.integer] | None = None,
    ) -> None:
        self.grid = grid
        self.shape = grid.shape
        h, w = grid.shape
        self._blocked = np.ascontiguousarray(grid.blocked, dtype=np.bool_).reshape(-1)
        self._cells = h * w
        self._weights: NDArray[np.uint16] | None = None
        self._incoming: NDArray[np.uint16] | None = None  # what the weighted search reads
        self._chains: Chains | None = None  # or this, on a map with many aisle cells
        self._unit_step = np.ones((1, 5), dtype=np.uint16)  # unread: plain maps add no step
        self._top = 1
        if weights is None:
            # A path never has more moves than there are free cells.
            small = int((~grid.blocked).sum()) < U16_NONE
        else:
            wt = np.asarray(weights)
            if wt.shape != (h * w, 5) or (h * w and int(wt[:, 1:].min()) < 1):
                raise ValueError("weights: expected (H * W, 5) whole numbers >= 1")
            self._top = max(1, int(wt[:, 1:].max()))
            bound = _route_bound(grid.blocked, self._top)
            if self._top > U16_NONE or bound >= UNREACHABLE:
                raise ValueError(f"weights: up to {self._top} a move is too costly for this map")
            self._weights = np.ascontiguousarray(wt, dtype=np.uint16)
            chains = contract(self._blocked, w, self._weights)
            many = len(chains.ch_cells) >= _CHAIN_SHARE * int((~grid.blocked).sum())
            if many and chains.top <= _CHAIN_TOP:
                self._chains = chains
            else:
                self._incoming = incoming_weights(self._blocked, w, self._weights)
            small = bound < U16_NONE
        # Scratch of the weighted search, one per thread (the caller's and the worker).
        self._scratch = threading.local()
        self._dtype = np.dtype(np.uint16 if small else np.int32)
        self._none = U16_NONE if small else UNREACHABLE
        per_map = self._cells * self._dtype.itemsize
        self.max_cached = max_cached or max(16, min(4096, (memory_mb << 20) // per_map))
        self._slab: NDArray[np.integer] | None = None  # (max_cached, H * W), on first store
        self._slot_of = np.full(self._cells, -1, dtype=np.int64)  # (H * W,) slot of a target
        self._target_of = np.full(self.max_cached, -1, dtype=np.int64)  # (max_cached,)
        self._used = np.zeros(self.max_cached, dtype=np.int64)  # (max_cached,) last use
        self._clock = 1
        self._filled = 0
        self.computed = 0  # maps computed on the caller's thread
        self.computed_ahead = 0  # maps computed by the background worker
        # CPU seconds of those searches (each thread's own clock): the worker's are spent beside
        # the control loop, in no tick's time, and a fair account of an executor counts them.
        self.computed_s = 0.0
        self.computed_ahead_s = 0.0
        self.adopted = 0  # of those, maps taken in where the worker wrote them (no copy)
        self.kept = 0  # maps a reroute repaired instead of dropping (:meth:`rerouted`)
        self._table: tuple[bytes, NDArray[np.int64], NDArray[np.int32]] | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # the worker wrote no slab row
        # Maps the worker finished: target -> (the array holding it, its row, whether the row
        # is a slab slot). A map written straight into a spare slot of the slab is taken over
        # by setting two indices, not by copying a map's worth of memory inside the tick.
        self._ready: dict[int, tuple[NDArray[np.integer], int, bool]] = {}
        self._spare: list[int] = []  # empty slab slots the worker may write into
        self._writing = False  # the worker is writing into a spare slot
        self._making = -1  # the target whose map the worker is making now (-1: none)
        # (due, order asked, target): the worker makes the map needed soonest first.
        self._requests: queue.PriorityQueue[tuple[int, int, int]] = queue.PriorityQueue()
        self._due: dict[int, int] = {}  # a queued target -> the due of its live entry
        self._asked = 0
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------------ storage
    @property
    def cached(self) -> int:
        """How many maps are held."""
        return int((self._target_of[: self._filled] >= 0).sum())

    @property
    def nbytes(self) -> int:
        """Bytes of the maps held."""
        return self.cached * self._cells * self._dtype.itemsize

    def counts(self) -> dict[str, float]:
        """Maps made so far and their CPU time: on the caller's thread, and by the worker."""
        return {
            "made_in_caller": self.computed,
            "made_ahead": self.computed_ahead,
            "made_in_caller_cpu_s": self.computed_s,
            "made_ahead_cpu_s": self.computed_ahead_s,
        }

    def reserve(self, count: int, *, touch: bool = False) -> None:
        """Keep room for at least ``count`` maps (e.g. one per robot target).

        Args:
            count: maps to hold at once.
            touch: write the room now, so that the page faults of fresh memory (about as
                long as a search per map) are paid here, not when a map is first stored.
        """
        if count > self.max_cached:
            grow = count - self.max_cached
            if self._slab is not None:
                slab = np.empty((count, self._cells), dtype=self._dtype)
                slab[: self._filled] = self._slab[: self._filled]
                self._slab = slab
            self._target_of = np.concatenate([self._target_of, np.full(grow, -1, dtype=np.int64)])
            self._used = np.concatenate([self._used, np.zeros(grow, dtype=np.int64)])
            self.max_cached = count
        if touch:
            if self._slab is None:
                self._slab = np.empty((self.max_cached, self._cells), dtype=self._dtype)
            self._slab[self._filled : count].fill(0)  # rows not stored yet: never read

    def _flat(self, cell: Cell) -> int:
        return int(cell[0]) * self.shape[1] + int(cell[1])

    def _bfs(self, flat: int, out: NDArray[np.integer] | None = None) -> NDArray[np.integer]:
        """The map of ``flat`` in the slab's type (into ``out`` when given)."""
        if out is None:
            out = np.empty(self._cells, dtype=self._dtype)
        self._search(flat, out, self._none)
        return out

    def _search(self, flat: int, out: NDArray[np.integer], none: int) -> None:
        """One map into ``out``: moves (BFS), or route costs on the weighted graph."""
        if self._weights is None:
            grid_bfs(self._blocked, self.shape[1], flat, out, none)
            return
        scratch = self._scratch
        ch = self._chains
        if ch is not None:
            if getattr(scratch, "dist", None) is None:
                scratch.dist = np.empty(len(ch.node_cell), dtype=np.int64)
                scratch.qnode = np.empty(len(ch.in_src) + 3, dtype=np.int32)
                scratch.qnext = np.empty(len(ch.in_src) + 3, dtype=np.int32)
            chain_dial(
                self._blocked,
                *ch[:-1],
                ch.top,
                flat,
                out,
                none,
                scratch.dist,
                scratch.qnode,
                scratch.qnext,
            )
            return
        if getattr(scratch, "node", None) is None:
            scratch.node = np.empty(4 * self._cells + 1, dtype=np.int32)
            scratch.nxt = np.empty(4 * self._cells + 1, dtype=np.int32)
        assert self._incoming is not None
        grid_dial(
            self._blocked,
            self.shape[1],
            self._incoming,
            self._top,
            flat,
            out,
            none,
            scratch.node,
            scratch.nxt,
        )

    def _free_slot(self, *, spare_recent: bool = True) -> int:
        """An empty slot: one never written, or the least recently used one emptied.

        Without ``spare_recent``, -1 rather than empty a map read at this clock or the last.
        """
        if self._filled < self.max_cached:
            self._filled += 1
            return self._filled - 1
        slot = int(np.argmin(self._used))
        if not spare_recent and self._used[slot] >= self._clock - 1:
            return -1
        if self._target_of[slot] >= 0:  # a slot a reroute emptied holds no target
            self._slot_of[self._target_of[slot]] = -1
            self._target_of[slot] = -1
        return slot

    def _slot(self, flat: int) -> int:
        """A slot for the map of ``flat``: a free one, or the least recently used."""
        if self._slab is None:
            self._slab = np.empty((self.max_cached, self._cells), dtype=self._dtype)
        slot = self._free_slot()
        self._target_of[slot] = flat
        self._slot_of[flat] = slot
        self._used[slot] = self._clock
        return slot

    def _store(self, flat: int, row: NDArray[np.integer] | None = None) -> None:
        """Put the map of ``flat`` (computed now when ``row`` is None) into the slab."""
        if self._slot_of[flat] >= 0:
            return
        slot = self._slot(flat)
        assert self._slab is not None
        if row is None:
            self._bfs(flat, self._slab[slot])
        else:
            self._slab[slot] = row

    def _absorb(self) -> None:
        """Take in the maps the background worker finished (caller's thread only).

        A map the worker wrote into a spare slot of the current slab is held from now on; one
        in its own array, or in a slab since replaced by a larger one, is copied in. The worker
        then gets its spare slots topped up.
        """
        if self._ready:
            with self._lock:
                ready, self._ready = self._ready, {}
            for flat, done in ready.items():
                self._take(flat, *done)
        if self._worker is not None:
            self._top_up()

    def _take(self, flat: int, buf: NDArray[np.integer], row: int, slotted: bool) -> None:
        """Hold the map of ``flat`` the worker wrote into row ``row`` of ``buf``."""
        if slotted and buf is self._slab and self._slot_of[flat] < 0:
            self._slot_of[flat] = row
            self._target_of[row] = flat
            self._used[row] = self._clock
            self.adopted += 1
            return
        self._store(flat, buf[row])
        if slotted:  # the slot is empty again (an older slab, or a map made twice)
            with self._lock:
                self._spare.append(row)

    def _top_up(self) -> None:
        """Keep :data:`_SPARE_SLOTS` empty slab slots for the worker to write maps into.

        A spare slot leaves the least-recently-used order (it is never handed out to another
        map while the worker may write into it).
        """
        if self._slab is None:
            return
        # At most a quarter of the cache: the least recently used slot is never a spare.
        want = min(_SPARE_SLOTS, self.max_cached // 4) - len(self._spare)
        if want <= 0:
            return
        fresh: list[int] = []
        for _ in range(want):
            slot = self._free_slot(spare_recent=False)
            if slot < 0:
                break  # every map was read this tick or the last: none to spare
            self._used[slot] = _SPARE
            fresh.append(slot)
        with self._lock:
            self._spare.extend(fresh)

    def _ensure(self, flats: NDArray[np.int64], *, keep_all: bool) -> NDArray[np.int64]:
        """Make sure the maps of the targets ``flats`` (repeats allowed) are held.

        With ``keep_all`` the cache grows to hold them all at once (they are read together).
        Returns ``(len(flats),)`` the slot of each target's map.
        """
        flats = np.ascontiguousarray(flats, dtype=np.int64)
        self._absorb()
        self._clock += 1
        # Touch what is there first, so that storing the missing maps never evicts them.
        missing = np.empty(len(flats), dtype=np.int64)
        slots = np.empty(len(flats), dtype=np.int64)
        held, k = _touch(flats, self._slot_of, self._used, self._clock, missing, slots)
        if keep_all:
            self.reserve(held + k + len(self._spare))
        if not k:
            return slots  # the common tick: every map held, no clock read
        t0 = time.thread_time()
        making = self._making  # the worker's map is taken when it is done, not made twice
        for flat in sorted(missing[:k].tolist()):
            if flat != making:
                self._store(flat)
                self.computed += 1
        self.computed_s += time.thread_time() - t0
        if making in missing[:k]:
            self._await(making)
        out: NDArray[np.int64] = self._slot_of[flats]
        return out

    def _await(self, flat: int) -> None:
        """Hold the map of ``flat``: the worker's, once it has made it, else made now.

        Called when the map is needed while the worker is making it: waiting for the rest of
        that search costs less than a whole search of its own in the caller.
        """
        with self._idle:
            while self._making == flat:
                self._idle.wait()
            done = self._ready.pop(flat, None)
        # Only this map is taken in: room was kept for it, not for others finished meanwhile.
        if done is not None:
            self._take(flat, *done)
        if self._slot_of[flat] < 0:  # the worker failed, or a reroute took the map away
            t0 = time.thread_time()
            self._store(flat)
            self.computed += 1
            self.computed_s += time.thread_time() - t0

    def rerouted(
        self, grid: GridMap, *, weights: NDArray[np.integer] | None = None
    ) -> DistanceOracle:
        """An oracle of ``grid`` (this map with walls added or removed) that keeps what still holds.

        A wall where a robot stopped changes a map only where routes ran through it: each held
        map is repaired in place from the changed cells outward (``_repair``: the cells that
        lost their cheapest routes are found and searched again, reopened cells lower what
        they can), instead of a whole new search per map. A map whose target closed, or where
        a quarter of the map lost its routes, is dropped and made again when read. Repaired or
        made again, every map holds what a new search on ``grid`` gives. This oracle hands its
        maps over and must not be used after.

        Args:
            grid: the same map with other walls.
            weights: the move weights on ``grid`` (a weighted oracle's; may differ near walls).
        """
        new = DistanceOracle(grid, max_cached=self.max_cached, weights=weights)
        for count in _COUNTS:  # the run's totals go on across reroutes
            setattr(new, count, getattr(self, count))
        old_blocked = self._blocked
        if (
            self._slab is None
            or new._dtype != self._dtype
            or new.shape != self.shape
            or (weights is None) != (self._weights is None)
        ):
            return new
        changed = old_blocked != new._blocked
        step = new._weights if new._weights is not None else new._unit_step
        if self._weights is not None and new._weights is not None:
            changed_step = (self._weights != new._weights).any(axis=1)
        else:
            changed_step = np.zeros_like(changed)
        h, w = self.shape
        flat = changed.reshape(h, w)
        near = flat.copy()
        near[1:] |= flat[:-1]
        near[:-1] |= flat[1:]
        near[:, 1:] |= flat[:, :-1]
        near[:, :-1] |= flat[:, 1:]
        check = np.flatnonzero(near.reshape(-1) | changed_step)
        reopened = np.flatnonzero(old_blocked & ~new._blocked)
        walled = np.flatnonzero(~old_blocked & new._blocked)
        stepped = new._weights is not None
        # Past a quarter of the free cells losing their routes, a new search is as quick.
        most = max(16, int((~new._blocked).sum()) // 4)
        with self._lock:  # asked for and not taken in: the new oracle asks for them again
            waiting = sorted(set(self._due) | set(self._ready))
            dues = [self._due.get(f, 0) for f in waiting]
        self._give_up_spares()
        change = (new._blocked, w, step, stepped, check, reopened, walled, most)
        ok = repair_held(self._slab, self._target_of, self._filled, new._none, change)
        self.kept += int(ok.sum())
        dropped = np.flatnonzero(~ok & (self._target_of[: self._filled] >= 0))
        self._slot_of[self._target_of[dropped]] = -1
        self._target_of[dropped] = -1
        self._used[dropped] = 0  # the first slots new maps take
        new._slab, self._slab = self._slab, None
        new._slot_of, new._target_of, new._used = self._slot_of, self._target_of, self._used
        new._filled, new._clock = self._filled, self._clock
        new.kept = self.kept  # with the maps repaired just now
        if waiting:
            new.request((divmod(f, w) for f in waiting), due=dues)
        return new

    def _give_up_spares(self) -> None:
        """Wait for the worker to finish any slab row, then free the spare slots.

        Before the slab changes hands (:meth:`rerouted`): no worker of this oracle writes into
        it afterwards, and its spare slots, and those of finished maps not taken in (the new
        oracle asks for them again), become plain empty slots.
        """
        with self._lock:
            while self._writing:
                self._idle.wait()
            spare, self._spare = self._spare, []
            spare += [row for buf, row, slotted in self._ready.values() if slotted]
            self._ready = {}
        self._used[spare] = 0

    # ------------------------------------------------------------------ reading
    def prefetch(self, targets: Iterable[Cell]) -> None:
        """Compute the maps of many targets now."""
        flats = np.unique(np.array([self._flat(t) for t in targets], dtype=np.int64))
        self._ensure(flats, keep_all=False)

    def request(self, targets: Iterable[Cell], due: Iterable[int] | None = None) -> None:
        """Have the maps of ``targets`` computed in the background (they are needed later).

        Returns at once. The maps go into the cache at the next read; one not finished by the
        time it is read is computed then, to the same values.

        Args:
            targets: the cells whose maps are wanted.
            due: per target, when its map is needed (the tick, say): the worker makes the
                soonest first, equal ones in the order asked. Default: 0 for each (as soon as
                possible). A target asked for again with an earlier due moves up.

        Raises:
            ValueError: when ``due`` does not give one value per target.
        """
        cells = list(targets)
        dues = [0] * len(cells) if due is None else [int(d) for d in due]
        if len(dues) != len(cells):
            raise ValueError(f"due: expected one per target ({len(cells)}), got {len(dues)}")
        with self._lock:
            for cell, d in zip(cells, dues, strict=True):
                f = self._flat(cell)
                if self._slot_of[f] >= 0 or f in self._ready:
                    continue
                if f in self._due and self._due[f] <= d:
                    continue
                self._due[f] = d
                self._asked += 1
                self._requests.put((d, self._asked, f))
            if self._due and self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name="distance-maps", daemon=True
                )
                self._worker.start()

    def _work(self) -> None:
        while True:
            try:
                due, _, flat = self._requests.get(timeout=_IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._requests.empty():
                        self._worker = None
                        return
                continue
            with self._lock:
                if self._due.get(flat) != due:
                    continue  # asked for again with an earlier due: made from that entry
                # The caller's thread may have made this map since (it was needed before it
                # was ready): a worker that made it again would fall behind the requests.
                if self._slot_of[flat] >= 0:
                    del self._due[flat]
                    continue
                slab = self._slab
                slot = self._spare.pop() if self._spare and slab is not None else -1
                self._writing = slot >= 0
                self._making = flat
            try:
                t0 = time.thread_time()
                if slab is not None and slot >= 0:
                    self._search(flat, slab[slot], self._none)
                    done = (slab, slot, True)
                else:
                    done = (self._bfs(flat)[None, :], 0, False)
                with self._lock:
                    self._ready[flat] = done
                    self._due.pop(flat, None)
                    self.computed_ahead += 1
                    self.computed_ahead_s += time.thread_time() - t0
            finally:  # a reroute waiting for this row must never wait for ever
                with self._lock:
                    self._writing = False
                    self._making = -1
                    self._idle.notify_all()

    def lookup(self, targets: ArrayLike, cells: ArrayLike) -> NDArray[np.int64]:
        """Distances from many cells to many targets in one gather.

        Args:
            targets: ``(M,)`` flat target cells ``row * W + col``.
            cells: ``(M,)`` or ``(M, K)`` flat cells, each row read in its target's map; ``-1``
                (a move off the grid, say) reads :data:`UNREACHABLE`.

        Returns:
            ``cells``-shaped int64 moves (:data:`UNREACHABLE` where there is no path).
        """
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        at = np.asarray(cells, dtype=np.int64)
        if at.shape[:1] != tgt.shape:
            raise ValueError(f"cells: expected {len(tgt)} rows, got shape {at.shape}")
        if tgt.size == 0:
            return np.zeros(at.shape, dtype=np.int64)
        self._ensure(tgt, keep_all=True)
        assert self._slab is not None
        slots = self._slot_of[tgt].reshape(tgt.shape + (1,) * (at.ndim - 1))
        raw = self._slab[slots, np.maximum(at, 0)]
        out = raw.astype(np.int64)
        out[(raw == self._none) | (at < 0)] = UNREACHABLE
        return out

    def maps(self, targets: ArrayLike) -> tuple[NDArray[np.integer], NDArray[np.int64], int]:
        """The slab holding the maps of ``targets`` and their rows, for a kernel to read.

        Returns:
            ``(slab, slots, none)``: ``slab[slots[k], cell]`` is the distance from ``cell`` to
            ``targets[k]``, ``none`` where there is no path. Valid until the next call that
            may store a map (the caller's thread only).
        """
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        slots = self._ensure(tgt, keep_all=True) if tgt.size else np.zeros(0, dtype=np.int64)
        if self._slab is None:
            self._slab = np.empty((self.max_cached, self._cells), dtype=self._dtype)
        return self._slab, slots, self._none

    def after_moves(self, targets: ArrayLike, here: ArrayLike) -> NDArray[np.int64]:
        """``(M, 5)`` route cost to ``targets[j]`` after each action from ``here[j]``.

        The map value of the cell each action (``sim.grid`` ids, waiting first) leads to; on a
        weighted oracle plus that action's own weight, so that a move's cost is its step and
        the rest of the route, and waiting's the wait plus the route from where it stands.
        Moves off the grid or into walls read :data:`UNREACHABLE`. One compiled pass.

        Args:
            targets: ``(M,)`` flat target cells.
            here: ``(M,)`` flat cells the robots stand on.
        """
        tgt = np.asarray(targets, dtype=np.int64).reshape(-1)
        at = np.ascontiguousarray(here, dtype=np.int64).reshape(-1)
        out = np.empty((len(tgt), 5), dtype=np.int64)
        if not len(tgt):
            return out
        slab, slots, none, blocked, width, step, stepped = self.reader(tgt)
        gather_after_moves(slab, slots, none, at, blocked, width, step, stepped, out)
        return out

    def reader(self, targets: ArrayLike) -> RouteReader:
        """What a compiled kernel reads for route costs to ``targets`` (a :class:`RouteReader`).

        Stores any missing map first; valid until the next call that may store a map.
        """
        slab, slots, none = self.maps(targets)
        stepped = self._weights is not None
        step = self._weights if self._weights is not None else self._unit_step
        return RouteReader(slab, slots, none, self._blocked, self.shape[1], step, stepped)

    def fleet_reader(self, cells: NDArray[np.integer], rows: NDArray[np.int64]) -> RouteReader:
        """:meth:`reader` of the targets ``cells[rows]``, given as ``(N, 2)`` cells.

        The flat targets come from one compiled pass, not from numpy steps per tick: a
        thousand robots' targets in a few microseconds.
        """
        kind = np.int32 if np.asarray(cells).dtype == np.int32 else np.int64
        flats = np.empty(len(rows), dtype=np.int64)
        cell_flats(np.ascontiguousarray(cells, dtype=kind), rows, self.shape[1], flats)
        return self.reader(flats)

    def to(self, target: Cell) -> NDArray[np.int32]:
        """``(H, W)`` moves from every cell to ``target`` (a fresh array)."""
        flat = self._flat(target)
        self._ensure(np.array([flat], dtype=np.int64), keep_all=True)
        assert self._slab is not None
        row = self._slab[self._slot_of[flat]]
        out = row.astype(np.int32)
        if self._none != UNREACHABLE:
            out[row == self._none] = UNREACHABLE
        dmap: NDArray[np.int32] = out.reshape(self.shape)
        return dmap

    def table(
        self, targets: NDArray[np.bool_], *, max_bytes: int = 256 << 20
    ) -> tuple[NDArray[np.int64], NDArray[np.int32]] | None:
        """Dense distance maps of every ``True`` cell of ``targets``, or None if too big.

        Returns:
            ``(row_of, dist)``: ``row_of`` ``(H * W,)`` maps a flat target cell to its row in
            ``dist`` (``-1`` for other cells); ``dist`` ``(T, H * W)`` holds the distances.
            Built once per mask and kept.
        """
        key = targets.tobytes()
        if self._table is not None and self._table[0] == key:
            return self._table[1], self._table[2]
        flat = np.flatnonzero(targets.ravel())
        if len(flat) == 0 or len(flat) * self._cells * 4 > max_bytes:
            return None
        dist = np.empty((len(flat), self._cells), dtype=np.int32)
        for k, f in enumerate(flat.tolist()):
            self._search(f, dist[k], UNREACHABLE)
        row_of = np.full(self._cells, -1, dtype=np.int64)
        row_of[flat] = np.arange(len(flat))
        self._table = (key, row_of, dist)
        return row_of, dist
