"""The RWARE twin: step-by-step agreement with the real rware package, and speed against it.

``fleetmind bench rware`` calls :func:`run` and prints :func:`format_table` (or the JSON of
the result). Per rware env ``rware-{size}-{N}ag-v2`` (sizes tiny, small, medium, large; ``N``
1, 2, 4, 19 by default), in one process, one after another:

- verification: :func:`~fleetmind.testing.rware_twin.compare_with_rware` on uniform random
  actions from the same seed (``N``) for ``steps`` steps (10,000 by default; rware's
  500-step episodes restart with ``reset()``, both generators continuing): every
  observation, reward, termination, truncation, info and the hidden state compared after
  every reset and step. ``mismatches`` must be 0.
- speed, agent steps per second (env steps x robots x worlds), each over a fixed wall budget
  after a warm-up (``quick``: 0.5 s, else 2 s): ``rware``, the raw ``rware.Warehouse`` (no
  wrapper: the fastest way to step it), the baseline; ``twin-single``, the twin's
  PettingZoo ParallelEnv with dict actions; ``twin-vector``, the twin's vector env with
  ``num_envs`` worlds (256) and observations on; ``batch`` and ``shaped``, the learners'
  ``TwinBatch`` over the same worlds with ``--shaping`` 0 and :data:`SHAPING` (the dense
  guide's cost is their ratio, ``shaping_cost``: how many times slower a shaped step is).
  Random actions are drawn beforehand from
  the seeded generator and reused in a cycle; episodes restart at rware's time limit.
  Ratios are over rware measured in the same command; the three take turns (ten slices of
  a tenth of the budget each), so a change of machine load weighs on all of them alike.

Target (issue 16): the vector env at least 50x rware's agent steps per second on every case,
with 0 mismatches. Needs rware (``pip install fleetmind[rware]``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
from rich.table import Table

from fleetmind.bench.sim import parallel_stepper
from fleetmind.envs.rware import make_rware
from fleetmind.envs.rware_twin import make_rware_twin, make_rware_vector
from fleetmind.errors import ConfigError, check_range

__all__ = ["AGENTS", "SHAPING", "SIZES", "VECTOR_RATIO_TARGET", "format_table", "run"]

logger = logging.getLogger(__name__)

SIZES: Final = ("tiny", "small", "medium", "large")
AGENTS: Final = (1, 2, 4, 19)
VECTOR_RATIO_TARGET: Final = 50.0
"""The twin's vector env over rware, agent steps per second (issue 16)."""
SHAPING: Final = 0.2
"""Weight of the dense guide in the ``shaped`` timing (``bench marl --shaping``'s ablation)."""
_POOL: Final = 512  # action draws per measurement, used in a cycle
_SLICES: Final = 10  # turns of the interleaved timing


def _timed(steps: Sequence[Callable[[], object]], *, budget_s: float) -> list[float]:
    """Calls per second of each step function, timed in turns (see the module docstring).

    Each is warmed up for a tenth of the budget (at least one call); then they take turns,
    ten slices of a tenth of the budget each, so a change of load weighs on all alike.
    """
    for step in steps:
        end = time.perf_counter() + budget_s / 10
        step()
        while time.perf_counter() < end:
            step()
    counts = [0] * len(steps)
    spent = [0.0] * len(steps)
    for _ in range(_SLICES):
        for k, step in enumerate(steps):
            start = time.perf_counter()
            now = start
            while now < start + budget_s / _SLICES:
                step()
                counts[k] += 1
                now = time.perf_counter()
            spent[k] += now - start
    return [c / t for c, t in zip(counts, spent, strict=True)]


def _step_rware(env_id: str, n: int, seed: int) -> Callable[[], None]:
    adapter = make_rware(env_id, seed=seed)
    warehouse = adapter.rware
    warehouse.reset(seed=seed)
    pool = np.random.default_rng(seed).integers(5, size=(_POOL, n)).tolist()
    tick = [0]

    def step() -> None:
        if warehouse.step(pool[tick[0] % _POOL])[2]:
            warehouse.reset()
        tick[0] += 1

    return step


