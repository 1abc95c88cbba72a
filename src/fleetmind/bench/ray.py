"""Benchmark of the Ray backend: sweep wall time and rollout samples/s with 1 and 2 workers.

Two measurements, each on the same work with 1 and then 2 Ray workers:

- **sweep**: ``runs`` dispatch runs (the classical strategy, one seed each, run folders
  recorded) through :func:`fleetmind.scale.jobs.run_jobs` with at most ``workers`` tasks in
  flight; wall time of the whole sweep.
- **rollout**: a :class:`fleetmind.scale.rollout.ShardedVectorEnv` of ``num_envs`` worlds split
  over ``workers`` Ray actors, stepped in lockstep by a policy network in this process (what
  the learners do today); world steps per second and robot steps per second.
- **collect**: the same env, each worker running a copy of the policy for whole rollouts
  (:meth:`~fleetmind.scale.rollout.ShardedVectorEnv.collect`).

Both are also measured once with in-process shards (no Ray) as the reference.

Workers are warmed up (processes started, fleetmind imported) before timing. On a 2-core
machine expect close to 2x for the sweep (independent runs, no communication) and less for
lockstep rollouts: the policy forward pass and the gather in this process are serial, and every
step pays a Ray round trip (see ``docs/ray.md``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetmind.scale.backend import ray_session
from fleetmind.scale.jobs import dispatch_job, run_jobs
from fleetmind.scale.rollout import ShardedVectorEnv

log = logging.getLogger(__name__)

FULL: dict[str, Any] = {
    "sweep": {"map": "warehouse-small", "robots": 8, "steps": 1000, "runs": 4},
    "rollout": {"map": "warehouse-small", "robots": 8, "num_envs": 32, "steps": 150},
}
QUICK: dict[str, Any] = {
    "sweep": {"map": "warehouse-tiny", "robots": 2, "steps": 40, "runs": 2},
    "rollout": {"map": "warehouse-tiny", "robots": 2, "num_envs": 4, "steps": 20},
}


def _sweep(case: dict[str, Any], workers: int, folder: Path) -> float:
    jobs = [
        dispatch_job(
            {
                "map": case["map"],
                "robots": case["robots"],
                "steps": case["steps"],
                "seed": seed,
                "planner_mode": "sync",
            },
            folder / f"w{workers}-s{seed}",
        )
        for seed in range(case["runs"])
    ]
    t0 = time.perf_counter()
    run_jobs(jobs, backend="ray", workers=workers)
    return time.perf_counter() - t0


def _policy(obs_size: int, n_actions: int, n_agents: int) -> Callable[[Any], Any]:
    import torch

    from fleetmind.rl.neural.ppo import Actor

    torch.manual_seed(0)
    actor = Actor(obs_size, n_actions, n_agents, (64, 64), agent_id=True)
    gen = torch.Generator().manual_seed(0)

    def act(obs: Any) -> Any:
        with torch.no_grad():
            logits = actor(torch.from_numpy(obs))
            probs = torch.softmax(logits, -1).reshape(-1, n_actions)
            return torch.multinomial(probs, 1, generator=gen).reshape(logits.shape[:-1]).numpy()

    return act


def _rollout(case: dict[str, Any], workers: int, backend: str) -> dict[str, float]:
    env = ShardedVectorEnv(
        case["map"], case["robots"], case["num_envs"], workers=workers, seed=0, backend=backend
    )
    try:
        act = _policy(env.obs_size, env.n_actions, env.n_robots)
        obs, _ = env.reset()
        for _ in range(3):  # warm-up: first calls pay imports and caches
            obs = env.step(act(obs))[0]
        t0 = time.perf_counter()
        for _ in range(case["steps"]):
            obs = env.step(act(obs))[0]
        wall = time.perf_counter() - t0
    finally:
        env.close()
    world_steps = case["steps"] * case["num_envs"]
    return {
        "wall_s": wall,
        "world_steps_per_s": world_steps / wall,
        "robot_steps_per_s": world_steps * case["robots"] / wall,
    }


def _collect(case: dict[str, Any], workers: int, backend: str) -> dict[str, float]:
    from fleetmind.rl.neural.ppo import Actor

    env = ShardedVectorEnv(
        case["map"], case["robots"], case["num_envs"], workers=workers, seed=0, backend=backend
    )
    try:
        actor = Actor(env.obs_size, env.n_actions, env.n_robots, (64, 64), agent_id=True)
        env.reset()
        env.collect(actor, 3, seed=0)  # warm-up
        rollouts = 3
        t0 = time.perf_counter()
        for i in range(rollouts):
            env.collect(actor, case["steps"], seed=i + 1)
        wall = time.perf_counter() - t0
    finally:
        env.close()
    world_steps = rollouts * case["steps"] * case["num_envs"]
    return {
        "wall_s": wall,
        "world_steps_per_s": world_steps / wall,
        "robot_steps_per_s": world_steps * case["robots"] / wall,
    }


def run(*, quick: bool = False, address: str | None = None) -> dict[str, Any]:
    """Measure sweep wall time and rollout samples/s with 1 and 2 Ray workers.

    Args:
        quick: smoke-sized cases.
        address: Ray cluster to join (None: the running instance, else a new local one with 2
            CPUs, stopped at the end).

    Returns:
        ``sweep`` and ``rollout`` sections (per worker count) and the cases measured.
    """
    import torch

    cases = QUICK if quick else FULL
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ray_session(address, num_cpus=2) as ray, tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            cpus = float(ray.cluster_resources().get("CPU", 0))
            sweep_case = cases["sweep"]
            # Warm-up: start both worker processes and import fleetmind in them.
            _sweep({**sweep_case, "steps": 5, "runs": 2}, 2, folder / "warm")
            sweep = {str(w): _sweep(sweep_case, w, folder) for w in (1, 2)}
            rollout_case = cases["rollout"]
            rollout = {
                "local-1": _rollout(rollout_case, 1, "local"),
                **{str(w): _rollout(rollout_case, w, "ray") for w in (1, 2)},
            }
            collect = {
                "local-1": _collect(rollout_case, 1, "local"),
                **{str(w): _collect(rollout_case, w, "ray") for w in (1, 2)},
            }
    finally:
        torch.set_num_threads(threads)
    return {
        "cluster_cpus": cpus,
        "sweep": {
            "wall_s": sweep,
            "speedup_2_vs_1": sweep["1"] / sweep["2"],
        },
        "rollout": {
            **rollout,
            "speedup_2_vs_1": rollout["2"]["world_steps_per_s"] / rollout["1"]["world_steps_per_s"],
        },
        "collect": {
            **collect,
            "speedup_2_vs_1": collect["2"]["world_steps_per_s"] / collect["1"]["world_steps_per_s"],
        },
        "load_avg_1min": os.getloadavg()[0],
        "cases": cases,
    }


def _rate_row(label: str, case: dict[str, Any]) -> tuple[str, str, str, str]:
    """A table row of world steps/s with 1 and 2 workers and the speed-up."""
    return (
        f"{label} (world steps/s)",
        f"{case['1']['world_steps_per_s']:.0f}",
        f"{case['2']['world_steps_per_s']:.0f}",
        f"{case['speedup_2_vs_1']:.2f}x",
    )


def format_table(result: dict[str, Any]) -> Any:
    """A Rich table of :func:`run`'s result."""
    from rich.table import Table

    table = Table(title=f"Ray backend ({result['cluster_cpus']:g} CPUs)")
    table.add_column("measure")
    table.add_column("1 worker", justify="right")
    table.add_column("2 workers", justify="right")
    table.add_column("2 vs 1", justify="right")
    sw = result["sweep"]
    s = result["cases"]["sweep"]
    table.add_row(
        f"sweep: {s['runs']} runs x {s['steps']} ticks, {s['robots']} robots (wall s)",
        f"{sw['wall_s']['1']:.2f}",
        f"{sw['wall_s']['2']:.2f}",
        f"{sw['speedup_2_vs_1']:.2f}x",
    )
    ro = result["rollout"]
    r = result["cases"]["rollout"]
    table.add_row(*_rate_row(f"rollout: {r['num_envs']} worlds x {r['robots']} robots", ro))
    co = result["collect"]
    table.add_row(*_rate_row("rollout, policy in the workers", co))
    table.add_row(
        "in-process shard, no Ray: lockstep / policy in shard (world steps/s)",
        f"{ro['local-1']['world_steps_per_s']:.0f} / {co['local-1']['world_steps_per_s']:.0f}",
        "",
        "",
    )
    table.caption = f"1-minute load average {result['load_avg_1min']:.1f}"
    return table
