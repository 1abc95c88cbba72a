"""Return estimators and experience buffers shared by the neural learners.

- :func:`discounted_returns` and :func:`gae`: return and advantage estimators over ``(T, ...)``
  arrays, with the time limit handled as it should be: an episode that *terminated* has no future
  (no bootstrap); one that was *truncated* by a time limit bootstraps from the value of its final
  state (``next_values``), and the advantage recursion is cut at both.
- :class:`RolloutBuffer` (on-policy, fixed length), :class:`ReplayBuffer` (off-policy, circular)
  and :class:`EpisodeBuffer` (off-policy, whole episodes, for recurrent learners),
  with :func:`final_transitions`, the next observations a replay buffer stores.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fleetmind.errors import range_message

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- estimators


def discounted_returns(
    rewards: NDArray[np.floating],
    episode_end: NDArray[np.bool_],
    gamma: float,
    last_value: NDArray[np.floating] | float = 0.0,
) -> NDArray[np.float64]:
    """Discounted returns ``G_t = r_t + gamma * G_{t+1} * (1 - end_t)``.

    Args:
        rewards: ``(T, ...)`` rewards.
        episode_end: ``(T, ...)`` True where step ``t`` was an episode's last (terminated).
        gamma: discount.
        last_value: ``G_T``, the value after the last step (0 for a finished episode).

    Returns:
        ``(T, ...)`` returns as float64.
    """
    r = np.asarray(rewards, dtype=np.float64)
    end = np.asarray(episode_end, dtype=bool)
    out = np.zeros_like(r)
    running = np.broadcast_to(np.asarray(last_value, dtype=np.float64), r.shape[1:]).copy()
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * running * (~end[t])
        out[t] = running
    return out


def gae(
    rewards: NDArray[np.floating],
    values: NDArray[np.floating],
    next_values: NDArray[np.floating],
    terminated: NDArray[np.bool_],
    truncated: NDArray[np.bool_],
    gamma: float,
    lam: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Generalised advantage estimation, GAE(lambda) (Schulman et al., 2016).

    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` with ``done = terminated | truncated``.
    ``next_values_t`` is the value of the state reached by step ``t``: ``values[t + 1]`` inside an
    episode, the value of the final state on truncation, the bootstrap value at the end of the
    rollout (see :func:`next_values`).

    Args:
        rewards: ``(T, ...)`` rewards.
        values: ``(T, ...)`` values of the states acted in.
        next_values: ``(T, ...)`` values of the states reached.
        terminated: ``(T, ...)`` the step ended the episode (no future).
        truncated: ``(T, ...)`` the step hit a time limit (future cut, but bootstrapped).
        gamma: discount.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, both ``(T, ...)`` float64; ``returns = advantages + values``.
    """
    r = np.asarray(rewards, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    nv = np.asarray(next_values, dtype=np.float64)
    term = np.asarray(terminated, dtype=bool)
    done = term | np.asarray(truncated, dtype=bool)
    adv = np.zeros_like(r)
    running = np.zeros(r.shape[1:], dtype=np.float64)
    for t in range(len(r) - 1, -1, -1):
        delta = r[t] + gamma * nv[t] * (~term[t]) - v[t]
        running = delta + gamma * lam * running * (~done[t])
        adv[t] = running
    return adv, adv + v


def next_values(
    values: NDArray[np.floating],
    last_value: NDArray[np.floating],
    truncated: NDArray[np.bool_],
    final_values: NDArray[np.floating],
) -> NDArray[np.float64]:
    """``next_values`` for :func:`gae`: ``values[t + 1]``, ``last_value`` at the end, final values.

    Args:
        values: ``(T, ...)`` values of the states acted in.
        last_value: ``(...)`` value of the state after the rollout's last step.
        truncated: ``(T, ...)`` time-limit steps.
        final_values: ``(T, ...)`` value of the final state where ``truncated`` (ignored elsewhere).

    Returns:
        ``(T, ...)`` float64.
    """
    v = np.asarray(values, dtype=np.float64)
    out = np.concatenate([v[1:], np.asarray(last_value, dtype=np.float64)[None]], axis=0)
    return np.where(np.asarray(truncated, dtype=bool), np.asarray(final_values), out)


# --------------------------------------------------------------------------- buffers


class RolloutBuffer:
    """Fixed-length on-policy storage of ``T`` batched steps of ``B`` worlds x ``N`` agents.

    Args:
        steps: ``T``.
        num_envs: ``B``.
        n_agents: ``N``.
        obs_size: ``D``.
        state_size: ``S``, the global state length (0: not stored).
    """

    def __init__(
        self, steps: int, num_envs: int, n_agents: int, obs_size: int, state_size: int = 0
    ) -> None:
        t, b, n = steps, num_envs, n_agents
        self.steps = steps
        self.obs = np.zeros((t, b, n, obs_size), dtype=np.float32)
        self.state = np.zeros((t, b, state_size), dtype=np.float32)
        self.actions = np.zeros((t, b, n), dtype=np.int64)
        self.logprobs = np.zeros((t, b, n), dtype=np.float32)
        self.rewards = np.zeros((t, b, n), dtype=np.float32)
        self.values = np.zeros((t, b, n), dtype=np.float32)
        self.final_values = np.zeros((t, b, n), dtype=np.float32)
        self.terminated = np.zeros((t, b, n), dtype=bool)
        self.truncated = np.zeros((t, b, n), dtype=bool)
        self.pos = 0

    @property
    def full(self) -> bool:
        """Whether all ``T`` steps are stored."""
        return self.pos == self.steps

    def add(
        self,
        *,
        obs: NDArray[np.float32],
        actions: NDArray[np.int64],
        logprobs: NDArray[np.float32],
        rewards: NDArray[np.float32],
        values: NDArray[np.float32],
        terminated: NDArray[np.bool_],
        truncated: NDArray[np.bool_],
        final_values: NDArray[np.float32] | None = None,
        state: NDArray[np.float32] | None = None,
    ) -> None:
        """Store one batched step (arrays ``(B, N, ...)``; flags ``(B,)`` or ``(B, N)``)."""
        if self.full:
            raise IndexError("RolloutBuffer is full; call compute() and reset()")
        t = self.pos
        n = self.obs.shape[2]
        self.obs[t] = obs
        self.actions[t] = actions
        self.logprobs[t] = logprobs
        self.rewards[t] = rewards
        self.values[t] = values
        self.terminated[t] = _per_agent(terminated, n)
        self.truncated[t] = _per_agent(truncated, n)
        if final_values is not None:
            self.final_values[t] = final_values
        if state is not None and self.state.shape[-1]:
            self.state[t] = state
        self.pos += 1

    def compute(
        self, last_value: NDArray[np.float32], gamma: float, lam: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """GAE advantages and returns ``(T, B, N)`` for the stored steps."""
        nv = next_values(self.values, last_value, self.truncated, self.final_values)
        return gae(self.rewards, self.values, nv, self.terminated, self.truncated, gamma, lam)

    def reset(self) -> None:
        """Start a new rollout (storage is reused)."""
        self.pos = 0

    def minibatches(self, n_minibatches: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
        """Shuffled index sets over the ``T * B`` (step, world) pairs, drawn with ``generator``."""
        total = self.steps * self.obs.shape[1]
        perm = torch.randperm(total, generator=generator)
        yield from torch.tensor_split(perm, n_minibatches)


def _per_agent(flag: NDArray[np.bool_], n: int) -> NDArray[np.bool_]:
    f = np.asarray(flag, dtype=bool)
    return np.repeat(f[:, None], n, axis=1) if f.ndim == 1 else f


def final_transitions(
    next_obs: NDArray[np.float32],
    next_state: NDArray[np.float32] | None,
    truncated: NDArray[np.bool_],
    info: dict[str, Any],
) -> tuple[NDArray[np.float32], NDArray[np.float32] | None, NDArray[np.bool_]]:
    """What a replay buffer stores as the next observation (and state) of one batched step.

    A world the time limit truncated was reset in place, so ``next_obs`` holds its new
    episode's first observation: it gets ``info["final_obs"]`` (and ``info["final_state"]``
    when states are stored) instead, or, when the env reports none, it is dropped.

    Args:
        next_obs: ``(B, N, D)`` observations the step returned.
        next_state: ``(B, S)`` global states after the step, or None (states not stored).
        truncated: ``(B,)`` time-limit flags.
        info: the step's info.

    Returns:
        ``(next_obs, next_state, keep (B,))``: copies with the final observations in place and
        the worlds to store.
    """
    real_next = next_obs.copy()
    real_next_state = next_state.copy() if next_state is not None else None
    keep = np.ones(len(next_obs), dtype=bool)
    if truncated.any():
        ended = np.flatnonzero(truncated)
        if "final_obs" in info and (next_state is None or "final_state" in info):
            real_next[ended] = info["final_obs"][ended]
            if real_next_state is not None:
                real_next_state[ended] = info["final_state"][ended]
        else:
            keep[ended] = False
    return real_next, real_next_state, keep


class ReplayBuffer:
    """Circular off-policy storage of joint transitions (one row = one world's step).

    Global states are stored as float16 (they hold small counts, exact in half precision) to
    keep big maps affordable.

    Args:
        capacity: rows kept; the oldest is overwritten first.
        n_agents: ``N``.
        obs_size: ``D``.
        state_size: ``S`` (0: not stored).
    """

    def __init__(self, capacity: int, n_agents: int, obs_size: int, state_size: int = 0) -> None:
        if capacity < 1:
            raise ValueError(range_message("capacity", capacity, low=1))
        c, n = capacity, n_agents
        self.capacity = capacity
        self.obs = np.zeros((c, n, obs_size), dtype=np.float32)
        self.next_obs = np.zeros((c, n, obs_size), dtype=np.float32)
        self.state = np.zeros((c, state_size), dtype=np.float16)
        self.next_state = np.zeros((c, state_size), dtype=np.float16)
        self.actions = np.zeros((c, n), dtype=np.int64)
        self.rewards = np.zeros((c, n), dtype=np.float32)
        self.terminated = np.zeros(c, dtype=bool)
        self.pos = 0
        self.size = 0

    def add(
        self,
        *,
        obs: NDArray[np.float32],
        actions: NDArray[np.int64],
        rewards: NDArray[np.float32],
        next_obs: NDArray[np.float32],
        terminated: NDArray[np.bool_],
        state: NDArray[np.float32] | None = None,
        next_state: NDArray[np.float32] | None = None,
    ) -> None:
        """Append ``M`` rows (``obs (M, N, D)``, ``terminated (M,)``, ...)."""
        m = len(obs)
        idx = (self.pos + np.arange(m)) % self.capacity
        self.obs[idx] = obs
        self.next_obs[idx] = next_obs
        self.actions[idx] = actions
        self.rewards[idx] = rewards
        self.terminated[idx] = terminated
        if self.state.shape[1]:
            assert state is not None
            assert next_state is not None
            self.state[idx] = state
            self.next_state[idx] = next_state
        self.pos = int((self.pos + m) % self.capacity)
        self.size = min(self.size + m, self.capacity)

    def sample(self, batch: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """``batch`` rows drawn uniformly (with replacement) from the stored ones."""
        if self.size == 0:
            raise IndexError("ReplayBuffer is empty")
        idx = torch.randint(self.size, (batch,), generator=generator).numpy()
        out = {
            "obs": torch.from_numpy(self.obs[idx]),
            "next_obs": torch.from_numpy(self.next_obs[idx]),
            "actions": torch.from_numpy(self.actions[idx]),
            "rewards": torch.from_numpy(self.rewards[idx]),
            "terminated": torch.from_numpy(self.terminated[idx].astype(np.float32)),
        }
        if self.state.shape[1]:
            out["state"] = torch.from_numpy(self.state[idx].astype(np.float32))
            out["next_state"] = torch.from_numpy(self.next_state[idx].astype(np.float32))
        return out


class EpisodeBuffer:
    """Circular off-policy storage of whole episodes, filled by ``B`` worlds stepping together.

    EPyMARL's episode replay (``components/episode_buffer.py`` of uoe-agents/epymarl): a row is
    one episode of at most ``max_len`` steps, its observations and states at ``max_len + 1``
    time indices (the last one is what the episode's last step reached), ``filled`` False past
    the episode's end. A recurrent learner unrolls its network over a row from a zero hidden
    state, so a sampled row must start at an episode's first step: the worlds' episodes are
    staged apart (:meth:`add_step`) and copied in when they end (:meth:`end`). Worlds may end at
    different steps. Global states are float16, as in :class:`ReplayBuffer`.

    Args:
        capacity: episodes kept; the oldest is overwritten first.
        max_len: longest episode (the env's time limit); a longer one is cut into pieces.
        num_envs: ``B``, the worlds staged.
        n_agents: ``N``.
        obs_size: ``D``.
        state_size: ``S`` (0: not stored).
    """

    def __init__(
        self,
        capacity: int,
        max_len: int,
        num_envs: int,
        n_agents: int,
        obs_size: int,
        state_size: int = 0,
    ) -> None:
        for name, value in (("capacity", capacity), ("max_len", max_len)):
            if value < 1:
                raise ValueError(range_message(name, value, low=1))
        c, t, n, b = capacity, max_len, n_agents, num_envs
        self.capacity, self.max_len = capacity, max_len
        # np.zeros maps pages lazily: memory grows with what is written, not with capacity.
        self.obs = np.zeros((c, t + 1, n, obs_size), dtype=np.float32)
        self.state = np.zeros((c, t + 1, state_size), dtype=np.float16)
        self.actions = np.zeros((c, t, n), dtype=np.int64)
        self.rewards = np.zeros((c, t, n), dtype=np.float32)
        self.terminated = np.zeros((c, t), dtype=bool)
        self.filled = np.zeros((c, t), dtype=bool)
        self.length = np.zeros(c, dtype=np.int64)
        self.pos = 0
        self.size = 0
        # The staging area: each world's running episode.
        self._obs = np.zeros((b, t + 1, n, obs_size), dtype=np.float32)
        self._state = np.zeros((b, t + 1, state_size), dtype=np.float32)
        self._actions = np.zeros((b, t, n), dtype=np.int64)
        self._rewards = np.zeros((b, t, n), dtype=np.float32)
        self._terminated = np.zeros((b, t), dtype=bool)
        self.t = np.zeros(b, dtype=np.int64)  # (B,) steps staged per world

    def add_step(
        self,
        *,
        obs: NDArray[np.float32],
        actions: NDArray[np.int64],
        rewards: NDArray[np.float32],
        terminated: NDArray[np.bool_],
        state: NDArray[np.float32] | None = None,
    ) -> NDArray[np.bool_]:
        """Stage one step of every world (``obs (B, N, D)`` acted on, ``terminated (B,)``).

        Returns:
            ``(B,)`` worlds whose staged episode is now ``max_len`` long: the caller must
            :meth:`end` them before the next step.
        """
        w = np.arange(len(self.t))
        self._obs[w, self.t] = obs
        self._actions[w, self.t] = actions
        self._rewards[w, self.t] = rewards
        self._terminated[w, self.t] = terminated
        if self._state.shape[-1]:
            assert state is not None
            self._state[w, self.t] = state
        self.t += 1
        full: NDArray[np.bool_] = self.t >= self.max_len
        return full

    def end(
        self,
        worlds: NDArray[np.int64],
        *,
        final_obs: NDArray[np.float32],
        final_state: NDArray[np.float32] | None,
        bootstrap: NDArray[np.bool_],
    ) -> None:
        """Store the staged episodes of ``worlds`` and start them afresh.

        Args:
            worlds: ``(K,)`` world indices.
            final_obs: ``(K, N, D)`` what each episode's last step reached.
            final_state: ``(K, S)`` its global state (None: states not stored).
            bootstrap: ``(K,)`` whether ``final_obs`` is real; where not (a truncation the env
                gave no final observation for), the last step is left out of learning.
        """
        for k, w in enumerate(worlds):
            length = int(self.t[w])
            if length == 0:
                continue
            c = self.pos
            self._obs[w, length] = final_obs[k]
            if self._state.shape[-1]:
                assert final_state is not None
                self._state[w, length] = final_state[k]
            self.obs[c, : length + 1] = self._obs[w, : length + 1]
            self.obs[c, length + 1 :] = 0.0
            self.state[c, : length + 1] = self._state[w, : length + 1]
            self.state[c, length + 1 :] = 0.0
            self.actions[c, :length] = self._actions[w, :length]
            self.actions[c, length:] = 0
            self.rewards[c, :length] = self._rewards[w, :length]
            self.rewards[c, length:] = 0.0
            self.terminated[c, :length] = self._terminated[w, :length]
            self.terminated[c, length:] = False
            self.filled[c, :length] = True
            self.filled[c, length:] = False
            if not bootstrap[k] and not self._terminated[w, length - 1]:
                self.filled[c, length - 1] = False
            self.length[c] = length
            self.pos = (self.pos + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)
            self.t[w] = 0

    def sample(self, batch: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """``batch`` episodes (distinct when the buffer holds enough), cut to the longest.

        Returns:
            ``obs (M, L + 1, N, D)``, ``state (M, L + 1, S)`` (when stored), ``actions``,
            ``rewards (M, L, N)``, ``terminated``, ``filled (M, L)`` as float tensors (actions
            int64).
        """
        if self.size == 0:
            raise IndexError("EpisodeBuffer is empty")
        if self.size >= batch:
            idx = torch.randperm(self.size, generator=generator)[:batch].numpy()
        else:
            idx = torch.randint(self.size, (batch,), generator=generator).numpy()
        span = int(self.length[idx].max())
        out = {
            "obs": torch.from_numpy(self.obs[idx, : span + 1]),
            "actions": torch.from_numpy(self.actions[idx, :span]),
            "rewards": torch.from_numpy(self.rewards[idx, :span]),
            "terminated": torch.from_numpy(self.terminated[idx, :span].astype(np.float32)),
            "filled": torch.from_numpy(self.filled[idx, :span].astype(np.float32)),
        }
        if self.state.shape[-1]:
            out["state"] = torch.from_numpy(self.state[idx, : span + 1].astype(np.float32))
        return out
