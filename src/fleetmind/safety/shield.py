"""The shield: turns each robot's ranking of its 5 actions into one collision-free joint move.

The algorithm is one step of PIBT (Okumura et al., "Priority Inheritance with Backtracking for
Iterative Multi-agent Path Finding", IJCAI 2019 / AIJ 2022):

1. Robots are taken in priority order (higher first, ties by robot index).
2. A robot that has not planned yet tries its candidate cells in its preference order. A cell is
   skipped if it is a wall, off the grid, forbidden (unless the robot waits where it is), already
   reserved for the next tick (vertex conflict), or the current cell of the robot that pushed it
   (that would be a swap).
3. If the chosen cell holds a robot that has not planned yet, that robot inherits the priority and
   must plan now, with the pusher's current cell excluded. If it finds no cell it stays, the pusher
   loses that cell and backtracks to its next candidate.
4. A robot left with no candidate stays. This is always possible for the robot that started a push
   chain: nobody can have reserved its cell without pushing it first.

The result never has a vertex conflict, a swap, or a move into a wall or a forbidden cell;
following a robot that moves away and rotations of three or more robots are allowed. The push
chain runs on an explicit stack, so a chain through a thousand robots needs no deep recursion.

Deadlock escape: the shield owns a :class:`~fleetmind.safety.deadlock.DeadlockMonitor`. When
``resolve`` is given each robot's distance to target, robots that have made no progress for
``deadlock_window`` ticks are reported and escape for ``escape_ticks`` ticks: they plan before
every other robot (among themselves, robots that escaped less often first, then a seeded random
order), and robots they push step sideways (off the pusher's line of travel) before they retreat,
which is how a robot pushed down a corridor finds a side pocket.

Performance: static legality of the 5 moves of all robots is computed with numpy in one pass; the
push loop is compiled (:func:`pibt_step`, numba), and :meth:`Shield._pibt_reference`, the same
step in PIBT's published recursive form in plain Python over lists, is the reference the kernel
is tested against (the same actions and reasons on the same inputs). The occupancy tables are
kept between calls and only the cells touched by a call are cleared, so nothing proportional to
the grid size is rebuilt per tick.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

from fleetmind.errors import ConfigError, FleetmindError, check_range
from fleetmind.safety.deadlock import DeadlockMonitor, per_robot
from fleetmind.sim.grid import DELTAS, DOWN, LEFT, N_ACTIONS, RIGHT, UP, WAIT, Cell, GridMap

logger = logging.getLogger(__name__)

# Order in which actions missing from a preference row are appended: moves first, WAIT last
# (a robot always has WAIT as its final, safe fallback).
FILL_ORDER: Final[tuple[int, ...]] = (UP, DOWN, LEFT, RIGHT, WAIT)

# Rule names, the keys of ShieldDecision.rule_counts. The first group explains why an intervened
# robot did not get its first choice (exactly one per intervened robot); the last two count events.
RULES: Final[tuple[str, ...]] = (
    "wall",
    "forbidden",
    "vertex",
    "swap",
    "yield",
    "broken",
    "invalid_preference",
    "sanitised",
    "deadlock_escape",
)

# Reason codes used inside the push loop (indices into _REASON_NAMES).
_OK: Final = 0
_WALL: Final = 1
_FORBIDDEN: Final = 2
_VERTEX: Final = 3
_SWAP: Final = 4
_YIELD: Final = 5
_BROKEN: Final = 6
_INVALID: Final = 7
_REASON_NAMES: Final[tuple[str, ...]] = ("", *RULES[:_INVALID])  # "" for _OK, then the rules

# Moves perpendicular to each action: where a pushed robot steps aside during a deadlock escape.
_SIDEWAYS: Final[tuple[frozenset[int], ...]] = (
    frozenset(),
    frozenset((LEFT, RIGHT)),
    frozenset((LEFT, RIGHT)),
    frozenset((UP, DOWN)),
    frozenset((UP, DOWN)),
)


# The same as an array for the kernel: _SIDEWAYS_MASK[a, b] is True when b is sideways of a.
_SIDEWAYS_MASK: Final = np.array(
    [[b in side for b in range(N_ACTIONS)] for side in _SIDEWAYS], dtype=np.bool_
)


class PushInput(NamedTuple):
    """One PIBT step's input on flat cells: what :func:`pibt_step` and the reference read.

    The fields are the first seven arguments of :func:`pibt_step`, described there.
    """

    cur: NDArray[np.int64]
    target: NDArray[np.int64]
    code: NDArray[np.int64]
    cands: NDArray[np.int64]
    order: NDArray[np.int64]
    broken: NDArray[np.bool_]
    escaping: NDArray[np.bool_]

    def contiguous(self) -> PushInput:
        """The same arrays, C-contiguous in the kernel's dtypes (``cands`` copied if need be)."""

        def i64(a: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.ascontiguousarray(a, dtype=np.int64)

        def flags(a: NDArray[np.bool_]) -> NDArray[np.bool_]:
            return np.ascontiguousarray(a, dtype=np.bool_)

        return PushInput(
            i64(self.cur),
            i64(self.target),
            i64(self.code),
            i64(self.cands),
            i64(self.order),
            flags(self.broken),
            flags(self.escaping),
        )


# Compiled when the module is imported, not on the first tick.
_PIBT_SIG = numba.int64(
    numba.int64[:],
    *(numba.int64[:, :], numba.int64[:, :], numba.int64[:, :]),
    numba.int64[:],
    *(numba.boolean[:], numba.boolean[:], numba.boolean[:, :]),
    *(numba.int64[:], numba.int64[:], numba.int64[:], numba.int64[:]),
)


@numba.njit(_PIBT_SIG, cache=True)
def pibt_step(
    cur: NDArray[np.int64],
    target: NDArray[np.int64],
    code: NDArray[np.int64],
    cands: NDArray[np.int64],
    order: NDArray[np.int64],
    broken: NDArray[np.bool_],
    escaping: NDArray[np.bool_],
    sideways: NDArray[np.bool_],
    occ_now: NDArray[np.int64],
    occ_next: NDArray[np.int64],
    act: NDArray[np.int64],
    reasons: NDArray[np.int64],
) -> int:
    """One PIBT step on flat cells, compiled: :meth:`Shield._pibt_reference` as a kernel.

    Args:
        cur: ``(N,)`` current flat cells.
        target: ``(N, 5)`` flat target cell of each action (0 where off the grid).
        code: ``(N, 5)`` static legality of each action (``_OK``, ``_WALL``, ``_FORBIDDEN``).
        cands: ``(N, 5)`` sanitised preference rows; rows of pushed robots may be reordered.
        order: ``(N,)`` robot indices in planning order.
        broken: ``(N,)`` broken robots.
        escaping: ``(N,)`` escaping robots.
        sideways: ``(5, 5)`` ``[a, b]``: action ``b`` is sideways of ``a``.
        occ_now: ``(H * W,)`` all -1; filled and cleared again here.
        occ_next: ``(H * W,)`` all -1; filled and cleared again here.
        act: ``(N,)`` written: each robot's action.
        reasons: ``(N,)`` written: the code of the rule that rejected its first choice.

    Returns:
        -1, or the robot whose own cell was taken (an invariant broken: the tables are left
        dirty and the caller must start them afresh).
    """
    n = cur.shape[0]
    nxt = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    tried = np.zeros(n, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    row = np.empty(N_ACTIONS, dtype=np.int64)
    for i in range(n):
        act[i] = WAIT
        reasons[i] = _OK
        occ_now[cur[i]] = i
    for i in range(n):
        if broken[i]:
            nxt[i] = cur[i]
            occ_next[cur[i]] = i
    for root in order:
        if nxt[root] != -1:
            continue
        escape = escaping[root]
        parent[root] = -1
        top = 0
        stack[0] = root
        while top >= 0:
            i = stack[top]
            p = parent[i]
            p_cell = cur[p] if p >= 0 else -1
            k = tried[i]
            pushed = -1
            done = False
            while k < N_ACTIONS:
                a = cands[i, k]
                k += 1
                bad = code[i, a]
                v = target[i, a]
                if bad == _OK:
                    holder = occ_next[v]
                    if holder != -1:
                        if holder == p and a == WAIT:
                            bad = _YIELD
                        elif broken[holder]:
                            bad = _BROKEN
                        else:
                            bad = _VERTEX
                    elif v == p_cell:
                        bad = _SWAP
                if bad != _OK:
                    if k == 1:
                        reasons[i] = bad
                    continue
                occ_next[v] = i
                nxt[i] = v
                act[i] = a
                j = occ_now[v]
                if j != -1 and j != i and nxt[j] == -1:
                    parent[j] = i
                    tried[j] = 0
                    if escape:
                        # Sideways moves first for the pushed robot, the rest in its order.
                        for m in range(N_ACTIONS):
                            row[m] = cands[j, m]
                        w = 0
                        for m in range(N_ACTIONS):
                            if sideways[a, row[m]]:
                                cands[j, w] = row[m]
                                w += 1
                        for m in range(N_ACTIONS):
                            if not sideways[a, row[m]]:
                                cands[j, w] = row[m]
                                w += 1
                    pushed = j
                else:
                    done = True
                break
            tried[i] = k
            if pushed >= 0:
                top += 1
                stack[top] = pushed
            elif done:
                break
            else:
                # No cell left: stay. Only the pusher can hold this cell right now.
                c = cur[i]
                if occ_next[c] != -1 and occ_next[c] != p:
                    return int(i)
                occ_next[c] = i
                nxt[i] = c
                act[i] = WAIT
                top -= 1
    for i in range(n):
        occ_now[cur[i]] = -1
        occ_next[nxt[i]] = -1
    return -1


class ShieldInputError(FleetmindError, ValueError):
    """The arrays handed to :meth:`Shield.resolve` are malformed (the message names the field)."""


@dataclass(frozen=True)
class ShieldDecision:
    """The shield's answer for one tick.

    Attributes:
        actions: ``(N,)`` int64, the action each robot executes; the joint move is collision-free.
        intervened: ``(N,)`` bool, True where the executed action differs from the first entry of
            the robot's preference row as given (an out-of-range first entry always counts).
        rule_counts: how many robots each rule touched this tick; every name in :data:`RULES` is
            present. ``wall``/``forbidden``/``vertex``/``swap``/``yield``/``broken``/
            ``invalid_preference`` give, for each intervened robot, why its first choice was not
            executed (``yield``: it wanted to wait but was pushed away; ``broken``: the robot is
            broken, or its first choice was a broken robot's cell). ``sanitised`` counts preference
            rows that had to be repaired, ``deadlock_escape`` the escapes started this tick.
        stuck: robots the deadlock monitor reported this tick (forward these to the planner).
        escaping: ``(N,)`` bool, robots in escape mode this tick.
    """

    actions: NDArray[np.int64]
    intervened: NDArray[np.bool_]
    rule_counts: dict[str, int]
    stuck: tuple[int, ...] = ()
    escaping: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))


