"""The LoRR simulator: state, errands and task pool, schedules, the time limit, the run loop."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim.lorr.instance import Instance
from fleetmind.sim.lorr.rules import FW, TIMEOUT, WAIT, conflicts, next_state


@dataclass(frozen=True, eq=False)
class View:
    """What a planner sees at one step (read-only copies).

    Attributes:
        step: the step about to be planned.
        loc: ``(n,)`` int64 robot locations.
        ori: ``(n,)`` int64 robot orientations.
        goal: ``(n,)`` int64 each robot's next errand location, ``-1`` when it has none.
        robot_task: ``(n,)`` int64 each robot's task id (2024; ``-1`` none) or errand id (2023).
        ahead: ``(n, R)`` int64 the errands a robot can see in order (2023; ``R`` =
            ``numTasksReveal``); ``(n, 0)`` in 2024.
        pool_task: ``(P,)`` int64 task id of each pool slot, ``-1`` for an empty slot (2024).
        pool_errands: ``(P, E)`` int64 errand locations (``-1`` pad).
        pool_len: ``(P,)`` int64 errands of each slot's task.
        pool_next: ``(P,)`` int64 index of the next errand (``> 0``: started, locked to its robot).
        pool_agent: ``(P,)`` int64 robot the task is assigned to, ``-1`` none.
    """

    step: int
    loc: NDArray[np.int64]
    ori: NDArray[np.int64]
    goal: NDArray[np.int64]
    robot_task: NDArray[np.int64]
    ahead: NDArray[np.int64]
    pool_task: NDArray[np.int64]
    pool_errands: NDArray[np.int64]
    pool_len: NDArray[np.int64]
    pool_next: NDArray[np.int64]
    pool_agent: NDArray[np.int64]


@dataclass(frozen=True)
class Plan:
    """A planner's answer for one step.

    Attributes:
        actions: ``(n,)`` action of each robot (FW, CR, CCR, WAIT).
        schedule: ``(n,)`` task id per robot, ``-1`` none (2024); ``None`` keeps the current one.
    """

    actions: NDArray[np.int64]
    schedule: NDArray[np.int64] | None = None


def _readonly(a: NDArray[np.int64]) -> NDArray[np.int64]:
    out = a.copy()
    out.flags.writeable = False
    return out


@dataclass
class Record:
    """What a run keeps for its output file (2024 and 2023 alike).

    Attributes:
        actions: executed action per step and robot, ``(steps, n)`` int8 (TIMEOUT on over-run).
        planned: the planner's actions per step and robot, ``(steps, n)`` int8 (TIMEOUT where it
            had not answered).
        planner_times: seconds of each planner call.
        errors: ``[robot_a, robot_b, step, kind]`` refused moves (``robot_b`` -1 for a wall).
        schedule_errors: ``[robot, task, step, reason]`` refused schedules.
        assignments: ``[step, robot, task]`` schedule changes applied before the step's move.
        events: ``[step, robot, task, errand_index]``: the robot stood on that errand after step.
        revealed: ``[task_id, step]`` each task's reveal (2024).
    """

    actions: NDArray[np.int8]
    planned: NDArray[np.int8]
    planner_times: list[float] = field(default_factory=list)
    errors: list[list[Any]] = field(default_factory=list)
    schedule_errors: list[list[Any]] = field(default_factory=list)
    assignments: list[list[int]] = field(default_factory=list)
    events: list[list[int]] = field(default_factory=list)
    revealed: list[list[int]] = field(default_factory=list)


class World:
    """The LoRR simulator for one instance (both editions).

    Args:
        instance: the problem.
        steps: the most steps that will be recorded (sizes the record).
    """

    def __init__(self, instance: Instance, *, steps: int) -> None:
        self.instance = instance
        n = instance.team_size
        h, w = instance.grid.shape
        self.width = w
        self.n_cells = h * w
        self.blocked_flat = instance.grid.blocked.ravel()
        self.loc = instance.starts.copy()
        self.ori = np.zeros(n, dtype=np.int64)
        self.step = 0
        self.finished = 0
        self.record = Record(
            actions=np.full((steps, n), WAIT, dtype=np.int8),
            planned=np.full((steps, n), WAIT, dtype=np.int8),
        )
        m = len(instance.tasks)
        if instance.edition == "2023":
            self.errand = np.arange(n, dtype=np.int64)  # errand id (line before mod M)
            self.pool_task = np.full(0, -1, dtype=np.int64)
            self.pool_errands = np.full((0, 1), -1, dtype=np.int64)
            self.pool_len = np.zeros(0, dtype=np.int64)
            self.pool_next = np.zeros(0, dtype=np.int64)
            self.pool_agent = np.full(0, -1, dtype=np.int64)
            self.robot_slot = np.full(n, -1, dtype=np.int64)
            self._slot_of: dict[int, int] = {}
            self.next_reveal = 0
        else:
            cap = instance.pool_size
            self.errand = np.full(n, -1, dtype=np.int64)
            self.pool_task = np.full(cap, -1, dtype=np.int64)
            self.pool_errands = np.full((cap, instance.tasks.shape[1]), -1, dtype=np.int64)
            self.pool_len = np.zeros(cap, dtype=np.int64)
            self.pool_next = np.zeros(cap, dtype=np.int64)
            self.pool_agent = np.full(cap, -1, dtype=np.int64)
            self.robot_slot = np.full(n, -1, dtype=np.int64)
            self._slot_of = {}
            self.next_reveal = 0
            self._reveal()
        self._m = m

    # ----------------------------------------------------------------- tasks
    def _reveal(self) -> None:
        empty = np.flatnonzero(self.pool_task < 0)
        if not empty.size:
            return
        m = len(self.instance.tasks)
        ids = self.next_reveal + np.arange(empty.size, dtype=np.int64)
        self.next_reveal += int(empty.size)
        lines = ids % m
        self.pool_task[empty] = ids
        self.pool_errands[empty] = self.instance.tasks[lines]
        self.pool_len[empty] = self.instance.task_len[lines]
        self.pool_next[empty] = 0
        self.pool_agent[empty] = -1
        for slot, task in zip(empty.tolist(), ids.tolist(), strict=True):
            self._slot_of[task] = slot
            self.record.revealed.append([task, self.step])

    def goals(self) -> NDArray[np.int64]:
        """``(n,)`` each robot's next errand location, ``-1`` none."""
        if self.instance.edition == "2023":
            line: NDArray[np.int64] = self.instance.tasks[self.errand % self._m, 0]
            return line
        out = np.full(len(self.loc), -1, dtype=np.int64)
        has = self.robot_slot >= 0
        slots = self.robot_slot[has]
        out[has] = self.pool_errands[slots, self.pool_next[slots]]
        return out

    def robot_task(self) -> NDArray[np.int64]:
        """``(n,)`` task id (2024) or errand id (2023) of each robot, ``-1`` none."""
        if self.instance.edition == "2023":
            return self.errand.copy()
        out = np.full(len(self.loc), -1, dtype=np.int64)
        has = self.robot_slot >= 0
        out[has] = self.pool_task[self.robot_slot[has]]
        return out

    def view(self) -> View:
        """A read-only snapshot for the planner."""
        if self.instance.edition == "2023":
            reveal = self.instance.pool_size
            n = len(self.loc)
            ids = self.errand[:, None] + n * np.arange(reveal, dtype=np.int64)[None, :]
            ahead = self.instance.tasks[ids % self._m, 0]
        else:
            ahead = np.zeros((len(self.loc), 0), dtype=np.int64)
        return View(
            step=self.step,
            loc=_readonly(self.loc),
            ori=_readonly(self.ori),
            goal=_readonly(self.goals()),
            robot_task=_readonly(self.robot_task()),
            ahead=_readonly(ahead),
            pool_task=_readonly(self.pool_task),
            pool_errands=_readonly(self.pool_errands),
            pool_len=_readonly(self.pool_len),
            pool_next=_readonly(self.pool_next),
            pool_agent=_readonly(self.pool_agent),
        )

    def _schedule(self, proposed: NDArray[np.int64]) -> None:
        """Apply a 2024 schedule, or refuse it whole (logging why) and keep the current one."""
        n = len(self.loc)
        current = self.robot_task()
        proposed = np.asarray(proposed, dtype=np.int64)
        if proposed.shape != (n,):
            self.record.schedule_errors.append([-1, -1, self.step, "schedule has wrong length"])
            return
        changed = np.flatnonzero(proposed != current)
        if not changed.size:
            return
        for r in changed.tolist():
            slot = int(self.robot_slot[r])
            if slot >= 0 and self.pool_next[slot] > 0:
                self.record.schedule_errors.append(
                    [r, int(proposed[r]), self.step, "robot's task already started"]
                )
                return
            task = int(proposed[r])
            if task >= 0 and task not in self._slot_of:
                self.record.schedule_errors.append([r, task, self.step, "task not in the pool"])
                return
        taken = proposed[proposed >= 0]
        if np.unique(taken).size != taken.size:
            values, counts = np.unique(taken, return_counts=True)
            task = int(values[counts > 1][0])
            self.record.schedule_errors.append([-1, task, self.step, "task given to two robots"])
            return
        for r in changed.tolist():
            slot = int(self.robot_slot[r])
            if slot >= 0 and self.pool_agent[slot] == r:
                self.pool_agent[slot] = -1
            self.robot_slot[r] = -1
        for r in changed.tolist():
            task = int(proposed[r])
            if task >= 0:
                slot = self._slot_of[task]
                self.pool_agent[slot] = r
                self.robot_slot[r] = slot
            self.record.assignments.append([self.step, r, task])

    def _errands(self) -> int:
        """Mark errands reached at the current locations; returns tasks (2024) or errands done."""
        goal = self.goals()
        reached = np.flatnonzero((goal >= 0) & (self.loc == goal))
        if not reached.size:
            return 0
        if self.instance.edition == "2023":
            for r in reached.tolist():
                self.record.events.append([self.step, r, int(self.errand[r]), 0])
            self.errand[reached] += len(self.loc)
            return int(reached.size)
        slots = self.robot_slot[reached]
        for r, s in zip(reached.tolist(), slots.tolist(), strict=True):
            self.record.events.append(
                [self.step, r, int(self.pool_task[s]), int(self.pool_next[s])]
            )
        self.pool_next[slots] += 1
        done = self.pool_next[slots] >= self.pool_len[slots]
        for s in slots[done].tolist():
            del self._slot_of[int(self.pool_task[s])]
        self.pool_task[slots[done]] = -1
        self.pool_agent[slots[done]] = -1
        self.robot_slot[reached[done]] = -1
        return int(done.sum())

    # ----------------------------------------------------------------- moves
    def check(self, actions: NDArray[np.int64]) -> list[list[Any]]:
        """The reasons ``actions`` would be refused (empty when legal)."""
        errors: list[list[Any]] = []
        n = len(self.loc)
        if actions.shape != (n,) or ((actions < FW) | (actions > WAIT)).any():
            return [[-1, -1, self.step, "actions: wrong length or unknown action"]]
        new_loc, _, row, col = next_state(self.loc, self.ori, actions, self.width)
        h = self.n_cells // self.width
        off = (row < 0) | (row >= h) | (col < 0) | (col >= self.width)
        wall = off.copy()
        wall[~off] = self.blocked_flat[new_loc[~off]]
        for r in np.flatnonzero(wall).tolist():
            errors.append([r, -1, self.step, "moves into a wall or off the map"])
        if errors:
            return errors
        vertex, swaps = conflicts(self.loc, new_loc)
        errors += [[a, b, self.step, "vertex conflict"] for a, b in vertex]
        errors += [[a, b, self.step, "swap conflict"] for a, b in swaps]
        return errors

    def advance(
        self,
        actions: NDArray[np.int64] | None,
        schedule: NDArray[np.int64] | None = None,
        *,
        timed_out: bool = False,
    ) -> int:
        """One step: apply the schedule (2024), move (or wait if refused), mark errands.

        Args:
            actions: ``(n,)`` actions; ``None`` with ``timed_out`` for a step the planner ran over.
            schedule: the proposed schedule (2024), ``None`` to keep the current one.
            timed_out: the planner had not answered (every robot waits, recorded as TIMEOUT).

        Returns:
            Tasks (2024) or errands (2023) finished this step.
        """
        t = self.step
        if t >= len(self.record.actions):
            raise ConfigError(f"step {t} is past the {len(self.record.actions)} recorded steps")
        if timed_out or actions is None:
            self.record.actions[t] = TIMEOUT
            self.record.planned[t] = TIMEOUT
        else:
            actions = np.asarray(actions, dtype=np.int64)
            if actions.shape == self.loc.shape:
                self.record.planned[t] = np.clip(actions, 0, TIMEOUT)
            if schedule is not None and self.instance.edition == "2024":
                self._schedule(schedule)
            errors = self.check(actions)
            if errors:
                self.record.errors += errors
                self.record.actions[t] = WAIT
            else:
                self.record.actions[t] = actions
                self.loc, self.ori, _, _ = next_state(self.loc, self.ori, actions, self.width)
        self.step += 1
        done = self._errands()
        self.finished += done
        if self.instance.edition == "2024":
            self._reveal()
        return done


