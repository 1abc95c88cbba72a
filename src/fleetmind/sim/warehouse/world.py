"""The warehouse world: robots, orders, tasks, faults and the tick (:class:`Warehouse`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim import kernels
from fleetmind.sim import rewards as rw
from fleetmind.sim.dynamics import resolve_moves
from fleetmind.sim.grid import WAIT, Cell, GridMap, action_error
from fleetmind.sim.orders import Order, OrderStream
from fleetmind.sim.warehouse import scores
from fleetmind.sim.warehouse.config import (
    BatteryConfig,
    TickPlan,
    WarehouseConfig,
    default_capabilities,
)
from fleetmind.sim.warehouse.records import OrderRecord, StepResult, Tick

if TYPE_CHECKING:
    from fleetmind.sim.observe import LocalObserver

_NO_GATES = np.zeros(0, dtype=bool)
_OBSERVED = kernels.OBSERVED
# dtype objects: np.empty and np.asarray are quicker with them than with a type.
_BOOL, _FLOAT32 = np.dtype(bool), np.dtype(np.float32)
_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)
_REFUSED = 32 | 64 | 256  # warehouse_tick refused the tick: a bad action, robot or buffer
_PYTHON_EVENTS = 1 | 2 | 4 | 8  # pickups, deliveries, errands, a finite battery
_AFTER_TICK = _PYTHON_EVENTS | 16  # ... or an idle robot to give work to
_NO_SUM = np.zeros(0, dtype=np.float64)
_NO_OBS = np.zeros((0, 0), dtype=np.float32)
# warehouse_tick's observation inputs when none are asked (empty, of the types it compiles for).
_NO_OBSERVER = (
    np.zeros((0, 0), dtype=np.float32),
    np.zeros((0, 0), dtype=np.float32),
    np.zeros((0, 0), dtype=bool),
    np.zeros(0, dtype=np.int64),
    np.zeros((0, 0), dtype=np.int32),
)

_new_tick = tuple.__new__


class Warehouse:
    """A single warehouse world.

    Args:
        grid: the map.
        config: episode settings.
        seed: root seed; split into named generators for placement, orders and tasks.
        start: optional ``(N, 2)`` start cells; default from the map's starts, then random.
        orders: optional fixed order list (a task file) instead of the Poisson stream.
    """

    # The tick's plan and its compiled call live in slots, outside __dict__: snapshots and the
    # recorder's captures, which copy __dict__, need not carry what the config already says.
    __slots__ = ("__dict__", "_checked", "_entry", "_made_pos", "_plan")

    def __init__(
        self,
        grid: GridMap,
        config: WarehouseConfig | None = None,
        *,
        seed: int | None = None,
        start: NDArray[np.int32] | None = None,
        orders: Sequence[Order] | None = None,
    ) -> None:
        self.grid = grid
        self.config = config or WarehouseConfig()
        n = self.config.n_robots
        self.robot_ids = [f"robot_{i}" for i in range(n)]
        self.capabilities = self.config.capabilities or default_capabilities(n)
        self._fixed_orders = list(orders) if orders is not None else None
        self._start = None if start is None else np.asarray(start, dtype=np.int32)
        self._plan = TickPlan.of(self.config, n, self._fixed_orders)
        # warehouse_tick's machine code for the arrays in _checked (and self.pos when it is
        # _made_pos), called without numba's type dispatch (advance); None until checked.
        self._entry: Callable[..., tuple[int, int, int]] | None = None
        self._checked: tuple[object, ...] = ()
        self._made_pos: NDArray[np.int32] | None = None
        self.reset(seed)

    def __getstate__(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Pickle and copy state: the compiled entry (this process's machine code) stays out."""
        return self.__dict__, {
            "_plan": self._plan,
            "_entry": None,
            "_checked": (),
            "_made_pos": None,
        }

    # ------------------------------------------------------------------ lifecycle
    def reset(self, seed: int | None = None) -> None:
        """Start a new episode; the same seed gives the same episode."""
        from fleetmind.sim.maps import start_cells

        n = self.config.n_robots
        self.seed = seed
        place_ss, order_ss, task_ss = np.random.SeedSequence(seed).spawn(3)
        place_rng = np.random.default_rng(place_ss)
        self.pos: NDArray[np.int32] = (
            self._start.copy()
            if self._start is not None
            else start_cells(self.grid, n, rng=place_rng)
        )
        if self.pos.shape != (n, 2):
            raise ConfigError(f"start: expected shape ({n}, 2), got {self.pos.shape}")
        self.goal = self.pos.copy()  # (N, 2) current target cell
        self.has_task = np.zeros(n, dtype=bool)
        self.carrying = np.zeros(n, dtype=bool)
        self.order_of = np.full(n, -1, dtype=np.int64)  # index into self.records
        self.broken_until = np.full(n, -1, dtype=np.int64)
        # Robots on a service errand (going to or charging at a charger): a task without an order.
        self.errand = np.zeros(n, dtype=bool)
        self.battery = np.full(
            n, self.config.battery.capacity if self.config.battery else np.inf, dtype=np.float64
        )
        self.tick = 0
        self.records: list[OrderRecord] = []
        self.index: dict[str, int] = {}
        self.open: list[int] = []  # record indices of unassigned orders, arrival order
        self.delivered_by = np.zeros(n, dtype=np.int64)
        self.reward_sum = np.zeros(n, dtype=np.float64)
        self.collision_attempts = 0
        self.wall_bumps = 0
        self.orders_dropped = 0
        # Load gates: record index -> (until tick or None for "until lifted", reason). A robot at
        # a gated order's pickup waits instead of loading (a note not read yet, a hold).
        self.gates: dict[int, tuple[int | None, str]] = {}
        self.gates_expired: dict[str, int] = {}
        # Parked orders: record index -> tick they come back to the open list (a hold that
        # takes the order away from planners, e.g. while its pickup is in a closed zone); the
        # tick each was parked; the ticks each order spent parked, once it is back.
        self.parked: dict[int, int] = {}
        self.parked_at: dict[int, int] = {}
        self.held_ticks: dict[int, int] = {}
        self.stream = OrderStream(
            self.grid,
            self.robot_ids,
            self.capabilities,
            self.config.orders,
            np.random.default_rng(order_ss),
        )
        self._task_rng = np.random.default_rng(task_ss)
        self._pending = list(self._fixed_orders) if self._fixed_orders is not None else None
        self._arrive(0)
        self._refill()

    # ------------------------------------------------------------------ orders and tasks
    def _add_order(self, order: Order) -> int:
        idx = len(self.records)
        self.records.append(OrderRecord(order))
        self.index[order.id] = idx
        return idx

    def _arrive(self, tick: int) -> list[str]:
        """Admit the orders arriving at ``tick``."""
        if self._pending is not None:
            new = []
            while self._pending and self._pending[0].tick <= tick:
                new.append(self._pending.pop(0))
        else:
            new = self.stream.arrivals(tick)
        ids = []
        for order in new:
            if len(self.open) >= self.config.orders.max_open:
                self.orders_dropped += 1
                continue
            self.open.append(self._add_order(order))
            ids.append(order.id)
        return ids

    def inject(self, orders: Sequence[Order]) -> list[str]:
        """Admit extra orders now (fault injection: a surge); returns the admitted ids.

        Orders get fresh ids in this world's sequence, whatever ids they carried.
        """
        ids = []
        for order in orders:
            if len(self.open) >= self.config.orders.max_open:
                self.orders_dropped += 1
                continue
            fresh = replace(order, id=f"o{len(self.records)}x", tick=self.tick)
            self.open.append(self._add_order(fresh))
            ids.append(fresh.id)
        return ids

    def _refill(self) -> None:
        """Give idle robots work: fresh random tasks (rate None) or FIFO auto-assignment."""
        idle = np.flatnonzero(~self.has_task & (self.broken_until < self.tick))
        if len(idle) == 0:
            return
        if self.config.orders.rate is None and self._pending is None:
            for i in idle:
                order = self.stream.make(self.tick)
                self._add_order(order)
                self._give(int(i), len(self.records) - 1)
            return
        if not self.config.auto_assign:
            return
        free = {int(i) for i in idle}
        for rec_idx in list(self.open):
            if not free:
                break
            order = self.records[rec_idx].order
            able = [
                i
                for i in free
                if order.capability is None or order.capability in self.capabilities[i]
            ]
            if not able:
                continue
            pr, pc = order.pickup
            best = min(
                able,
                key=lambda i: (abs(int(self.pos[i, 0]) - pr) + abs(int(self.pos[i, 1]) - pc), i),
            )
            self._give(best, rec_idx)
            free.discard(best)

    def _give(self, robot: int, rec_idx: int) -> None:
        rec = self.records[rec_idx]
        rec.robot = robot
        rec.assigned_tick = self.tick
        rec.assigned_cell = self.cell_of(robot)
        if rec_idx in self.open:
            self.open.remove(rec_idx)
        self.order_of[robot] = rec_idx
        self.has_task[robot] = True
        self.carrying[robot] = False
        self.goal[robot] = rec.order.pickup

    def _take_back(self, robot: int) -> OrderRecord:
        """Undo :meth:`_give`: the robot's order back on the open list, the robot idle and empty."""
        rec_idx = int(self.order_of[robot])
        rec = self.records[rec_idx]
        rec.robot = -1
        rec.assigned_tick = -1
        self.open.append(rec_idx)
        self.open.sort()
        self.order_of[robot] = -1
        self.has_task[robot] = False
        self.carrying[robot] = False
        self.goal[robot] = self.pos[robot]
        return rec

    def assign(self, robot: int | str, order_id: str) -> None:
        """Give an open order to an idle robot (the planner's decision).

        Raises:
            ConfigError: unknown robot or order, robot busy or broken, order not open.
        """
        r = self.robot_index(robot)
        if order_id not in self.index:
            raise ConfigError(f"assign: unknown order {order_id!r}")
        rec_idx = self.index[order_id]
        if rec_idx not in self.open:
            raise ConfigError(f"assign: order {order_id!r} is not open")
        if self.has_task[r]:
            raise ConfigError(f"assign: {self.robot_ids[r]} is busy")
        if self.broken_until[r] >= self.tick:
            raise ConfigError(f"assign: {self.robot_ids[r]} is broken")
        self._give(r, rec_idx)

    def unassign(self, robot: int | str) -> str | None:
        """Take back a robot's order if it is not loaded yet; returns the order id."""
        r = self.robot_index(robot)
        if not self.has_task[r] or self.carrying[r] or self.errand[r]:
            return None
        return self._take_back(r).order.id

    def gate(self, order_id: str, until: int | None, reason: str) -> None:
        """Let no robot load ``order_id`` before tick ``until`` (None: until :meth:`ungate`).

        A gate that runs out is counted per reason in ``gates_expired`` when the order is
        loaded under it (e.g. a note the planner never got read in time).
        """
        if order_id not in self.index:
            raise ConfigError(f"gate: unknown order {order_id!r}")
        rec_idx = self.index[order_id]
        if self.records[rec_idx].picked_tick < 0:
            self.gates[rec_idx] = (until, reason)

    def park(self, order_id: str, until: int) -> None:
        """Take an unloaded order off the open list until tick ``until`` (no planner sees it).

        An order a robot was sent for goes back from that robot first.

        Raises:
            ConfigError: unknown order, or one already loaded or delivered.
        """
        if order_id not in self.index:
            raise ConfigError(f"park: unknown order {order_id!r}")
        rec_idx = self.index[order_id]
        rec = self.records[rec_idx]
        if rec.picked_tick >= 0 or rec.delivered_tick >= 0:
            raise ConfigError(f"park: order {order_id!r} is already loaded")
        if rec.robot >= 0:
            self.unassign(rec.robot)
        if rec_idx in self.open:
            self.open.remove(rec_idx)
        self.parked[rec_idx] = int(until)
        self.parked_at.setdefault(rec_idx, self.tick)

    def unpark(self, order_id: str) -> bool:
        """Put a parked order back on the open list now; False if it was not parked."""
        rec_idx = self.index.get(order_id)
        if rec_idx is None or rec_idx not in self.parked:
            return False
        del self.parked[rec_idx]
        # The planner weighs the ticks an order was kept out of its sight (see planners).
        since = self.parked_at.pop(rec_idx, self.tick)
        self.held_ticks[rec_idx] = self.held_ticks.get(rec_idx, 0) + self.tick - since
        self.open.append(rec_idx)
        self.open.sort()
        return True

    def ungate(self, order_id: str) -> None:
        """Lift the load gate of an order (no-op when it has none)."""
        if order_id in self.index:
            self.gates.pop(self.index[order_id], None)

    def gated(self) -> NDArray[np.bool_]:
        """``(N,)`` robots whose order may not be loaded this tick."""
        out = np.zeros(len(self.robot_ids), dtype=bool)
        for r in np.flatnonzero(self.has_task & ~self.carrying):
            gate = self.gates.get(int(self.order_of[r]))
            if gate is not None and (gate[0] is None or self.tick < gate[0]):
                out[r] = True
        return out

    def robot_index(self, robot: int | str) -> int:
        """Index of a robot given its index or id."""
        if isinstance(robot, str):
            try:
                return self.robot_ids.index(robot)
            except ValueError:
                raise ConfigError(f"unknown robot {robot!r}") from None
        if not 0 <= robot < len(self.robot_ids):
            raise ConfigError(f"unknown robot index {robot}")
        return int(robot)

    def break_robot(self, robot: int | str, ticks: int) -> None:
        """Fault injection: the robot stops for ``ticks`` ticks; an unloaded order goes back."""
        r = self.robot_index(robot)
        self.broken_until[r] = self.tick + ticks - 1
        self.unassign(r)

    @property
    def broken(self) -> NDArray[np.bool_]:
        """``(N,)`` robots currently out of order."""
        return self.broken_until >= self.tick

    @property
    def frozen(self) -> NDArray[np.bool_]:
        """``(N,)`` robots that cannot move this tick: broken, or out of battery."""
        return self.broken | (self.battery <= 0)

    def set_battery(self, robot: int | str, level: float) -> None:
        """Fault injection: set a robot's charge (it drains by the battery model from now)."""
        r = self.robot_index(robot)
        self.battery[r] = max(0.0, float(level))

    def drop_load(self, robot: int | str) -> Cell:
        """Set a loaded robot's load down on a free neighbouring cell, for another to collect.

        The order goes back to the open list with that cell as its pickup (a robot that broke
        down or runs out of charge carrying a load hands it over this way).

        Returns:
            The cell the load now waits on.

        Raises:
            ConfigError: the robot carries nothing, or no free neighbouring cell exists.
        """
        r = self.robot_index(robot)
        if not self.carrying[r]:
            raise ConfigError(f"drop_load: {self.robot_ids[r]} carries nothing")
        here = self.cell_of(r)
        taken = {self.cell_of(i) for i in range(len(self.robot_ids)) if i != r}
        free = self.grid.free_beside(here, taken)
        if not free:
            raise ConfigError(f"drop_load: no free cell beside {self.robot_ids[r]} at {here}")
        cell = free[0]
        rec = self._take_back(r)
        rec.order = replace(rec.order, pickup=cell)
        rec.picked_tick = -1
        return cell

    def send_to(self, robot: int | str, cell: Cell) -> str | None:
        """Send a robot without a load on a service errand to ``cell`` (e.g. a charger).

        Its unloaded order, if any, goes back to the open list (returned). On a charger the
        robot stays until its battery is full, then becomes idle.

        Raises:
            ConfigError: the robot is loaded, or the cell is blocked or off the grid.
        """
        r = self.robot_index(robot)
        if self.carrying[r]:
            raise ConfigError(f"send_to: {self.robot_ids[r]} is carrying a load")
        h, w = self.grid.shape
        if not (0 <= cell[0] < h and 0 <= cell[1] < w) or self.grid.blocked[cell]:
            raise ConfigError(f"send_to: cell {cell} is not a free cell")
        back = None if self.errand[r] else self.unassign(r)
        self.has_task[r] = True
        self.errand[r] = True
        self.goal[r] = cell
        return back

    def open_orders(self) -> list[Order]:
        """Unassigned orders, oldest first."""
        return [self.records[i].order for i in self.open]

    def order(self, order_id: str) -> OrderRecord:
        """The record of an order by id."""
        return self.records[self.index[order_id]]

    def task_of(self, robot: int) -> Order | None:
        """The order a robot is serving, if any."""
        idx = int(self.order_of[robot])
        return None if idx < 0 else self.records[idx].order

    # ------------------------------------------------------------------ stepping
    def _transition(
        self, actions: NDArray[np.integer], *, variants: NDArray[np.integer] | None = None
    ) -> tuple[Any, NDArray[np.bool_], NDArray[np.bool_]]:
        """Pure part of a tick over ``B`` action variants: moves, pickups and deliveries."""
        acts = np.asarray(actions).reshape(1, -1) if variants is None else variants
        n_var = acts.shape[0]
        frozen = self.frozen
        pos = np.broadcast_to(self.pos, (n_var, *self.pos.shape))
        res = resolve_moves(
            pos, acts, self.grid.blocked, tick=self.tick, frozen=np.broadcast_to(frozen, acts.shape)
        )
        at_goal = (res.pos == self.goal).all(axis=-1) & self.has_task & ~self.errand
        picked = at_goal & ~self.carrying
        if self.gates:
            picked &= ~self.gated()
        delivered = at_goal & self.carrying
        return res, picked, delivered

    def counterfactual_team_rewards(self, actions: NDArray[np.integer]) -> NDArray[np.float32]:
        """``(N,)`` team reward of this tick had robot ``i`` waited instead (state unchanged)."""
        n = len(self.robot_ids)
        variants = np.broadcast_to(np.asarray(actions), (n, n)).copy()
        variants[np.arange(n), np.arange(n)] = WAIT
        res, picked, delivered = self._transition(actions, variants=variants)
        ind = rw.individual(
            self.config.reward, delivered=delivered, picked=picked, conflict=res.conflict
        )
        team: NDArray[np.float32] = ind.sum(axis=-1, dtype=np.float32)
        return team

    def step(self, actions: NDArray[np.integer] | Sequence[int]) -> StepResult:
        """Advance one tick with one action per robot (ids 0..4)."""
        t = self.advance(actions)
        moved, wall_bump, conflict, _, _ = t.flags
        return StepResult(
            rewards=t.rewards,
            individual=t.individual,
            moved=moved,
            conflict=conflict,
            wall_bump=wall_bump,
            picked=t.picked,
            delivered=t.delivered,
            arrived=t.arrived,
            idle=t.idle,
            truncated=t.truncated,
            released=t.released,
        )

    def advance(
        self,
        actions: NDArray[np.integer] | Sequence[int],
        *,
        observer: LocalObserver | None = None,
        out: NDArray[np.float32] | None = None,
    ) -> Tick:
        """:meth:`step` without its :class:`StepResult`, optionally observing in the same call.

        The tick is the same; this is the form for hot loops (the env's step), which reads
        arrays and skips building the result's tuples.

        Args:
            actions: one action id (0..4) per robot.
            observer: with ``out``, the observer whose local observations after the tick
                the tick's compiled call writes into ``out`` when it can (``Tick.observed``);
                when it cannot (a pickup, a delivery, an errand, an idle robot, a target
                outside the observer's table), ``out`` holds no observations and the caller
                observes the world after the tick itself.
            out: ``(N, observer.size)`` float32 for the observations.

        Raises:
            ConfigError: the wrong number of actions, an action id outside 0..4, a robot
                outside the grid.
        """
        plan = self._plan
        if plan.config is not self.config:
            plan = self._plan = TickPlan.of(self.config, len(self.robot_ids), self._fixed_orders)
        acts = np.asarray(actions, dtype=_INT64)
        if acts.shape != plan.actions_shape:
            raise ConfigError(f"step: expected {plan.n} actions, got shape {acts.shape}")
        team_without = None if plan.mode != "difference" else self._team_without(acts)
        inputs = None if observer is None or out is None else observer.kernel_inputs
        # The pure part of the tick in one compiled call (the numpy reference: _transition and
        # rewards.individual); Python below runs only per event.
        pos = self.pos
        new_pos = np.empty(plan.pos_shape, _INT32)
        flags = np.empty(plan.flags_shape, _BOOL)  # moved, wall bump, conflict, picked, delivered
        ind = np.empty(plan.n, _FLOAT32)
        robots = (
            self.goal,
            self.has_task,
            self.errand,
            self.carrying,
            self.gated() if self.gates else _NO_GATES,
            self.broken_until,
            self.battery,
        )
        # The rewards are the individual ones: the kernel adds them up (as numpy would).
        reward_sum = self.reward_sum if plan.individual else _NO_SUM
        obs_in, obs = (_NO_OBSERVER, _NO_OBS) if inputs is None or out is None else (inputs, out)
        # The kernel's own machine code, without numba's type dispatch, when every argument is
        # one whose type was checked: the arrays of _checked by identity, pos the one the last
        # tick made (of new_pos's type), the actions and the observation buffer, new each tick,
        # behaved C arrays (asarray made acts int64, and from a list a fresh array; the shape
        # check made it 1-D).
        checked = self._checked
        entry = self._entry
        typed = (
            (type(actions) is list or acts.flags.carray)
            and (obs is _NO_OBS or (obs.dtype is _FLOAT32 and obs.ndim == 2 and obs.flags.carray))
            and robots[4] is _NO_GATES  # gated() is new each tick
        )
        if not (
            typed
            and entry is not None
            and pos is self._made_pos
            and self.grid.blocked is checked[0]
            and robots[0] is checked[1]
            and robots[1] is checked[2]
            and robots[2] is checked[3]
            and robots[3] is checked[4]
            and robots[5] is checked[5]
            and robots[6] is checked[6]
            and reward_sum is checked[7]
            and obs_in is checked[8]
        ):
            entry = kernels.warehouse_tick  # numba's dispatch: any types, checked
        args = (
            pos,
            acts,
            self.grid.blocked,
            self.tick,
            robots,
            plan.reward_terms,
            new_pos,
            flags,
            ind,
            reward_sum,
            obs_in,
            obs,
        )
        events, n_conflict, n_bump = entry(*args)
        if entry is kernels.warehouse_tick and typed:
            self._check(args)
        if events & _REFUSED:
            self._refuse(events, acts, out)
        self.pos = self._made_pos = new_pos
        if events & _AFTER_TICK or plan.eventful or self.parked:
            return self._after_tick(events, flags, ind, team_without, n_conflict, n_bump)
        # A quiet tick: nothing for Python but the counts (the rest of _after_tick does nothing).
        rewards = ind if plan.individual else self._combine(ind, team_without)
        self.collision_attempts += n_conflict
        self.wall_bumps += n_bump
        self.tick = tick = self.tick + 1
        # tuple.__new__: Tick's own __new__ is a Python function, a third of a microsecond.
        return _new_tick(
            Tick,
            (
                rewards,
                ind,
                flags,
                (),
                (),
                (),
                (),
                (),
                tick >= plan.max_steps,
                events & _OBSERVED != 0,
            ),
        )

    def _check(self, args: tuple[Any, ...]) -> None:
        """Pick warehouse_tick's machine code for the types of ``args`` (see :meth:`advance`).

        The position is typed as ``new_pos`` (``args[6]``): the next tick's ``pos``.
        """
        self._entry = kernels.compiled_entry(kernels.warehouse_tick, (args[6], *args[1:]))
        robots = args[4]
        self._checked = (args[2], *robots[:4], *robots[5:], args[9], args[10])

    def _after_tick(
        self,
        events: int,
        flags: NDArray[np.bool_],
        ind: NDArray[np.float32],
        team_without: NDArray[np.float32] | None,
        n_conflict: int,
        n_bump: int,
    ) -> Tick:
        """The rest of :meth:`advance` after the kernel: events, rewards, counts, orders."""
        plan = self._plan
        picked: tuple[str, ...] = ()
        delivered: tuple[str, ...] = ()
        idle: tuple[int, ...] = ()
        if events & _PYTHON_EVENTS or plan.battery is not None:
            picked, delivered, idle = self._events(events, flags)
        rewards = ind if plan.individual else self._combine(ind, team_without)
        self.collision_attempts += n_conflict
        self.wall_bumps += n_bump
        self.tick = tick = self.tick + 1
        released = self._release(tick) if self.parked else ()
        # A stream without a rate and no task file admits nothing (and draws nothing).
        arrived = () if plan.lifelong else tuple(self._arrive(tick))
        if idle or events & 16:  # else no robot is idle and free: _refill would do nothing
            self._refill()
        return _new_tick(
            Tick,
            (
                rewards,
                ind,
                flags,
                picked,
                delivered,
                arrived,
                idle,
                released,
                tick >= plan.max_steps,
                events & _OBSERVED != 0,
            ),
        )

    def _team_without(self, acts: NDArray[np.int64]) -> NDArray[np.float32]:
        """``difference`` rewards' counterfactual team rewards, after checking the actions."""
        if ((acts < 0) | (acts > 4)).any():
            raise action_error(acts, "step")
        return self.counterfactual_team_rewards(acts)

    def _combine(
        self, ind: NDArray[np.float32], team_without: NDArray[np.float32] | None
    ) -> NDArray[np.float32]:
        """The rewards of a mode other than ``individual``, added to the reward sums."""
        rewards = rw.combine(
            self.config.reward,
            ind,
            team_without=None if team_without is None else team_without.astype(np.float32),
        )
        self.reward_sum += rewards
        return rewards

    def _release(self, tick: int) -> tuple[str, ...]:
        """Put the parked orders due back by ``tick`` on the open list; their ids."""
        released = tuple(
            self.records[i].order.id for i, until in self.parked.items() if until <= tick
        )
        for oid in released:
            self.unpark(oid)
        return released

    def _refuse(
        self, events: int, acts: NDArray[np.int64], out: NDArray[np.float32] | None
    ) -> None:
        """Raise the ConfigError of a tick the kernel refused (events bits 32, 64, 256)."""
        if events & kernels.BAD_BUFFER:
            assert out is not None
            raise ConfigError(f"advance: out has the wrong shape for the observer: {out.shape}")
        if events & 32:
            raise action_error(acts, "step")
        raise ConfigError(f"step: a robot stands outside the grid: {self.pos.tolist()}")

    def _events(
        self, events: int, flags: NDArray[np.bool_]
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
        """The per-event part of a tick after the kernel: batteries, pickups, errands, deliveries.

        Returns:
            The ids of the orders picked and delivered, the robots that became idle.
        """
        picked: list[str] = []
        delivered: list[str] = []
        idle: list[int] = []
        # The battery model in force: the config's, or the default once some battery is finite
        # (a fault set one robot's charge; the kernel's bit 8).
        b = self.config.battery
        if b is None and events & 8:
            b = BatteryConfig()
        if b is not None:
            # Only finite batteries take part (inf stays inf without a battery model).
            finite = np.isfinite(self.battery)
            self.battery -= b.drain_per_move * flags[0]
            on_charger = self.grid.chargers[self.pos[:, 0], self.pos[:, 1]] & finite
            charged = np.minimum(self.battery + b.recharge_per_tick * on_charger, b.capacity)
            # In place: the array stays the one advance checked the type of.
            np.copyto(self.battery, np.maximum(charged, 0.0), where=finite)
        for r in np.flatnonzero(flags[3]) if events & 1 else ():
            rec_idx = int(self.order_of[r])
            rec = self.records[rec_idx]
            rec.picked_tick = self.tick + 1
            gate = self.gates.pop(rec_idx, None)
            if gate is not None:
                self.gates_expired[gate[1]] = self.gates_expired.get(gate[1], 0) + 1
            self.carrying[r] = True
            self.goal[r] = rec.order.station
            picked.append(rec.order.id)
        if events & 4:  # some robot on an errand
            full = b.capacity if b is not None else np.inf
            for r in np.flatnonzero(self.errand):
                arrived_at = bool((self.pos[r] == self.goal[r]).all())
                charging = bool(self.grid.chargers[self.pos[r, 0], self.pos[r, 1]])
                if arrived_at and (not charging or self.battery[r] >= full):
                    self.errand[r] = False
                    self.has_task[r] = False
                    idle.append(int(r))
        for r in np.flatnonzero(flags[4]) if events & 2 else ():
            rec = self.records[int(self.order_of[r])]
            rec.delivered_tick = self.tick + 1
            self.carrying[r] = False
            self.has_task[r] = False
            self.order_of[r] = -1
            self.goal[r] = self.pos[r]
            self.delivered_by[r] += 1
            delivered.append(rec.order.id)
            idle.append(int(r))
        return tuple(picked), tuple(delivered), tuple(idle)

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the mutable state; :meth:`restore` brings the world back to it."""
        keep = ("grid", "config", "robot_ids", "capabilities", "_fixed_orders", "_start")
        return copy.deepcopy({k: v for k, v in self.__dict__.items() if k not in keep})

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Return to a state taken by :meth:`snapshot` (the snapshot stays reusable)."""
        self.__dict__.update(copy.deepcopy(snapshot))

    # ------------------------------------------------------------------ scores
    def violations(self) -> dict[str, int]:
        """Constraint violations over all orders, delivered or not (:func:`.scores.violations`)."""
        return scores.violations(self)

    def metrics(self) -> dict[str, Any]:
        """Scores of the episode so far (:func:`.scores.metrics`: the DESIGN.md contract)."""
        return scores.metrics(self)

    def cell_of(self, robot: int) -> Cell:
        """Current cell of a robot."""
        return (int(self.pos[robot, 0]), int(self.pos[robot, 1]))
