"""Many warehouse worlds stepped at once, for training.

:class:`VectorWarehouse` keeps ``B`` worlds of ``N`` robots in arrays (positions ``(B, N, 2)``)
and steps them together in one compiled call (:func:`fleetmind.sim.kernels.vector_tick`). Tasks are
lifelong and RWARE-style: every robot always has a task (random pickup cell, then random station);
on delivery it draws the next one. Worlds that reach the time limit are reset in place (their
``truncated`` flag is set for that step; time limits are never termination).

Rewards follow :mod:`fleetmind.sim.rewards`; ``difference`` runs the counterfactual step for all
robots of all worlds in one more batched call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.sim import kernels
from fleetmind.sim import rewards as rw
from fleetmind.sim.dynamics import resolve_moves
from fleetmind.sim.grid import WAIT, GridMap, action_error
from fleetmind.sim.maps import start_cells


@dataclass(frozen=True)
class VectorStep:
    """One batched step.

    Attributes:
        rewards: ``(B, N)`` rewards after the reward mode.
        delivered: ``(B, N)`` deliveries this step.
        conflict: ``(B, N)`` failed moves because of another robot.
        truncated: ``(B,)`` worlds that hit the time limit (and were reset).
        terminated: ``(B,)`` always False (lifelong tasks never end).
    """

    rewards: NDArray[np.float32]
    delivered: NDArray[np.bool_]
    conflict: NDArray[np.bool_]
    truncated: NDArray[np.bool_]
    terminated: NDArray[np.bool_]


class VectorWarehouse:
    """``num_envs`` lifelong warehouse worlds stepped together.

    Args:
        grid: the map (needs pickup and station cells).
        n_robots: robots per world.
        num_envs: worlds.
        max_steps: time limit per world.
        reward: reward constants and mode.
        seed: root seed.
    """

    def __init__(
        self,
        grid: GridMap,
        n_robots: int,
        num_envs: int,
        *,
        max_steps: int = 500,
        reward: rw.RewardConfig | None = None,
        seed: int | None = None,
    ) -> None:
        check_range("num_envs", num_envs, low=1, where="vector env")
        check_range("robots", n_robots, low=1, where="vector env")
        self.grid = grid
        self.n_robots = n_robots
        self.num_envs = num_envs
        self.max_steps = max_steps
        self.reward = reward or rw.RewardConfig()
        self._pickups = np.argwhere(grid.pickups).astype(np.int32)
        self._stations = np.argwhere(grid.stations).astype(np.int32)
        if len(self._pickups) == 0 or len(self._stations) == 0:
            raise ConfigError(f"map {grid.name!r} needs pickup and station cells")
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        """Reset every world; the same seed gives the same batch of episodes."""
        self.seed = seed
        place_ss, task_ss = np.random.SeedSequence(seed).spawn(2)
        self._place_rng = np.random.default_rng(place_ss)
        self._task_rng = np.random.default_rng(task_ss)
        b, n = self.num_envs, self.n_robots
        self.pos = np.stack([start_cells(self.grid, n, rng=self._place_rng) for _ in range(b)])
        self.pickup = self._pickups[self._task_rng.integers(len(self._pickups), size=(b, n))]
        self.station = self._stations[self._task_rng.integers(len(self._stations), size=(b, n))]
        self.carrying = np.zeros((b, n), dtype=bool)
        self.has_task = np.ones((b, n), dtype=bool)
        self.tick = np.zeros(b, dtype=np.int64)
        self.delivered_total = np.zeros((b, n), dtype=np.int64)

    @property
    def goal(self) -> NDArray[np.int32]:
        """``(B, N, 2)`` current target cells."""
        return np.where(self.carrying[..., None], self.station, self.pickup)

    def _transition(
        self,
        pos: NDArray[np.int32],
        actions: NDArray[np.integer],
        tick: NDArray[np.int64],
        goal: NDArray[np.int32],
        carrying: NDArray[np.bool_],
    ) -> tuple[NDArray[np.int32], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
        res = resolve_moves(pos, actions, self.grid.blocked, tick=tick)
        at_goal = (res.pos == goal).all(axis=-1)
        return res.pos, at_goal & ~carrying, at_goal & carrying, res.conflict

    def step(self, actions: NDArray[np.integer], *, autoreset: bool = True) -> VectorStep:
        """Advance every world one tick with ``(B, N)`` actions.

        One compiled call (:func:`fleetmind.sim.kernels.vector_tick`) does the tick;
        :meth:`step_reference` is the same tick in numpy (and the one ``difference`` rewards
        take, for their counterfactual step).

        Args:
            actions: ``(B, N)`` action ids.
            autoreset: reset worlds that hit the time limit now; with False the caller reads
                their final state first and calls :meth:`reset_worlds`.

        Raises:
            ConfigError: the actions have the wrong shape or an id outside 0..4.
        """
        if self.reward.mode == "difference":
            return self.step_reference(actions, autoreset=autoreset)
        acts = self._checked(actions)
        b, n = acts.shape
        cfg = self.reward
        new_pos = np.empty_like(self.pos)
        flags = np.empty((2, b, n), dtype=bool)  # delivered, conflict
        ind = np.empty((b, n), dtype=np.float32)
        carrying = np.empty_like(self.carrying)
        truncated = np.empty(b, dtype=bool)
        n_new = kernels.vector_tick(
            self.pos,
            acts,
            self.grid.blocked,
            self.tick,
            (self.pickup, self.station, self.carrying),
            (cfg.step_cost, cfg.delivery_bonus, cfg.pickup_bonus, cfg.conflict_penalty),
            self.max_steps,
            new_pos,
            flags,
            ind,
            carrying,
            self.delivered_total,
            truncated,
        )
        if n_new == -kernels.BAD_ACTION:
            raise action_error(acts, "vector step")
        if n_new == -kernels.OFF_GRID:
            raise ConfigError("vector step: a robot stands outside the grid")
        delivered, conflict = flags
        self.pos, self.carrying = new_pos, carrying
        if n_new:
            self._new_tasks(delivered, n_new)
        if autoreset and truncated.any():
            self.reset_worlds(np.flatnonzero(truncated))
        return VectorStep(
            rewards=rw.combine(cfg, ind),
            delivered=delivered,
            conflict=conflict,
            truncated=truncated,
            terminated=np.zeros(b, dtype=bool),
        )

    def _checked(self, actions: NDArray[np.integer]) -> NDArray[np.integer]:
        acts = np.asarray(actions)
        b, n = self.num_envs, self.n_robots
        if acts.shape != (b, n):
            raise ConfigError(
                f"vector step: expected actions of shape ({b}, {n}), got {acts.shape}"
            )
        return acts

    def _new_tasks(self, delivered: NDArray[np.bool_], n_new: int) -> None:
        """Fresh pickups, then stations, for the robots that delivered (in that draw order)."""
        self.pickup[delivered] = self._pickups[
            self._task_rng.integers(len(self._pickups), size=n_new)
        ]
        self.station[delivered] = self._stations[
            self._task_rng.integers(len(self._stations), size=n_new)
        ]

    def step_reference(self, actions: NDArray[np.integer], *, autoreset: bool = True) -> VectorStep:
        """The numpy reference of :meth:`step` (with the counterfactual step of ``difference``).

        Raises:
            ConfigError: the actions have the wrong shape or an id outside 0..4.
        """
        acts = self._checked(actions)
        b, n = self.num_envs, self.n_robots
        goal = self.goal
        new_pos, picked, delivered, conflict = self._transition(
            self.pos, acts, self.tick, goal, self.carrying
        )
        ind = rw.individual(self.reward, delivered=delivered, picked=picked, conflict=conflict)
        team_without = None
        if self.reward.mode == "difference":
            # (B*N) variant worlds: world b with robot i forced to wait.
            var = np.repeat(acts[:, None, :], n, axis=1)  # (B, N, N)
            var[:, np.arange(n), np.arange(n)] = WAIT
            _, vp, vd, vc = self._transition(
                np.repeat(self.pos, n, axis=0),
                var.reshape(b * n, n),
                np.repeat(self.tick, n),
                np.repeat(goal, n, axis=0),
                np.repeat(self.carrying, n, axis=0),
            )
            team_without = (
                rw.individual(self.reward, delivered=vd, picked=vp, conflict=vc)
                .sum(axis=-1)
                .reshape(b, n)
            )
        rewards = rw.combine(self.reward, ind, team_without=team_without)
        self.pos = new_pos
        self.carrying = (self.carrying | picked) & ~delivered
        n_new = int(delivered.sum())
        if n_new:
            self._new_tasks(delivered, n_new)
        self.delivered_total += delivered
        self.tick += 1
        truncated = self.tick >= self.max_steps
        if autoreset and truncated.any():
            self.reset_worlds(np.flatnonzero(truncated))
        return VectorStep(
            rewards=rewards,
            delivered=delivered,
            conflict=conflict,
            truncated=truncated,
            terminated=np.zeros(b, dtype=bool),
        )

    def reset_worlds(self, worlds: NDArray[np.intp]) -> None:
        """Start new episodes in the given worlds (the rest go on)."""
        n = self.n_robots
        for w in worlds:
            self.pos[w] = start_cells(self.grid, n, rng=self._place_rng)
            self.pickup[w] = self._pickups[self._task_rng.integers(len(self._pickups), size=n)]
            self.station[w] = self._stations[self._task_rng.integers(len(self._stations), size=n)]
            self.carrying[w] = False
            self.tick[w] = 0