def sanitise_preferences(preferences: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Repair preference rows into permutations of the 5 action ids.

    Invalid entries (out of range) and repeats are dropped, keeping the first occurrence; the
    missing actions are appended in :data:`FILL_ORDER` (moves, then WAIT last).

    Args:
        preferences: ``(N, K)`` integer rankings, best first, ``K >= 1``.

    Returns:
        ``(ranked, repaired)``: ``(N, 5)`` int64 permutations, and ``(N,)`` bool marking the rows
        that were not already a permutation of ``0..4``.

    Raises:
        ShieldInputError: when ``preferences`` is not a 2-D integer array.
    """
    raw = np.asarray(preferences)
    if raw.ndim != 2 or raw.shape[1] < 1:
        raise ShieldInputError(f"preferences: expected shape (N, 5), got {raw.shape}")
    if raw.size and not np.issubdtype(raw.dtype, np.integer):
        raise ShieldInputError(f"preferences: expected integer action ids, got dtype {raw.dtype}")
    n = raw.shape[0]
    raw = raw.astype(np.int64, copy=False)
    if raw.shape[1] == N_ACTIONS:
        ok = (np.sort(raw, axis=1) == np.arange(N_ACTIONS)).all(axis=1)
    else:
        ok = np.zeros(n, dtype=bool)
    ranked = np.empty((n, N_ACTIONS), dtype=np.int64)
    if raw.shape[1] == N_ACTIONS:
        ranked[ok] = raw[ok]
    for i in np.flatnonzero(~ok).tolist():
        row: list[int] = []
        for a in raw[i].tolist():
            if 0 <= a < N_ACTIONS and a not in row:
                row.append(a)
        row.extend(a for a in FILL_ORDER if a not in row)
        ranked[i] = row
    return ranked, ~ok


class Shield:
    """Collision-free joint moves from per-robot action rankings (one step of PIBT).

    Args:
        grid: the map; its blocked cells are walls.
        forbidden: cells treated like walls (maintenance zones); robots already on one may wait
            there or leave but no robot enters one.
        deadlock_window: ticks without progress before a robot is reported stuck.
        escape_ticks: how long a stuck robot stays in escape mode; ``deadlock_window`` when None.
        seed: seed or generator for the random order among escaping robots.

    Raises:
        ConfigError: when a forbidden cell is off the grid or a setting is out of range.
    """

    def __init__(
        self,
        grid: GridMap,
        *,
        forbidden: Iterable[Cell] = (),
        deadlock_window: int = 8,
        escape_ticks: int | None = None,
        seed: int | np.random.Generator | None = 0,
    ) -> None:
        self.grid = grid
        height, width = grid.shape
        self._height = height
        self._width = width
        self._blocked_flat: NDArray[np.bool_] = np.ascontiguousarray(grid.blocked, dtype=bool)
        self._blocked_flat = self._blocked_flat.reshape(-1)
        self._forbidden_flat: NDArray[np.bool_] = np.zeros(height * width, dtype=bool)
        self.set_forbidden(forbidden)
        self.monitor = DeadlockMonitor(window=deadlock_window)
        ticks = deadlock_window if escape_ticks is None else escape_ticks
        check_range("escape_ticks", int(ticks), low=1)
        self.escape_ticks = int(ticks)
        self._rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        # Occupancy tables over flat cell indices, -1 where empty. Kept between calls; each call
        # clears exactly the entries it wrote.
        self._occ_now = np.full(height * width, -1, dtype=np.int64)
        self._occ_next = np.full(height * width, -1, dtype=np.int64)
        # Escape state, sized to the fleet on first use.
        self._escape_left: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # (N,)
        self._escape_rank: NDArray[np.float64] = np.zeros(0, dtype=np.float64)  # (N,)
        self._escape_count: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # (N,)

    @property
    def forbidden(self) -> list[Cell]:
        """The forbidden cells, in reading order."""
        flat = np.flatnonzero(self._forbidden_flat)
        return [(int(f // self._width), int(f % self._width)) for f in flat]

    def set_forbidden(self, cells: Iterable[Cell]) -> None:
        """Replace the set of forbidden cells.

        Args:
            cells: ``(row, col)`` cells no robot may enter from now on.

        Raises:
            ConfigError: when a cell is off the grid.
        """
        mask = np.zeros(self._height * self._width, dtype=bool)
        for k, cell in enumerate(cells):
            r, c = int(cell[0]), int(cell[1])
            if not (0 <= r < self._height and 0 <= c < self._width):
                raise ConfigError(
                    f"forbidden[{k}]: cell ({r}, {c}) is off the {self._height}x{self._width} grid"
                )
            mask[r * self._width + c] = True
        self._forbidden_flat = mask

    def start_escape(self, robots: Iterable[int]) -> None:
        """Put robots into escape mode for ``escape_ticks`` ticks (e.g. on a planner's request).

        Args:
            robots: robot indices; they must be valid for the fleet of the last ``resolve`` call.
        """
        idx = np.asarray(list(robots), dtype=np.int64)
        if idx.size == 0:
            return
        # Fewer earlier escapes first; a seeded random order among equals.
        self._escape_rank[idx] = -self._escape_count[idx] + self._rng.random(idx.size)
        self._escape_count[idx] += 1
        self._escape_left[idx] = self.escape_ticks
        logger.debug("deadlock escape for robots %s", idx.tolist())

    def _fit_fleet(self, n: int) -> None:
        if self._escape_left.shape != (n,):
            if self._escape_left.size:
                logger.info("fleet size changed to %d: escape state reset", n)
            self._escape_left = np.zeros(n, dtype=np.int64)
            self._escape_rank = np.zeros(n, dtype=np.float64)
            self._escape_count = np.zeros(n, dtype=np.int64)

    def _check_positions(self, positions: ArrayLike) -> NDArray[np.int64]:
        pos = np.asarray(positions)
        if pos.ndim != 2 or pos.shape[1] != 2:
            raise ShieldInputError(f"positions: expected shape (N, 2), got {pos.shape}")
        if pos.size and not np.issubdtype(pos.dtype, np.integer):
            raise ShieldInputError(f"positions: expected integer cells, got dtype {pos.dtype}")
        pos = pos.astype(np.int64, copy=False)
        outside = (
            (pos[:, 0] < 0)
            | (pos[:, 0] >= self._height)
            | (pos[:, 1] < 0)
            | (pos[:, 1] >= self._width)
        )
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise ShieldInputError(
                f"positions[{i}]: cell {tuple(pos[i].tolist())} is off the "
                f"{self._height}x{self._width} grid"
            )
        flat = pos[:, 0] * self._width + pos[:, 1]
        on_wall = self._blocked_flat[flat]
        if on_wall.any():
            i = int(np.flatnonzero(on_wall)[0])
            raise ShieldInputError(f"positions[{i}]: cell {tuple(pos[i].tolist())} is blocked")
        if flat.size > 1:
            srt = np.sort(flat)
            dup = srt[1:] == srt[:-1]
            if dup.any():
                cell = int(srt[1:][dup][0])
                robots = np.flatnonzero(flat == cell).tolist()
                raise ShieldInputError(
                    f"positions{robots}: robots share cell "
                    f"({cell // self._width}, {cell % self._width})"
                )
        return pos

    def resolve(
        self,
        positions: ArrayLike,
        preferences: ArrayLike,
        *,
        priorities: ArrayLike | None = None,
        broken: ArrayLike | None = None,
        dist_to_target: ArrayLike | None = None,
        active: ArrayLike | None = None,
        target_changed: ArrayLike | None = None,
    ) -> ShieldDecision:
        """Choose one collision-free joint move for one tick.

        Args:
            positions: ``(N, 2)`` int, distinct free cells ``(row, col)``.
            preferences: ``(N, 5)`` int, each robot's ranking of the action ids, best first.
                Garbage is repaired by :func:`sanitise_preferences`.
            priorities: ``(N,)`` float, higher plans first; ties go to the lower robot index.
                All equal when None.
            broken: ``(N,)`` bool, robots that never move and are obstacles.
            dist_to_target: ``(N,)`` int, each robot's distance to its target; when given, the
                deadlock monitor is updated and stuck robots start an escape.
            active: ``(N,)`` bool, robots that have a target (for the deadlock monitor).
            target_changed: ``(N,)`` bool, robots whose target or map changed since the last
                call (for the deadlock monitor, which then takes ``dist_to_target`` as any
                route cost: ``DeadlockMonitor.update``'s ``changed``).

        Returns:
            The decision; ``actions`` never contains a vertex conflict, a swap, or a move into a
            wall, off the grid or into a forbidden cell, and broken robots always wait.

        Raises:
            ShieldInputError: when an array has the wrong shape or type, a position is off the
                grid or blocked, two robots share a cell, or a priority is not finite.
        """
        pos = self._check_positions(positions)
        n = pos.shape[0]
        raw_prefs = np.asarray(preferences)
        if raw_prefs.ndim != 2 or raw_prefs.shape[0] != n:
            raise ShieldInputError(
                f"preferences: expected shape ({n}, 5) to match positions, got {raw_prefs.shape}"
            )
        ranked, repaired = sanitise_preferences(raw_prefs)
        prio = per_robot(
            priorities, n, "priorities", fill=0.0, dtype=np.float64, error=ShieldInputError
        )
        if not np.isfinite(prio).all():
            i = int(np.flatnonzero(~np.isfinite(prio))[0])
            raise ShieldInputError(f"priorities[{i}]: must be finite, got {prio[i]}")
        brk = per_robot(broken, n, "broken", fill=False, dtype=np.bool_, error=ShieldInputError)

        self._fit_fleet(n)
        stuck: list[int] = []
        if dist_to_target is not None:
            try:
                stuck = self.monitor.update(dist_to_target, active, target_changed)
            except ValueError as exc:
                raise ShieldInputError(str(exc)) from exc
            fresh = [i for i in stuck if not brk[i]]
            self.start_escape(fresh)
        escaping = (self._escape_left > 0) & ~brk

        # Plan order: escaping robots first (by escape rank), then by priority, then by index.
        rank = np.where(escaping, self._escape_rank, 0.0)
        order = np.lexsort((np.arange(n), -prio, -rank, ~escaping))

        # Static legality of each robot's 5 moves: 0 ok, _WALL, _FORBIDDEN.
        target = pos[:, None, :] + DELTAS[None, :, :].astype(np.int64)  # (N, 5, 2)
        rows, cols = target[..., 0], target[..., 1]
        inside = (rows >= 0) & (rows < self._height) & (cols >= 0) & (cols < self._width)
        flat = np.where(inside, rows * self._width + cols, 0)  # (N, 5)
        code = np.where(
            ~inside | self._blocked_flat[flat],
            _WALL,
            np.where(self._forbidden_flat[flat], _FORBIDDEN, _OK),
        )
        code[:, WAIT] = _OK  # waiting is always legal, even on a forbidden cell

        act, reasons = self._pibt(
            PushInput(
                cur=pos[:, 0] * self._width + pos[:, 1],
                target=flat.astype(np.int64, copy=False),
                code=code.astype(np.int64, copy=False),
                cands=ranked,
                order=order.astype(np.int64, copy=False),
                broken=brk,
                escaping=escaping,
            )
        )

        first = raw_prefs[:, 0].astype(np.int64) if raw_prefs.shape[1] else np.full(n, -1)
        intervened = act != first
        first_invalid = (first < 0) | (first >= N_ACTIONS)
        # Why each intervened robot lost its first choice: broken, an invalid first entry, or
        # the rule that rejected it; one whose tentative first cell was lost to a push that
        # failed (reason still _OK) is a vertex conflict.
        why = np.where(
            brk,
            _BROKEN,
            np.where(first_invalid, _INVALID, np.where(reasons == _OK, _VERTEX, reasons)),
        )
        tally = np.bincount(why[intervened], minlength=len(_REASON_NAMES)).tolist()
        counts = dict.fromkeys(RULES, 0)
        for code_id, name in enumerate(_REASON_NAMES[1:], start=1):
            counts[name] = int(tally[code_id])
        counts["sanitised"] = int(repaired.sum())
        counts["deadlock_escape"] = len(stuck) - int(brk[stuck].sum()) if stuck else 0

        self._escape_left = np.maximum(self._escape_left - 1, 0)
        act.flags.writeable = False
        intervened.flags.writeable = False
        escaping.flags.writeable = False
        return ShieldDecision(
            actions=act,
            intervened=intervened,
            rule_counts=counts,
            stuck=tuple(stuck),
            escaping=escaping,
        )

    def _pibt(self, push: PushInput) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Run one PIBT step with the kernel (:func:`pibt_step`): actions and reason codes.

        ``push.cands`` may be reordered in place.
        """
        n = len(push.cur)
        act = np.empty(n, dtype=np.int64)
        reasons = np.empty(n, dtype=np.int64)
        bad = pibt_step(
            *push.contiguous(),
            _SIDEWAYS_MASK,
            self._occ_now,
            self._occ_next,
            act,
            reasons,
        )
        if bad >= 0:
            # Tentative reservations may be left anywhere: start the tables afresh.
            self._occ_now.fill(-1)
            self._occ_next.fill(-1)
            raise AssertionError(f"PIBT invariant: own cell of robot {bad} taken")
        return act, reasons

    def _pibt_reference(self, push: PushInput) -> tuple[list[int], list[int]]:
        """Run one PIBT step on flat cell indices: the kernel's reference, in plain Python.

        PIBT as published (Okumura et al.): a robot takes its best free candidate and pushes the
        robot standing there, recursively; a pushed robot with no cell left stays, and its pusher
        tries its next candidate. The kernel does the same with an explicit stack; this form
        recurses, over lists, and the kernel is tested to give the same actions and reasons.

        Returns:
            ``(actions, reasons)``: the action of each robot, and the reason code of the first
            rule that rejected its first choice (``_OK`` when none did).
        """
        cur, target, code, cands, order, broken, escaping = (np.asarray(a).tolist() for a in push)
        n = len(cur)
        # Tables of its own (the kernel's stay untouched), as lists: fast scalar access.
        occ_now = [-1] * (self._height * self._width)
        occ_next = [-1] * (self._height * self._width)
        nxt = [-1] * n  # planned flat cell, -1 while unplanned
        act = [WAIT] * n
        reasons = [_OK] * n
        for i, c in enumerate(cur):
            occ_now[c] = i
        for i in (i for i in range(n) if broken[i]):
            nxt[i], occ_next[cur[i]] = cur[i], i

        def rule(i: int, a: int, pusher: int) -> int:
            """The code of the first rule that forbids robot ``i`` action ``a`` now."""
            v = target[i][a]
            holder = occ_next[v]
            if code[i][a]:
                return int(code[i][a])
            if holder == -1:
                return _SWAP if pusher >= 0 and v == cur[pusher] else _OK
            if holder == pusher and a == WAIT:
                return _YIELD
            return _BROKEN if broken[holder] else _VERTEX

        def plan(i: int, pusher: int, escape: bool) -> bool:
            """Plan robot ``i`` (pushed by ``pusher``, -1 for none); False when it must stay."""
            for k, a in enumerate(cands[i]):
                why = rule(i, a, pusher)
                if why != _OK:
                    reasons[i] = why if k == 0 else reasons[i]
                    continue
                v = target[i][a]
                occ_next[v], nxt[i], act[i] = i, v, a
                j = occ_now[v]
                if j in (-1, i) or nxt[j] != -1:
                    return True
                if escape:
                    # Sideways moves first for the pushed robot (a stable sort keeps its order).
                    cands[j] = sorted(cands[j], key=lambda b: b not in _SIDEWAYS[a])
                if plan(j, i, escape):
                    return True
            # No cell left: stay. Only the pusher can hold this cell right now.
            assert occ_next[cur[i]] in (-1, pusher), "PIBT invariant: own cell taken"
            occ_next[cur[i]], nxt[i], act[i] = i, cur[i], WAIT
            return False

        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * n + 1000))  # a push chain can cross the fleet
        try:
            for root in order:
                if nxt[root] == -1:
                    plan(root, -1, escaping[root])
        finally:
            sys.setrecursionlimit(limit)
        return act, reasons
