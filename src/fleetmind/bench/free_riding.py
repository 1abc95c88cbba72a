"""Measured experiments on the warehouse: free-riding under reward modes (FIELD-NOTES §5.2).

:func:`free_riding` trains independent tabular Q-learners (one per robot,
:func:`fleetmind.rl.tabular.independent_q`) on ``warehouse-tiny`` with a lifelong order stream
(by default every idle robot at once gets a fresh random task), once per reward mode and seed,
then plays a few greedy episodes. The note's claim under test: with a shared team reward the
total creeps up while one robot stops contributing; a difference reward (team reward with the
robot minus without it) restores its contribution and raises team throughput.

Set-up of one run (mode ``m``, seed ``s``):

- env: ``make_parallel(map, robots, obs="tabular", reward_mode=m, order_rate=..., max_steps=L)``;
  every training episode starts from a fresh episode seed (start cells and task stream differ),
  drawn from the run's seed.
- hyperparameters: the §3.3 rules of :func:`fleetmind.rl.hyper.resolve`: gamma by the horizon
  ``L``; alpha 0.1, halved when the learners share a reward (``shared`` and ``mixed``); rewards
  scaled by ``1 / bound`` and clipped to ``[-1, 1]``, ``bound`` the largest per-step reward the
  mode can pay (``N`` times the individual bound for ``shared`` and ``difference``).
- exploration: epsilon from ``eps_start`` decayed per episode to ``eps_min`` at ``eps_reach`` of
  the training episodes.
- updates: Watkins's Q(lambda), ``lam`` as ``fleetmind train`` sets it on a warehouse (0.9).
- recorded per robot and training episode: deliveries, own reward (the individual reward
  ``r_i`` of :mod:`fleetmind.sim.rewards`, whatever the learners were trained on), the reward the
  learner saw (normalised), action entropy; team deliveries are counted apart, from the orders'
  delivery ticks. After training, ``eval_episodes`` greedy episodes on fresh seeds record the same.
- diagnostics: :func:`fleetmind.rl.diagnostics.diagnose` on the own-reward curves with the
  action-entropy curves, the team's own-reward curve and the per-episode peaks of the learners'
  (normalised) rewards.

Randomness: one root seed per run, split by ``SeedSequence(seed).spawn(3)`` into the learner's
seed (``independent_q`` passes its env seed to the first reset, from which the wrapper draws every
training episode's seed), the env's construction seed and the evaluation seeds; the same seed gives
the same result bit for bit.

Reproduce from the shell::

    fleetmind bench free-riding --robots 2 --seeds 0,1,2 --episodes 1000 --out runs/fr-2
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.bench.free_riding_summary import format_table as format_table
from fleetmind.bench.free_riding_summary import ratios, share_summary, shares
from fleetmind.envs import make_parallel
from fleetmind.envs.warehouse import ParallelStep, WarehouseParallelEnv
from fleetmind.errors import ConfigError, check_range
from fleetmind.eval.compare import confidence as ci95
from fleetmind.rl.diagnostics import diagnose
from fleetmind.rl.hyper import Hyper, resolve
from fleetmind.rl.nav import shortest_path_actions
from fleetmind.rl.tabular import IQLResult, entropy_of_counts, independent_q
from fleetmind.rl.train import TASK_HORIZON, WAREHOUSE_LAMBDA, reward_bound
from fleetmind.sim import rewards as rw

log = logging.getLogger(__name__)

DEFAULT_MODES: tuple[str, ...] = ("shared", "individual", "difference")
MAP = "warehouse-tiny"


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Episodes of a trained joint policy without learning.

    Attributes:
        epsilon: exploration rate used (0.0 = greedy).
        deliveries: robot -> ``(episodes,)`` deliveries per episode.
        team: ``(episodes,)`` team deliveries per episode, from the order records.
        own_reward: robot -> ``(episodes,)`` individual reward per episode.
        entropy: robot -> entropy (nats) of its actions over all the episodes.
        ticks: ``(episodes,)`` ticks per episode.
    """

    epsilon: float
    deliveries: dict[str, NDArray[np.int64]]
    team: NDArray[np.int64]
    own_reward: dict[str, NDArray[np.float64]]
    entropy: dict[str, float]
    ticks: NDArray[np.int64]

    @property
    def throughput(self) -> float:
        """Team deliveries per tick."""
        return float(self.team.sum() / max(int(self.ticks.sum()), 1))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready means per episode, delivery shares and entropies."""
        return {
            "epsilon": self.epsilon,
            "episodes": len(self.ticks),
            "per_agent_deliveries": {a: float(d.mean()) for a, d in self.deliveries.items()},
            "team_deliveries": float(self.team.mean()),
            "throughput": self.throughput,
            "own_reward": {a: float(v.mean()) for a, v in self.own_reward.items()},
            "action_entropy": dict(self.entropy),
            "delivery_share": shares(self.deliveries),
        }


@dataclass(frozen=True, eq=False)
class RunRecord:
    """Everything one (mode, seed) run measured.

    Attributes:
        mode: reward mode the learners were trained on.
        seed: root seed of the run.
        agents: robot ids.
        hyper: the resolved §3.3 hyperparameters.
        epsilons: ``(episodes,)`` exploration rate per training episode.
        train_deliveries: robot -> ``(episodes,)`` deliveries per training episode.
        train_team_deliveries: ``(episodes,)`` team deliveries per training episode, counted from
            the orders' delivery ticks (not from the per-robot counters).
        train_own_reward: robot -> ``(episodes,)`` individual reward ``r_i`` summed per episode.
        train_learner_reward: robot -> ``(episodes,)`` normalised reward the learner trained on.
        train_entropy: robot -> ``(episodes,)`` action entropy (nats).
        train_reward_peak: robot -> ``(episodes,)`` largest ``|r|`` the learner saw per episode.
        train_ticks: ``(episodes,)`` ticks per training episode.
        greedy: the greedy evaluation episodes.
        explore: the same episodes played epsilon-greedy at ``eps_min`` (the tabular state is
            aliased, so a deterministic policy can loop forever where a little noise gets out).
        reference: the same episodes (same starts and task streams) played by shortest-path
            robots (:func:`fleetmind.rl.nav.shortest_path_actions`, no learning, no shield) at
            the explore evaluation's epsilon: the simple baseline every figure stands next to.
        seconds: wall time of training plus evaluation.
        findings: :func:`fleetmind.rl.diagnostics.diagnose` findings as JSON-ready dicts.
    """

    mode: str
    seed: int
    agents: tuple[str, ...]
    hyper: Hyper
    epsilons: NDArray[np.float64]
    train_deliveries: dict[str, NDArray[np.int64]]
    train_team_deliveries: NDArray[np.int64]
    train_own_reward: dict[str, NDArray[np.float64]]
    train_learner_reward: dict[str, NDArray[np.float64]]
    train_entropy: dict[str, NDArray[np.float64]]
    train_reward_peak: dict[str, NDArray[np.float64]]
    train_ticks: NDArray[np.int64]
    greedy: Evaluation
    explore: Evaluation
    reference: Evaluation | None = None
    seconds: float = 0.0
    findings: list[dict[str, Any]] = field(default_factory=list)

    def train_throughput(self, first: int, last: int) -> float:
        """Team deliveries per tick over training episodes ``[first, last)``."""
        ticks = int(self.train_ticks[first:last].sum())
        return float(self.train_team_deliveries[first:last].sum() / max(ticks, 1))


class _Instrumented:
    """A ParallelEnv wrapper for training: fresh seed per episode, normalised rewards, logs.

    The first ``reset(seed=s)`` seeds a generator that draws every later episode's seed. Rewards
    handed to the learner are ``hyper.normalise(r)``. Per finished episode it appends each robot's
    deliveries and own individual reward, and the team deliveries counted from order records.
    """

    def __init__(self, env: WarehouseParallelEnv, hyper: Hyper, baseline: float = 0.0) -> None:
        self.env = env
        self.hyper = hyper
        self.baseline = baseline
        self.possible_agents = list(env.possible_agents)
        self._rng = np.random.default_rng(0)
        self._own: NDArray[np.float64] = np.zeros(len(self.possible_agents))
        self.deliveries: list[list[int]] = []
        self.team: list[int] = []
        self.own: list[list[float]] = []
        self.ticks: list[int] = []

    @property
    def agents(self) -> list[str]:
        """Live agents of the wrapped env."""
        return list(self.env.agents)

    def observation_space(self, agent: str) -> Any:
        """The wrapped env's observation space."""
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        """The wrapped env's action space."""
        return self.env.action_space(agent)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Reset on a fresh episode seed (re-seeding the episode-seed generator if given)."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._own = np.zeros(len(self.possible_agents))
        return self.env.reset(seed=int(self._rng.integers(2**63 - 1)))

    def step(self, actions: dict[str, int]) -> ParallelStep[Any]:
        """Step the wrapped env; rewards come back normalised."""
        carrying_before = self.env.world.carrying.copy()
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self._own += own_rewards(self.env, carrying_before, infos)
        scaled = self.hyper.normalise([rewards[a] + self.baseline for a in rewards])
        out = {a: float(scaled[i]) for i, a in enumerate(rewards)}
        if not self.env.agents:
            self.deliveries.append([int(infos[a]["deliveries"]) for a in self.possible_agents])
            self.team.append(team_deliveries(self.env))
            self.own.append(self._own.tolist())
            self.ticks.append(int(self.env.world.tick))
        return obs, out, terms, truncs, infos


