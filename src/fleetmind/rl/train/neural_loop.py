"""The neural loop: a :mod:`fleetmind.rl.neural` learner on batched worlds, then its evaluation.

Warehouse maps train on ``make_vector`` and are evaluated on fresh worlds
(``_evaluate_batch``); rware ids train on the exact twin and are scored on the real rware
package (:class:`~fleetmind.rl.train.rware.RwareCurve`).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.rl.reward import ScoredVectorEnv
from fleetmind.rl.train.output import ProgressBar, finish, tensorboard_writer
from fleetmind.rl.train.request import (
    WAREHOUSE_EPISODE_TICKS,
    Request,
    TrainRun,
    reward_bound,
)
from fleetmind.rl.train.rware import RWARE_ID, RwareCurve, rware_defaults


def _config(algo: str, fields: dict[str, Any]) -> Any:
    from fleetmind.rl.neural import config_class

    cls = config_class(algo)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ConfigError(
            f"overrides: unknown {cls.__name__} field(s) {unknown}; known: {sorted(known)}"
        )
    if "hidden" in fields:
        fields["hidden"] = tuple(int(x) for x in fields["hidden"])
    return cls(**fields)


def _make_env(
    map: str,
    robots: int,
    num_envs: int,
    *,
    seed: int,
    reward_mode: str,
    max_steps: int | None,
    shaping: float = 0.0,
) -> Any:
    if RWARE_ID.match(map):
        from fleetmind.rl.neural.adapters import TwinBatch

        if reward_mode != "individual":
            raise ConfigError("reward_mode: rware envs have their own reward; use 'individual'")
        # Training runs on the exact twin (rware's rules, every world at once); the figures
        # are measured on the real rware package (RwareCurve, adapters.evaluate_rware).
        env = TwinBatch(map, num_envs, seed=seed, shaping=shaping)
        if env.n_robots != robots:
            raise ConfigError(f"robots: {map} has {env.n_robots} robots, got --robots {robots}")
        return env
    from fleetmind.envs import make_vector

    return make_vector(
        map,
        robots,
        num_envs,
        seed=seed,
        reward_mode=reward_mode,
        max_steps=max_steps or WAREHOUSE_EPISODE_TICKS,
    )


def train_neural(
    req: Request,
    *,
    resume: bool,
    checkpoint_every: int,
    num_envs: int,
    max_steps: int | None,
    progress: bool,
    time_limit_s: float | None = None,
    eval_every_s: float | None = None,
    eval_episodes: int = 4,
    shaping: float = 0.0,
    threads: int | None = None,
    curve_episodes: int | None = None,
) -> TrainRun:
    """Train a neural learner on ``req`` (options: :func:`~fleetmind.rl.train.train`'s)."""
    (map, robots, algo, reward_mode, steps, seed, out, overrides, eval_ticks, spec, scorer) = req
    import torch

    from fleetmind.rl.neural import MODULES, base

    if threads is not None:
        torch.set_num_threads(threads)
    rware = bool(RWARE_ID.match(map))

    env_seed, _learn, eval_seed = (
        int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(3)
    )
    env = _make_env(
        map, robots, num_envs, seed=env_seed, reward_mode=reward_mode, max_steps=max_steps,
        shaping=shaping,
    )  # fmt: skip
    scored = ScoredVectorEnv(env, spec, scorer) if spec.scored else None
    if scored is not None:
        env = scored
    fields = {
        "shared_reward": reward_mode.strip() == "shared",
        "reward_bound": spec.bound(reward_bound(reward_mode, robots)),
        **(rware_defaults(algo) if rware else {}),
        **overrides,
    }
    cfg = _config(algo, fields)
    module = importlib.import_module(MODULES[algo])
    writer = tensorboard_writer(out / "tb")
    callbacks: list[base.Callback] = []
    if writer is not None:

        def to_tensorboard(event: base.Event) -> None:
            for key, value in event.scalars.items():
                writer.add_scalar(key, value, event.step)

        callbacks.append(to_tensorboard)
    curve = RwareCurve(
        map,
        episodes=curve_episodes or eval_episodes,
        final_episodes=eval_episodes,
        seed=eval_seed,
        every_s=eval_every_s,
        out=out,
    )
    if rware:
        curve.start()
        callbacks.append(curve.on_event)
    spent_before = curve.spent()
    started = time.monotonic()
    bar = ProgressBar(
        progress,
        algo,
        steps,
        seconds=time_limit_s,
        clock=lambda: time.monotonic() - started - (curve.spent() - spent_before),
    )
    with bar as advance:
        callbacks.append(lambda e: advance(e.step))
        result = module.train(
            env,
            cfg,
            seed=seed,
            steps=steps,
            out_dir=out,
            callbacks=callbacks,
            checkpoint_every=checkpoint_every,
            resume=resume,
            time_limit_s=time_limit_s,
            # Evaluations inside the call (the random policy's ran before it) do not count.
            excluded_s=lambda: curve.spent() - spent_before,
        )
    torch.save(
        {"algo": algo, "state_dict": result.policy.state_dict(), "config": result.config},
        out / "policy.pt",
    )
    eval_inside = curve.spent() - spent_before
    policy = result.policy

    def act(obs: NDArray[np.float32]) -> NDArray[np.int64]:
        with torch.no_grad():
            out_: NDArray[np.int64] = policy(torch.from_numpy(obs)).argmax(-1).numpy()
        return out_

    if rware:
        curve.evaluate(policy, result.steps, final=True)
        ev = curve.metrics()
    else:
        eval_env = _make_env(
            map,
            robots,
            4,
            seed=eval_seed,
            reward_mode=reward_mode,
            max_steps=max_steps or WAREHOUSE_EPISODE_TICKS,
        )
        ev = _evaluate_batch(eval_env, act, eval_ticks)
    config = {
        **req.record(),
        "seed": seed,
        "num_envs": num_envs,
        "max_steps": max_steps,
        "backend": "local",
        "reward": str(spec),
        "resolved": result.config,
        **({"time_limit_s": time_limit_s, "shaping": shaping, "trained_on": "rware twin"}
           if rware else {}),
    }  # fmt: skip
    metrics = {
        "algo": algo,
        "steps": result.steps,
        "updates": result.updates,
        "robots": robots,
        "train_wall_s": result.wall_s - eval_inside,
        "samples_per_s": result.steps_this_call / max(1e-9, result.wall_s - eval_inside),
        **ev,
        "final_losses": {k: v[-1] for k, v in result.losses.items() if v},
    }
    parts: Mapping[str, Mapping[str, Sequence[float]]] = {}
    if scored is not None:
        metrics["llm_reward"] = scored.scoring.summary()
        parts = scored.scoring.curves()
    return finish(out, config, metrics, result.returns, result.deliveries,
                   result.episode_end_steps, writer, peaks=result.peaks, parts=parts)  # fmt: skip


def _evaluate_batch(env: Any, act: Any, ticks: int) -> dict[str, Any]:
    """Greedy rollout of ``ticks`` batched steps; per-agent deliveries and rewards."""
    obs, _ = env.reset()
    b, n = env.num_envs, env.n_robots
    delivered = np.zeros(n, dtype=np.int64)
    reward = np.zeros(n, dtype=np.float64)
    conflicts = 0
    for _ in range(ticks):
        obs, r, _te, _tr, info = env.step(act(obs))
        reward += r.sum(axis=0)
        if "delivered" in info:
            delivered += info["delivered"].sum(axis=0)
        if "conflict" in info:
            conflicts += int(info["conflict"].sum())
    agents = [f"robot_{i}" for i in range(n)]
    return {
        "eval_ticks": ticks,
        "eval_worlds": b,
        "tasks_completed": int(delivered.sum()),
        "throughput": float(delivered.sum()) / (ticks * b),
        "per_agent_deliveries": {a: int(delivered[i]) for i, a in enumerate(agents)},
        "per_agent_reward": {a: float(reward[i]) for i, a in enumerate(agents)},
        "collision_attempts": conflicts,
    }
