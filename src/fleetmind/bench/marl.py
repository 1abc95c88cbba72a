"""Multi-agent learners at equal wall time (``fleetmind bench marl``): mat, mappo, maddpg, qmix.

Each learner trains on the RWARE twin (:mod:`fleetmind.envs.rware_twin`: rware 2.0's rules in
numpy, every world of the batch stepped at once) for the same wall-clock budget
(``time_limit_s``), each with its default config and ``num_envs`` worlds, one torch thread.
Its greedy policy then plays ``eval_episodes`` 500-step episodes of the **real** ``rware``
package (:func:`fleetmind.rl.neural.adapters.rware_batch`), the same seeded episodes for every
learner, and the row reports deliveries per 500-step episode (all robots together, and per
robot). Beside them: a uniformly random policy on the same episodes (fleetmind has no
hand-written rware policy; random is the floor every published rware curve starts from) and,
for each learner, the deliveries per episode its sampling policy made in the last quarter of
its training episodes (on the twin).

Rewards are rware's individual ones (+1 to the robot at the goal per delivery), so a delivery
is a positive reward. Without ``rware`` installed the evaluation runs on the twin and says so.

Quick mode (a few minutes): a 30 s budget per learner, 4 evaluation episodes, one seed. The
comparison in ``docs/neural.md`` is ``run(quick=False)``: 600 s per learner.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.rl.neural import MODULES, config_class
from fleetmind.rl.neural.adapters import EPISODE, TwinBatch, evaluate_rware

__all__ = ["ALGOS", "EPISODE", "TwinBatch", "evaluate", "format_table", "run"]

log = logging.getLogger(__name__)

ALGOS: tuple[str, ...] = ("mat", "mappo", "maddpg", "qmix")


def evaluate(
    act: Callable[[NDArray[np.float32]], NDArray[np.int64]],
    env_id: str,
    *,
    episodes: int,
    seed: int,
) -> dict[str, Any]:
    """Deliveries per 500-step episode of ``act`` on ``episodes`` seeded episodes of rware.

    See :func:`fleetmind.rl.neural.adapters.evaluate_rware`.
    """
    out = evaluate_rware(act, env_id, episodes=episodes, seed=seed)
    if out["eval_on"] == "twin":
        log.warning("bench marl: rware is not installed; evaluated on the twin")
    return out


def random_policy(seed: int, n_actions: int) -> Callable[[NDArray[np.float32]], NDArray[np.int64]]:
    """Uniform random actions from a seeded generator."""
    rng = np.random.default_rng(seed)

    def act(obs: NDArray[np.float32]) -> NDArray[np.int64]:
        out: NDArray[np.int64] = rng.integers(n_actions, size=obs.shape[:-1])
        return out

    return act


def greedy(policy: torch.nn.Module) -> Callable[[NDArray[np.float32]], NDArray[np.int64]]:
    """The argmax of a learner's result policy (MAT: its greedy autoregressive decoding)."""

    def act(obs: NDArray[np.float32]) -> NDArray[np.int64]:
        with torch.no_grad():
            out: NDArray[np.int64] = policy(torch.from_numpy(obs)).argmax(-1).numpy()
        return out

    return act