def own_rewards(
    env: WarehouseParallelEnv,
    carrying_before: NDArray[np.bool_],
    infos: Mapping[str, Mapping[str, Any]],
) -> NDArray[np.float64]:
    """Individual rewards ``r_i`` of the tick just stepped, whatever the env's reward mode.

    Args:
        env: the env after its step.
        carrying_before: ``(N,)`` carrying flags before the step.
        infos: the step's infos (``delivered``, ``conflict`` per robot).

    Returns:
        ``(N,)`` rewards in ``possible_agents`` order.
    """
    ids = env.possible_agents
    delivered = np.array([bool(infos[a]["delivered"]) for a in ids])
    conflict = np.array([bool(infos[a]["conflict"]) for a in ids])
    picked = ~carrying_before & env.world.carrying
    r = rw.individual(env.config.reward, delivered=delivered, picked=picked, conflict=conflict)
    return np.asarray(r, dtype=np.float64)


def team_deliveries(env: WarehouseParallelEnv) -> int:
    """Orders delivered so far this episode, counted from the order records."""
    return sum(1 for rec in env.world.records if rec.delivered_tick >= 0)


def _split_seed(seed: int) -> tuple[int, int, int]:
    learn, episodes, evaluation = np.random.SeedSequence(seed).spawn(3)
    return (
        int(learn.generate_state(1)[0]),
        int(episodes.generate_state(1)[0]),
        int(evaluation.generate_state(1)[0]),
    )


