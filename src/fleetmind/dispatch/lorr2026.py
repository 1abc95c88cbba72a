"""The LoRR 2026 tiers: a staged multi-step planner and the plan-following rule executor.

- :class:`StagedPlanner`: the LoRR planner (:class:`~fleetmind.dispatch.lorr.PibtPlanner`:
  greedy assignment, rotation-aware PIBT) run ``steps`` times from the predicted states the
  executor reports, each step advancing the predicted states, into one multi-step plan. The
  first call's schedule is the proposal; later steps keep it. 2026 robots are squares that
  sweep: a robot may not enter a cell whose robot leaves it in another direction at the same
  time, and a cycle of robots moving together collides, so in every step a move into an
  occupied cell is kept only if that cell's robot moves on and is kept itself (cycles and
  followers of a robot that stays wait).
- :class:`RuleExecutor`: the baseline executor, as the start kit's default one: staged actions
  are the plan's moves and turns (waits dropped); a temporal dependency graph keeps, for every
  cell, the robots that will enter it in plan order, and a robot is told GO unless its next
  action is a Forward into a cell whose earlier visitor has not left yet (STOP). The action
  model still has the last word. A new plan is staged only while no robot has more than
  ``max_staged`` actions left, so that a long delay does not let plans pile up behind it;
  with ``hold``, every plan is staged and the planner (given the executor) plans waits for the
  robots over the limit instead, so one delayed robot no longer stalls the whole fleet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.lorr import Levers, PibtPlanner
from fleetmind.rl.lorr_executor import (
    EARLY,
    FEATURES,
    RULES,
    LinearPolicy,
    cem,
    load,
    training_problems,
)
from fleetmind.sim.lorr import CCR, CR, FW, HEADING, WAIT, Instance, View
from fleetmind.sim.lorr.world2026 import NONE, Plan2026, State, simulate2026


def _advance(
    loc: NDArray[np.int64], ori: NDArray[np.int64], act: NDArray[np.int64], width: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    fw = act == FW
    new = loc + fw * (HEADING[ori, 0] * width + HEADING[ori, 1])
    turn = (act == CR).astype(np.int64) - (act == CCR)
    return new, (ori + turn) % 4


def acyclic(
    act: NDArray[np.int64], loc: NDArray[np.int64], ori: NDArray[np.int64], width: int
) -> NDArray[np.int64]:
    """``act`` with every Forward made a wait unless its target is free or being left for good.

    A move into an occupied cell is kept only when the occupant moves on and is kept itself:
    chains behind a robot that stays, and cycles, wait (squares sweeping into one another).
    """
    act = act.copy()
    movers = np.flatnonzero(act == FW)
    if not movers.size:
        return act
    target, _ = _advance(loc[movers], ori[movers], act[movers], width)
    occupant = dict(zip(loc.tolist(), range(len(loc)), strict=True))
    kept: dict[int, bool] = {}
    mover_target = dict(zip(movers.tolist(), target.tolist(), strict=True))

    def ok(i: int) -> bool:
        chain = []
        j = i
        while j not in kept:
            chain.append(j)
            k = occupant.get(mover_target[j], -1)
            if k < 0:
                result = True
                break
            if k not in mover_target or k in chain:
                result = False  # the occupant stays, or a cycle
                break
            j = k
        else:
            result = kept[j]
        for c in chain:
            kept[c] = result
        return kept[i]

    for i in movers.tolist():
        if not ok(i):
            act[i] = WAIT
    return act


class StagedPlanner:
    """Multi-step plans from the LoRR planner (see the module docstring).

    Args:
        base: the one-step planner.
        steps: steps per plan (``None``: ``max(1, comm_ticks // agentCounter)``).
        comm_ticks: ticks between communications, to size ``steps``.
        executor: an executor with ``hold`` on: the robots it :meth:`~RuleExecutor.held`
            wait in every plan (``None``: none held).
    """

    def __init__(
        self,
        base: PibtPlanner,
        *,
        steps: int | None = None,
        comm_ticks: int = 10,
        executor: RuleExecutor | None = None,
    ):
        self.base = base
        self.steps = steps
        self.comm_ticks = comm_ticks
        self.executor = executor
        self.width = 0

    def initialize(self, instance: Instance) -> None:
        """Preprocess the map (the base planner's distance maps)."""
        self.base.initialize(instance)
        self.width = instance.width
        if self.steps is None:
            self.steps = max(1, self.comm_ticks // instance.agent_counter)

    def plan(self, view: View) -> Plan2026:
        """``steps`` planner steps from the predicted states in ``view``."""
        assert self.steps is not None
        loc, ori = view.loc.copy(), view.ori.copy()
        hold = self.executor.held() if self.executor is not None else None
        first = self.base.plan(view, hold)
        schedule = first.schedule if first.schedule is not None else view.robot_task.copy()
        agent = np.full(len(view.pool_task), -1, dtype=np.int64)
        slot_of = {int(t): s for s, t in enumerate(view.pool_task.tolist()) if t >= 0}
        for r in np.flatnonzero(schedule >= 0).tolist():
            agent[slot_of[int(schedule[r])]] = r
        cols = []
        act = first.actions
        for s in range(self.steps):
            if s:
                act = self.base.plan(
                    replace(view, loc=loc, ori=ori, robot_task=schedule, pool_agent=agent), hold
                ).actions
            act = acyclic(np.asarray(act, dtype=np.int64), loc, ori, self.width)
            cols.append(act)
            loc, ori = _advance(loc, ori, act, self.width)
        return Plan2026(actions=np.stack(cols, axis=1), schedule=schedule)


class RuleExecutor:
    """The plan-following baseline executor (see the module docstring).

    Args:
        max_staged: stage a new plan only while every robot has at most this many actions
            left (``None``: four plans' worth of steps, at least 4).
        hold: stage every plan, and have the planner (a :class:`StagedPlanner` given this
            executor) plan waits for the robots over ``max_staged`` (:meth:`held`) instead
            of skipping the whole fleet's plan for one delayed robot.
    """

    def __init__(self, max_staged: int | None = None, *, hold: bool = False) -> None:
        self.max_staged = max_staged
        self.hold = hold
        self.backlog = np.zeros(0, dtype=np.int64)
        self.limit = max_staged or 4
        self.queues: dict[int, deque[int]] = {}
        self.width = 0
        self.prev = np.zeros(0, dtype=np.int64)
        self.p_loc = np.zeros(0, dtype=np.int64)
        self.p_ori = np.zeros(0, dtype=np.int64)
        self.skipped = 0

    def initialize(self, instance: Instance) -> None:
        """Every robot first in the queue of its start cell."""
        self.width = instance.width
        self.queues = {int(c): deque([i]) for i, c in enumerate(instance.starts.tolist())}
        h, w = instance.grid.shape
        self.head = np.full(h * w, -1, dtype=np.int64)  # first robot of each cell's queue
        self.head[instance.starts] = np.arange(instance.team_size)
        self.qlen = np.zeros(h * w, dtype=np.int64)  # robots in each cell's queue
        self.qlen[instance.starts] = 1
        self.prev = instance.starts.copy()
        self.p_loc = instance.starts.copy()
        self.p_ori = np.zeros(instance.team_size, dtype=np.int64)

    def _sync(self, loc: NDArray[np.int64]) -> None:
        for i in np.flatnonzero(loc != self.prev).tolist():
            cell = int(self.prev[i])
            q = self.queues[cell]
            assert q[0] == i, "a robot left a cell it was not first to visit"
            q.popleft()
            self.qlen[cell] -= 1
            self.head[cell] = q[0] if q else -1
        self.prev = loc.copy()

    def process_new_plan(
        self, actions: NDArray[np.int64], staged: list[list[int]], state: State
    ) -> tuple[list[list[int]], NDArray[np.int64], NDArray[np.int64]]:
        """Stage the plan behind the current staged actions; the predicted end states."""
        self._sync(state.loc)
        limit = self.max_staged or max(4, 4 * actions.shape[1])
        self.limit = limit
        if not self.hold and max((len(s) for s in staged), default=0) > limit:
            self.skipped += 1
            return staged, self.p_loc.copy(), self.p_ori.copy()
        staged = [list(s) for s in staged]
        for step in range(actions.shape[1]):
            act = actions[:, step]
            loc, ori = _advance(self.p_loc, self.p_ori, act, self.width)
            for i in np.flatnonzero(act != WAIT).tolist():
                staged[i].append(int(act[i]))
                if act[i] == FW:
                    q = self.queues.setdefault(int(loc[i]), deque())
                    if not q:
                        self.head[int(loc[i])] = i
                    q.append(i)
                    self.qlen[int(loc[i])] += 1
            self.p_loc, self.p_ori = loc, ori
        self.backlog = np.array(list(map(len, staged)), dtype=np.int64)
        return staged, self.p_loc.copy(), self.p_ori.copy()

    def held(self) -> NDArray[np.bool_] | None:
        """With ``hold``: robots with more than the limit staged, to be planned as waiting.

        The plan is then staged for every robot (no fleet-wide skip): a held robot's plan is
        all waits, planned so by the planner, so the predicted states stay consistent.
        ``None`` without ``hold`` (or before the first plan).
        """
        if not self.hold or not self.backlog.size:
            return None
        held: NDArray[np.bool_] = self.backlog > self.limit
        return held

    def next_command(self, staged: list[list[int]], state: State) -> NDArray[np.bool_]:
        """GO unless the next action enters a cell an earlier robot has not left."""
        self._sync(state.loc)
        n = len(staged)
        go = np.ones(n, dtype=bool)
        front = np.array([s[0] if s else WAIT for s in staged], dtype=np.int64)
        starting = np.flatnonzero((front == FW) & (state.cur == NONE))
        if starting.size:
            target, _ = _advance(
                state.loc[starting], state.ori[starting], front[starting], self.width
            )
            go[starting] = self.head[target] == starting
        return go


class LearnedExecutor(RuleExecutor):
    """GO/STOP from a learned parameter-shared policy (:mod:`fleetmind.rl.lorr_executor`).

    Plans are staged as by :class:`RuleExecutor`, and a robot is admissible to GO where the
    rule executor lets it go or where it may go early: its next action is a Forward into the
    cell of the robot planned just before it, and that robot is leaving the cell the same way
    (moving, or starting with GO this tick), so the two squares slide together without
    overlap and the cell's visiting order is kept. Among admissible robots the policy's score
    decides; a STOP may also pause an action under way (the counter is kept).

    Args:
        policy: the GO/STOP policy (default: the shipped weights).
        max_staged: as for :class:`RuleExecutor`.
        hold: as for :class:`RuleExecutor`.
    """

    def __init__(
        self,
        policy: LinearPolicy | None = None,
        max_staged: int | None = None,
        *,
        hold: bool = False,
    ):
        super().__init__(max_staged, hold=hold)
        self.policy = policy if policy is not None else load()[0]
        self.k = 1
        self.shape = (0, 0)
        self.stopped = np.zeros(0, dtype=bool)
        self.has = np.zeros(0, dtype=bool)  # robots with staged actions, this tick
        self.early_go = 0

    def initialize(self, instance: Instance) -> None:
        """As :meth:`RuleExecutor.initialize`; remember the counter and the map's shape."""
        super().initialize(instance)
        self.k = instance.agent_counter
        self.shape = instance.grid.shape
        self.stopped = np.zeros(instance.team_size, dtype=bool)
        self.early_go = 0

    def observe(
        self, staged: list[list[int]], state: State
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """``(n, F)`` observations (:data:`~fleetmind.rl.lorr_executor.FEATURES`), admissible."""
        self._sync(state.loc)
        h, w = self.shape
        n = len(staged)
        size = np.array(list(map(len, staged)), dtype=np.int64)
        front = np.array([q[0] if q else WAIT for q in staged], dtype=np.int64)
        has = size > 0
        self.has = has
        started = state.cur != NONE
        r, c = np.divmod(state.loc, w)
        tr, tc = r + HEADING[state.ori, 0], c + HEADING[state.ori, 1]
        inside = (tr >= 0) & (tr < h) & (tc >= 0) & (tc < w)
        target = np.where(inside, tr * w + tc, state.loc)
        starting = (front == FW) & ~started
        rule = has & (~starting | (self.head[target] == np.arange(n)))
        # Early GO: the target's first visitor j is there, facing the same way, and moving or
        # starting a Forward with GO; this robot is the cell's next visitor after j.
        j = self.head[target]
        jj = np.maximum(j, 0)
        lead = (
            starting & ~rule & (j >= 0) & (state.loc[jj] == target) & (state.ori[jj] == state.ori)
        )
        lead &= (state.cur[jj] == FW) | (
            (state.cur[jj] == NONE) & (front[jj] == FW) & rule[jj] & ~state.delayed[jj]
        )
        for i in np.flatnonzero(lead).tolist():
            q = self.queues[int(target[i])]
            lead[i] = len(q) > 1 and q[1] == i
        # One byte a cell of a map padded by one cell: 4 = a robot, 1 = delayed, 2 = stopped.
        pw = w + 2
        pad = (r + 1) * pw + c + 1
        grid = np.zeros((h + 2) * pw, dtype=np.uint8)
        grid[pad] = 4 | state.delayed.view(np.uint8) | (self.stopped.view(np.uint8) << 1)
        around = grid[pad[:, None] + np.array([-pw, pw, -1, 1])]  # (n, 4)
        # The four bytes as one word: a flag's count is the top byte of (word & mask) * mask.
        word = np.ascontiguousarray(around).view(np.uint32)[:, 0]
        ones = np.uint32(0x01010101)
        near = np.stack(
            [((word >> k) & ones) * ones >> np.uint32(24) for k in (0, 2, 1)], axis=1
        ).astype(np.float64)
        ahead_delayed = (grid[np.where(inside, (tr + 1) * pw + tc + 1, 0)] & 1).astype(bool)
        fw = front == FW
        x = np.empty((n, len(FEATURES)))
        x[:, 0] = 1.0
        x[:, 1] = rule
        x[:, 2] = lead
        x[:, 3] = started
        x[:, 4] = (front == CR) | (front == CCR)
        x[:, 5] = state.count / self.k
        x[:, 6] = np.minimum(size / 20.0, 1.0)
        x[:, 7] = np.minimum((self.qlen[state.loc] - 1) / 3.0, 1.0)
        x[:, 8] = np.where(fw, np.minimum(self.qlen[target] / 3.0, 1.0), 0.0)
        x[:, 9] = fw & inside & ahead_delayed
        x[:, 10:13] = near / 4.0
        return x, rule | lead

    def next_command(self, staged: list[list[int]], state: State) -> NDArray[np.bool_]:
        """The policy's GO among admissible robots.

        An early GO behind a leader that does not move this tick is withdrawn (the action
        model would refuse it).
        """
        x, admissible = self.observe(staged, state)
        go = self.policy.go(x, admissible)
        early = np.flatnonzero(go & (x[:, 2] > 0))
        if early.size:
            w = self.shape[1]
            r, c = np.divmod(state.loc[early], w)
            ori = state.ori[early]
            lead = self.head[(r + HEADING[ori, 0]) * w + c + HEADING[ori, 1]]
            moving = state.cur[lead] == FW
            go[early] = moving | (go[lead] & ~state.delayed[lead])
            self.early_go += int(go[early].sum())
        self.stopped = ~go & self.has
        return go


def train_executor(
    *,
    seed: int = 0,
    generations: int = 15,
    population: int = 12,
    sigma: float = 0.25,
    problems: int = 4,
    ticks: int = 400,
    levers: Levers | None = None,
    init: NDArray[np.float64] | None = None,
    progress: Callable[[int, float, float], None] | None = None,
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """Learn :class:`LearnedExecutor`'s weights by the cross-entropy method, delays on.

    The objective is tasks finished (summed over ``problems`` generated training problems,
    :func:`~fleetmind.rl.lorr_executor.training_problems`, never the scored ones), each played
    ``ticks`` ticks with its delays under a seed that changes every generation and is shared by
    the generation's candidates.

    Returns:
        The weights and a record of the training (settings, per-generation scores).
    """
    levers = levers if levers is not None else Levers(highway=2)
    insts = training_problems(seed, problems)

    def score(weights: NDArray[np.float64], generation: int) -> float:
        total = 0
        for p, inst in enumerate(insts):
            run = simulate2026(
                inst, StagedPlanner(PibtPlanner(levers, seed=seed)),
                LearnedExecutor(LinearPolicy(weights)), ticks=ticks, delays=True,
                delay_seed=seed * 100_000 + generation * 100 + p,
            )  # fmt: skip
            total += run.finished
        return float(total)

    start = np.asarray(init if init is not None else RULES, dtype=np.float64)
    weights, history = cem(
        score, start, seed=seed, generations=generations, population=population, elite=4,
        sigma=sigma, progress=progress,
    )  # fmt: skip
    meta = {
        "learner": "cross-entropy method",
        "objective": "tasks finished, delays on (training problems only)",
        "seed": seed,
        "generations": generations,
        "population": population,
        "elite": 4,
        "sigma": sigma,
        "problems": problems,
        "ticks": ticks,
        "levers": {"highway": levers.highway},
        "history": history,
    }
    return weights, meta


def validate_executor_weights(
    weights: NDArray[np.float64],
    *,
    seed: int,
    problems: int = 4,
    ticks: int = 400,
    levers: Levers | None = None,
) -> dict[str, int]:
    """Tasks finished on fresh generated problems by the learned, rule and early-GO executors.

    The problems are :func:`~fleetmind.rl.lorr_executor.training_problems` of ``seed`` (give a
    seed the training did not use), delays on with one seed per problem, the same for all three.
    """
    levers = levers if levers is not None else Levers(highway=2)
    insts = training_problems(seed, problems)
    out = {}
    for name, w in (("learned", weights), ("rules", RULES), ("early", EARLY)):
        total = 0
        for p, inst in enumerate(insts):
            run = simulate2026(
                inst, StagedPlanner(PibtPlanner(levers, seed=seed)),
                LearnedExecutor(LinearPolicy(w)), ticks=ticks, delays=True,
                delay_seed=seed * 100_000 + p,
            )  # fmt: skip
            total += run.finished
        out[name] = total
    return out
