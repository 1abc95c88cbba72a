"""Learning benchmarks (``fleetmind bench learn``): learner speed and time-to-baseline.

- ``learners``: world steps per second (and agent steps per second) of every neural learner on
  ``warehouse-small`` with 4 robots, 8 worlds, training included. The target machine has 2
  cores; torch runs one intra-op thread by default (``threads``), because the networks are small
  and a second thread measured 5x slower on a loaded 2-core machine (threads spin and wait).
- ``nav``: the shortest-path baseline (always the action with the best heuristic value) and the
  shipped navigation policy, deliveries and collision attempts per robot per tick on
  ``warehouse-small`` with 4 robots (same seeds, no shield: a move into a robot fails and counts
  as a collision attempt); then IPPO trained from scratch in chunks, evaluated after each, until
  its greedy delivery rate reaches 95% of the baseline's or the time cap runs out.

Quick mode (< 60 s): short speed runs, a 25 s cap on the from-scratch run (too short to reach
the threshold; it reports how far it got). Full mode: 20k steps per learner, a 15 min cap.
"""

from __future__ import annotations

import importlib
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from fleetmind.envs import make_vector
from fleetmind.rl import nav
from fleetmind.rl.neural import ALGOS, MODULES, ON_POLICY, config_class
from fleetmind.rl.neural.ppo import Actor, PPOConfig

log = logging.getLogger(__name__)

MAP = "warehouse-small"
ROBOTS = 4
THRESHOLD = 0.95


def _speed(algo: str, steps: int) -> dict[str, float]:
    module = importlib.import_module(MODULES[algo])
    env = make_vector(MAP, ROBOTS, 8, seed=0, max_steps=256)
    cfg: Any = config_class(algo)(**({} if algo in ON_POLICY else {"learning_starts": 256}))
    result = module.train(env, cfg, seed=0, steps=steps)
    return {
        "world_steps_per_s": result.samples_per_s,
        "agent_steps_per_s": result.samples_per_s * ROBOTS,
        "steps": float(result.steps),
        "updates": float(result.updates),
    }


def _time_to_baseline(cap_s: float, chunk: int, eval_kw: dict[str, Any]) -> dict[str, Any]:
    from fleetmind.rl.neural import ippo

    base = nav.evaluate(nav.shortest_path_actions, MAP, ROBOTS, **eval_kw)
    target = THRESHOLD * base["deliveries_per_robot_tick"]
    # Constant bonus: chunks of one growing run would restart an annealing schedule.
    cfg = PPOConfig(agent_id=False, hidden=(128, 128), ent_coef=nav.NAV_ENT_COEF)
    train_s = 0.0
    t0 = time.perf_counter()
    history = []
    reached = False
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        steps = 0
        env = make_vector(MAP, ROBOTS, 16, seed=0, max_steps=256)
        last_chunk_s = 0.0
        while time.perf_counter() - t0 + last_chunk_s < cap_s:
            c0 = time.perf_counter()
            steps += chunk
            res = ippo.train(env, cfg, seed=0, steps=steps, out_dir=out, resume=steps > chunk)
            train_s += res.wall_s
            actor = res.policy
            assert isinstance(actor, Actor)
            ev = nav.evaluate(nav.NavPolicy(actor).act, MAP, ROBOTS, **eval_kw)
            history.append((res.steps, ev["deliveries_per_robot_tick"]))
            last_chunk_s = time.perf_counter() - c0
            if ev["deliveries_per_robot_tick"] >= target:
                reached = True
                break
    return {
        "reached": reached,
        "train_wall_s": train_s,
        "total_wall_s": time.perf_counter() - t0,
        "cap_s": cap_s,
        "steps": history[-1][0] if history else 0,
        "target_deliveries_per_robot_tick": target,
        "history": history,
    }


def run(*, quick: bool = True, threads: int = 1) -> dict[str, Any]:
    """Run the learning benchmarks.

    Args:
        quick: short runs (under a minute) instead of the full ones.
        threads: torch intra-op threads during the runs.

    Returns:
        ``{"learners": {algo: speeds}, "nav": {...}, "quick": quick, "threads": threads}``.
    """
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        speed_steps = 2048 if quick else 20_000
        _speed("ippo", 128)  # warm-up: torch kernels and the distance cache of the first map
        learners = {algo: _speed(algo, speed_steps) for algo in ALGOS}
        eval_kw: dict[str, Any] = (
            {"seeds": (100,), "num_envs": 4, "ticks": 300}
            if quick
            else {"seeds": (100, 101), "num_envs": 8, "ticks": 500}
        )
        baseline = nav.evaluate(nav.shortest_path_actions, MAP, ROBOTS, **eval_kw)
        shipped = nav.evaluate(
            nav.NavPolicy.load(nav.default_policy_path()).act, MAP, ROBOTS, **eval_kw
        )
        scratch = _time_to_baseline(25.0 if quick else 900.0, 8_192 if quick else 32_768, eval_kw)
    finally:
        torch.set_num_threads(saved_threads)
    base_rate = baseline["deliveries_per_robot_tick"]
    return {
        "quick": quick,
        "threads": threads,
        "map": MAP,
        "robots": ROBOTS,
        "learners": learners,
        "nav": {
            "baseline": baseline,
            "shipped_policy": shipped,
            "shipped_vs_baseline": shipped["deliveries_per_robot_tick"] / base_rate
            if base_rate
            else float("inf"),
            "from_scratch": scratch,
        },
    }


def format_table(result: dict[str, Any]) -> str:
    """The benchmark result as plain text lines."""
    lines = [
        f"learners on {result['map']}, {result['robots']} robots, 8 worlds, "
        f"{result['threads']} torch thread(s):"
    ]
    for algo, s in result["learners"].items():
        lines.append(
            f"  {algo:8s} {s['world_steps_per_s']:9.0f} world steps/s "
            f"{s['agent_steps_per_s']:9.0f} agent steps/s"
        )
    n = result["nav"]
    for name in ("baseline", "shipped_policy"):
        e = n[name]
        lines.append(
            f"  {name:15s} deliveries/robot/tick {e['deliveries_per_robot_tick']:.4f}  "
            f"collision attempts/robot/tick {e['collision_attempts_per_robot_tick']:.4f}"
        )
    s = n["from_scratch"]
    lines.append(
        f"  IPPO from scratch: reached 95% of baseline: {s['reached']} after {s['steps']} steps, "
        f"{s['train_wall_s']:.1f} s training ({s['total_wall_s']:.1f} s with evaluation)"
    )
    return "\n".join(lines)
