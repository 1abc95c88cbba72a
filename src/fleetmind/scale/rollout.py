"""Rollout workers: the warehouse vector env split over workers, each stepping its own batch.

:class:`ShardedVectorEnv` has the batched-env face the neural learners drive
(:class:`fleetmind.rl.neural.base.BatchEnv`: ``reset``, ``step``, ``global_state``,
``num_envs``, ``n_robots``, ``obs_size``, ``n_actions``, ``max_steps``), so every learner of
:mod:`fleetmind.rl.neural` trains on it unchanged. Behind that face, ``num_envs`` worlds are
split into ``workers`` shards, each a :func:`fleetmind.envs.make_vector` batch:

- ``backend="local"``: the shards live in this process and step one after the other (the
  reference the Ray backend must match, and the default: no Ray import);
- ``backend="ray"``: each shard lives in a :class:`RolloutWorker` Ray actor (one CPU each); a
  step sends every actor its slice of the actions at once and gathers the results, so the
  shards' simulation and observation building run in parallel while the learner stays one
  process.

Shard ``i`` is seeded with the ``i``-th child of ``SeedSequence(seed)``, so for a given seed and
worker count the local and Ray backends produce the same observations, rewards and training
results, bit for bit. (A different worker count is a different batch of worlds, as a different
``num_envs`` is.)

The learner's forward passes and updates stay in the learner's process: with lockstep stepping,
what scales with workers is the env side of sample collection (simulation and observations),
and every step pays one round trip to the workers. :meth:`ShardedVectorEnv.collect` is the
actor-side alternative: each worker runs a copy of the policy for a whole rollout, so the
forward passes scale too and a rollout costs one round trip (a learner needs a hook to consume
such rollouts; see ``docs/ray.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.envs.vector import BatchStep
from fleetmind.errors import ConfigError
from fleetmind.rl.neural.adapters import batch_actions
from fleetmind.scale.backend import check_backend, import_ray


class RolloutWorker:
    """One shard: a warehouse vector env stepped on request (the body of a Ray actor).

    Args:
        map: a preset name, map file, rware layout string or GridMap.
        robots: robots per world.
        num_envs: worlds in this shard.
        seed: the shard's seed.
        options: ``make_vector`` options (``max_steps``, ``reward_mode``, ``radius``, ...).
    """

    def __init__(
        self, map: Any, robots: int, num_envs: int, seed: int | None, options: dict[str, Any]
    ) -> None:
        from fleetmind.envs import make_vector

        self.env = make_vector(map, robots, num_envs, seed=seed, **options)
        self._obs: NDArray[np.float32] | None = None
        self._actor: Any = None
        self._actor_key: tuple[Any, ...] | None = None

    def spec(self) -> dict[str, int]:
        """Sizes of the shard's batch (``obs_size``, ``n_actions``, ``max_steps``)."""
        return {
            "obs_size": int(self.env.obs_size),
            "n_actions": int(self.env.n_actions),
            "max_steps": int(self.env.sim.max_steps),
        }

    def reset(self, seed: int | None) -> NDArray[np.float32]:
        """Reset the shard; its observations ``(b, N, D)``."""
        obs, _ = self.env.reset(seed)
        self._obs = obs
        return obs

    def step(self, actions: NDArray[np.integer]) -> tuple[Any, ...]:
        """Step the shard with ``(b, N)`` actions; the env's step tuple."""
        out = self.env.step(actions)
        self._obs = out[0]
        return out

    def collect(self, policy: dict[str, Any], steps: int, seed: int) -> dict[str, Any]:
        """Act with ``policy`` for ``steps`` batched steps here; the trajectories.

        Args:
            policy: ``state_dict``, ``hidden`` and ``agent_id`` of a
                :class:`fleetmind.rl.neural.ppo.Actor` (the learner's current weights).
            steps: batched steps ``T``.
            seed: seed of this call's action sampling.

        Returns:
            ``obs (T, b, N, D)``, ``actions``, ``logprobs``, ``rewards`` ``(T, b, N)``,
            ``terminated``, ``truncated`` ``(T, b)``, ``delivered (T, b, N)`` and
            ``last_obs (b, N, D)``.
        """
        import torch

        from fleetmind.rl.neural.ppo import Actor

        env = self.env
        key = (tuple(policy["hidden"]), bool(policy["agent_id"]))
        if self._actor is None or self._actor_key != key:
            self._actor = Actor(env.obs_size, env.n_actions, env.n_robots, key[0], key[1])
            self._actor_key = key
        self._actor.load_state_dict(policy["state_dict"])
        gen = torch.Generator().manual_seed(seed)
        obs = self._obs if self._obs is not None else self.reset(None)
        b, n, d = obs.shape
        out: dict[str, NDArray[Any]] = {
            "obs": np.zeros((steps, b, n, d), dtype=np.float32),
            "actions": np.zeros((steps, b, n), dtype=np.int64),
            "logprobs": np.zeros((steps, b, n), dtype=np.float32),
            "rewards": np.zeros((steps, b, n), dtype=np.float32),
            "terminated": np.zeros((steps, b), dtype=bool),
            "truncated": np.zeros((steps, b), dtype=bool),
            "delivered": np.zeros((steps, b, n), dtype=bool),
        }
        with torch.no_grad():
            for t in range(steps):
                logits = self._actor(torch.from_numpy(obs))
                probs = torch.softmax(logits, -1).reshape(-1, env.n_actions)
                act = torch.multinomial(probs, 1, generator=gen).reshape(b, n)
                logp = torch.log_softmax(logits, -1).gather(-1, act[..., None])[..., 0]
                out["obs"][t] = obs
                out["actions"][t] = act.numpy()
                out["logprobs"][t] = logp.numpy()
                obs, rew, term, trunc, info = env.step(act.numpy())
                out["rewards"][t] = rew
                out["terminated"][t] = term
                out["truncated"][t] = trunc
                out["delivered"][t] = info["delivered"]
        self._obs = obs
        out["last_obs"] = obs
        return out

    def global_state(self) -> NDArray[np.float32]:
        """``(b, S)`` global state of the shard's worlds."""
        return self.env.global_state()