def _step_single(env_id: str, seed: int) -> Callable[[], None]:
    env = make_rware_twin(env_id, seed=seed)
    env.reset()
    return parallel_stepper(env, seed=seed, pool=_POOL)


def _cycling(env: Any, n: int, num_envs: int, seed: int) -> Callable[[], None]:
    """A step of ``env`` (reset here) through 8 seeded random joint actions, in turn."""
    env.reset()
    pool = np.random.default_rng(seed).integers(5, size=(8, num_envs, n))
    tick = [0]

    def step() -> None:
        env.step(pool[tick[0] % len(pool)])
        tick[0] += 1

    return step


def _step_vector(env_id: str, n: int, num_envs: int, seed: int) -> Callable[[], None]:
    return _cycling(make_rware_vector(env_id, num_envs, seed=seed), n, num_envs, seed)


def _step_batch(
    env_id: str, n: int, num_envs: int, seed: int, shaping: float
) -> Callable[[], None]:
    from fleetmind.rl.neural.adapters import TwinBatch

    return _cycling(TwinBatch(env_id, num_envs, seed=seed, shaping=shaping), n, num_envs, seed)


def _case(
    size: str, n: int, *, steps: int, num_envs: int, budget_s: float, seed: int
) -> dict[str, Any]:
    from fleetmind.testing.rware_twin import compare_with_rware

    env_id = f"rware-{size}-{n}ag-v2"
    start = time.perf_counter()
    check = compare_with_rware(env_id, steps=steps, seed=seed + n)
    verify_s = time.perf_counter() - start
    steppers = [
        _step_rware(env_id, n, seed),
        _step_single(env_id, seed),
        _step_vector(env_id, n, num_envs, seed),
        _step_batch(env_id, n, num_envs, seed, 0.0),
        _step_batch(env_id, n, num_envs, seed, SHAPING),
    ]
    calls = _timed(steppers, budget_s=budget_s)
    rware_rate, single = calls[0] * n, calls[1] * n
    vector, batch, shaped = (c * n * num_envs for c in calls[2:])
    row = {
        "env_id": env_id,
        "size": size,
        "robots": n,
        "steps_verified": check.steps,
        "episodes": check.episodes,
        "mismatches": check.mismatches,
        "first_mismatch": check.first_mismatch,
        "reward_total": check.reward_total,
        "verify_s": verify_s,
        "rware_agent_steps_per_s": rware_rate,
        "twin_single_agent_steps_per_s": single,
        "twin_vector_agent_steps_per_s": vector,
        "single_ratio": single / rware_rate,
        "vector_ratio": vector / rware_rate,
        "twin_batch_agent_steps_per_s": batch,
        "twin_shaped_agent_steps_per_s": shaped,
        "shaping_cost": batch / shaped,
        "num_envs": num_envs,
    }
    logger.info(
        "bench rware %s: %d steps, %d mismatches; rware %.0f, single %.1fx, vector %.1fx, "
        "shaping %.2fx slower",
        env_id,
        check.steps,
        check.mismatches,
        rware_rate,
        row["single_ratio"],
        row["vector_ratio"],
        row["shaping_cost"],
    )
    return row


