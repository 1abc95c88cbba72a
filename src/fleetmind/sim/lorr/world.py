"""The LoRR simulator: state, errands and task pool, schedules, the time limit, the run loop."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import BudgetExceeded, ConfigError, check_range
from fleetmind.sim.lorr.instance import Instance
from fleetmind.sim.lorr.rules import FW, TIMEOUT, WAIT, conflicts, first_fault, next_state


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
    """What a run keeps for its output file, in the start kit's terms.

    Timesteps follow the start kit: the move of step ``t`` (0-based) lands at timestep ``t + 1``,
    and errors, events and schedules carry that timestep.

    Attributes:
        actions: executed action per step and robot, ``(steps, n)`` int8 (TIMEOUT where the
            2024 robots waited for a late planner; WAIT in 2023, as the kit writes it).
        planned: the planner's actions per step and robot, ``(steps, n)`` int8 (TIMEOUT where it
            had not answered).
        planner_times: seconds of each planner call (one per call, waits included).
        call_timeouts: steps the robots waited for each planner call.
        errors: ``[robot_a, robot_b, timestep, text]``: the first reason a joint move was
            refused (the kit stops at the first), ``robot_b`` the earlier robot or ``-1``.
        schedule_errors: ``[task, robot_a, robot_b, timestep, text]`` refused schedules (2024).
        planner_schedule: per robot, ``(timestep, task)`` each time its proposal changed (2024).
        actual_schedule: per robot, ``(timestep, task)`` each time its accepted task changed.
        events: 2024 ``[timestep, robot, task, k]`` (robot reached errand ``k``, 1-based);
            2023 per robot ``[task, timestep, "assigned" | "finished"]`` (kit task ids).
        revealed: 2024 ``[task, timestep]`` each reveal; 2023 ``[kit task id, location]``.
        goal_steps: ``(n,)`` steps each robot had a task when planned (the kit's cost).
        all_valid: no refused move and no missing answer (2023 ``AllValid``).
    """

    actions: NDArray[np.int8]
    planned: NDArray[np.int8]
    planner_times: list[float] = field(default_factory=list)
    call_timeouts: list[int] = field(default_factory=list)
    errors: list[list[Any]] = field(default_factory=list)
    schedule_errors: list[list[Any]] = field(default_factory=list)
    planner_schedule: list[list[tuple[int, int]]] = field(default_factory=list)
    actual_schedule: list[list[tuple[int, int]]] = field(default_factory=list)
    events: list[list[Any]] = field(default_factory=list)
    revealed: list[list[int]] = field(default_factory=list)
    goal_steps: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    all_valid: bool = True


class World:
    """The LoRR simulator for one instance (both editions), step for step as the start kit.

    Args:
        instance: the problem.
        steps: the most steps that will be recorded (sizes the record).
    """

    def __init__(self, instance: Instance, *, steps: int) -> None:
        if instance.edition == "2026":
            raise ConfigError(
                f"{instance.path}: a LoRR 2026 problem (multi-tick actions, delays): this "
                "simulator plays the 2023 and 2024 rules; `fleetmind lorr validate` replays 2026 "
                "output files"
            )
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
            planner_schedule=[[] for _ in range(n)],
            actual_schedule=[[] for _ in range(n)],
            goal_steps=np.zeros(n, dtype=np.int64),
        )
        m = len(instance.tasks)
        self._m = m
        self.robot_slot = np.full(n, -1, dtype=np.int64)
        self._slot_of: dict[int, int] = {}
        self._last_actual = np.full(n, -2, dtype=np.int64)  # -2: nothing logged yet
        self.next_reveal = 0
        if instance.edition == "2023":
            self.errand = np.arange(n, dtype=np.int64)  # errand id (line before mod M)
            self.pool_task = np.full(0, -1, dtype=np.int64)
            self.pool_errands = np.full((0, 1), -1, dtype=np.int64)
            self.pool_len = np.zeros(0, dtype=np.int64)
            self.pool_next = np.zeros(0, dtype=np.int64)
            self.pool_agent = np.full(0, -1, dtype=np.int64)
            # The kit numbers 2023 tasks in the order it hands them out (robots in id order,
            # numTasksReveal each at the start, then one per finished errand).
            reveal = instance.pool_size
            self.kit_ids: list[list[int]] = []
            self.record.events = [[] for _ in range(n)]
            for r in range(n):
                ids = list(range(r * reveal, (r + 1) * reveal))
                self.kit_ids.append(ids)
                for k, kid in enumerate(ids):
                    self.record.events[r].append([kid, 0, "assigned"])
                    line = (r + k * n) % m
                    self.record.revealed.append([kid, int(instance.tasks[line, 0])])
            self.next_kit_id = n * reveal
        else:
            cap = instance.pool_size
            self.errand = np.full(n, -1, dtype=np.int64)
            self.pool_task = np.full(cap, -1, dtype=np.int64)
            self.pool_errands = np.full((cap, instance.tasks.shape[1]), -1, dtype=np.int64)
            self.pool_len = np.zeros(cap, dtype=np.int64)
            self.pool_next = np.zeros(cap, dtype=np.int64)
            self.pool_agent = np.full(cap, -1, dtype=np.int64)
            self._reveal()

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

    def _schedule_error(self, proposed: NDArray[np.int64]) -> list[Any] | None:
        """The kit's first objection to a 2024 schedule (robots in id order), or ``None``."""
        n = len(self.loc)
        t = self.step + 1  # the kit stamps schedule errors one past the move's timestep
        if proposed.shape != (n,):
            return [-1, -1, -1, t, "Invalid schedule size"]
        current = self.robot_task()
        named = proposed >= 0
        pool = self.pool_task[self.pool_task >= 0]
        unknown = named & ~np.isin(proposed, pool)
        taken = proposed[named]
        twice = np.unique(taken).size != taken.size
        cur_slot = self.robot_slot
        started = (cur_slot >= 0) & (proposed != current)
        started[started] = self.pool_next[cur_slot[started]] > 0
        if not (unknown.any() or twice or started.any()):
            return None
        first: dict[int, int] = {}
        for i in range(n):
            task = int(proposed[i])
            if task != -1 and unknown[i]:
                return [task, i, -1, t, "task already finished"]
            if task != -1 and task in first:
                return [
                    task, i, first[task], t,
                    "task is already assigned by the second agent at the same time",
                ]  # fmt: skip
            if started[i]:
                holder = int(self.pool_agent[cur_slot[i]])
                return [task, i, holder, t, "task is already opened by the second agent"]
            if task != -1:
                first[task] = i
        return None

    def _schedule(self, proposed: NDArray[np.int64]) -> None:
        """Apply a 2024 schedule at the current timestep, or refuse it whole and log why."""
        proposed = np.asarray(proposed, dtype=np.int64).ravel()
        t = self.step
        plan_log = self.record.planner_schedule
        for r in range(min(len(proposed), len(self.loc))):
            if not plan_log[r] or plan_log[r][-1][1] != proposed[r]:
                plan_log[r].append((t, int(proposed[r])))
        error = self._schedule_error(proposed)
        if error is not None:
            self.record.schedule_errors.append(error)
            return
        changed = np.flatnonzero(proposed != self.robot_task())
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
        log = self.record.actual_schedule
        current = self.robot_task()
        # The kit compares with the last logged task, not the previous assignment: a robot
        # whose task finished logs -1 when the next schedule leaves it free.
        for r in np.flatnonzero(current != self._last_actual).tolist():
            log[r].append((t, int(current[r])))
        self._last_actual = current

    def _errands(self) -> int:
        """Mark errands reached at the current locations; returns tasks (2024) or errands done."""
        goal = self.goals()
        reached = np.flatnonzero((goal >= 0) & (self.loc == goal))
        if not reached.size:
            return 0
        t = self.step
        if self.instance.edition == "2023":
            n = len(self.loc)
            reveal = self.instance.pool_size
            for r in reached.tolist():
                ids = self.kit_ids[r]
                self.record.events[r].append([ids.pop(0), t, "finished"])
            for r in reached.tolist():  # the kit hands out new ids robot by robot
                kid = self.next_kit_id
                self.next_kit_id += 1
                self.kit_ids[r].append(kid)
                self.record.events[r].append([kid, t, "assigned"])
                line = (int(self.errand[r]) + reveal * n) % self._m
                self.record.revealed.append([kid, int(self.instance.tasks[line, 0])])
            self.errand[reached] += n
            return int(reached.size)
        slots = self.robot_slot[reached]
        self.pool_next[slots] += 1
        for r, s in zip(reached.tolist(), slots.tolist(), strict=True):
            self.record.events.append([t, r, int(self.pool_task[s]), int(self.pool_next[s])])
        done = self.pool_next[slots] >= self.pool_len[slots]
        for s in slots[done].tolist():
            del self._slot_of[int(self.pool_task[s])]
        self.pool_task[slots[done]] = -1
        self.pool_agent[slots[done]] = -1
        self.robot_slot[reached[done]] = -1
        return int(done.sum())

    # ----------------------------------------------------------------- moves
    def check(self, actions: NDArray[np.int64]) -> list[Any] | None:
        """The kit's first reason to refuse ``actions`` (robots in id order), or ``None``.

        Returns:
            ``[robot_a, robot_b, timestep, text]`` with the kit's texts: ``incorrect vector
            size``, ``unallowed move`` (a wall or off the map), ``vertex conflict``, ``edge
            conflict`` (two robots trading cells); ``robot_b`` is the earlier robot, ``-1``
            when one robot is at fault.
        """
        n = len(self.loc)
        t = self.step + 1
        if actions.shape != (n,):
            return [-1, -1, t, "incorrect vector size"]
        new_loc, _, row, col = next_state(self.loc, self.ori, actions, self.width)
        h = self.n_cells // self.width
        off = (row < 0) | (row >= h) | (col < 0) | (col >= self.width)
        wall = off.copy()
        wall[~off] = self.blocked_flat[new_loc[~off]]
        vertex, swaps = conflicts(self.loc, new_loc)
        if not (wall.any() or vertex or swaps):
            return None
        # Replay the kit's scan to name the same robots it names.
        fault = first_fault(self.loc, new_loc, wall, t)
        if fault is None:
            raise AssertionError("conflict found by the vector check but not by the scan")
        return fault

    def advance(
        self,
        actions: NDArray[np.int64] | None,
        schedule: NDArray[np.int64] | None = None,
        *,
        timed_out: bool = False,
    ) -> int:
        """One step as the kit plays it: move (or all wait if refused), then the tasks.

        2024: an executed step then applies the schedule (``None`` keeps the current one),
        marks errands reached and refills the pool, all at the new timestep; a timed-out step
        does none of that (the kit updates tasks only after a plan is executed). 2023: a
        timed-out step is an empty answer (error ``incorrect vector size``, everyone waits), and
        errands are marked after every step.

        Args:
            actions: ``(n,)`` actions; ``None`` with ``timed_out`` for a step the planner ran over.
            schedule: the proposed schedule (2024), ``None`` to keep the current one; on a
                timed-out step only counted for the kit's cost (robots with a task).
            timed_out: the planner had not answered (every robot waits, recorded as TIMEOUT).

        Returns:
            Tasks (2024) or errands (2023) finished this step.
        """
        t = self.step
        if t >= len(self.record.actions):
            raise ConfigError(f"step {t} is past the {len(self.record.actions)} recorded steps")
        edition = self.instance.edition
        proposal = self.robot_task() if schedule is None else np.asarray(schedule, np.int64)
        if edition == "2023":
            self.record.goal_steps += 1  # every 2023 robot always has its errands
        elif proposal.shape == self.loc.shape:
            self.record.goal_steps += proposal >= 0
        if timed_out or actions is None:
            self.record.planned[t] = TIMEOUT
            if edition == "2024":
                self.record.actions[t] = TIMEOUT
                self.step += 1
                return 0
            self.record.errors.append([-1, -1, t + 1, "incorrect vector size"])
            self.record.all_valid = False
            self.record.actions[t] = WAIT
        else:
            actions = np.asarray(actions, dtype=np.int64)
            if actions.size and ((actions < FW) | (actions > WAIT)).any():
                raise ConfigError(f"step {t}: actions must be FW, CR, CCR or WAIT (0-3)")
            flat = actions.ravel()
            k = min(flat.size, len(self.loc))
            self.record.planned[t] = TIMEOUT
            self.record.planned[t, :k] = flat[:k]
            error = self.check(actions)
            if error is not None:
                self.record.errors.append(error)
                self.record.all_valid = False
                self.record.actions[t] = WAIT
            else:
                self.record.actions[t] = actions
                self.loc, self.ori, _, _ = next_state(self.loc, self.ori, actions, self.width)
        self.step += 1
        if edition == "2024":
            self._schedule(proposal)
        done = self._errands()
        self.finished += done
        if edition == "2024":
            self._reveal()
        return done


# --------------------------------------------------------------------------- running


PREPROCESS_LIMIT_S = 1800.0
"""LoRR's preprocessing limit in the 2023 and 2024 competitions (the kit's option default is
30 s; the competitions ran with 30 minutes)."""


class LorrPlanner(Protocol):
    """A LoRR entry: preprocessing once, then one answer per step."""

    def initialize(self, instance: Instance) -> None:
        """Preprocess the map and team (LoRR's preprocessing phase, not timed per step).

        As in the start kit, it runs before any task is revealed: ``instance`` carries the
        map, the team and the rules but no task (``tasks`` is ``(0, E)``).
        """
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
        record: actions, planner times, errors, schedules and events.
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
    preprocess_limit: float | None = PREPROCESS_LIMIT_S,
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
        preprocess_limit: seconds :meth:`LorrPlanner.initialize` may take (LoRR's
            ``--preprocessTimeLimit``: 30 minutes in the competitions); ``None``: no limit.

    Raises:
        BudgetExceeded: preprocessing ran over ``preprocess_limit`` (the kit ends the run).
    """
    check_range("steps", steps, low=1)
    if time_limit is not None:
        check_range("time limit", time_limit, above=0)
    world = World(instance, steps=steps)
    # The kit preprocesses before revealing any task: the planner gets no task line.
    blind = replace(
        instance,
        tasks=instance.tasks[:0].copy(),
        task_len=instance.task_len[:0].copy(),
    )
    t0 = clock()
    planner.initialize(blind)
    preprocess = clock() - t0
    if preprocess_limit is not None and preprocess > preprocess_limit:
        raise BudgetExceeded(
            f"{instance.path}: preprocessing took {preprocess:.1f} s, over the limit of "
            f"{preprocess_limit:g} s (LoRR --preprocessTimeLimit)"
        )
    timeouts = 0
    while world.step < steps:
        view = world.view()
        t0 = clock()
        plan = planner.plan(view)
        spent = clock() - t0
        world.record.planner_times.append(spent)
        waited = 0
        if time_limit is not None and spent > time_limit:
            waited = min(math.ceil(spent / time_limit) - 1, steps - world.step)
            for _ in range(waited):
                world.advance(None, plan.schedule, timed_out=True)
        world.record.call_timeouts.append(waited)
        timeouts += waited
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
