"""The vector env as the dispatch tier runs the navigation policy (:class:`FallbackVectorEnv`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.envs import make_vector
from fleetmind.envs.vector import BatchStep
from fleetmind.errors import ConfigError, check_range
from fleetmind.rl.nav import N_ACTIONS, RADIUS
from fleetmind.sim import observe
from fleetmind.sim.dynamics import resolve_moves
from fleetmind.sim.grid import WAIT, GridMap


class FallbackVectorEnv:
    """The vector env as the dispatch tier runs the policy: fallbacks instead of failed moves.

    In dispatch the policy's action ranks first, the other four follow by the shortest-path
    heuristic, and the shield executes the first safe one. The plain env instead makes a move
    into a wall or another robot fail (the robot waits, and pays the conflict penalty), so a
    policy trained there learns to side-step pre-emptively, which costs moves once the shield
    resolves conflicts. Here each robot's ranking is the sampled action, then the others by
    heuristic value (ties: lower action id); every robot whose move fails moves down its ranking
    and the joint move is resolved again (at most 5 rounds, :func:`resolve_moves` each time),
    then the executed moves go to the env, which sees no conflict.

    Rewards: the env's reward (no conflict penalty arises) plus ``override_penalty`` for every
    robot whose sampled move was not executed, plus ``progress`` times the distance gained
    toward the target by the executed move (-1 .. +1 from the heuristic channels).

    Args:
        map: the map (a preset name, map file or GridMap).
        robots: robots per world.
        num_envs: worlds.
        seed: root seed of the wrapped env.
        max_steps: episode length of a world.
        radius: observation radius.
        override_penalty: reward when the sampled move is replaced by a fallback (<= 0).
        progress: reward per cell of shortest-path distance gained (>= 0).
    """

    def __init__(
        self,
        map: str | GridMap,
        robots: int,
        num_envs: int,
        *,
        seed: int | None = None,
        max_steps: int = 256,
        radius: int = RADIUS,
        override_penalty: float = 0.0,
        progress: float = 0.0,
    ) -> None:
        check_range("override_penalty", override_penalty, high=0, where="FallbackVectorEnv")
        check_range("progress", progress, low=0, where="FallbackVectorEnv")
        self.env = make_vector(map, robots, num_envs, seed=seed, max_steps=max_steps, radius=radius)
        self.sim = self.env.sim
        self.num_envs = num_envs
        self.n_robots = robots
        self.obs_size = self.env.obs_size
        self.n_actions = self.env.n_actions
        self.override_penalty = float(override_penalty)
        self.progress = float(progress)
        self._obs: NDArray[np.float32] | None = None

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every world."""
        obs, info = self.env.reset(seed)
        self._obs = obs
        return obs, info

    def global_state(self) -> NDArray[np.float32]:
        """``(B, S)`` global state of the wrapped env."""
        return self.env.global_state()

    def executed(self, actions: NDArray[np.integer]) -> NDArray[np.int64]:
        """``(B, N)`` moves executed for sampled ``actions`` under heuristic fallbacks."""
        if self._obs is None:
            raise ConfigError("FallbackVectorEnv: call reset() before step()")
        acts = np.asarray(actions, dtype=np.int64)
        heur = self._obs[..., -observe.N_HEURISTIC :]
        key = heur.astype(np.float64) * 10.0
        np.put_along_axis(key, acts[..., None], -np.inf, axis=-1)
        ranking = np.argsort(key, axis=-1, kind="stable")  # (B, N, 5), sampled first
        tried = np.zeros(acts.shape, dtype=np.int64)
        sim = self.sim
        for _ in range(N_ACTIONS):
            cur = np.take_along_axis(ranking, tried[..., None], axis=-1)[..., 0]
            res = resolve_moves(sim.pos, cur, sim.grid.blocked, tick=sim.tick)
            failed = (res.conflict | res.wall_bump) & (cur != WAIT)
            if not failed.any():
                break
            tried = np.minimum(tried + failed, N_ACTIONS - 1)
        out: NDArray[np.int64] = np.where(res.moved, cur, WAIT).astype(np.int64)
        return out

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world with sampled ``(B, N)`` actions (see the class docstring)."""
        if self._obs is None:
            raise ConfigError("FallbackVectorEnv: call reset() before step()")
        prev = self._obs
        acts = np.asarray(actions, dtype=np.int64)
        moves = self.executed(acts)
        obs, rewards, term, trunc, info = self.env.step(moves)
        overridden = moves != acts
        gained = -np.take_along_axis(prev[..., -observe.N_HEURISTIC :], moves[..., None], -1)
        rewards = (
            rewards
            + self.override_penalty * overridden
            + self.progress * gained[..., 0].clip(-1.0, 1.0)
        ).astype(np.float32)
        info["overridden"] = overridden
        self._obs = obs
        return obs, rewards, term, trunc, info
