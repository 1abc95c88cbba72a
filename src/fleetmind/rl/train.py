"""The training loop behind ``fleetmind train``: one entry point for every learner.

:func:`train` resolves the map and the algorithm, applies the §3.3 hyperparameter rules
(:mod:`fleetmind.rl.hyper`), trains, evaluates the greedy policy and writes a run folder::

    out_dir/
      config.json      resolved hyperparameters (with the rule behind each), map, robots, seed
      policy.pt        neural: weights + config;  policy.npz: tabular Q-tables
      checkpoint.pt    neural: every ``checkpoint_every`` updates and at the end (resume=True)
      curves.csv       per agent and episode: return, deliveries, peak |r| trained on
      curves.png       the same, one line per agent (never only the team total, §3.3)
      metrics.json     per_agent_deliveries, throughput, per_agent_reward, diagnostics, speed;
                       with a scored reward also llm_reward (calls, cache_hits, parse_fallbacks,
                       variance_fallbacks, tokens, ...)
      calls.jsonl      with an LLM reward: every model call (written by the caller's recorder)
      tb/              TensorBoard scalars: train/..., eval/..., train/agent/robot_i/return

``reward`` (``fleetmind train --reward``) is ``env`` or an LLM score mixed in every K ticks
(:mod:`fleetmind.rl.reward`); the scorer itself comes from the caller, since this tier imports
no LLM code. A scored run's curves.csv adds each agent's environment and score parts of its
return (``<agent>_env``, ``<agent>_llm``), and the diagnostics check them for reward drift.

Algorithms: tabular ``q`` (one robot), ``iql``, ``ctde`` (the race ``race-4x4``: the joint
table needs a small global state) run :mod:`fleetmind.rl.tabular` / :mod:`fleetmind.rl.ctde`
on ``make_parallel(..., obs="tabular")`` (``make_race`` / ``make_gridworld`` for the §3 grids);
neural ``ippo``, ``mappo``, ``iql-dqn``, ``vdn``, ``qmix`` run :mod:`fleetmind.rl.neural` on
``make_vector`` (or, for a map named like ``rware-tiny-2ag-v2``, on real rware envs).

Only ``backend="local"`` exists; ``"ray"`` raises ConfigError.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib
import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.rl import diagnostics, hyper
from fleetmind.rl.neural import ON_POLICY
from fleetmind.rl.reward import RewardSpec, ScoredParallelEnv, ScoredVectorEnv, Scorer

log = logging.getLogger(__name__)

TABULAR_ALGOS: tuple[str, ...] = ("q", "iql", "ctde")
NEURAL_ALGOS: tuple[str, ...] = ("ippo", "mappo", "iql-dqn", "vdn", "qmix", "maddpg", "mat")
ALGOS: tuple[str, ...] = TABULAR_ALGOS + NEURAL_ALGOS
BACKENDS: tuple[str, ...] = ("local", "ray")
RWARE_ID = re.compile(r"^rware-(tiny|small|medium|large)-(?P<agents>\d+)ag(-easy|-hard)?-v2$")


@dataclass(frozen=True)
class TrainRun:
    """What :func:`train` did.

    Attributes:
        out_dir: the run folder.
        metrics: the content of ``metrics.json``.
        config: the content of ``config.json``.
        returns: agent -> per-episode return (the curves).
    """

    out_dir: Path
    metrics: dict[str, Any]
    config: dict[str, Any]
    returns: dict[str, list[float]]


DEFAULT_STEPS = 100_000
"""Environment steps of ``fleetmind train`` without ``--steps`` or ``--minutes`` (not rware)."""
WAREHOUSE_EPISODE_TICKS = 500
"""Ticks of one warehouse training episode (tabular: ``DEFAULT_STEPS`` are 200 episodes)."""
WAREHOUSE_EVAL_EPISODES = 8
"""Episodes of a warehouse run's evaluation after training."""


def reward_bound(reward_mode: str, robots: int) -> float:
    """Largest absolute one-step reward of the warehouse under ``reward_mode`` (for §3.3 scaling).

    One robot earns at most the delivery bonus (1.0) in a tick; the team reward sums ``robots``
    of them. A difference reward ``G - G_{-i}`` holds robot ``i``'s own terms and the conflicts
    its move causes or spares the others (0.5 each): ``robots`` bounds it as it bounds ``G``.
    """
    mode = reward_mode.strip()
    if mode in ("shared", "difference"):
        return float(robots)
    if mode.startswith("mixed"):
        inner = mode[len("mixed") :].strip("() ")
        w = float(inner) if inner else 0.5
        return w + (1.0 - w) * robots
    return 1.0