@dataclass(frozen=True)
class RunSettings:
    """What every run of the experiment shares besides its fleet size, reward mode and seed.

    Attributes:
        episodes: training episodes.
        episode_len: ticks per episode (the env's ``max_steps``, also the §3.3 horizon).
        order_rate: ``None`` for the lifelong stream (a fresh task per idle robot), else Poisson
            orders per tick with FIFO auto-assignment.
        eval_episodes: greedy episodes after training.
        eps_start: exploration rate of the first episode.
        eps_min: exploration floor.
        eps_reach: share of the training episodes after which epsilon reaches ``eps_min``.
        lam: eligibility-trace decay of the learners' Q(lambda) (``fleetmind train``'s rule for
            warehouse maps; 0 for one-step Q-learning, the ablation).
        baseline: constant added to every raw reward before normalisation, for the learners only
            (own-reward curves are unchanged). In a continuing task a constant shift leaves the
            optimal policy alone, but a negative one makes the zero-initialised table optimistic
            (untried actions look better than tried ones), which drives exploration.
        map_name: map preset or file.

    Raises:
        ConfigError: a count below 1 or an exploration rate out of range.
    """

    episodes: int
    episode_len: int
    order_rate: float | None = None
    eval_episodes: int = 5
    eps_start: float = 1.0
    eps_min: float = 0.05
    eps_reach: float = 0.6
    lam: float = WAREHOUSE_LAMBDA
    baseline: float = 0.0
    map_name: str = MAP

    def __post_init__(self) -> None:
        for name in ("episodes", "episode_len", "eval_episodes"):
            _check_count(name, getattr(self, name))
        check_range("eps_reach", self.eps_reach, above=0, high=1)
        check_range("lam", self.lam, low=0, high=1)
        if not 0.0 < self.eps_min <= self.eps_start <= 1.0:
            raise ConfigError(
                f"need 0 < eps_min <= eps_start <= 1, got {self.eps_min}, {self.eps_start}"
            )