def run(
    *,
    quick: bool = False,
    steps: int | None = None,
    sizes: Sequence[str] = SIZES,
    agents: Sequence[int] = AGENTS,
    num_envs: int = 256,
    budget_s: float | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Verify the twin against rware and time both (see the module docstring).

    Args:
        quick: 500 verified steps and 0.5 s per timing, instead of 10,000 and 2 s.
        steps: verified steps per case, overriding ``quick``'s.
        sizes: rware sizes to run.
        agents: agent counts to run (1..19).
        num_envs: worlds of the twin's vector env.
        budget_s: wall seconds per timing, overriding ``quick``'s.
        seed: seed of the timings' envs and actions (verification: ``seed + N``).
        progress: called with one line per finished case.

    Returns:
        A JSON-ready dict: ``rows`` (one per case), ``targets`` and ``settings``.

    Raises:
        ConfigError: rware is not installed, an unknown size, an agent count outside
            1..19, or a step count, world count or budget below 1.
    """
    if importlib.util.find_spec("rware") is None:
        raise ConfigError("bench rware: needs rware; install it with pip install fleetmind[rware]")
    unknown = sorted(set(sizes) - set(SIZES))
    if unknown:
        raise ConfigError(f"--sizes: unknown {unknown}; expected some of {', '.join(SIZES)}")
    for n in agents:
        check_range("--agents", n, low=1, high=19)  # what rware registers
    steps = steps if steps is not None else (500 if quick else 10_000)
    budget = budget_s if budget_s is not None else (0.5 if quick else 2.0)
    check_range("--steps", steps, low=1)
    check_range("--num-envs", num_envs, low=1)
    check_range("budget_s", budget, above=0)
    rows = []
    for size in sizes:
        for n in agents:
            row = _case(size, n, steps=steps, num_envs=num_envs, budget_s=budget, seed=seed)
            rows.append(row)
            if progress is not None:
                progress(
                    f"{row['env_id']}: {row['steps_verified']} steps, "
                    f"{row['mismatches']} mismatches, vector {row['vector_ratio']:.1f}x rware, "
                    f"shaping {row['shaping_cost']:.2f}x slower"
                )
    worst = min(r["vector_ratio"] for r in rows)
    return {
        "rows": rows,
        "targets": {
            "mismatches": {"total": sum(r["mismatches"] for r in rows), "target": 0},
            "vector_vs_rware": {
                "target_ratio": VECTOR_RATIO_TARGET,
                "worst_ratio": worst,
                "worst_case": min(rows, key=lambda r: r["vector_ratio"])["env_id"],
                "met": worst >= VECTOR_RATIO_TARGET,
            },
        },
        "settings": {
            "steps": steps,
            "budget_s": budget,
            "num_envs": num_envs,
            "shaping": SHAPING,
            "seed": seed,
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "rware": importlib.metadata.version("rware"),
            "networkx": importlib.metadata.version("networkx"),
        },
    }


def format_table(result: dict[str, Any]) -> Table:
    """The result as a rich table, one row per rware env."""
    table = Table(title="RWARE twin vs rware 2.0 (agent steps/s; ratios over rware)")
    names = ("env", "steps", "mismatches", "rware", "single", "vector", "single x", "vector x")
    for name in (*names, "shaped", "shaping cost"):
        table.add_column(name, justify="left" if name == "env" else "right")
    for r in result["rows"]:
        table.add_row(
            r["env_id"].removeprefix("rware-").removesuffix("-v2"),
            f"{r['steps_verified']:,}",
            str(r["mismatches"]),
            f"{r['rware_agent_steps_per_s']:,.0f}",
            f"{r['twin_single_agent_steps_per_s']:,.0f}",
            f"{r['twin_vector_agent_steps_per_s']:,.0f}",
            f"{r['single_ratio']:.1f}",
            f"{r['vector_ratio']:.1f}",
            f"{r['twin_shaped_agent_steps_per_s']:,.0f}",
            f"{r['shaping_cost']:.2f}",
        )
    t = result["targets"]
    vec = t["vector_vs_rware"]
    table.caption = (
        f"single: the ParallelEnv; vector: {result['settings']['num_envs']} worlds, "
        f"observations on; shaped: TwinBatch with --shaping {result['settings']['shaping']}, "
        "its cost: TwinBatch's steps/s without it over with it. "
        f"Mismatches {t['mismatches']['total']} (target 0); vector worst "
        f"{vec['worst_ratio']:.1f}x rware on {vec['worst_case']} (target "
        f"{vec['target_ratio']:.0f}x: {'met' if vec['met'] else 'missed'})"
    )
    return table