# --------------------------------------------------------------------------- running


class LorrPlanner(Protocol):
    """A LoRR entry: preprocessing once, then one answer per step."""

    def initialize(self, instance: Instance) -> None:
        """Preprocess the map and team (LoRR's preprocessing phase, not timed per step)."""
        ...

    def plan(self, view: View) -> Plan:
        """Actions (and, in 2024, a schedule) for the step of ``view``."""
        ...


@dataclass(frozen=True)
class RunResult:
    """The outcome of :func:`simulate`.

    Attributes:
        instance: the problem.
        steps: steps simulated.
        finished: tasks (2024) or errands (2023) finished.
        timeouts: steps the robots waited because the planner ran over the limit.
        time_limit: the per-step limit in seconds (``None``: unlimited).
        preprocess_s: seconds of :meth:`LorrPlanner.initialize`.
        record: actions, planner times, errors, assignments and events.
        final_loc: ``(n,)`` locations at the end.
        final_ori: ``(n,)`` orientations at the end.
    """

    instance: Instance
    steps: int
    finished: int
    timeouts: int
    time_limit: float | None
    preprocess_s: float
    record: Record
    final_loc: NDArray[np.int64]
    final_ori: NDArray[np.int64]

    @property
    def throughput(self) -> float:
        """Finished tasks (errands in 2023) per step."""
        return self.finished / self.steps if self.steps else 0.0