def run_once(*, robots: int, mode: str, seed: int, settings: RunSettings) -> RunRecord:
    """Train and evaluate one (mode, seed) run; see the module docstring.

    Args:
        robots: fleet size.
        mode: reward mode (``individual``, ``shared``, ``mixed(w)``, ``difference``).
        seed: root seed.
        settings: episodes, exploration, map and the rest every run shares.

    Returns:
        The run's curves and evaluation.

    Raises:
        ConfigError: a bad fleet size or mode.
    """
    _check_count("robots", robots)
    episodes, episode_len = settings.episodes, settings.episode_len
    eps_start, eps_min = settings.eps_start, settings.eps_min
    map_name = settings.map_name
    t0 = time.perf_counter()
    cfg = rw.RewardConfig.parse(mode)
    # The §3.3 rules exactly as `fleetmind train` applies them on a warehouse.
    hyper = resolve(
        horizon=min(episode_len, TASK_HORIZON),
        n_learners=robots,
        shared_reward=cfg.mode in ("shared", "mixed"),
        reward_bound=reward_bound(mode, robots),
    )
    learn_seed, episode_seed, eval_seed = _split_seed(seed)
    options: dict[str, Any] = {
        "obs": "tabular",
        "reward_mode": mode,
        "order_rate": settings.order_rate,
        "max_steps": episode_len,
    }
    # independent_q's first reset passes its own env seed; the wrapper draws every episode's seed
    # from it, so episode_seed only seeds the env's construction.
    env = _Instrumented(
        make_parallel(map_name, robots, seed=episode_seed, **options), hyper, settings.baseline
    )
    decay = (eps_min / eps_start) ** (1.0 / max(1.0, settings.eps_reach * episodes))
    result = independent_q(
        env,
        episodes=episodes,
        alpha=hyper.alpha,
        gamma=hyper.gamma,
        eps_start=eps_start,
        eps_decay=decay,
        eps_min=eps_min,
        seed=learn_seed,
        lam=settings.lam,
    )
    agents = tuple(env.possible_agents)
    deliveries = np.asarray(env.deliveries, dtype=np.int64)  # (episodes, N)
    own = np.asarray(env.own, dtype=np.float64)  # (episodes, N)
    eval_env = make_parallel(map_name, robots, seed=eval_seed, **options)
    greedy, explore = (
        _evaluate(eval_env, result, episodes=settings.eval_episodes, seed=eval_seed, epsilon=e)
        for e in (0.0, eps_min)
    )
    reference = _evaluate(
        make_parallel(map_name, robots, seed=eval_seed, **{**options, "obs": "local"}),
        _ShortestPath(agents),
        episodes=settings.eval_episodes,
        seed=eval_seed,
        # The learners' own evaluation rate: without a shield, greedy robots that meet head-on
        # wait forever, and a deadlocked reference would flatter every learner.
        epsilon=eps_min,
    )
    record = RunRecord(
        mode=mode,
        seed=seed,
        agents=agents,
        hyper=hyper,
        epsilons=result.epsilons,
        train_deliveries={a: deliveries[:, i] for i, a in enumerate(agents)},
        train_team_deliveries=np.asarray(env.team, dtype=np.int64),
        train_own_reward={a: own[:, i] for i, a in enumerate(agents)},
        train_learner_reward={a: result.returns[a] for a in agents},
        train_entropy={a: result.action_entropy[a] for a in agents},
        train_reward_peak={a: result.reward_peak[a] for a in agents},
        train_ticks=np.asarray(env.ticks, dtype=np.int64),
        greedy=greedy,
        explore=explore,
        reference=reference,
        seconds=time.perf_counter() - t0,
    )
    findings = diagnose(
        record.train_own_reward,
        entropy=record.train_entropy,
        team=np.sum(own, axis=1),
        step_rewards=record.train_reward_peak,
    )
    record.findings.extend(
        {
            "kind": f.kind,
            "agents": list(f.agents),
            "evidence": {k: _finite(v) for k, v in f.evidence.items()},
            "message": f.message,
        }
        for f in findings
    )
    log.info(
        "free_riding run: %d robots, %s, seed %d: %d episodes in %.1f s, greedy throughput %.4f",
        robots,
        mode,
        seed,
        episodes,
        record.seconds,
        record.greedy.throughput,
    )
    return record


