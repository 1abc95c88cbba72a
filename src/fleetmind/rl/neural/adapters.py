"""Batch PettingZoo ParallelEnvs (such as rware) into the :class:`~.core.BatchEnv` the learners use.

:class:`ParallelBatch` steps ``B`` ParallelEnvs with flat ``Box`` observations and ``Discrete``
actions one after the other and stacks their arrays: observations ``(B, N, D)``, rewards
``(B, N)``, flags ``(B,)``. A world whose episode ends is reset at once; ``info`` then carries
``final_obs`` and ``final_state`` (what the finished episode's last step reached), so learners
bootstrap truncations correctly. ``global_state()`` is the env's ``state()`` when it has one,
else the concatenation of all agents' observations (rware has no global state).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from fleetmind.envs.vector import BatchStep
from fleetmind.errors import ConfigError


class ParallelBatch:
    """``B`` ParallelEnvs as one batched env (see the module docstring).

    Args:
        factories: one callable per world, each returning a fresh ParallelEnv.
        seed: root seed; world ``i`` is reset with a seed spawned from it.
        delivered_from_reward: report ``info["delivered"] = reward > 0`` (right for rware, whose
            only positive reward is a delivery).
    """

    def __init__(
        self,
        factories: Sequence[Callable[[], Any]],
        *,
        seed: int | None = None,
        delivered_from_reward: bool = False,
    ) -> None:
        if not factories:
            raise ConfigError("ParallelBatch: give at least one env factory")
        self.envs = [f() for f in factories]
        first = self.envs[0]
        self.agents = list(first.possible_agents)
        self.num_envs = len(self.envs)
        self.n_robots = len(self.agents)
        obs_space = first.observation_space(self.agents[0])
        act_space = first.action_space(self.agents[0])
        if not (isinstance(obs_space, spaces.Box) and len(obs_space.shape) == 1):
            raise ConfigError(f"ParallelBatch: observations must be flat Box, got {obs_space}")
        if not isinstance(act_space, spaces.Discrete):
            raise ConfigError(f"ParallelBatch: actions must be Discrete, got {act_space}")
        self.obs_size = int(obs_space.shape[0])
        self.n_actions = int(act_space.n)
        inner = getattr(first, "rware", None)
        self.max_steps = int(getattr(inner, "max_steps", 0) or 0) or None
        self.delivered_from_reward = delivered_from_reward
        self._seed = seed
        self._obs = np.zeros((self.num_envs, self.n_robots, self.obs_size), dtype=np.float32)

    def _stack(self, obs: dict[str, Any]) -> NDArray[np.float32]:
        return np.stack([np.asarray(obs[a], dtype=np.float32) for a in self.agents])

    def _state_of(self, i: int, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        env = self.envs[i]
        if hasattr(env, "state"):
            try:
                return np.asarray(env.state(), dtype=np.float32).ravel()
            except NotImplementedError:
                pass
        return obs.reshape(-1)

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every world (world ``i`` with the ``i``-th seed spawned from ``seed``)."""
        if seed is not None:
            self._seed = seed
        seqs = np.random.SeedSequence(self._seed).spawn(self.num_envs)
        for i, (env, seq) in enumerate(zip(self.envs, seqs, strict=True)):
            obs, _ = env.reset(seed=int(seq.generate_state(1)[0]))
            self._obs[i] = self._stack(obs)
        return self._obs.copy(), {}

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world with ``(B, N)`` actions; finished worlds are reset in place."""
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs, self.n_robots):
            raise ConfigError(
                f"ParallelBatch.step: actions must have shape {(self.num_envs, self.n_robots)}, "
                f"got {acts.shape}"
            )
        b, n = self.num_envs, self.n_robots
        rewards = np.zeros((b, n), dtype=np.float32)
        term = np.zeros(b, dtype=bool)
        trunc = np.zeros(b, dtype=bool)
        final_obs = self._obs.copy()
        final_state = np.stack([self._state_of(i, self._obs[i]) for i in range(b)])
        for i, env in enumerate(self.envs):
            obs, rew, te, tr, _ = env.step({a: int(acts[i, j]) for j, a in enumerate(self.agents)})
            rewards[i] = [float(rew.get(a, 0.0)) for a in self.agents]
            term[i] = any(te.values())
            trunc[i] = any(tr.values()) and not term[i]
            stacked = self._stack(obs)
            if term[i] or trunc[i]:
                final_obs[i] = stacked
                final_state[i] = self._state_of(i, stacked)
                obs, _ = env.reset()
                stacked = self._stack(obs)
            self._obs[i] = stacked
        info: dict[str, Any] = {"final_obs": final_obs, "final_state": final_state}
        if self.delivered_from_reward:
            info["delivered"] = rewards > 0
        return self._obs.copy(), rewards, term, trunc, info

    def global_state(self) -> NDArray[np.float32]:
        """``(B, S)``: each world's ``state()``, else its agents' observations concatenated."""
        return np.stack([self._state_of(i, self._obs[i]) for i in range(self.num_envs)])


def rware_batch(
    env_id: str = "rware-tiny-2ag-v2",
    num_envs: int = 8,
    *,
    seed: int | None = None,
    **kwargs: Any,
) -> ParallelBatch:
    """``num_envs`` rware envs (through :func:`fleetmind.envs.rware.make_rware`) as one batch.

    Args:
        env_id: a registered rware id.
        num_envs: worlds.
        seed: root seed.
        **kwargs: passed to ``make_rware`` (e.g. ``max_steps``).
    """
    from fleetmind.envs.rware import make_rware

    return ParallelBatch(
        [lambda: make_rware(env_id, **kwargs) for _ in range(num_envs)],
        seed=seed,
        delivered_from_reward=True,
    )
