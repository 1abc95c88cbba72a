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
  ``max_staged`` actions left, so that a long delay does not let plans pile up behind it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.lorr import PibtPlanner
from fleetmind.sim.lorr import CCR, CR, FW, HEADING, WAIT, Instance, View
from fleetmind.sim.lorr.world2026 import NONE, Plan2026, State


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
    """

    def __init__(self, base: PibtPlanner, *, steps: int | None = None, comm_ticks: int = 10):
        self.base = base
        self.steps = steps
        self.comm_ticks = comm_ticks
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
        first = self.base.plan(view)
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
                    replace(view, loc=loc, ori=ori, robot_task=schedule, pool_agent=agent)
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
    """

    def __init__(self, max_staged: int | None = None) -> None:
        self.max_staged = max_staged
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
        self.prev = instance.starts.copy()
        self.p_loc = instance.starts.copy()
        self.p_ori = np.zeros(instance.team_size, dtype=np.int64)

    def _sync(self, loc: NDArray[np.int64]) -> None:
        for i in np.flatnonzero(loc != self.prev).tolist():
            cell = int(self.prev[i])
            q = self.queues[cell]
            assert q[0] == i, "a robot left a cell it was not first to visit"
            q.popleft()
            self.head[cell] = q[0] if q else -1
        self.prev = loc.copy()

    def process_new_plan(
        self, actions: NDArray[np.int64], staged: list[list[int]], state: State
    ) -> tuple[list[list[int]], NDArray[np.int64], NDArray[np.int64]]:
        """Stage the plan behind the current staged actions; the predicted end states."""
        self._sync(state.loc)
        limit = self.max_staged or max(4, 4 * actions.shape[1])
        if max((len(s) for s in staged), default=0) > limit:
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
            self.p_loc, self.p_ori = loc, ori
        return staged, self.p_loc.copy(), self.p_ori.copy()

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