class _ShortestPath:
    """Shortest-path robots as a joint policy on the default observation (the reference)."""

    def __init__(self, agents: Sequence[str]) -> None:
        self.agents = list(agents)

    def act(self, observations: Mapping[str, Any]) -> dict[str, int]:
        """Each robot's first-best shortest-path action."""
        acts = shortest_path_actions(np.stack([observations[a] for a in self.agents]))
        return {a: int(acts[i]) for i, a in enumerate(self.agents)}


def _evaluate(
    env: WarehouseParallelEnv,
    policy: IQLResult | _ShortestPath,
    *,
    episodes: int,
    seed: int,
    epsilon: float = 0.0,
) -> Evaluation:
    """Greedy (or epsilon-greedy) episodes on fresh seeds: deliveries, own reward, entropy."""
    agents = list(env.possible_agents)
    episode_seq, explore_seq = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(episode_seq)
    explore = np.random.default_rng(explore_seq)
    deliveries = np.zeros((episodes, len(agents)), dtype=np.int64)
    own = np.zeros((episodes, len(agents)), dtype=np.float64)
    team = np.zeros(episodes, dtype=np.int64)
    ticks = np.zeros(episodes, dtype=np.int64)
    counts = np.zeros((len(agents), 5), dtype=np.int64)
    for ep in range(episodes):
        observations, _ = env.reset(seed=int(rng.integers(2**63 - 1)))
        infos: dict[str, dict[str, Any]] = {}
        while env.agents:
            actions = policy.act(observations)
            if epsilon > 0.0:
                for a in agents:
                    if explore.random() < epsilon:
                        actions[a] = int(explore.integers(5))
            for i, a in enumerate(agents):
                counts[i, actions[a]] += 1
            carrying = env.world.carrying.copy()
            observations, _, _, _, infos = env.step(actions)
            own[ep] += own_rewards(env, carrying, infos)
        deliveries[ep] = [int(infos[a]["deliveries"]) for a in agents]
        team[ep] = team_deliveries(env)
        ticks[ep] = env.world.tick
    return Evaluation(
        epsilon=epsilon,
        deliveries={a: deliveries[:, i] for i, a in enumerate(agents)},
        team=team,
        own_reward={a: own[:, i] for i, a in enumerate(agents)},
        entropy={a: entropy_of_counts(counts[i]) for i, a in enumerate(agents)},
        ticks=ticks,
    )


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    check_range(name, value, low=1)


# --------------------------------------------------------------------------- the experiment


def _run_job(kwargs: dict[str, Any]) -> RunRecord:
    return run_once(**kwargs)


