"""Whole-episode determinism checking for fleetmind and third-party envs.

PettingZoo's ``parallel_seed_test`` has compared only one step since 2023 (``any()`` over a dict
looks at its keys). :func:`check_determinism` runs two environments built by the same factory with
the same seed and the same action sequence for a whole episode (or ``steps`` steps) and compares
every observation, reward, termination, truncation and info at every step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fleetmind.errors import FleetmindError


class NondeterminismError(FleetmindError):
    """Two runs with the same seed and actions differed."""


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        return a_arr.shape == b_arr.shape and bool(np.array_equal(a_arr, b_arr, equal_nan=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return bool(a == b)


def _first_diff(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path or 'keys'}: {sorted(a)} != {sorted(b)}"
        for k in a:
            if not _same(a[k], b[k]):
                return _first_diff(a[k], b[k], f"{path}[{k!r}]")
    return f"{path or 'value'}: {a!r} != {b!r}"


def _kind(env: Any) -> str:
    if hasattr(env, "possible_agents"):
        return "parallel"
    if hasattr(env, "num_envs") and hasattr(env, "n_robots"):
        return "vector"
    return "gym"


def _sample_actions(env: Any, kind: str, rng: np.random.Generator) -> Any:
    if kind == "parallel":
        return {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
    if kind == "vector":
        return rng.integers(env.n_actions, size=(env.num_envs, env.n_robots))
    return int(rng.integers(env.action_space.n))


def check_determinism(
    env_fn: Callable[[], Any], *, steps: int, seed: int = 0, action_seed: int = 0
) -> int:
    """Raise if two seeded runs of ``env_fn()`` differ at any step.

    Works with Gymnasium envs (discrete actions), PettingZoo ParallelEnvs and fleetmind vector
    envs. Both runs get ``seed`` at reset and the same random actions (from ``action_seed``).

    Args:
        env_fn: builds a fresh environment.
        steps: the most steps to compare; the check also stops at the end of the episode.
        seed: reset seed for both runs.
        action_seed: seed of the shared action sequence.

    Returns:
        The number of steps compared.

    Raises:
        NondeterminismError: naming the step and the field that differed.
    """
    env_a, env_b = env_fn(), env_fn()
    kind = _kind(env_a)
    out_a = env_a.reset(seed=seed)
    out_b = env_b.reset(seed=seed)
    if not _same(out_a, out_b):
        raise NondeterminismError(f"reset differs: {_first_diff(out_a, out_b)}")
    rng = np.random.default_rng(action_seed)
    names = ("observation", "reward", "terminated", "truncated", "info")
    compared = 0
    for step in range(steps):
        actions = _sample_actions(env_a, kind, rng)
        step_a = env_a.step(actions)
        step_b = env_b.step(actions)
        compared += 1
        for name, x, y in zip(names, step_a, step_b, strict=True):
            if not _same(x, y):
                raise NondeterminismError(f"step {step}: {name} differs: {_first_diff(x, y)}")
        if kind == "parallel" and not env_a.agents:
            break
        if kind == "gym" and (step_a[2] or step_a[3]):
            break
    for env in (env_a, env_b):
        close = getattr(env, "close", None)
        if callable(close):
            close()
    return compared