def shard_sizes(num_envs: int, workers: int) -> list[int]:
    """``num_envs`` worlds split as evenly as possible over ``workers`` shards (largest first)."""
    if workers < 1 or num_envs < workers:
        raise ConfigError(
            f"rollout workers: need 1 <= workers <= num_envs, got workers={workers}, "
            f"num_envs={num_envs}"
        )
    base, extra = divmod(num_envs, workers)
    return [base + (1 if i < extra else 0) for i in range(workers)]


def shard_seeds(seed: int | None, workers: int) -> list[int]:
    """The shards' seeds: one int from each child of ``SeedSequence(seed)``."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(workers)]


class ShardedVectorEnv:
    """``num_envs`` warehouse worlds split over ``workers`` rollout workers (see the module).

    Args:
        map: a preset name, map file, rware layout string or GridMap.
        robots: robots per world.
        num_envs: worlds in total.
        workers: shards (rollout workers).
        seed: root seed.
        backend: ``"local"`` (shards in this process) or ``"ray"`` (one actor per shard; Ray
            must be initialised, or ``address`` given).
        address: ray only: the cluster to join when Ray is not initialised yet.
        **options: ``make_vector`` options (``max_steps``, ``reward_mode``, ``radius``,
            ``heuristic``).
    """

    def __init__(
        self,
        map: Any,
        robots: int,
        num_envs: int,
        *,
        workers: int = 2,
        seed: int | None = None,
        backend: str = "local",
        address: str | None = None,
        **options: Any,
    ) -> None:
        check_backend(backend, address)
        self.sizes = shard_sizes(num_envs, workers)
        self.backend = backend
        self.num_envs = num_envs
        self.n_robots = robots
        self.workers = workers
        self._bounds = np.cumsum([0, *self.sizes])
        self._seed = seed
        seeds = shard_seeds(seed, workers)
        self._ray: Any = None
        self._actors: list[Any] = []
        self._local: list[RolloutWorker] = []
        if backend == "ray":
            ray = import_ray()
            if not ray.is_initialized():
                ray.init(address=address, include_dashboard=False, logging_level="WARNING")
            self._ray = ray
            actor_cls = ray.remote(num_cpus=1)(RolloutWorker)
            self._actors = [
                actor_cls.remote(map, robots, n, s, dict(options))
                for n, s in zip(self.sizes, seeds, strict=True)
            ]
            spec = ray.get(self._actors[0].spec.remote())
        else:
            self._local = [
                RolloutWorker(map, robots, n, s, dict(options))
                for n, s in zip(self.sizes, seeds, strict=True)
            ]
            spec = self._local[0].spec()
        self.obs_size: int = spec["obs_size"]
        self.n_actions: int = spec["n_actions"]
        self.max_steps: int = spec["max_steps"]

    def _call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Call ``method`` on every shard with its arguments; results in shard order."""
        if self._ray is not None:
            refs = [getattr(a, method).remote(*x) for a, x in zip(self._actors, args, strict=True)]
            out: list[Any] = self._ray.get(refs)
            return out
        return [getattr(w, method)(*x) for w, x in zip(self._local, args, strict=True)]

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every shard (shard ``i`` with the ``i``-th seed spawned from ``seed``)."""
        if seed is not None:
            self._seed = seed
            seeds: list[int | None] = list(shard_seeds(seed, self.workers))
        else:
            seeds = [None] * self.workers
        return np.concatenate(self._call("reset", [(s,) for s in seeds])), {}

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world with ``(num_envs, N)`` actions."""
        acts = batch_actions(actions, self)
        parts = [acts[lo:hi] for lo, hi in zip(self._bounds[:-1], self._bounds[1:], strict=True)]
        outs = self._call("step", [(p,) for p in parts])
        obs = np.concatenate([o[0] for o in outs])
        rewards = np.concatenate([o[1] for o in outs])
        term = np.concatenate([o[2] for o in outs])
        trunc = np.concatenate([o[3] for o in outs])
        info = {k: np.concatenate([o[4][k] for o in outs]) for k in outs[0][4]}
        return obs, rewards, term, trunc, info

    def collect(self, actor: Any, steps: int, *, seed: int = 0) -> dict[str, Any]:
        """Every worker acts with a copy of ``actor`` for ``steps`` steps, all in parallel.

        The actor-side alternative to lockstep :meth:`step`: one round trip per rollout instead
        of one per step, and the policy's forward passes run in the workers too. Worker ``i``
        samples with the ``i``-th seed spawned from ``seed``.

        Args:
            actor: a :class:`fleetmind.rl.neural.ppo.Actor` (its weights are sent).
            steps: batched steps ``T``.
            seed: sampling seed of this rollout.

        Returns:
            The workers' trajectories joined on the world axis (see
            :meth:`RolloutWorker.collect`).
        """
        policy = {
            "state_dict": {k: v.detach().cpu() for k, v in actor.state_dict().items()},
            "hidden": tuple(actor.hidden),
            "agent_id": bool(actor.agent_id),
        }
        if self._ray is not None:
            policy = self._ray.put(policy)
        seeds = shard_seeds(seed, self.workers)
        parts = self._call("collect", [(policy, steps, s) for s in seeds])
        axis = {"last_obs": 0}
        return {k: np.concatenate([p[k] for p in parts], axis=axis.get(k, 1)) for k in parts[0]}

    def global_state(self) -> NDArray[np.float32]:
        """``(num_envs, S)`` global state (one more round trip to the workers)."""
        return np.concatenate(self._call("global_state", [()] * self.workers))

    def close(self) -> None:
        """Stop the Ray actors (local shards need nothing)."""
        if self._ray is not None:
            for a in self._actors:
                self._ray.kill(a)
            self._actors = []
            self._ray = None

    def __enter__(self) -> ShardedVectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