def free_riding(
    *,
    robots: int,
    modes: Sequence[str] = DEFAULT_MODES,
    seeds: Sequence[int],
    settings: RunSettings,
    out_dir: Path | None,
    workers: int = 1,
) -> dict[str, Any]:
    """Train IQL on the warehouse under each reward mode and seed; measure free-riding (§5.2).

    Args:
        robots: fleet size.
        modes: reward modes to compare.
        seeds: root seeds (one run per mode and seed).
        settings: what every run shares (episodes, exploration, map; see :class:`RunSettings`).
        out_dir: where to write ``metrics.json``, ``curves.csv`` and ``curves.png`` (None: none).
        workers: processes running runs in parallel (1: in this process).

    Returns:
        The metrics (the content of ``metrics.json``): ``config``, ``per_agent_deliveries``
        (mode -> seed -> robot -> mean greedy deliveries per episode), ``throughput`` (mode ->
        seed -> greedy team deliveries per tick), ``runs`` (mode -> seed -> details: training
        early/late figures, own reward, entropy, hyperparameters, findings) and ``summary``
        (mode -> mean and 95% CI over seeds, min/max per-robot delivery share, findings counts).

    Raises:
        ConfigError: bad arguments (empty or repeated modes or seeds, unknown mode, counts < 1).
    """
    _check_count("robots", robots)
    if not modes:
        raise ConfigError("modes must name at least one reward mode")
    if not seeds:
        raise ConfigError("seeds must hold at least one seed")
    for name, values in (("modes", list(modes)), ("seeds", list(seeds))):
        if len(set(values)) != len(values):
            raise ConfigError(f"{name} has repeats: {values}")
    for m in modes:
        rw.RewardConfig.parse(m)  # raises ConfigError naming the bad mode
    check_range("workers", workers, low=1)
    jobs = [
        {"robots": robots, "mode": m, "seed": int(s), "settings": settings}
        for m in modes
        for s in seeds
    ]
    # metrics.json records the shared settings beside the map.
    common = {k: v for k, v in dataclasses.asdict(settings).items() if k != "map_name"}
    if workers == 1:
        records = [_run_job(j) for j in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            records = list(pool.map(_run_job, jobs))
    config = {
        "map": settings.map_name,
        "robots": robots,
        "modes": list(modes),
        "seeds": [int(s) for s in seeds],
        **common,
    }
    metrics = _metrics(config, records)
    if out_dir is not None:
        write(out_dir, metrics, records)
    return metrics


def _window(n: int) -> int:
    return max(1, n // 10)


def _run_metrics(r: RunRecord) -> dict[str, Any]:
    n = len(r.train_ticks)
    w = _window(n)
    late = {a: d[-w:] for a, d in r.train_deliveries.items()}
    early = {a: d[:w] for a, d in r.train_deliveries.items()}
    late_share = shares(late)
    return {
        "hyper": r.hyper.to_dict(),
        "seconds": r.seconds,
        "eval": r.greedy.to_dict(),
        "eval_explore": r.explore.to_dict(),
        "shortest_path": None if r.reference is None else r.reference.to_dict(),
        "train": {
            "window_episodes": w,
            "throughput_early": r.train_throughput(0, w),
            "throughput_late": r.train_throughput(n - w, n),
            "per_agent_deliveries_early": {a: float(d.mean()) for a, d in early.items()},
            "per_agent_deliveries_late": {a: float(d.mean()) for a, d in late.items()},
            "delivery_share_late": late_share,
            "own_reward_early": {a: float(v[:w].mean()) for a, v in r.train_own_reward.items()},
            "own_reward_late": {a: float(v[-w:].mean()) for a, v in r.train_own_reward.items()},
            "action_entropy_early": {a: float(v[:w].mean()) for a, v in r.train_entropy.items()},
            "action_entropy_late": {a: float(v[-w:].mean()) for a, v in r.train_entropy.items()},
        },
        "findings": r.findings,
    }


def _metrics(config: dict[str, Any], records: Sequence[RunRecord]) -> dict[str, Any]:
    modes: list[str] = config["modes"]
    per_agent: dict[str, dict[str, dict[str, float]]] = {m: {} for m in modes}
    throughput: dict[str, dict[str, float]] = {m: {} for m in modes}
    runs: dict[str, dict[str, Any]] = {m: {} for m in modes}
    for r in records:
        detail = _run_metrics(r)
        runs[r.mode][str(r.seed)] = detail
        per_agent[r.mode][str(r.seed)] = detail["eval"]["per_agent_deliveries"]
        throughput[r.mode][str(r.seed)] = detail["eval"]["throughput"]
    summary: dict[str, Any] = {}
    for m in modes:
        mine = [runs[m][str(s)] for s in config["seeds"]]
        kinds: dict[str, int] = {}
        for d in mine:
            for f in d["findings"]:
                kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        summary[m] = {
            "throughput": ci95([d["eval"]["throughput"] for d in mine]),
            "throughput_explore": ci95([d["eval_explore"]["throughput"] for d in mine]),
            # Same episodes, same seeds: the learners' share of what shortest-path robots deliver.
            "shortest_path_throughput": ci95(
                [d["shortest_path"]["throughput"] for d in mine if d["shortest_path"]]
            ),
            "vs_shortest_path": ci95(
                ratios([(d["eval"]["throughput"], d["shortest_path"]) for d in mine])
            ),
            "explore_vs_shortest_path": ci95(
                ratios([(d["eval_explore"]["throughput"], d["shortest_path"]) for d in mine])
            ),
            "train_throughput_early": ci95([d["train"]["throughput_early"] for d in mine]),
            "train_throughput_late": ci95([d["train"]["throughput_late"] for d in mine]),
            **share_summary("delivery_share", [d["eval"]["delivery_share"] for d in mine]),
            **share_summary(
                "explore_delivery_share", [d["eval_explore"]["delivery_share"] for d in mine]
            ),
            **share_summary(
                "train_delivery_share", [d["train"]["delivery_share_late"] for d in mine]
            ),
            "findings": kinds,
        }
    return {
        "config": config,
        "per_agent_deliveries": per_agent,
        "throughput": throughput,
        "summary": summary,
        "runs": runs,
    }


# --------------------------------------------------------------------------- files


def write(out_dir: Path, metrics: Mapping[str, Any], records: Sequence[RunRecord]) -> None:
    """Write ``metrics.json``, ``curves.csv`` (one row per run, episode and robot), ``curves.png``.

    Args:
        out_dir: folder (created if missing).
        metrics: what :func:`free_riding` returns.
        records: the runs behind it.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, allow_nan=False) + "\n")
    with (out_dir / "curves.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "mode",
                "seed",
                "episode",
                "robot",
                "deliveries",
                "team_deliveries",
                "own_reward",
                "learner_reward",
                "action_entropy",
                "epsilon",
                "ticks",
            ]
        )
        for r in records:
            for ep in range(len(r.train_ticks)):
                for a in r.agents:
                    writer.writerow(
                        [
                            r.mode,
                            r.seed,
                            ep,
                            a,
                            int(r.train_deliveries[a][ep]),
                            int(r.train_team_deliveries[ep]),
                            f"{r.train_own_reward[a][ep]:.6g}",
                            f"{r.train_learner_reward[a][ep]:.6g}",
                            f"{r.train_entropy[a][ep]:.6g}",
                            f"{r.epsilons[ep]:.6g}",
                            int(r.train_ticks[ep]),
                        ]
                    )
    plot(out_dir / "curves.png", records)


def _smooth(x: NDArray[Any], window: int) -> NDArray[np.float64]:
    if window <= 1 or len(x) < window:
        return np.asarray(x, dtype=np.float64)
    return np.convolve(np.asarray(x, dtype=np.float64), np.ones(window) / window, mode="valid")


def plot(path: Path, records: Sequence[RunRecord]) -> None:
    """Per-robot training deliveries per episode, one panel per (mode, seed), team dashed.

    Args:
        path: the PNG to write.
        records: the runs.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(dict.fromkeys(r.mode for r in records))
    seeds = list(dict.fromkeys(r.seed for r in records))
    fig, axes = plt.subplots(
        len(modes),
        len(seeds),
        figsize=(3.2 * len(seeds) + 1, 2.4 * len(modes) + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    for r in records:
        ax = axes[modes.index(r.mode)][seeds.index(r.seed)]
        w = max(1, len(r.train_ticks) // 30)
        for a in r.agents:
            ax.plot(_smooth(r.train_deliveries[a], w), lw=1.0, label=a)
        ax.plot(_smooth(r.train_team_deliveries, w), "k--", lw=1.0, label="team")
        ax.set_title(f"{r.mode}, seed {r.seed}", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("training episode", fontsize=8)
    for row in axes:
        row[0].set_ylabel("deliveries / episode", fontsize=8)
    axes[0][0].legend(fontsize=6, loc="upper left")
    fig.suptitle("Per-robot deliveries during training (moving average)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
