"""Batch PettingZoo ParallelEnvs (such as rware) into the :class:`~.core.BatchEnv` the learners use.

:class:`ParallelBatch` steps ``B`` ParallelEnvs with flat ``Box`` observations and ``Discrete``
actions one after the other and stacks their arrays: observations ``(B, N, D)``, rewards
``(B, N)``, flags ``(B,)``. A world whose episode ends is reset at once; ``info`` then carries
``final_obs`` and ``final_state`` (what the finished episode's last step reached), so learners
bootstrap truncations correctly. ``global_state()`` is the env's ``state()`` when it has one,
else the concatenation of all agents' observations (rware has no global state).

:class:`TwinBatch` is the RWARE twin's vector env (:mod:`fleetmind.envs.rware_twin`) as the same
kind of batch: rware's rules, every world stepped at once, ~90x the real package; learners
train on it and are scored on the real rware through :func:`rware_batch`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from fleetmind.envs.vector import BatchStep
from fleetmind.errors import ConfigError, check_range
from fleetmind.sim import rware_shaping as shaping_kernels


class TwinBatch:
    """The RWARE twin's vector env as a learner's ``BatchEnv``.

    Adds what the learners read and the twin does not report: ``obs_size``, the time limit,
    ``info["delivered"]`` (a delivery: rware's reward at the goal) and ``info["final_state"]``
    (the global state of the final observations: every robot's observation side by side).

    Args:
        env_id: an rware ``-v2`` id.
        num_envs: worlds.
        seed: root seed of the first reset.
        shaping: weight of :class:`RwareShaping` added to rware's reward (0: rware's reward
            alone). ``info["delivered"]`` always counts real deliveries.
        **options: rware constructor overrides (``reward_type``, ``max_steps``, ...; see
            :mod:`fleetmind.envs.rware_twin`).
    """

    def __init__(
        self, env_id: str, num_envs: int, *, seed: int, shaping: float = 0.0, **options: Any
    ) -> None:
        from fleetmind.envs import make_rware_vector

        self.env = make_rware_vector(env_id, num_envs, seed=seed, **options)
        self.num_envs = num_envs
        self.n_robots = self.env.n_robots
        self.obs_size = int(np.prod(self.env.obs_shape))
        self.n_actions = self.env.n_actions
        self.max_steps = int(self.env.spec.config.max_steps or 500)
        # two_stage pays 0.5 at the goal and 0.5 at the next put-down: only the first counts.
        self._two_stage = self.env.spec.config.reward_type == "two_stage"
        check_range("shaping", shaping, low=0)
        self.shaping = float(shaping)
        self._shaper = RwareShaping(self.env.worlds) if shaping > 0 else None

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every world."""
        return self.env.reset(seed=seed)

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world; adds ``delivered`` and ``final_state`` to ``info``."""
        carrying_before = self.env.worlds.carrying >= 0 if self._two_stage else None
        before = self._shaper.before() if self._shaper is not None else None
        obs, rewards, term, trunc, info = self.env.step(actions)
        if carrying_before is None:
            info["delivered"] = rewards > 0
        else:
            # A put-down reward comes with a robot that carried before the step and not after.
            dropped = carrying_before & ~(self.env.worlds.carrying >= 0)
            info["delivered"] = (rewards > 0) & ~dropped
        if self._shaper is not None and before is not None:
            bonus = self._shaper.after(before, info["delivered"], trunc | term)
            info["shaping"] = self.shaping * bonus
            rewards = (rewards + info["shaping"]).astype(np.float32)
        if "final_obs" in info:
            info["final_state"] = info["final_obs"].reshape(self.num_envs, -1)
        return obs, rewards, term, trunc, info

    def global_state(self) -> NDArray[np.float32]:
        """``(B, N * D)``."""
        return self.env.global_state()


def _carry_distances(highways: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``(HW, HW)`` steps between cells for a loaded robot, which keeps to the highways.

    A loaded robot may not drive into a shelf cell; every cell between the two ends of its
    path is taken to be a highway (shelves stand on every other cell at reset). Unreachable
    pairs get ``H + W`` steps.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    h, w = highways.shape
    free = highways.reshape(-1)
    src, dst = [], []
    for cell in range(h * w):
        r, c = divmod(cell, w)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            nb = rr * w + cc
            # Moves that stay on highways, or leave or enter a shelf cell at a path's end.
            if 0 <= rr < h and 0 <= cc < w and (free[cell] or free[nb]):
                src.append(cell)
                dst.append(nb)
    graph = coo_matrix((np.ones(len(src)), (src, dst)), shape=(h * w, h * w)).tocsr()
    dist = np.asarray(shortest_path(graph, unweighted=True), dtype=np.float64)
    # No shelf-to-shelf edge: rware's shelf blocks are two cells thick, so paths cannot
    # cut through them (a one-cell-thick shelf row of a custom layout could be cut).
    return np.where(np.isfinite(dist), dist, float(h + w))


class RwareShaping:
    """A dense guide added to rware's sparse reward while training on the twin.

    rware pays only at the goal (+1), so a policy must stumble on pick-up, carry and delivery
    by chance before anything is learned (EPyMARL's MAPPO needs about 6M steps for its first
    deliveries on tiny-2ag). Per robot and step, in units of one delivery:

    - +0.5 the first time a requested shelf is picked up in its request (a shelf put down and
      picked up again pays nothing more);
    - +0.5 for putting a shelf down after delivering it (the step rware's ``two_stage``
      reward pays for too);
    - ``phi(s') - phi(s)`` with ``phi = -d / (H + W)`` and ``d`` the Manhattan distance to the
      robot's current aim: the nearest requested shelf on the floor (empty-handed, Manhattan:
      it drives under shelves), the nearest goal (carrying a requested shelf), the nearest
      empty shelf cell (carrying one that is not), both along highways (a loaded robot may
      not drive into a shelf). The aim is the one of the step's start state and steps that
      pick up or put down pay no potential term, so phase changes cost nothing; moving back
      and forth earns zero.

    Evaluation never uses it: the figures are rware's deliveries. The work is done by the
    compiled kernels of :mod:`fleetmind.sim.rware_shaping`: a shaped step costs 1.5-2x a plain
    one (the numpy broadcasts they replaced: 10-50x; ``fleetmind bench rware`` times both).

    Args:
        worlds: the twin's worlds (read, never changed).
    """

    def __init__(self, worlds: Any) -> None:
        self.w = worlds
        h, wd = worlds.shape
        self._scale = float(h + wd)
        lay = worlds.config.layout
        carry = _carry_distances(lay.highways) / self._scale  # (HW, HW)
        goals = np.array([r * wd + c for r, c in lay.goals], dtype=np.int64)
        cells = np.arange(h * wd, dtype=np.int64)
        shelf_cells = np.flatnonzero(~lay.highways.reshape(-1)).astype(np.int64)
        self._tables = (
            carry,
            carry[:, goals].min(axis=1),  # (HW,) to the nearest goal
            shelf_cells,
            np.stack([cells // wd, cells % wd]),  # (2, HW)
        )
        s = worlds.n_shelves
        self._scratch = (
            np.zeros(h * wd, dtype=bool),
            np.zeros(s, dtype=bool),
            np.zeros(s, dtype=np.int64),
            np.zeros(len(shelf_cells), dtype=np.int64),
        )
        b, n = worlds.pos.shape
        self._claimed = np.zeros((b, s + 1), dtype=bool)
        self._delivered = np.zeros((b, n), dtype=bool)  # carries a shelf it has delivered
        self._aim = np.zeros((b, n), dtype=np.float64)

    def _view(self) -> shaping_kernels.View:
        w = self.w
        return (w.pos, w.carrying, w.shelf_pos, w.requested)

    def before(self) -> dict[str, NDArray[Any]]:
        """What the step's shaping needs of the state before it.

        Returns:
            ``kind`` (the aim of each robot: 0 seek, 1 goal, 2 drop), ``phi`` (its
            potential) and ``carrying``, each ``(B, N)``.
        """
        shape = self.w.pos.shape
        kind = np.empty(shape, dtype=np.int64)
        phi = np.empty(shape, dtype=np.float64)
        carrying = np.empty(shape, dtype=np.int64)
        shaping_kernels.before(
            self._view(), self._tables, self._scratch, self._scale, kind, phi, carrying
        )
        return {"kind": kind, "phi": phi, "carrying": carrying}

    def after(
        self,
        before: dict[str, NDArray[Any]],
        delivered: NDArray[np.bool_],
        done: NDArray[np.bool_],
    ) -> NDArray[np.float32]:
        """``(B, N)`` shaping of the step that led here (0 in worlds that restarted)."""
        out = np.empty(self.w.pos.shape, dtype=np.float32)
        shaping_kernels.after(
            self._view(),
            self._tables,
            self._scratch,
            self._scale,
            (before["kind"], before["phi"], before["carrying"]),
            (np.ascontiguousarray(delivered, dtype=bool), np.ascontiguousarray(done, dtype=bool)),
            (self._claimed, self._delivered),
            self._aim,
            out,
        )
        return out


def batch_actions(actions: NDArray[np.integer], env: Any) -> NDArray[np.integer]:
    """``actions`` as an array, checked to be ``(env.num_envs, env.n_robots)``.

    Raises:
        ConfigError: naming ``env``'s class and both shapes, when the shape is another.
    """
    acts = np.asarray(actions)
    want = (env.num_envs, env.n_robots)
    if acts.shape != want:
        raise ConfigError(
            f"{type(env).__name__}.step: actions must have shape {want}, got {acts.shape}"
        )
    return acts


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
        acts = batch_actions(actions, self)
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


EPISODE = 500
"""rware's episode length (steps) for the ``-v2`` ids."""


def evaluate_rware(
    act: Callable[[NDArray[np.float32]], NDArray[np.int64]],
    env_id: str,
    *,
    episodes: int,
    seed: int,
    steps: int = EPISODE,
) -> dict[str, Any]:
    """Deliveries per ``steps``-step episode of ``act`` on ``episodes`` seeded rware episodes.

    Plays the real ``rware`` package (:func:`rware_batch`, one env per episode, all stepped
    together); without rware installed, the twin (exact on rware's rules) stands in and the
    result says so.

    Returns:
        ``{"deliveries_per_episode", "per_agent", "eval_on", "episodes"}`` (``per_agent``:
        robot id -> deliveries per episode).
    """
    env: Any
    try:
        env, where = rware_batch(env_id, episodes, seed=seed), "rware"
    except ConfigError:
        env, where = TwinBatch(env_id, episodes, seed=seed), "twin"
    obs, _ = env.reset(seed=seed)
    delivered = np.zeros(env.n_robots, dtype=np.int64)
    for _ in range(steps):
        obs, _r, _te, _tr, info = env.step(act(obs))
        delivered += info["delivered"].sum(axis=0)
    return {
        "deliveries_per_episode": float(delivered.sum()) / episodes,
        "per_agent": {f"robot_{i}": float(d) / episodes for i, d in enumerate(delivered)},
        "eval_on": where,
        "episodes": episodes,
    }