def _check(algo: str, backend: str, steps: int, checkpoint_every: int) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "ray":
        raise ConfigError("backend: the ray backend is not built yet; use --backend local")
    if algo not in ALGOS:
        raise ConfigError(f"algo: expected one of {', '.join(ALGOS)}, got {algo!r}")
    if steps < 1:
        raise ConfigError(f"steps: must be >= 1, got {steps}")
    if checkpoint_every < 0:
        raise ConfigError(f"checkpoint_every: must be >= 0, got {checkpoint_every}")


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
    if robots < 1:
        raise ConfigError(f"robots: must be >= 1, got {robots}")
    if eval_episodes < 1:
        raise ConfigError(f"eval_episodes: must be >= 1, got {eval_episodes}")
    if time_limit_s is not None and not time_limit_s > 0:
        raise ConfigError(f"minutes: must be > 0, got {time_limit_s / 60:g}")
    if eval_every_s is not None and not eval_every_s > 0:
        raise ConfigError(f"eval_every: must be > 0 minutes, got {eval_every_s / 60:g}")
    if not 0.0 <= shaping <= 10.0:
        raise ConfigError(f"shaping: must be in [0, 10], got {shaping:g}")
    if (shaping or eval_every_s) and not RWARE_ID.match(map):
        raise ConfigError(
            f"shaping/eval_every: only for rware ids (e.g. rware-tiny-2ag-v2), got map {map!r}"
        )
    if threads is not None and threads < 1:
        raise ConfigError(f"threads: must be >= 1, got {threads}")
    spec = reward if isinstance(reward, RewardSpec) else RewardSpec.parse(reward)
    if spec.scored:
        if scorer is None:
            raise ConfigError("reward: an LLM reward needs a scorer (fleetmind train wires one)")
        if RWARE_ID.match(map) or map in ("gridworld-4x4", "race-4x4"):
            raise ConfigError(f"reward: an LLM reward needs a fleetmind warehouse map, got {map!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    req = _Request(
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
        return _train_tabular(
            req._replace(eval_ticks=eval_ticks * episodes),
            max_steps=max_steps or WAREHOUSE_EPISODE_TICKS,
        )
    return _train_neural(
        req, resume=resume, checkpoint_every=checkpoint_every, num_envs=num_envs,
        max_steps=max_steps, progress=progress, time_limit_s=time_limit_s,
        eval_every_s=eval_every_s, eval_episodes=eval_episodes, shaping=shaping, threads=threads,
        curve_episodes=curve_episodes,
    )  # fmt: skip


class _Request(NamedTuple):
    """What :func:`train` asks of either trainer, checked (see its arguments)."""

    map: str
    robots: int
    algo: str
    reward_mode: str
    steps: int
    seed: int
    out: Path
    overrides: dict[str, Any]  # a copy of the caller's; the tabular trainer pops from it
    eval_ticks: int
    spec: RewardSpec
    scorer: Scorer | None

    def record(self) -> dict[str, Any]:
        """The entries of the run's ``config.json`` that the request gives, first."""
        return {k: getattr(self, k) for k in ("map", "robots", "algo", "reward_mode", "steps")}


# --------------------------------------------------------------------------- neural


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


def _train_neural(
    req: _Request,
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
    writer = _tensorboard(out / "tb")
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
    bar = _progress_bar(
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
    return _finish(out, config, metrics, result.returns, result.deliveries,
                   result.episode_end_steps, writer, peaks=result.peaks, parts=parts)  # fmt: skip


RWARE_PPO: dict[str, Any] = {
    "activation": "relu",
    "feature_norm": True,
    "value_norm": True,
    "ent_coef": 0.03,
    "lr": 1e-3,
}
"""IPPO/MAPPO defaults on rware ids (each overridable): MAPPO's feature and value
normalisation, ReLU (several times cheaper than tanh on CPU), a larger entropy bonus (0.01
collapsed onto pick-up/put-down loops in 5-minute runs on the twin; 0.03 did not) and a larger
learning rate (1e-3: 8.6 training deliveries per episode after 2M steps, 5e-4: 4.1)."""

RWARE_MAT: dict[str, Any] = {
    **{k: RWARE_PPO[k] for k in ("value_norm", "ent_coef", "lr")},
    "embed": 32,
    "hidden": (32,),
}
"""MAT's defaults on rware ids (each overridable): the :data:`RWARE_PPO` fields its model reads
(it has its own input LayerNorm and GELU) and a model half as wide as :class:`MATConfig`'s
default (token width and the heads' hidden width 32 instead of 64). The update is MAT's cost on
CPU and the width its arithmetic; at 32 it makes 1.9-2.4x the world steps of width 64 in the
same time and learnt more on every task in 5-minute runs (``docs/rware.md``, *MAT against
MAPPO*)."""


RWARE_WORLDS: dict[str, int] = {
    "ippo": 256,
    "mappo": 256,
    "mat": 256,
    "iql-dqn": 32,
    "vdn": 32,
    "qmix": 32,
    "maddpg": 32,
}
"""Twin worlds stepped together on rware ids, per learner (``fleetmind train`` and ``bench
marl``). On-policy learners need many worlds: rware's first delivery comes after thousands of
steps of one world, and 8 worlds of 100k steps (the warehouse default) never reach it; 256
worlds make about 25k world steps a second on one core. Replay learners take 32 (a 100k buffer
then holds about 6 episodes per world)."""

RWARE_MINUTES = 15.0
"""The training budget of ``fleetmind train`` on an rware id given neither ``--steps`` nor
``--minutes``: the time the MAPPO recipe needs to pass EPyMARL's published MAPPO return on
``rware-tiny-2ag-v2`` (``docs/rware.md``)."""


def rware_robots(map: str) -> int | None:
    """The fleet an rware id names (``rware-tiny-4ag-v2`` -> 4); None for any other map."""
    m = RWARE_ID.match(map)
    if m is None:
        return None
    return int(m.group("agents"))


def rware_defaults(algo: str) -> dict[str, Any]:
    """The config fields ``algo`` gets on rware ids before the user's overrides.

    Args:
        algo: a ``fleetmind train --algo`` name.

    Returns:
        :data:`RWARE_MAT` for ``mat``, :data:`RWARE_PPO` for the other PPO learners
        (``rl.neural.ON_POLICY``), else ``{}``.
    """
    if algo == "mat":
        return dict(RWARE_MAT)
    return dict(RWARE_PPO) if algo in ON_POLICY else {}


@dataclass(eq=False)
class RwareCurve:
    """Scores a policy on the real rware during and after training: the learning curve.

    Each evaluation plays ``episodes`` seeded 500-step episodes of the real package (the same
    episodes every time, :func:`~fleetmind.rl.neural.adapters.evaluate_rware`) twice: the
    policy sampling its actions (seeded; the policy as trained, the figure reported) and its
    argmax (greedy). A uniformly random policy plays the same episodes once, at the start.
    Seconds spent evaluating are counted apart (:meth:`spent`) and left out of training time.

    Args:
        env_id: the rware id.
        episodes: episodes per evaluation during training.
        final_episodes: episodes of the evaluation after training (default ``episodes``).
        seed: evaluation seed (episodes and action sampling).
        every_s: seconds of training between evaluations (None: only at the start and end).
        out: the run folder; the curve is rewritten there after every evaluation, so a long
            run can be watched (and survives an interruption).
    """

    env_id: str
    _: dataclasses.KW_ONLY
    episodes: int
    seed: int
    every_s: float | None
    out: Path | None = None
    final_episodes: int | None = None
    rows: list[dict[str, Any]] = field(init=False, default_factory=list)
    random: dict[str, Any] = field(init=False, default_factory=dict)
    _spent: float = field(init=False, default=0.0, repr=False)
    _t0: float = field(init=False, default_factory=time.perf_counter, repr=False)
    _last: float | None = field(init=False, default=None, repr=False)

    def spent(self) -> float:
        """Seconds spent evaluating so far."""
        return self._spent

    def train_s(self) -> float:
        """Seconds of training so far (wall time since :meth:`start`, evaluations excluded)."""
        return time.perf_counter() - self._t0 - self._spent

    def start(self) -> None:
        """Start the training clock; score the random policy."""
        from fleetmind.rl.neural.adapters import evaluate_rware

        self._t0 = time.perf_counter()
        rng = np.random.default_rng(self.seed)

        def uniform(obs: NDArray[np.float32]) -> NDArray[np.int64]:
            out: NDArray[np.int64] = rng.integers(5, size=obs.shape[:-1])
            return out

        self.random = evaluate_rware(uniform, self.env_id, episodes=self.episodes, seed=self.seed)
        self._spent += time.perf_counter() - self._t0

    def on_event(self, event: Any) -> None:
        """A learner callback: evaluate on ``update`` events when one is due."""
        if event.kind != "update" or event.policy is None:
            return
        now = self.train_s()
        if self._last is None or (self.every_s is not None and now - self._last >= self.every_s):
            self.evaluate(event.policy, event.step)

    def evaluate(self, policy: Any, step: int, *, final: bool = False) -> dict[str, Any]:
        """Score ``policy`` (obs -> logits) now; append a row to the curve.

        ``final``: the evaluation after training, on ``final_episodes`` episodes.
        """
        from fleetmind.rl.neural import base
        from fleetmind.rl.neural.adapters import evaluate_rware

        t = time.perf_counter()
        train_s = t - self._t0 - self._spent
        self._last = train_s
        episodes = (self.final_episodes or self.episodes) if final else self.episodes
        kw = {"episodes": episodes, "seed": self.seed}
        s = evaluate_rware(base.sampled_actions(policy, self.seed), self.env_id, **kw)
        g = evaluate_rware(base.greedy_actions(policy), self.env_id, **kw)
        row = {
            "train_s": round(train_s, 1),
            "steps": step,
            "sampled": s["deliveries_per_episode"],
            "greedy": g["deliveries_per_episode"],
            **{f"sampled_{a}": v for a, v in s["per_agent"].items()},
            **{f"greedy_{a}": v for a, v in g["per_agent"].items()},
            "eval_on": s["eval_on"],
            "episodes": episodes,
        }
        self.rows.append(row)
        log.info("rware eval: %s", row)
        if self.out is not None:
            self.write(self.out)
        self._spent += time.perf_counter() - t
        return row

    def write(self, out: Path) -> None:
        """``eval_curve.csv`` (one row per evaluation) and ``eval_curve.png``."""
        if not self.rows:
            return
        with (out / "eval_curve.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(self.rows[0]))
            w.writeheader()
            w.writerows(self.rows)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        x = [r["train_s"] / 60 for r in self.rows]
        ax.plot(x, [r["sampled"] for r in self.rows], "o-", label="policy (sampled)")
        ax.plot(x, [r["greedy"] for r in self.rows], "s--", label="greedy (argmax)")
        if self.random:
            ax.axhline(self.random["deliveries_per_episode"], color="grey", lw=1, label="random")
        ax.set_xlabel("training minutes (evaluations excluded)")
        ax.set_ylabel(f"deliveries per 500-step episode ({self.episodes} episodes)")
        ax.set_title(f"{self.env_id}: real rware during training on the twin")
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(out / "eval_curve.png", dpi=80)
        plt.close(fig)

    def metrics(self) -> dict[str, Any]:
        """The last evaluation as ``metrics.json`` entries (the sampled policy is the figure)."""
        last = self.rows[-1]
        episodes = int(last["episodes"])
        agents = sorted(k.removeprefix("sampled_") for k in last if k.startswith("sampled_robot"))
        total = last["sampled"] * episodes
        return {
            "eval_on": last["eval_on"],
            "eval_episodes": episodes,
            "eval_ticks": 500,
            "eval_worlds": episodes,
            "policy_figure": "sampled",
            "deliveries_per_episode": last["sampled"],
            "greedy_deliveries_per_episode": last["greedy"],
            "random_deliveries_per_episode": self.random.get("deliveries_per_episode"),
            "tasks_completed": round(total),
            "throughput": total / (500 * episodes),
            "per_agent_deliveries": {a: round(last[f"sampled_{a}"] * episodes) for a in agents},
            "per_agent_reward": {a: float(last[f"sampled_{a}"]) for a in agents},
            "eval_curve": self.rows,
            "eval_wall_s": round(self._spent, 1),
        }


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


# --------------------------------------------------------------------------- tabular


def _train_tabular(req: _Request, *, max_steps: int) -> TrainRun:
    (map, robots, algo, reward_mode, steps, seed, out, overrides, eval_ticks, spec, scorer) = req
    from fleetmind.envs import make_gridworld, make_parallel, make_race
    from fleetmind.rl import ctde, tabular

    allowed = {"alpha", "gamma", "eps_start", "eps_decay", "eps_min"}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise ConfigError(
            f"overrides: unknown tabular field(s) {unknown}; known: {sorted(allowed)}"
        )
    special = map in ("gridworld-4x4", "race-4x4")
    if algo == "q" and robots != 1:
        raise ConfigError(f"algo 'q' trains one robot, got --robots {robots}; use 'iql'")
    if algo == "ctde" and map != "race-4x4":
        raise ConfigError(
            "algo 'ctde' (tabular joint Q) needs a small global state: use --map race-4x4, "
            "or a neural CTDE learner (mappo, vdn, qmix) on a warehouse"
        )
    if map == "race-4x4" and robots != 2:
        raise ConfigError(f"map race-4x4 has 2 robots, got --robots {robots}")
    horizon = 100 if special else max_steps
    h = hyper.resolve(
        # Lifelong warehouse tasks: the horizon that matters is one task (tens of ticks), not
        # the episode; gamma 0.95 doubled the evaluation's deliveries against 0.99 (docs/rl.md).
        horizon=horizon if special else min(horizon, TASK_HORIZON),
        n_learners=robots,
        shared_reward=reward_mode.strip() == "shared" or map == "race-4x4",
        alpha=overrides.pop("alpha", None),
        gamma=overrides.pop("gamma", None),
        reward_bound=None if special else spec.bound(reward_bound(reward_mode, robots)),
    )
    episodes = max(1, steps // horizon)
    explore = {} if special else warehouse_exploration(episodes)
    for key, value in explore.items():
        overrides.setdefault(key, value)
    t0 = time.perf_counter()
    env: Any
    result: Any
    scored: ScoredParallelEnv | None = None
    if algo == "q" and map == "gridworld-4x4":
        env = make_gridworld()
        result = tabular.q_learning(
            env, episodes=episodes, alpha=h.alpha, gamma=h.gamma, seed=seed, **overrides
        )
        returns = {"robot_0": [float(x) for x in result.returns]}
        peaks = None
        tables: dict[str, Any] = {"robot_0": result.q}
    else:
        if map == "race-4x4":
            env = make_race()
        elif special:
            raise ConfigError(f"map {map}: use algo 'q' with 1 robot")
        else:
            env = make_parallel(
                map, robots, obs="tabular", reward_mode=reward_mode, max_steps=max_steps
            )
            # Also with the env reward: the wrapper counts each episode's deliveries per robot.
            # A score mixed in can leave [-1, 1]: the §3.3 rule scales it (hyper.normalise).
            scored = ScoredParallelEnv(
                env, spec, scorer, normalise=h.normalise if spec.scored else None
            )
        kw = {"episodes": episodes, "alpha": h.alpha, "gamma": h.gamma, "seed": seed, **overrides}
        learn_env = env if scored is None else scored
        result = (
            ctde.ctde_q(learn_env, **kw)
            if algo == "ctde"
            else tabular.independent_q(learn_env, **kw)
        )
        returns = {a: [float(x) for x in v] for a, v in result.returns.items()}
        peaks = {a: [float(x) for x in v] for a, v in result.reward_peak.items()}
        tables = dict(result.q) if result.q else {"joint": result.q_joint}
    wall = time.perf_counter() - t0
    np.savez_compressed(out / "policy.npz", **tables)
    resolved: dict[str, Any] = {**h.to_dict(), **overrides}
    eval_eps = float(overrides.get("eps_min", 0.0)) if not special else 0.0
    ev: dict[str, Any]
    if map != "gridworld-4x4":
        ev = _evaluate_parallel(env, result, eval_ticks, seed=seed, epsilon=eval_eps)
    else:
        ev = {
            "per_agent_deliveries": {"robot_0": int(result.reached_goal)},
            "per_agent_reward": {"robot_0": float(result.returns[-1])},
            "throughput": float(result.reached_goal) / max(1, len(result.path) - 1),
            "greedy_path_steps": len(result.path) - 1,
        }
    config = {
        **req.record(),
        "episodes": episodes,
        "seed": seed,
        "max_steps": max_steps,
        "backend": "local",
        "reward": str(spec),
        "resolved": resolved,
    }
    if explore:
        resolved["sources"]["exploration"] = (
            f"rule: epsilon {EXPLORE_START} -> {EXPLORE_MIN} at {EXPLORE_AT:.0%} of "
            f"{episodes} episodes (overridden keys win)"
        )
    if not special:
        ref = _shortest_path_reference(
            map, robots, reward_mode=reward_mode, max_steps=max_steps, ticks=eval_ticks,
            seed=seed, epsilon=eval_eps,
        )  # fmt: skip
        ev["shortest_path_tasks_completed"] = ref
        ev["vs_shortest_path"] = int(ev["tasks_completed"]) / ref if ref else math.nan
    metrics = {
        "algo": algo,
        "steps": int(sum(getattr(result, "lengths", [])) or steps),
        "episodes": episodes,
        "robots": robots,
        "train_wall_s": wall,
        **ev,
    }
    deliveries = {a: [0] * len(v) for a, v in returns.items()}
    parts: Mapping[str, Mapping[str, Sequence[float]]] = {}
    if scored is not None:
        deliveries = {a: list(v) for a, v in scored.scoring.deliveries.items()}
        parts = scored.scoring.curves()
        if spec.scored:
            metrics["llm_reward"] = scored.scoring.summary()
    ends = list(np.cumsum(getattr(result, "lengths", np.ones(episodes))).astype(int).tolist())
    return _finish(out, config, metrics, returns, deliveries, ends, None, peaks=peaks, parts=parts)


EXPLORE_START, EXPLORE_MIN, EXPLORE_AT = 1.0, 0.05, 0.6
TASK_HORIZON = 50
"""Ticks of one warehouse task for the tabular gamma rule (under 100: gamma 0.95)."""


def warehouse_exploration(episodes: int) -> dict[str, float]:
    """Tabular exploration on a warehouse: epsilon 1.0 decaying to 0.05 at 60% of ``episodes``.

    The §3.2 race defaults (0.6 decaying x0.999 per episode) are tuned for 30,000 short
    episodes; ``fleetmind train``'s 100,000 steps are 200 warehouse episodes, after which they
    would still explore half the time. Tying the decay to the run's length is §3.1's advice
    (slow the decay before touching alpha) made a rule.
    """
    return {
        "eps_start": EXPLORE_START,
        "eps_min": EXPLORE_MIN,
        "eps_decay": EXPLORE_MIN ** (1.0 / max(1.0, EXPLORE_AT * episodes)),
    }


def _shortest_path_reference(
    map: str,
    robots: int,
    *,
    reward_mode: str,
    max_steps: int,
    ticks: int,
    seed: int,
    epsilon: float = EXPLORE_MIN,
) -> int:
    """Deliveries of shortest-path robots (no learning, no shield) in the evaluation's ticks.

    The same map, robots, seed, tick count and exploration rate as :func:`_evaluate_parallel`:
    the simple baseline every tabular figure stands next to. A random action with probability
    ``epsilon`` (seeded) is what keeps two robots that face each other from waiting forever
    without a shield; the purely greedy robots deadlock and deliver a third as much.
    """
    from fleetmind.envs import make_parallel
    from fleetmind.rl.nav import shortest_path_actions

    env = make_parallel(map, robots, reward_mode=reward_mode, max_steps=max_steps)
    agents = list(env.possible_agents)
    rng = np.random.default_rng(seed)
    delivered = done_ticks = episode = 0
    while done_ticks < ticks:
        obs, _ = env.reset(seed=seed + episode)
        episode += 1
        while env.agents and done_ticks < ticks:
            acts = shortest_path_actions(np.stack([obs[a] for a in agents]))
            explore = rng.random(len(agents)) < epsilon
            acts = np.where(explore, rng.integers(0, 5, len(agents)), acts)
            obs, _r, _te, _tr, infos = env.step({a: int(acts[i]) for i, a in enumerate(agents)})
            done_ticks += 1
            delivered += sum(int(bool(infos[a].get("delivered", False))) for a in agents)
    return delivered


class _EpsilonGreedy:
    """A tabular joint policy acting at random with probability ``epsilon`` (seeded).

    Evaluating at the exploration floor follows DQN's convention (epsilon 0.05): the tabular
    warehouse state is aliased (direction signs and neighbour bits), so a purely greedy
    policy can loop forever between two cells, while a small epsilon breaks such loops.
    """

    def __init__(self, policy: Any, epsilon: float, seed: int, n_actions: int = 5) -> None:
        self.policy = policy
        self.epsilon = epsilon
        self.n_actions = n_actions
        self.rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[3])

    def act(self, observations: Mapping[str, Any]) -> dict[str, int]:
        """Greedy actions, each replaced by a uniform one with probability ``epsilon``."""
        greedy = self.policy.act(observations)
        return {
            a: int(self.rng.integers(self.n_actions)) if self.rng.random() < self.epsilon else g
            for a, g in greedy.items()
        }


def _evaluate_parallel(
    env: Any, policy: Any, ticks: int, *, seed: int, epsilon: float = 0.0
) -> dict[str, Any]:
    """Episodes of a tabular joint policy on a ParallelEnv for about ``ticks`` steps.

    With ``epsilon > 0`` the policy is epsilon-greedy (see :class:`_EpsilonGreedy`) and that
    is the headline figure; the greedy one is reported beside it (``greedy_*``).
    """
    if epsilon > 0:
        greedy = _evaluate_parallel(env, policy, ticks, seed=seed)
        out = _evaluate_parallel(env, _EpsilonGreedy(policy, epsilon, seed), ticks, seed=seed)
        out["eval_policy"] = f"epsilon-greedy {epsilon:g}"
        out["greedy_tasks_completed"] = greedy["tasks_completed"]
        out["greedy_per_agent_deliveries"] = greedy["per_agent_deliveries"]
        return out
    agents = list(env.possible_agents)
    reward = dict.fromkeys(agents, 0.0)
    delivered = dict.fromkeys(agents, 0)
    done_ticks = 0
    episode = 0
    while done_ticks < ticks:
        obs, _ = env.reset(seed=seed + episode)
        episode += 1
        while env.agents and done_ticks < ticks:
            obs, rew, _te, _tr, infos = env.step(policy.act(obs))
            done_ticks += 1
            for a in agents:
                reward[a] += float(rew.get(a, 0.0))
                info = infos.get(a, {})
                delivered[a] += int(bool(info.get("delivered", False)))
                delivered[a] += int(info.get("winner") == a)
    return {
        "eval_ticks": done_ticks,
        "eval_worlds": 1,
        "tasks_completed": sum(delivered.values()),
        "throughput": sum(delivered.values()) / max(1, done_ticks),
        "per_agent_deliveries": delivered,
        "per_agent_reward": reward,
    }


# --------------------------------------------------------------------------- outputs


def _finish(
    out: Path,
    config: dict[str, Any],
    metrics: dict[str, Any],
    returns: Mapping[str, Sequence[float]],
    deliveries: Mapping[str, Sequence[int]],
    end_steps: Sequence[int],
    writer: Any,
    *,
    peaks: Mapping[str, Sequence[float]] | None = None,
    parts: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> TrainRun:
    curves = {a: [float(x) for x in v] for a, v in returns.items()}
    parts = parts or {}
    # Episode returns sum many steps; the §3.3 scale check reads per-episode peaks of |r|.
    step_rewards = {a: list(v) for a, v in peaks.items()} if peaks else {a: [0.0] for a in curves}
    findings = []
    if all(len(v) >= 20 for v in curves.values()) and len(curves) > 1:
        try:
            findings = [
                {"kind": f.kind, "agents": list(f.agents), "message": f.message}
                for f in diagnostics.diagnose(
                    curves,
                    step_rewards=step_rewards,
                    llm_rewards=parts.get("llm"),
                    env_rewards=parts.get("env"),
                    scorer=metrics.get("llm_reward"),
                )
            ]
        except ConfigError as error:
            log.warning("diagnostics skipped: %s", error)
    metrics["diagnostics"] = findings
    metrics["episodes_recorded"] = min((len(v) for v in curves.values()), default=0)
    metrics["last_returns_mean"] = {
        a: float(np.mean(v[-10:])) if v else math.nan for a, v in curves.items()
    }
    _write_csv(out / "curves.csv", curves, deliveries, end_steps, peaks or {}, parts)
    _plot(out / "curves.png", curves, str(config["algo"]), str(config["map"]))
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str))
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    if writer is not None:
        step = int(metrics.get("steps", 0))
        writer.add_scalar("eval/throughput", float(metrics["throughput"]), step)
        for a, v in metrics["per_agent_deliveries"].items():
            writer.add_scalar(f"eval/agent/{a}/deliveries", float(v), step)
        for a, v in metrics["per_agent_reward"].items():
            writer.add_scalar(f"eval/agent/{a}/reward", float(v), step)
        writer.close()
    log.info("train: wrote %s (throughput %.4f)", out, metrics["throughput"])
    return TrainRun(out_dir=out, metrics=metrics, config=config, returns=curves)


def _write_csv(
    path: Path,
    curves: Mapping[str, Sequence[float]],
    deliveries: Mapping[str, Sequence[int]],
    end_steps: Sequence[int],
    peaks: Mapping[str, Sequence[float]],
    parts: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> None:
    """One row per episode: returns, deliveries and (when known) peak ``|r|`` of every agent.

    Scored runs add the environment and score parts of each return (``<agent>_env``, ``_llm``).
    """
    agents = list(curves)
    n = min((len(v) for v in curves.values()), default=0)
    peak_agents = [a for a in agents if len(peaks.get(a, ())) >= n] if peaks else []
    part_cols = [
        (f"{a}_{name}", part[a])
        for name, part in (parts or {}).items()
        for a in agents
        if len(part.get(a, ())) >= n
    ]

    def at(seq: Sequence[Any], i: int, default: Any = 0) -> Any:
        return seq[i] if i < len(seq) else default

    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["episode", "end_step", *(f"{a}_return" for a in agents),
             *(f"{a}_deliveries" for a in agents), *(f"{a}_peak" for a in peak_agents),
             *(name for name, _ in part_cols)]
        )  # fmt: skip
        for i in range(n):
            w.writerow(
                [i, at(end_steps, i, ""), *(curves[a][i] for a in agents),
                 *(at(deliveries.get(a, ()), i) for a in agents),
                 *(peaks[a][i] for a in peak_agents), *(col[i] for _, col in part_cols)]
            )  # fmt: skip


def _plot(path: Path, curves: Mapping[str, Sequence[float]], algo: str, map: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for a, v in curves.items():
        y = np.asarray(v, dtype=np.float64)
        if len(y) == 0:
            continue
        k = max(1, len(y) // 50)
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(k - 1, len(y)), smooth, label=a)
    ax.set_xlabel("episode")
    ax.set_ylabel("own return")
    ax.set_title(f"{algo} on {map}: per-agent returns")
    if curves:
        ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _tensorboard(log_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is an optional extra
        log.warning("tensorboard is not installed; no TensorBoard scalars")
        return None
    return SummaryWriter(log_dir=str(log_dir))


class _progress_bar:
    """Rich progress bar with an ETA (a no-op when ``enabled`` is False).

    Over environment steps, or, with a time budget (``seconds``), over training seconds read
    from ``clock`` (the step cap of a timed run is a safety bound, not an ETA).
    """

    def __init__(
        self,
        enabled: bool,
        algo: str,
        total: int,
        *,
        seconds: float | None = None,
        clock: Any = None,
    ) -> None:
        self.enabled = enabled
        self.algo = algo
        self.total = total
        self.seconds = seconds
        self.clock = clock
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return lambda step: None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        timed = self.seconds is not None and self.clock is not None
        count = TextColumn("{task.fields[steps]:,} steps") if timed else MofNCompleteColumn()
        self._progress = Progress(
            f"[bold]{self.algo}",
            BarColumn(),
            count,
            TimeElapsedColumn(),
            "ETA",
            TimeRemainingColumn(),
        )
        self._progress.start()
        total = self.seconds if timed else self.total
        self._task = self._progress.add_task(self.algo, total=total, steps=0)
        if timed:
            return lambda step: self._progress.update(
                self._task, completed=min(self.clock(), total), steps=step
            )
        return lambda step: self._progress.update(self._task, completed=min(step, self.total))

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
