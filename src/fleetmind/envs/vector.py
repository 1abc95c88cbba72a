"""Batched numpy face of the warehouse: ``num_envs`` worlds of ``N`` robots stepped together.

Environment id: ``fleetmind/warehouse-vector-v0``. Same dynamics, observation, action and reward
as ``fleetmind/warehouse-v0`` (see :mod:`fleetmind.envs.warehouse`), with lifelong RWARE-style
tasks (every robot always has one). Arrays, not dicts:

- ``reset(seed) -> (obs (B, N, D) float32, info)``
- ``step(actions (B, N) int) -> (obs, rewards (B, N), terminated (B,), truncated (B,), info)``
  where ``info`` holds ``delivered (B, N)`` and ``conflict (B, N)``; worlds that hit the time limit
  are reset in place and report ``truncated``, and ``info`` then also holds every world's
  observation and global state before that reset, ``final_obs (B, N, D)`` and
  ``final_state (B, S)`` (Gymnasium's convention); ``terminated`` is always False.
- ``global_state() -> (B, 6 * H * W)`` for centralised critics.
- ``single_observation_space`` (one robot's observation, the Box of ``fleetmind/warehouse-v0``)
  and ``single_action_space`` (``Discrete(5)``), Gymnasium's names for one slot of a batch.

Set ``observe=False`` to skip building observations (pure simulation speed).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from fleetmind.envs.warehouse import resolve_map
from fleetmind.sim import observe as obs_mod
from fleetmind.sim.grid import GridMap
from fleetmind.sim.maps import require_tasks
from fleetmind.sim.rewards import RewardConfig
from fleetmind.sim.vector import VectorWarehouse

BatchStep: TypeAlias = tuple[
    NDArray[np.float32],  # observations (B, N, D)
    NDArray[np.float32],  # rewards (B, N)
    NDArray[np.bool_],  # terminated (B,)
    NDArray[np.bool_],  # truncated (B,)
    dict[str, Any],  # info
]
"""What ``step`` of every batched env returns: ``(obs, rewards, terminated, truncated, info)``."""


class WarehouseVectorEnv:
    """Batched warehouse env (see the module docstring) over the worlds of ``sim``.

    Args:
        sim: the worlds, their robots, time limit and rewards (:func:`make_vector` builds it).
        radius: observation window radius.
        heuristic: add the shortest-path heuristic values to the observations.
        observe: build observations (False: zero-width ones, pure simulation speed).
    """

    def __init__(
        self, sim: VectorWarehouse, *, radius: int = 2, heuristic: bool = True, observe: bool = True
    ) -> None:
        self.sim = sim
        self.grid = grid = sim.grid
        self.num_envs = sim.num_envs
        self.n_robots = sim.n_robots
        self.observe = observe
        self._observer = obs_mod.LocalObserver.for_map(grid, radius, heuristic=heuristic)
        self.obs_size = self._observer.size
        self.n_actions = 5
        low, high = self._observer.bounds()
        self.single_observation_space = spaces.Box(low, high, dtype=np.float32)
        self.single_action_space: spaces.Space[Any] = spaces.Discrete(self.n_actions)

    def _obs(self) -> NDArray[np.float32]:
        if not self.observe:
            return np.zeros((self.num_envs, self.n_robots, 0), dtype=np.float32)
        s = self.sim
        return self._observer(s.pos, s.goal, s.carrying, s.has_task)

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every world."""
        self.sim.reset(self.sim.seed if seed is None else seed)
        return self._obs(), {}

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world once with ``(B, N)`` actions."""
        out = self.sim.step(actions, autoreset=False)
        info: dict[str, Any] = {"delivered": out.delivered, "conflict": out.conflict}
        obs = self._obs()
        done = np.flatnonzero(out.truncated)
        if len(done):
            # Gymnasium's convention: learners bootstrap a truncated episode from its last state.
            info["final_obs"] = obs.copy()
            info["final_state"] = self.global_state()
            self.sim.reset_worlds(done)
            obs = self._obs()
        return obs, out.rewards, out.terminated, out.truncated, info

    def global_state(self) -> NDArray[np.float32]:
        """``(B, 6 * H * W)`` global state."""
        s = self.sim
        return obs_mod.global_state(self.grid, obs_mod.Fleet(s.pos, s.goal, s.carrying, s.has_task))


def make_vector(
    map: str | GridMap,
    robots: int,
    num_envs: int,
    *,
    seed: int | None = None,
    **options: Any,
) -> WarehouseVectorEnv:
    """``num_envs`` warehouse worlds stepped as one batch.

    Args:
        map: a preset name, a map file, an rware layout string, or a GridMap.
        robots: robots per world.
        num_envs: worlds.
        seed: root seed.
        **options: ``max_steps``, ``reward_mode`` (the worlds'), ``radius``, ``heuristic``,
            ``observe`` (the env's, see :class:`WarehouseVectorEnv`).
    """
    grid = resolve_map(map)
    require_tasks(grid)
    world = {k: options.pop(k) for k in ("max_steps",) if k in options}
    if "reward_mode" in options:
        world["reward"] = RewardConfig.parse(options.pop("reward_mode"))
    sim = VectorWarehouse(grid, robots, num_envs, seed=seed, **world)
    return WarehouseVectorEnv(sim, **options)