def train_one(
    algo: str, env_id: str, *, seed: int, budget_s: float, num_envs: int
) -> tuple[Any, dict[str, Any]]:
    """Train ``algo`` on the twin for ``budget_s`` seconds; its result and a summary row."""
    module = importlib.import_module(MODULES[algo])
    env = TwinBatch(env_id, num_envs, seed=seed)
    load_before = os.getloadavg()[0]
    res = module.train(env, config_class(algo)(), seed=seed, steps=10**12, time_limit_s=budget_s)
    n_ep = len(res.returns["robot_0"])
    tail = slice(n_ep - max(1, n_ep // 4), n_ep) if n_ep else slice(0, 0)
    train_deliveries = [
        sum(int(res.deliveries[a][k]) for a in res.deliveries) for k in range(n_ep)[tail]
    ]
    return res, {
        "algo": algo,
        "seed": seed,
        "world_steps": res.steps,
        "updates": res.updates,
        "train_wall_s": round(res.wall_s, 1),
        # The machine is shared: the 1-minute load average before and after training.
        "load_avg": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "world_steps_per_s": round(res.samples_per_s, 1),
        "train_episodes": n_ep,
        "train_deliveries_per_episode_last_quarter": (
            float(np.mean(train_deliveries)) if train_deliveries else None
        ),
    }


def run(
    *,
    quick: bool = True,
    env_id: str = "rware-tiny-2ag-v2",
    algos: Sequence[str] = ALGOS,
    seeds: Sequence[int] = (0,),
    budget_s: float | None = None,
    num_envs: int = 8,
    eval_episodes: int | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """Train each learner for the same wall time on the twin, score it on real rware.

    Args:
        quick: 30 s per learner and 4 evaluation episodes (else 600 s and 8).
        env_id: the rware task.
        algos: learners (names of ``fleetmind train --algo``).
        seeds: one training run per learner and seed.
        budget_s: seconds of training per run (overrides ``quick``).
        num_envs: twin worlds per learner.
        eval_episodes: 500-step episodes of the greedy evaluation (overrides ``quick``).
        threads: torch intra-op threads.

    Returns:
        ``{"rows": [...], "random": {...}, "env_id", "budget_s", "eval_episodes", ...}``.

    Raises:
        ConfigError: an unknown algorithm or a bad budget.
    """
    unknown = [a for a in algos if a not in MODULES]
    if unknown:
        raise ConfigError(f"algos: unknown {unknown}; known: {sorted(MODULES)}")
    budget = budget_s if budget_s is not None else (30.0 if quick else 600.0)
    if not budget > 0:
        raise ConfigError(f"budget_s: must be > 0, got {budget}")
    episodes = eval_episodes or (4 if quick else 8)
    eval_seed = 10_000
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    rows = []
    try:
        for seed in seeds:
            for algo in algos:
                res, row = train_one(algo, env_id, seed=seed, budget_s=budget, num_envs=num_envs)
                row |= evaluate(greedy(res.policy), env_id, episodes=episodes, seed=eval_seed)
                log.info("bench marl: %s", row)
                rows.append(row)
        n_actions = TwinBatch(env_id, 1, seed=0).n_actions
        baseline = evaluate(
            random_policy(eval_seed, n_actions), env_id, episodes=episodes, seed=eval_seed
        )
    finally:
        torch.set_num_threads(saved)
    return {
        "env_id": env_id,
        "budget_s": budget,
        "num_envs": num_envs,
        "eval_episodes": episodes,
        "seeds": list(seeds),
        "threads": threads,
        "rows": rows,
        "random": baseline,
        "wall_s": round(time.perf_counter() - t0, 1),
        "quick": quick,
    }


def format_table(result: dict[str, Any]) -> str:
    """A Markdown table of :func:`run`'s result."""
    lines = [
        f"{result['env_id']}, {result['budget_s']:.0f} s of training per run, "
        f"greedy evaluation: {result['eval_episodes']} episodes of {EPISODE} steps",
        "",
        "| algo | seed | world steps | steps/s | deliveries/episode (greedy, real rware) "
        "| per robot | training deliveries/episode (last quarter) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        per = " / ".join(f"{v:.2f}" for v in r["per_agent"].values())
        tr = r["train_deliveries_per_episode_last_quarter"]
        lines.append(
            f"| {r['algo']} | {r['seed']} | {r['world_steps']:,} | {r['world_steps_per_s']:,.0f} "
            f"| {r['deliveries_per_episode']:.2f} | {per} | "
            f"{'-' if tr is None else f'{tr:.2f}'} |"
        )
    rnd = result["random"]
    per = " / ".join(f"{v:.2f}" for v in rnd["per_agent"].values())
    lines.append(f"| random | - | - | - | {rnd['deliveries_per_episode']:.2f} | {per} | - |")
    return "\n".join(lines)