def simulate(
    instance: Instance,
    planner: LorrPlanner,
    *,
    steps: int,
    time_limit: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Run ``planner`` on ``instance`` for ``steps`` steps under the LoRR rules.

    Args:
        instance: the problem.
        planner: the entry.
        steps: the run's length (LoRR's ``--simulationTime``).
        time_limit: seconds per step (LoRR's ``--planTimeLimit``); ``None``: unlimited and
            deterministic. An answer after ``p > time_limit`` seconds costs ``ceil(p / L) - 1``
            steps of everyone waiting before it is executed.
        clock: seconds, for timing the planner (a fake one in tests).
        progress: called with ``(step, finished)`` after every executed plan.
    """
    if steps < 1:
        raise ConfigError(f"steps must be at least 1, got {steps}")
    if time_limit is not None and time_limit <= 0:
        raise ConfigError(f"time limit must be positive, got {time_limit}")
    world = World(instance, steps=steps)
    t0 = clock()
    planner.initialize(instance)
    preprocess = clock() - t0
    timeouts = 0
    while world.step < steps:
        view = world.view()
        t0 = clock()
        plan = planner.plan(view)
        spent = clock() - t0
        world.record.planner_times.append(spent)
        if time_limit is not None and spent > time_limit:
            for _ in range(min(math.ceil(spent / time_limit) - 1, steps - world.step)):
                world.advance(None, timed_out=True)
                timeouts += 1
        if world.step >= steps:
            break
        world.advance(plan.actions, plan.schedule)
        if progress is not None:
            progress(world.step, world.finished)
    return RunResult(
        instance=instance,
        steps=world.step,
        finished=world.finished,
        timeouts=timeouts,
        time_limit=time_limit,
        preprocess_s=preprocess,
        record=world.record,
        final_loc=world.loc.copy(),
        final_ori=world.ori.copy(),
    )
