"""A planner for the LoRR rules: greedy task assignment and a one-step PIBT with rotations.

Each step (:meth:`PibtPlanner.plan`):

1. Assignment (2024): every robot without a task takes the open, unassigned task with the lowest
   cost, robots in order of their best cost; cost = Manhattan distance to the first errand,
   plus, with lever ``task_length``, the task's own errand-to-errand length. Lever
   ``reassign``: each step a share of the robots still on their way to a first errand may trade
   their task for a free one that is cheaper by more than 8 (the 2024 rules allow it until the
   first errand is reached).
2. Distance maps: one shortest-distance map per goal location (int16 over free cells, one row
   per cached goal, least recently used first out), searched by the project's compiled
   :class:`~fleetmind.sim.distances.DistanceOracle` (breadth-first, or bucket-queue Dijkstra
   on the highway costs), at most ``maps_per_step`` new ones a step (a
   count, so that runs repeat); a robot whose map is not ready yet steers by Manhattan
   distance. Maps of the map's ``E`` cells are computed in :meth:`PibtPlanner.initialize`
   (LoRR's preprocessing). Lever ``highway``: even rows run
   east, odd rows west, even columns south, odd columns north, and a move against its row's or
   column's way costs ``highway`` instead of 1 in the maps (map-agnostic crisscross lanes that
   turn head-on meetings in one-lane aisles into overtaking flows).
3. Ranking: each robot ranks its four neighbours and its own cell by distance to its goal plus
   the rotations needed to face the neighbour (staying costs one step).
4. PIBT (Okumura et al. 2022) by priority (steps since the robot's goal changed, seeded
   tie-breaks): a robot takes its best free candidate; one that wants the cell of a
   lower-priority robot pushes it (in turn); no robot takes the cell of the robot pushing it
   (no swap); one that cannot make room stays. This is the project's one PIBT, the shield's
   compiled :func:`~fleetmind.safety.shield.pibt_step`, run on the ranked candidate cells.
   Lever ``unstick``: robots that have not changed cell for that many steps rank first, in a
   seeded random order redrawn while they stay stuck (a fixed order can hold two robots in a
   dead end for good). Lever ``break_cycles`` (2026): PIBT runs again until no ring of robots
   moves together.
5. Rotations: a robot whose chosen cell is not straight ahead turns toward it and stays; then
   every robot that meant to enter the cell of a robot that stays stays too (chains of
   followers, found from the stayers). Staying robots turn toward their cheapest neighbour.

Every reserved cell has one robot and no robot enters its pusher's cell, so the plan has no
vertex or swap conflict; :func:`fleetmind.sim.lorr.validate` checks executed files on its own.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.safety.shield import pibt_step
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, GridMap
from fleetmind.sim.lorr import CCR, CR, FW, HEADING, WAIT, Instance, Plan, View

BIG = np.int16(30000)
"""Distance of an unreachable or blocked cell in a map (int16)."""
_ACTION_OF_HEADING = (RIGHT, DOWN, LEFT, UP)  # sim.grid action of heading 0 E, 1 S, 2 W, 3 N
_CHUNK = 64  # maps searched and copied in one go
_KERNEL_WALL = 1  # pibt_step's code of a move it must not take
_NO_SIDEWAYS = np.zeros((5, 5), dtype=np.bool_)  # escapes are the shield's, unused here
TURNS = np.array([0, 1, 2, 1], dtype=np.int64)
"""Rotations from heading ``o`` to heading ``k``, indexed by ``(k - o) % 4``."""


def cycles(cell: NDArray[np.int64], into: NDArray[np.int64]) -> list[list[int]]:
    """Rings of robots that each move into the cell of the next one (which moves on).

    Args:
        cell: ``(n,)`` each robot's cell.
        into: ``(n,)`` the cell each robot drives into, ``-1`` for a robot that stays.

    Returns:
        Each ring's robots, in the order they follow one another.
    """
    occupant = dict(zip(cell.tolist(), range(len(cell)), strict=True))
    into_l = into.tolist()
    state = [0] * len(cell)  # 0 unseen, 1 on the current walk, 2 done
    rings = []
    for start in np.flatnonzero(into >= 0).tolist():
        walk = []
        j = start
        while j >= 0 and state[j] == 0 and into_l[j] >= 0:
            state[j] = 1
            walk.append(j)
            j = occupant.get(into_l[j], -1)
        if j >= 0 and state[j] == 1:
            rings.append(walk[walk.index(j) :])
        for k in walk:
            state[k] = 2
    return rings


class DistanceMaps:
    """Breadth-first distance maps to goal locations over the free cells of one map.

    Args:
        grid: the map.
        capacity: most maps kept (each ``(free cells + 1)`` int16).
        highway: cost of a move against the crisscross way (0: every move costs 1).
    """

    def __init__(
        self,
        grid: GridMap,
        *,
        capacity: int,
        highway: float = 0.0,
    ) -> None:
        h, w = grid.shape
        free = ~grid.blocked.ravel()
        self.width = w
        self.loc_of: NDArray[np.int64] = np.flatnonzero(free)  # (F,)
        self.n_free = len(self.loc_of)
        self.cell_of: NDArray[np.int64] = np.full(h * w, -1, dtype=np.int64)
        self.cell_of[self.loc_of] = np.arange(self.n_free)
        rows, cols = np.divmod(self.loc_of, w)
        self.rows, self.cols = rows, cols
        # nbr[c, k]: free cell in heading k of cell c, n_free (a sentinel) if blocked or off.
        self.nbr = np.full((self.n_free + 1, 4), self.n_free, dtype=np.int64)
        for k in range(4):
            r, c = rows + HEADING[k, 0], cols + HEADING[k, 1]
            ok = (r >= 0) & (r < h) & (c >= 0) & (c < w)
            ok[ok] = free[r[ok] * w + c[ok]]
            self.nbr[np.flatnonzero(ok), k] = self.cell_of[r[ok] * w + c[ok]]
        # Highways: even rows run east, odd rows west, even columns south, odd columns north;
        # a move against its row's or column's way costs ``highway`` instead of 1.
        weights: NDArray[np.int64] | None = None
        if highway > 0:
            r_all, c_all = np.divmod(np.arange(h * w), w)
            weights = np.ones((h * w, 5), dtype=np.int64)
            cost = max(int(highway), 1)
            for k, action in enumerate(_ACTION_OF_HEADING):
                with_way = (r_all % 2 == 0) == (k == 0) if k % 2 == 0 else (
                    (c_all % 2 == 0) == (k == 1)
                )  # fmt: skip
                weights[:, action] = np.where(with_way, 1, cost)
        self.weighted = highway > 0
        # The project's compiled searches (BFS, or bucket-queue Dijkstra on the highway costs):
        # distances *to* a goal, read for the free cells only.
        self.oracle = DistanceOracle(grid, max_cached=_CHUNK, weights=weights)
        self.capacity = max(1, capacity)
        self.maps = np.full((self.capacity, self.n_free + 1), BIG, dtype=np.int16)
        self.slot_of: OrderedDict[int, int] = OrderedDict()  # goal cell -> slot, LRU order
        self.free_slots = list(range(self.capacity - 1, -1, -1))
        self.computed = 0

    def compute(self, cells: list[int], pinned: set[int]) -> None:
        """Compute maps for ``cells`` (free-cell indices), evicting least recently used ones."""
        todo: list[tuple[int, int]] = []
        for cell in cells:
            if cell in self.slot_of:
                continue
            if not self.free_slots:
                for old in self.slot_of:
                    if old not in pinned:
                        self.free_slots.append(self.slot_of.pop(old))
                        break
                else:
                    return
            slot = self.free_slots.pop()
            self.slot_of[cell] = slot
            todo.append((cell, slot))
        for start in range(0, len(todo), _CHUNK):
            chunk = todo[start : start + _CHUNK]
            targets = self.loc_of[[c for c, _ in chunk]]
            slab, rows, none = self.oracle.maps(targets)
            raw = slab[rows[:, None], self.loc_of[None, :]]  # (k, free cells)
            dist = np.where(raw == none, BIG, np.minimum(raw, BIG)).astype(np.int16)
            self.maps[[s for _, s in chunk], : self.n_free] = dist
            self.computed += len(chunk)

    def slots(self, cells: NDArray[np.int64]) -> NDArray[np.int64]:
        """Slot of each goal cell (``-1``: no map), marking those used as recent."""
        out = np.full(len(cells), -1, dtype=np.int64)
        for i, cell in enumerate(cells.tolist()):
            slot = self.slot_of.get(cell)
            if slot is not None:
                out[i] = slot
        for cell in set(cells.tolist()):
            if cell in self.slot_of:
                self.slot_of.move_to_end(cell)
        return out


@dataclass(frozen=True)
class Levers:
    """Switches of :class:`PibtPlanner` (each measured by ``fleetmind bench lorr``).

    Attributes:
        task_length: add a task's own errand-to-errand length to its assignment cost.
        highway: cost of a move against the way of its row or column (even rows east, odd rows
            west, even columns south, odd columns north) in the distance maps, a whole number;
            0: off.
        reassign: robots a step (taken in turn) that may trade an unstarted task for a free one
            cheaper by more than 8 (0: off).
        maps_per_step: most new distance maps a step (robots without one steer by
            Manhattan distance); ``None``: every map the step needs.
        unstick: a robot with a goal that has not changed cell for this many steps is stuck:
            stuck robots rank above every other robot, in a seeded random order drawn again
            every ``unstick`` steps they stay stuck (0: off). PIBT's priorities (steps since
            the goal changed) otherwise keep one order between two robots for good, and the
            older one can hold the younger one in a dead end for ever.
        break_cycles: no ring of robots moves together: where the step's moves close a cycle,
            its lowest-ranked robot may not take its cell in the cycle and PIBT runs again
            (up to 3 rounds). The 2024 rules allow such rotations; under the 2026 rules the
            sweeping squares of a ring collide, and PIBT would propose the same ring, made
            waits, every step.
    """

    task_length: bool = False
    highway: float = 0.0
    reassign: int = 0
    maps_per_step: int | None = 64
    unstick: int = 0
    break_cycles: bool = False


class PibtPlanner:
    """Greedy assignment and rotation-aware one-step PIBT (see the module docstring).

    Args:
        levers: the options.
        seed: seed of the priority tie-breaks.
        map_capacity: most distance maps kept (default: team size + ``E`` cells + 512).
    """

    def __init__(
        self, levers: Levers | None = None, *, seed: int = 0, map_capacity: int | None = None
    ) -> None:
        self.levers = levers or Levers()
        hw = self.levers.highway
        if hw and (hw < 1 or hw != int(hw)):
            # Maps hold whole numbers: a fractional weight would round into flat or rising
            # steps along shortest paths, and robots would stop on them.
            raise ConfigError(f"highway weight must be 0 or a whole number >= 1, got {hw}")
        self.seed = seed
        self.map_capacity = map_capacity
        self.stats: dict[str, float] = {"maps_computed": 0, "manhattan_robots": 0}
        self._cursor = 0

    # ----------------------------------------------------------------- setup
    def initialize(self, instance: Instance) -> None:
        """Build the neighbour table and the distance maps of the ``E`` cells."""
        grid = instance.grid
        n = instance.team_size
        pickups = np.flatnonzero(grid.pickups.ravel())
        cap = self.map_capacity or (n + len(pickups) + 512)
        self.dm = DistanceMaps(grid, capacity=cap, highway=self.levers.highway)
        self.n = n
        self.width = instance.width
        self.edition = instance.edition
        self.rng = np.random.default_rng(self.seed)
        self.tiebreak = self.rng.random(n) * 0.5
        self.prio = self.tiebreak.copy()
        self.last_goal = np.full(n, -2, dtype=np.int64)
        self.last_loc = instance.starts.copy()
        self.still = np.zeros(n, dtype=np.int64)  # steps since the robot last changed cell
        self.boost = np.zeros(n, dtype=np.float64)  # stuck robots' random order
        pinned_cells = self.dm.cell_of[pickups]
        self.pinned = set(pinned_cells.tolist())
        self.dm.compute(sorted(self.pinned), self.pinned)

    # ----------------------------------------------------------------- assignment
    def _costs(
        self,
        robots_loc: NDArray[np.int64],
        goal_loc: NDArray[np.int64],
        extra: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """``(R, G)`` assignment costs: robot to goal Manhattan distance, plus ``extra``."""
        w = self.width
        rr, rc = np.divmod(robots_loc, w)
        gr, gc = np.divmod(goal_loc, w)
        d: NDArray[np.float64] = (
            np.abs(rr[:, None] - gr[None, :]) + np.abs(rc[:, None] - gc[None, :])
        ).astype(np.float64)
        d += extra[None, :]
        return d

    def _assign(self, view: View) -> NDArray[np.int64]:
        """The 2024 schedule: robots without a task get one (see the module docstring)."""
        schedule = view.robot_task.copy()
        live = view.pool_task >= 0
        robots = np.flatnonzero(schedule < 0)
        slots = np.flatnonzero(live & (view.pool_agent < 0))
        taken = np.zeros(len(slots), dtype=bool)
        if robots.size and slots.size:
            first = view.pool_errands[slots, 0]
            extra = self._extra(view, slots)
            loc = view.loc[robots]
            best = np.empty(len(robots), dtype=np.float64)
            for c0 in range(0, len(robots), 256):
                chunk = self._costs(loc[c0 : c0 + 256], first, extra)
                best[c0 : c0 + 256] = chunk.min(axis=1)
            for r in np.argsort(best, kind="stable").tolist():
                row = self._costs(loc[r : r + 1], first, extra)[0]
                row[taken] = np.inf
                j = int(np.argmin(row))
                if np.isfinite(row[j]):
                    taken[j] = True
                    schedule[robots[r]] = view.pool_task[slots[j]]
        if self.levers.reassign:
            self._trade(view, schedule, slots[~taken])
        return schedule

    def _trade(self, view: View, schedule: NDArray[np.int64], free: NDArray[np.int64]) -> None:
        """Robots not yet at their first errand take a free task cheaper by more than 8."""
        held = np.flatnonzero((view.pool_task >= 0) & (view.pool_agent >= 0))
        held = held[view.pool_next[held] == 0]
        if not held.size or not free.size:
            return
        k = min(self.levers.reassign, held.size)
        mine = held[(self._cursor + np.arange(k)) % held.size]
        self._cursor += k
        robots = view.pool_agent[mine]
        own = self._costs(view.loc[robots], view.pool_errands[mine, 0], self._extra(view, mine))[
            np.arange(k), np.arange(k)
        ]
        first = view.pool_errands[free, 0]
        cost = self._costs(view.loc[robots], first, self._extra(view, free))
        gain = own[:, None] - cost  # (k, F)
        taken = np.zeros(len(free), dtype=bool)
        for r in np.argsort(-gain.max(axis=1), kind="stable").tolist():
            row = np.where(taken, -np.inf, gain[r])
            j = int(np.argmax(row))
            if row[j] <= 8.0:
                continue
            taken[j] = True
            schedule[robots[r]] = view.pool_task[free[j]]

    def _extra(self, view: View, slots: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.levers.task_length:
            return self._task_length(view, slots)
        return np.zeros(len(slots), dtype=np.float64)

    def _task_length(self, view: View, slots: NDArray[np.int64]) -> NDArray[np.float64]:
        """Manhattan length of each task from its first to its last errand."""
        w = self.width
        errands = view.pool_errands[slots]
        total = np.zeros(len(slots), dtype=np.float64)
        for k in range(1, errands.shape[1]):
            ok = errands[:, k] >= 0
            a, b = errands[ok, k - 1], errands[ok, k]
            total[ok] += np.abs(a // w - b // w) + np.abs(a % w - b % w)
        return total

    # ----------------------------------------------------------------- one step
    def plan(self, view: View, hold: NDArray[np.bool_] | None = None) -> Plan:
        """Actions and schedule for one step; robots in ``hold`` wait where they are."""
        n = self.n
        dm = self.dm
        schedule = self._assign(view) if self.edition != "2023" else None  # 2024 and 2026
        goal = self._goals(view, schedule)
        cell = dm.cell_of[view.loc]
        ori = view.ori
        has_goal = goal >= 0
        goal_cell = np.where(has_goal, dm.cell_of[np.maximum(goal, 0)], -1)
        # Priorities: steps since the goal changed, plus a fixed tie-break.
        changed = goal != self.last_goal
        self.prio = np.where(changed, self.tiebreak, self.prio + 1.0)
        self.last_goal = goal.copy()
        self.still = np.where(view.loc != self.last_loc, 0, self.still + 1)
        self.last_loc = view.loc.copy()
        order_prio = self.prio
        k = self.levers.unstick
        if k:
            stuck = has_goal & (self.still >= k)
            redraw = stuck & (self.still % k == 0)
            if redraw.any():
                self.boost[redraw] = self.rng.random(int(redraw.sum()))
            order_prio = np.where(stuck, 1e9 + 1e6 * self.boost, self.prio)
        # Distance maps of the step's goals, those of the longest-waiting robots first (no robot
        # starves behind a backlog).
        needed = goal_cell[has_goal]
        pinned = self.pinned | set(needed.tolist())
        by_wait = needed[np.argsort(-self.prio[has_goal], kind="stable")]
        missing = [c for c in dict.fromkeys(by_wait.tolist()) if c not in dm.slot_of]
        if missing:
            # A count, not seconds, so that a run without a time limit repeats exactly.
            count = self.levers.maps_per_step
            dm.compute(missing if count is None else missing[:count], pinned)
        self.stats["maps_computed"] = dm.computed
        slot = np.full(n, -1, dtype=np.int64)
        slot[has_goal] = dm.slots(goal_cell[has_goal])
        nb = dm.nbr[cell]  # (n, 4)
        h_nb, h_cur = self._heuristic(cell, nb, goal, slot)
        self.stats["manhattan_robots"] = int((has_goal & (slot < 0)).sum())
        turn = TURNS[(np.arange(4)[None, :] - ori[:, None]) % 4]  # (n, 4)
        cost = np.empty((n, 5), dtype=np.float64)
        cost[:, :4] = h_nb + turn
        cost[:, 4] = h_cur + 1.0
        cost[:, :4][nb >= dm.n_free] = np.inf
        cost += self.rng.random((n, 5)) * 0.1
        order = np.argsort(cost, axis=1)
        cand = np.hstack([nb, cell[:, None]])[np.arange(n)[:, None], order]  # (n, 5) cells
        ban = np.full(n, -1, dtype=np.int64)
        for _ in range(4 if self.levers.break_cycles else 1):
            nxt = self._pibt(cell, cand, order_prio, ban, hold)
            actions = self._actions(cell, nxt, ori, nb, cost)
            if hold is not None:
                actions[hold] = WAIT
            if not self.levers.break_cycles:
                break
            rings = cycles(cell, np.where(actions == FW, nb[np.arange(n), ori], -1))
            if not rings:
                break
            for ring in rings:
                low = ring[int(np.argmin(order_prio[ring]))]
                ban[low] = nb[low, ori[low]]
        self.stats["cycles_broken"] = self.stats.get("cycles_broken", 0) + int((ban >= 0).sum())
        return Plan(actions=actions, schedule=schedule)

    def _goals(self, view: View, schedule: NDArray[np.int64] | None) -> NDArray[np.int64]:
        if schedule is None:
            return view.goal.copy()
        goal = np.full(self.n, -1, dtype=np.int64)
        slot_of = {int(t): s for s, t in enumerate(view.pool_task.tolist()) if t >= 0}
        has = np.flatnonzero(schedule >= 0)
        slots = np.array([slot_of[int(t)] for t in schedule[has]], dtype=np.int64)
        if slots.size:
            goal[has] = view.pool_errands[slots, view.pool_next[slots]]
        return goal

    def _heuristic(
        self,
        cell: NDArray[np.int64],
        nb: NDArray[np.int64],
        goal: NDArray[np.int64],
        slot: NDArray[np.int64],
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(n, 4)`` distance of each neighbour to the goal and ``(n,)`` of the robot's cell."""
        dm = self.dm
        n = len(cell)
        h_nb = np.zeros((n, 4), dtype=np.int64)
        h_cur = np.zeros(n, dtype=np.int64)
        mapped = np.flatnonzero(slot >= 0)
        if mapped.size:
            s = slot[mapped]
            h_nb[mapped] = dm.maps[s[:, None], nb[mapped]]
            h_cur[mapped] = dm.maps[s, cell[mapped]]
        manh = np.flatnonzero((slot < 0) & (goal >= 0))
        if manh.size:
            gr, gc = np.divmod(goal[manh], self.width)
            nbm = nb[manh]
            ok = nbm < dm.n_free
            safe = np.where(ok, nbm, 0)
            d = np.abs(dm.rows[safe] - gr[:, None]) + np.abs(dm.cols[safe] - gc[:, None])
            h_nb[manh] = np.where(ok, d, int(BIG))
            c = cell[manh]
            h_cur[manh] = np.abs(dm.rows[c] - gr) + np.abs(dm.cols[c] - gc)
        h_nb[nb >= dm.n_free] = int(BIG)
        return h_nb, h_cur

    def _pibt(
        self,
        cell: NDArray[np.int64],
        cand: NDArray[np.int64],
        prio: NDArray[np.float64],
        ban: NDArray[np.int64] | None = None,
        hold: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """PIBT over each robot's ranked candidate cells; returns the ``(n,)`` next cells.

        The project's one PIBT, the shield's compiled :func:`~fleetmind.safety.shield.pibt_step`,
        on free-cell indices: column 0 of a robot's targets is its own cell (the kernel's wait,
        what it falls back to), columns 1-4 its other candidates, and its preference row ranks
        the columns as ``cand`` ranks the cells. ``prio`` orders the robots (highest first);
        ``ban`` (``-1``: none) is a cell each robot may not take; robots in ``hold`` keep
        their cell.
        """
        n = len(cell)
        sentinel = self.dm.n_free
        own = cand == cell[:, None]  # (n, 5): exactly one True a row
        target = np.empty((n, 5), dtype=np.int64)
        target[:, 0] = cell
        target[:, 1:] = cand[~own].reshape(n, 4)
        column = np.cumsum(~own, axis=1) * ~own  # rank -> column (0 for the own cell)
        walls = target == sentinel
        if ban is not None:
            walls |= (target == ban[:, None]) & (ban[:, None] >= 0)
        if hold is not None:
            walls[hold, 1:] = True
        code = np.where(walls, _KERNEL_WALL, 0).astype(np.int64)
        target[target == sentinel] = 0  # never read where the code says wall
        order = np.argsort(-prio, kind="stable").astype(np.int64)
        occ_now = np.full(sentinel + 1, -1, dtype=np.int64)
        occ_next = np.full(sentinel + 1, -1, dtype=np.int64)
        act = np.empty(n, dtype=np.int64)
        reasons = np.empty(n, dtype=np.int64)
        no = np.zeros(n, dtype=np.bool_)
        broken = pibt_step(
            cell, target, code, np.ascontiguousarray(column), order, no, no, _NO_SIDEWAYS,
            occ_now, occ_next, act, reasons,
        )  # fmt: skip
        if broken >= 0:
            raise AssertionError(f"PIBT: robot {broken}'s own cell was taken")
        nxt: NDArray[np.int64] = target[np.arange(n), act]
        return nxt

    def _actions(
        self,
        cell: NDArray[np.int64],
        nxt: NDArray[np.int64],
        ori: NDArray[np.int64],
        nb: NDArray[np.int64],
        cost: NDArray[np.float64],
    ) -> NDArray[np.int64]:
        """Turn PIBT's next cells into actions, keeping robots that cannot drive in place.

        A robot whose next cell is not straight ahead turns toward it and stays; then every
        robot that meant to enter the cell of a robot that stays stays too (a chain). Staying
        robots turn toward their cheapest neighbour.
        """
        n = len(cell)
        rows = np.arange(n)
        heading = np.argmax(nb == nxt[:, None], axis=1)  # direction of the next cell
        moving = nxt != cell
        stays = ~moving | (heading != ori)
        # Who will stand in each cell: robots that stay keep theirs; chains of followers stop.
        into = np.full(self.dm.n_free + 1, -1, dtype=np.int64)
        into[nxt[moving]] = rows[moving]
        blocked = stays.copy()
        queue = np.flatnonzero(stays).tolist()
        into_l = into.tolist()
        cell_l = cell.tolist()
        blocked_l = blocked.tolist()
        while queue:
            j = queue.pop()
            i = into_l[cell_l[j]]
            if i >= 0 and i != j and not blocked_l[i]:
                blocked_l[i] = True
                queue.append(i)
        blocked = np.array(blocked_l, dtype=bool)
        actions = np.full(n, WAIT, dtype=np.int64)
        actions[~blocked] = FW
        # Turn toward the next cell, or, for robots that stay put, the cheapest neighbour.
        best = np.argmin(cost[:, :4], axis=1)
        target = np.where(moving, heading, np.where(cost[rows, best] < cost[:, 4], best, -1))
        turn = np.flatnonzero(blocked & (target >= 0) & (target != ori))
        d = (target[turn] - ori[turn]) % 4
        cw = d == 1
        back = d == 2
        if back.any():
            i = turn[back]
            cw[back] = cost[i, (ori[i] + 1) % 4] <= cost[i, (ori[i] + 3) % 4]
        actions[turn[cw]] = CR
        actions[turn[~cw]] = CCR
        return actions
