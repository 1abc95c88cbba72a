"""The LoRR 2026 loop (start kit v3.x) in sim time: planner, executor, action model, delays.

One run of :func:`simulate2026`, tick by tick, as the start kit's ``BaseSystem::simulate``:

- Every ``comm_ticks`` ticks (the kit's ``planCommTimeLimit / actionMoveTimeLimit``, 10 by
  default) the planner's last answer is applied: its schedule goes to the task manager (checked
  robot by robot and corrected, as v3.x does), its multi-step plan to the executor, which
  returns the staged actions (checked: they must be a prefix of the old staged actions followed
  by the plan, waits left out) and the states robots will reach when their staged actions are
  done; the planner is then asked again from those predicted states, and its answer waits for
  the next communication (a late plan leaves the staged actions running). Planner time is
  measured but never costs ticks: runs repeat exactly.
- Every tick: new delays are drawn (seeded numpy, ``delayConfig``); the executor says GO or
  STOP for each robot; a GO robot requests the front of its staged actions, a STOP, idle or
  delayed one a wait; the action model turns every request that would leave the map, enter a
  wall or overlap another robot's swept square (side ``agentSize``) into a wait, lowest robot id
  first; actions run with the counter rules (an action takes ``agentCounter`` ticks and takes
  effect when its counter reaches it; a wait pauses a started action); a staged action is
  dropped when it completes; then errands are checked and the pool refilled.

Output (:func:`output2026`): the start kit's 2026 layout, which ``fleetmind lorr validate``
replays with code of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim.lorr.instance import Instance
from fleetmind.sim.lorr.rules import CCR, CR, FW, HEADING, WAIT
from fleetmind.sim.lorr.world import View

NONE = -1
"""No action in progress."""
_EPS = 1e-6
SEGMENT = 100
"""Ticks per path segment in the output (the kit's ``outputSegmentSize``)."""


@dataclass(frozen=True)
class Plan2026:
    """A planner's answer: a multi-step plan and a schedule.

    Attributes:
        actions: ``(n, L)`` actions per robot (FW, CR, CCR, WAIT); waits are dropped on staging.
        schedule: ``(n,)`` proposed task id per robot, ``-1`` none.
    """

    actions: NDArray[np.int64]
    schedule: NDArray[np.int64]


class Planner2026(Protocol):
    """The planner and scheduler tier, called every ``comm_ticks`` ticks."""

    def initialize(self, instance: Instance) -> None:
        """Preprocess the map (no task is known yet)."""

    def plan(self, view: View) -> Plan2026:
        """A plan from the predicted states in ``view`` (``loc``, ``ori``)."""


class Executor2026(Protocol):
    """The executor tier: stages plans and says GO or STOP every tick."""

    def initialize(self, instance: Instance) -> None:
        """Set up for the instance."""

    def process_new_plan(
        self, actions: NDArray[np.int64], staged: list[list[int]], state: State
    ) -> tuple[list[list[int]], NDArray[np.int64], NDArray[np.int64]]:
        """New staged actions and the ``(loc, ori)`` robots will have when they are done."""

    def next_command(self, staged: list[list[int]], state: State) -> NDArray[np.bool_]:
        """``(n,)`` True = GO."""


@dataclass
class State:
    """Robot states: ``(n,)`` location, orientation, action in progress, counter, delayed."""

    loc: NDArray[np.int64]
    ori: NDArray[np.int64]
    cur: NDArray[np.int64]
    count: NDArray[np.int64]
    delayed: NDArray[np.bool_]


@dataclass
class Run2026:
    """What a 2026 run keeps for its output file and metrics."""

    instance: Instance
    ticks: int
    comm_ticks: int
    actual: NDArray[np.int8]  # (ticks, n)
    planned: NDArray[np.int8]  # (ticks, n)
    delay_intervals: list[list[list[int]]]
    events: list[list[int]] = field(default_factory=list)
    tasks: list[list[Any]] = field(default_factory=list)
    planner_schedule: list[list[tuple[int, int]]] = field(default_factory=list)
    actual_schedule: list[list[tuple[int, int]]] = field(default_factory=list)
    schedule_errors: list[list[Any]] = field(default_factory=list)
    refused: list[list[Any]] = field(default_factory=list)
    finished: int = 0
    planner_times: list[float] = field(default_factory=list)
    executor_times: list[float] = field(default_factory=list)


class Delays:
    """Random stoppages from ``delayConfig``, seeded (numpy, not the kit's C++ draws).

    Args:
        instance: a 2026 problem.
        seed: overrides ``delayConfig.seed`` when given.
        enabled: ``False`` draws nothing.
    """

    def __init__(self, instance: Instance, *, seed: int | None, enabled: bool) -> None:
        cfg = instance.delay
        self.cfg = cfg
        self.enabled = enabled and cfg is not None and cfg.p_delay > 0
        base = cfg.seed if cfg is not None else 0
        self.rng = np.random.default_rng(base if seed is None else seed)
        self.n = instance.team_size
        self.left = np.zeros(self.n, dtype=np.int64)
        self.intervals: list[list[list[int]]] = [[] for _ in range(self.n)]

    def _durations(self, k: int) -> NDArray[np.int64]:
        cfg = self.cfg
        assert cfg is not None
        lo, hi = cfg.min_delay, cfg.max_delay
        if cfg.duration_model == "uniform":
            return self.rng.integers(lo, hi + 1, size=k)
        span = hi - lo
        d = self.rng.normal(lo + cfg.gauss_mean_ratio * span, cfg.gauss_std_ratio * span, size=k)
        return np.clip(np.rint(d), lo, hi).astype(np.int64)

    def tick(self, t: int) -> NDArray[np.bool_]:
        """``(n,)`` robots stopped at tick ``t`` (new stoppages start now)."""
        self.left = np.maximum(self.left - 1, 0)
        if self.enabled:
            cfg = self.cfg
            assert cfg is not None
            free = np.flatnonzero(self.left == 0)
            if cfg.event_model == "bernoulli":
                hit = free[self.rng.random(len(free)) < cfg.p_delay]
            else:
                k = min(int(self.rng.poisson(self.n * cfg.p_delay)), len(free))
                hit = np.sort(self.rng.choice(free, size=k, replace=False))
            if hit.size:
                d = self._durations(len(hit))
                self.left[hit] = d
                for r, dr in zip(hit.tolist(), d.tolist(), strict=True):
                    self.intervals[r].append([t, t + dr])
        return self.left > 0


class _Tasks:
    """The v3 task manager: pool slots (the planner's view), schedule checks, errands."""

    def __init__(self, instance: Instance) -> None:
        n = instance.team_size
        size = instance.pool_size
        self.lines, self.lens, self.w = instance.tasks, instance.task_len, instance.width
        self.pool_task = np.full(size, -1, dtype=np.int64)
        self.pool_errands = np.full((size, instance.tasks.shape[1]), -1, dtype=np.int64)
        self.pool_len = np.zeros(size, dtype=np.int64)
        self.pool_next = np.zeros(size, dtype=np.int64)
        self.pool_agent = np.full(size, -1, dtype=np.int64)
        self.slot_of: dict[int, int] = {}
        self.current = np.full(n, -1, dtype=np.int64)
        self.proposal = np.full(n, -1, dtype=np.int64)
        self.next_id = 0
        self.done = 0
        self.events: list[list[int]] = []
        self.revealed: list[list[Any]] = []
        self.errors: list[list[Any]] = []
        self.planner_schedule: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.actual_schedule: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.reveal(0)

    def reveal(self, t: int) -> None:
        for s in np.flatnonzero(self.pool_task < 0).tolist():
            line = self.next_id % len(self.lines)
            k = int(self.lens[line])
            self.pool_task[s], self.pool_len[s], self.pool_next[s] = self.next_id, k, 0
            self.pool_errands[s] = self.lines[line]
            self.pool_agent[s] = -1
            self.slot_of[self.next_id] = s
            locs = self.lines[line, :k]
            cells = np.stack([locs // self.w, locs % self.w], axis=1).ravel().tolist()
            self.revealed.append([self.next_id, t, cells])
            self.next_id += 1

    def goal(self) -> NDArray[np.int64]:
        goal = np.full(len(self.current), -1, dtype=np.int64)
        has = np.flatnonzero(self.current >= 0)
        slots = np.array([self.slot_of[int(k)] for k in self.current[has]], dtype=np.int64)
        if slots.size:
            goal[has] = self.pool_errands[slots, self.pool_next[slots]]
        return goal

    def assign(self, schedule: NDArray[np.int64], t: int) -> None:
        """The planner's proposal set at tick ``t`` (before its move), as v3.x checks it."""
        p = self.proposal
        p[:] = schedule
        for i in range(len(p)):
            mine = self.planner_schedule[i]
            if not mine or mine[-1][1] != int(p[i]):
                mine.append((t, int(p[i])))
        seen: set[int] = set()
        for i in range(len(p)):
            task = int(p[i])
            if task != -1 and task not in self.slot_of:
                self.errors.append(["task already finished", task, i, -1, t + 1])
                p[i] = task = -1
            if task != -1 and task in seen:
                self.errors.append(["task is already assigned by the second agent at the same time",
                                    task, i, -1, t + 1])  # fmt: skip
                p[i] = task = -1
            cur = int(self.current[i])
            if cur != -1 and self.pool_next[self.slot_of[cur]] > 0 and task != cur:
                self.errors.append(["schedule agent to another task who is already opened a task",
                                    task, i, -1, t + 1])  # fmt: skip
                p[i] = task = cur
            if task != -1:
                s = self.slot_of[task]
                if self.pool_next[s] > 0 and self.pool_agent[s] != i:
                    self.errors.append(["task is already opened by other agent", task, i,
                                        int(self.pool_agent[s]), t + 1])  # fmt: skip
                    p[i] = task = -1
            if task != -1:
                seen.add(task)
        self.pool_agent[:] = -1
        self.current = p.copy()
        for i in np.flatnonzero(self.current >= 0).tolist():
            self.pool_agent[self.slot_of[int(self.current[i])]] = i
        for i in range(len(p)):
            mine = self.actual_schedule[i]
            if not mine or mine[-1][1] != int(self.current[i]):
                mine.append((t, int(self.current[i])))

    def update(self, t: int, loc: NDArray[np.int64]) -> None:
        goal = self.goal()
        for k in np.flatnonzero((self.current >= 0) & (loc == goal)).tolist():
            task = int(self.current[k])
            s = self.slot_of[task]
            self.pool_next[s] += 1
            if self.pool_next[s] >= self.pool_len[s]:
                self.current[k] = self.proposal[k] = -1
                self.pool_task[s], self.pool_agent[s] = -1, -1
                del self.slot_of[task]
                self.done += 1
            self.events.append([t, k, task, int(self.pool_next[s])])
        self.reveal(t)

    def view(self, tick: int, loc: NDArray[np.int64], ori: NDArray[np.int64]) -> View:
        return View(
            step=tick,
            loc=loc.copy(),
            ori=ori.copy(),
            goal=self.goal(),
            robot_task=self.current.copy(),
            ahead=np.zeros((len(loc), 0), dtype=np.int64),
            pool_task=self.pool_task.copy(),
            pool_errands=self.pool_errands.copy(),
            pool_len=self.pool_len.copy(),
            pool_next=self.pool_next.copy(),
            pool_agent=self.pool_agent.copy(),
        )


def _window(d0: NDArray[np.float64], dv: NDArray[np.float64], size: float) -> tuple[
    NDArray[np.float64], NDArray[np.float64]
]:  # fmt: skip
    still = np.abs(dv) < _EPS
    v = np.where(still, 1.0, dv)
    a, b = (-size - d0) / v, (size - d0) / v
    pad = _EPS / np.abs(v)
    lo = np.maximum(0.0, np.minimum(a, b) + pad)
    hi = np.minimum(1.0, np.maximum(a, b) - pad)
    inside = np.abs(d0) < size - _EPS
    return np.where(still, np.where(inside, 0.0, 2.0), lo), np.where(
        still, np.where(inside, 1.0, -1.0), hi
    )


class ActionModel:
    """The 2026 action model: counters, swept squares, unsafe requests turned into waits."""

    def __init__(self, instance: Instance) -> None:
        self.h, self.w = instance.grid.shape
        self.blocked = instance.grid.blocked.ravel()
        self.k = instance.agent_counter
        self.size = float(instance.agent_size)
        self.occ = np.full(self.h * self.w, -1, dtype=np.int64)

    def advance(
        self, s: State, req: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """``(loc, ori, cur, count)`` after one tick of ``req`` (no safety check)."""
        started = s.cur != NONE
        paused = started & (req == WAIT)
        exe = np.where(started, s.cur, req)
        active = (exe != WAIT) & ~paused
        count = np.where(active, s.count + 1, s.count)
        done = active & (count >= self.k)
        count[done] = 0
        fw = done & (exe == FW)
        r, c = np.divmod(s.loc, self.w)
        loc = (r + fw * HEADING[s.ori, 0]) * self.w + c + fw * HEADING[s.ori, 1]
        turn = (done & (exe == CR)).astype(np.int64) - (done & (exe == CCR))
        ori = (s.ori + turn) % 4
        cur = np.where(done, NONE, np.where(active, exe, np.where(count > 0, s.cur, NONE)))
        return loc, ori, cur, count

    def corner(
        self, loc: NDArray[np.int64], ori: NDArray[np.int64], cur: NDArray[np.int64],
        count: NDArray[np.int64],
    ) -> NDArray[np.float64]:  # fmt: skip
        """``(n, 2)`` top-left ``(x, y)`` of each robot's square (offset during a move)."""
        r, c = np.divmod(loc, self.w)
        f = np.where((cur == FW) & (count > 0), count / self.k, 0.0)
        return np.stack([c + f * HEADING[ori, 1], r + f * HEADING[ori, 0]], axis=1)

    def step(self, s: State, req: NDArray[np.int64]) -> tuple[NDArray[np.int64], State]:
        """The executed actions (unsafe requests made waits) and the next state."""
        req = req.copy()
        before = self.corner(s.loc, s.ori, s.cur, s.count)
        while True:
            loc, ori, cur, count = self.advance(s, req)
            after = self.corner(loc, ori, cur, count)
            moving = np.flatnonzero(np.abs(after - before).sum(axis=1) > 0)
            if not moving.size:
                break
            stop = self._unsafe(s, before, after, moving)
            if not stop.size:
                break
            req[stop] = WAIT
        return req, State(loc=loc, ori=ori, cur=cur, count=count, delayed=s.delayed)

    def _unsafe(
        self, s: State, before: NDArray[np.float64], after: NDArray[np.float64],
        moving: NDArray[np.int64],
    ) -> NDArray[np.int64]:  # fmt: skip
        h, w, size = self.h, self.w, self.size
        lo = np.minimum(before[moving], after[moving])
        hi = np.maximum(before[moving], after[moving]) + size
        bad = (lo < -_EPS).any(axis=1) | (hi[:, 0] > w + _EPS) | (hi[:, 1] > h + _EPS)
        base = np.floor(lo).astype(np.int64)
        for dx in range(3):
            for dy in range(3):
                cx, cy = base[:, 0] + dx, base[:, 1] + dy
                ok = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
                hit = np.zeros(len(moving), dtype=bool)
                hit[ok] = self.blocked[cy[ok] * w + cx[ok]]
                hit &= (lo[:, 0] < cx + 1 - _EPS) & (hi[:, 0] > cx + _EPS)
                hit &= (lo[:, 1] < cy + 1 - _EPS) & (hi[:, 1] > cy + _EPS)
                bad |= hit
        if bad.any():
            return moving[bad]
        n = len(s.loc)
        self.occ[s.loc] = np.arange(n)
        r0, c0 = np.divmod(s.loc[moving], w)
        off = np.array([(a, b) for a in range(-2, 3) for b in range(-2, 3) if a or b])
        nr, nc = r0[:, None] + off[None, :, 0], c0[:, None] + off[None, :, 1]
        ok = (nr >= 0) & (nr < h) & (nc >= 0) & (nc < w)
        other = np.full(nr.shape, -1, dtype=np.int64)
        other[ok] = self.occ[nr[ok] * w + nc[ok]]
        self.occ[s.loc] = -1
        ii, jj = np.nonzero(other >= 0)
        a, b = moving[ii], other[ii, jj]
        d0 = before[a] - before[b]
        dv = (after[a] - before[a]) - (after[b] - before[b])
        lx, hx = _window(d0[:, 0], dv[:, 0], size)
        ly, hy = _window(d0[:, 1], dv[:, 1], size)
        clash = (lx <= hx) & (ly <= hy) & (np.maximum(lx, ly) <= np.minimum(hx, hy))
        if not clash.any():
            return np.zeros(0, dtype=np.int64)
        a, b = a[clash], b[clash]
        is_moving = np.zeros(n, dtype=bool)
        is_moving[moving] = True
        # Against a robot that stays, the mover waits; of two movers, the higher id waits.
        stop = np.where(is_moving[b], np.maximum(a, b), a)
        return np.unique(stop)


def _is_prefix(old: list[list[int]], plan: NDArray[np.int64], new: list[list[int]]) -> int:
    """The first robot whose new staged actions are not a prefix of old + plan, or ``-1``."""
    for i, (o, n) in enumerate(zip(old, new, strict=True)):
        expect = o + [int(a) for a in plan[i] if a != WAIT]
        if len(n) > len(expect) or n != expect[: len(n)]:
            return i
    return -1


def simulate2026(
    instance: Instance,
    planner: Planner2026,
    executor: Executor2026,
    *,
    ticks: int,
    comm_ticks: int = 10,
    delays: bool = True,
    delay_seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Run2026:
    """Play a 2026 problem for ``ticks`` ticks (see the module docstring).

    Args:
        instance: a problem read under the 2026 rules.
        planner: the planner and scheduler.
        executor: the executor.
        ticks: ticks to simulate (the kit's ``simulationTime``).
        comm_ticks: ticks between planner communications (``planCommTimeLimit`` over
            ``actionMoveTimeLimit``: 1000 ms / 100 ms by default).
        delays: draw delays from ``delayConfig`` (``False``: none).
        delay_seed: overrides ``delayConfig.seed``.
        progress: called with ``(tick, finished)`` at each communication.

    Raises:
        ConfigError: the problem is not a 2026 one, or the executor broke the prefix rule.
    """
    if instance.edition != "2026":
        raise ConfigError(f"{instance.path}: not a LoRR 2026 problem")
    if comm_ticks < 1:
        raise ConfigError(f"comm_ticks must be at least 1, got {comm_ticks}")
    n = instance.team_size
    state = State(
        loc=instance.starts.copy(),
        ori=np.zeros(n, dtype=np.int64),
        cur=np.full(n, NONE, dtype=np.int64),
        count=np.zeros(n, dtype=np.int64),
        delayed=np.zeros(n, dtype=bool),
    )
    model = ActionModel(instance)
    tasks = _Tasks(instance)
    draw = Delays(instance, seed=delay_seed, enabled=delays)
    run = Run2026(
        instance=instance,
        ticks=ticks,
        comm_ticks=comm_ticks,
        actual=np.full((ticks, n), WAIT, dtype=np.int8),
        planned=np.full((ticks, n), WAIT, dtype=np.int8),
        delay_intervals=draw.intervals,
    )
    planner.initialize(instance)
    executor.initialize(instance)
    staged: list[list[int]] = [[] for _ in range(n)]

    def ask(loc: NDArray[np.int64], ori: NDArray[np.int64], tick: int) -> Plan2026:
        t0 = time.perf_counter()
        answer = planner.plan(tasks.view(tick, loc, ori))
        run.planner_times.append(time.perf_counter() - t0)
        # The kit's proposal vector: the planner writes it when it answers, and a robot that
        # finishes its task before the next communication has its entry reset to -1.
        tasks.proposal[:] = answer.schedule
        return answer

    pending = ask(state.loc, state.ori, 0)
    for t in range(ticks):
        if t % comm_ticks == 0:
            tasks.assign(tasks.proposal.copy(), t)
            old = [list(s) for s in staged]
            staged, p_loc, p_ori = executor.process_new_plan(pending.actions, staged, state)
            bad = _is_prefix(old, pending.actions, staged)
            if bad >= 0:
                raise ConfigError(
                    f"executor: robot {bad}'s staged actions are not a prefix of its old ones "
                    "followed by the new plan"
                )
            pending = ask(p_loc, p_ori, t)
            if progress is not None:
                progress(t, tasks.done)
        state.delayed = draw.tick(t)
        t0 = time.perf_counter()
        go = executor.next_command(staged, state)
        run.executor_times.append(time.perf_counter() - t0)
        front = np.array([s[0] if s else WAIT for s in staged], dtype=np.int64)
        req = np.where(go & ~state.delayed, front, WAIT)
        run.planned[t] = req
        exe, nxt = model.step(state, req)
        run.actual[t] = exe
        for r in np.flatnonzero((exe == WAIT) & (req != WAIT)).tolist():
            run.refused.append([r, -1, t + 1, "Agent waits instead of " + "FRCW"[req[r]]])
        changed = (nxt.loc != state.loc) | (nxt.ori != state.ori)
        for r in np.flatnonzero(changed).tolist():
            staged[r].pop(0)
        state = nxt
        tasks.update(t + 1, state.loc)
    run.events, run.tasks, run.finished = tasks.events, tasks.revealed, tasks.done
    run.planner_schedule, run.actual_schedule = tasks.planner_schedule, tasks.actual_schedule
    run.schedule_errors = tasks.errors
    return run


def _segments(codes: NDArray[np.int8], start: tuple[int, int]) -> str:
    out = []
    for s in range(0, len(codes), SEGMENT):
        chunk = codes[s : s + SEGMENT]
        edges = np.flatnonzero(np.diff(chunk)) + 1
        starts = np.concatenate([[0], edges])
        lengths = np.diff(np.concatenate([starts, [len(chunk)]]))
        body = ",".join(f"{'FRCW'[chunk[a]]} {d}" for a, d in zip(starts, lengths, strict=True))
        out.append(f"[({s},{start[0]},{start[1]},0,0):({body})]")
    return "".join(out)


def output2026(run: Run2026) -> dict[str, Any]:
    """The run as the start kit v3.x writes its output file."""
    inst = run.instance
    n = inst.team_size
    starts = [(int(s) // inst.width, int(s) % inst.width) for s in inst.starts]
    sched = [[f"{t}:{k}" for t, k in e] for e in run.actual_schedule]
    plan = [[f"{t}:{k}" for t, k in e] for e in run.planner_schedule]
    return {
        "actionModel": "MAPF_T",
        "version": "2026 LoRR",
        "teamSize": n,
        "numTaskFinished": run.finished,
        "makespan": run.ticks,
        "numPlannerErrors": len(run.refused),
        "numScheduleErrors": len(run.schedule_errors),
        "numEntryTimeouts": 0,
        "agentMaxCounter": inst.agent_counter,
        "outputSegmentSize": SEGMENT,
        "delayIntervals": run.delay_intervals,
        "start": [[r, c, "E"] for r, c in starts],
        "actualPaths": [_segments(run.actual[:, i], starts[i]) for i in range(n)],
        "events": run.events,
        "tasks": run.tasks,
        "plannerPaths": [_segments(run.planned[:, i], starts[i]) for i in range(n)],
        "plannerTimes": [round(x, 6) for x in run.planner_times],
        "errors": run.refused,
        "actualSchedule": [",".join(e) for e in sched],
        "plannerSchedule": [",".join(e) for e in plan],
        "scheduleErrors": run.schedule_errors,
    }
