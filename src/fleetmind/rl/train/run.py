"""``fleetmind train``'s entry point: check the request, hand it to the tabular or neural loop."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetmind.errors import ConfigError, check_range
from fleetmind.rl.reward import RewardSpec, Scorer
from fleetmind.rl.train.neural_loop import train_neural
from fleetmind.rl.train.request import (
    ALGOS,
    BACKENDS,
    DEFAULT_STEPS,
    TABULAR_ALGOS,
    WAREHOUSE_EPISODE_TICKS,
    Request,
    TrainRun,
)
from fleetmind.rl.train.rware import RWARE_ID
from fleetmind.rl.train.tabular_loop import train_tabular


def _check(algo: str, backend: str, steps: int, checkpoint_every: int) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "ray":
        raise ConfigError("backend: the ray backend is not built yet; use --backend local")
    if algo not in ALGOS:
        raise ConfigError(f"algo: expected one of {', '.join(ALGOS)}, got {algo!r}")
    check_range("steps", steps, low=1)
    check_range("checkpoint_every", checkpoint_every, low=0)


def train(
    map: str,
    robots: int,
    algo: str,
    *,
    reward_mode: str = "individual",
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    out_dir: str | Path = "runs/train",
    resume: bool = False,
    backend: str = "local",
    checkpoint_every: int = 10,
    num_envs: int = 8,
    max_steps: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    eval_ticks: int = 500,
    eval_episodes: int = 8,
    progress: bool = True,
    reward: str | RewardSpec = "env",
    scorer: Scorer | None = None,
    time_limit_s: float | None = None,
    eval_every_s: float | None = None,
    shaping: float = 0.0,
    threads: int | None = None,
    curve_episodes: int | None = None,
) -> TrainRun:
    """Train ``algo`` on ``map`` with ``robots`` robots and write the run folder.

    Args:
        map: a preset name, map file, rware layout, or an rware env id (neural algorithms).
        robots: robots (agents).
        algo: one of :data:`ALGOS`.
        reward_mode: ``individual``, ``shared``, ``mixed(w)`` or ``difference``.
        steps: environment steps (world steps; tabular: converted to episodes of ``max_steps``).
        seed: root seed.
        out_dir: the run folder.
        resume: continue a neural run from ``out_dir/checkpoint.pt``.
        backend: ``"local"`` (``"ray"`` is not built yet).
        checkpoint_every: neural: checkpoint every this many updates (0: only at the end).
        num_envs: neural: worlds stepped together.
        max_steps: episode length (default: 500 for the warehouse, the env's own otherwise).
        overrides: hyperparameters by name (``PPOConfig`` / ``DQNConfig`` fields for neural
            algorithms; ``alpha``, ``gamma``, ``eps_start``, ``eps_decay``, ``eps_min`` tabular).
        eval_ticks: ticks of the greedy evaluation rollout.
        eval_episodes: tabular warehouse runs: evaluation episodes of ``eval_ticks`` ticks each
            (seeds ``seed``, ``seed + 1``, ...), for the learner and the shortest-path reference.
        progress: show a Rich progress bar with ETA.
        reward: ``env`` or an LLM-scored spec (:class:`~fleetmind.rl.reward.RewardSpec`).
        scorer: the scorer a scored ``reward`` needs (the greedy evaluation never calls it).
        time_limit_s: neural: stop training after this many seconds (evaluations excluded),
            even short of ``steps``.
        eval_every_s: rware ids: score the policy on the real rware every this many seconds
            of training (and at the start and the end), written to ``eval_curve.csv`` / ``.png``.
        shaping: rware ids: weight of the twin's dense guide
            (:class:`~fleetmind.rl.neural.adapters.RwareShaping`; 0: rware's reward alone).
        threads: torch intra-op threads (None: torch's default).
        curve_episodes: rware ids: episodes of each evaluation during training (default
            ``eval_episodes``); the last evaluation, the run's figure, plays ``eval_episodes``.

    Returns:
        The run folder, its metrics, config and curves.

    Raises:
        ConfigError: a bad algorithm, backend, map/algorithm pairing, hyperparameter name or
            reward spec, or a scored reward on a map that is not a fleetmind warehouse.
    """
    _check(algo, backend, steps, checkpoint_every)
    check_range("robots", robots, low=1)
    check_range("eval_episodes", eval_episodes, low=1)
    if time_limit_s is not None:
        check_range("minutes", time_limit_s / 60, above=0)
    if eval_every_s is not None:
        check_range("eval_every", eval_every_s / 60, above=0)
    check_range("shaping", shaping, low=0, high=10)
    if (shaping or eval_every_s) and not RWARE_ID.match(map):
        raise ConfigError(
            f"shaping/eval_every: only for rware ids (e.g. rware-tiny-2ag-v2), got map {map!r}"
        )
    if threads is not None:
        check_range("threads", threads, low=1)
    spec = reward if isinstance(reward, RewardSpec) else RewardSpec.parse(reward)
    if spec.scored:
        if scorer is None:
            raise ConfigError("reward: an LLM reward needs a scorer (fleetmind train wires one)")
        if RWARE_ID.match(map) or map in ("gridworld-4x4", "race-4x4"):
            raise ConfigError(f"reward: an LLM reward needs a fleetmind warehouse map, got {map!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    req = Request(
        map=map,
        robots=robots,
        algo=algo,
        reward_mode=reward_mode,
        steps=steps,
        seed=seed,
        out=out,
        overrides=dict(overrides or {}),
        eval_ticks=eval_ticks,
        spec=spec,
        scorer=scorer,
    )
    if algo in TABULAR_ALGOS:
        if resume:
            raise ConfigError("resume: tabular runs are short and not resumable; rerun instead")
        # Warehouse runs evaluate eval_episodes episodes of eval_ticks ticks, back to back.
        episodes = 1 if map in ("gridworld-4x4", "race-4x4") else eval_episodes
        return train_tabular(
            req._replace(eval_ticks=eval_ticks * episodes),
            max_steps=max_steps or WAREHOUSE_EPISODE_TICKS,
        )
    return train_neural(
        req, resume=resume, checkpoint_every=checkpoint_every, num_envs=num_envs,
        max_steps=max_steps, progress=progress, time_limit_s=time_limit_s,
        eval_every_s=eval_every_s, eval_episodes=eval_episodes, shaping=shaping, threads=threads,
        curve_episodes=curve_episodes,
    )  # fmt: skip
