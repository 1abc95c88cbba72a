"""Multi-agent learners at equal wall time on RWARE (``fleetmind bench marl``).

Every learner (``mat``, ``mappo``, ``maddpg``, ``qmix``) trains on the RWARE twin
(:class:`fleetmind.rl.neural.adapters.TwinBatch`: rware 2.0's rules, many worlds at once) with the
recipe ``fleetmind train`` uses on rware ids: the twin's dense guide at one weight for all
(``shaping``, :class:`~fleetmind.rl.neural.adapters.RwareShaping`; 0.2 by default, the weight of
the 60-minute MAPPO run in ``docs/rware.md``), the §3.3 rules on rware's individual reward, one
torch thread, and each learner's rware options (:data:`RECIPES`). Each run gets the same
wall-clock budget (evaluations excluded). Its policy then plays ``eval_episodes`` seeded 500-step
episodes of the **real** ``rware`` package twice, sampling its actions and by argmax
(:func:`fleetmind.rl.neural.adapters.evaluate_rware`), the same episodes for every learner and
for a uniformly random policy (the floor every published rware curve starts from; fleetmind has
no hand-written rware policy). The figure is rware's deliveries per episode, never the guide.

Deliveries against wall time: each training episode's end is stamped with the training seconds
so far, and the rows give the deliveries per episode (rware's, counted on the twin, which is
exact) of the episodes that ended in each quarter of the budget, from the policy as it acts in
training (sampled, or epsilon-greedy for QMIX).

Quick mode: tiny-2ag only, 30 s per learner, 4 evaluation episodes, one seed.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.rl.neural import MODULES, base, config_class
from fleetmind.rl.neural.adapters import EPISODE, TwinBatch, evaluate_rware
from fleetmind.rl.train import RWARE_ID, RWARE_MAT, RWARE_PPO

__all__ = [
    "ALGOS",
    "EPISODE",
    "PUBLISHED",
    "RECIPES",
    "SHAPING",
    "TASKS",
    "Recipe",
    "TwinBatch",
    "compare",
    "evaluate",
    "format_table",
    "run",
]

log = logging.getLogger(__name__)

ALGOS: tuple[str, ...] = ("mat", "mappo", "maddpg", "qmix")
TASKS: tuple[str, ...] = ("rware-tiny-2ag-v2", "rware-tiny-4ag-v2", "rware-small-4ag-v2")
SHAPING = 0.2
"""The guide's weight for every learner: the one ``docs/rware.md``'s MAPPO runs learnt with."""

EVAL_SEED = 10_000
QUARTERS = 4


@dataclass(frozen=True)
class Recipe:
    """How one learner trains on rware ids.

    Attributes:
        num_envs: twin worlds stepped together.
        overrides: config fields on top of the learner's defaults.
        figure: which evaluation is the learner's figure: ``sampled`` (a stochastic policy, as
            it was trained) or ``greedy`` (a value learner's argmax).
        steps_per_s: replay learners with an exploration schedule over the run's steps: the
            world steps per second expected on this machine; the run's step cap is twice that
            times the budget (so the clock, not the cap, ends it) and epsilon reaches its floor
            at a quarter of the cap (half the budget at the expected rate). None: no cap.
        why: one line on the choice.
    """

    num_envs: int
    overrides: Mapping[str, Any] = field(default_factory=dict)
    figure: Literal["sampled", "greedy"] = "sampled"
    steps_per_s: float | None = None
    why: str = ""


RECIPES: dict[str, Recipe] = {
    "mappo": Recipe(
        256, RWARE_PPO, why="fleetmind train's rware PPO options (rl.train.RWARE_PPO), 256 worlds"
    ),
    "mat": Recipe(
        256,
        RWARE_MAT,
        why="fleetmind train's rware MAT options (rl.train.RWARE_MAT): RWARE_PPO's value_norm, "
        "ent_coef 0.03, lr 1e-3; embed 32, hidden (32,); 256 worlds",
    ),
    # Replay learners: a 10,000-transition buffer (the default) holds 39 batched steps of 256
    # worlds, so they get fewer worlds and a larger buffer (about 6 episodes per world).
    "maddpg": Recipe(
        32, {"buffer_size": 100_000}, why="32 worlds, buffer 100k; Gumbel exploration"
    ),
    "qmix": Recipe(
        32,
        {"buffer_size": 100_000, "eps_fraction": 0.25},
        figure="greedy",
        steps_per_s=4_000.0,  # measured: 3,800-4,100 on tiny-2ag and small-4ag at load 0.5
        why="32 worlds, buffer 100k; epsilon 1 -> 0.05 over about half the budget",
    ),
}

# Published RWARE figures for the same tasks. The only ones found are curves: Mava's
# docs/benchmarks.md (instadeepai/Mava, plots docs/images/rware_results/ff_mappo/main_readme/
# {task}-1.png, commit bc9632e, 2024-02-07): feedforward MAPPO, 20M environment steps, 16
# vectorised environments, one NVIDIA Quadro RTX 4000, mean episode return against run time in
# minutes, for EPyMARL's MAPPO on rware (no collision termination) and Mava's on Jumanji's JAX
# RobotWarehouse. The values are the end points of the mean curves, read off the plots (about
# +-0.5 on tiny-2ag and small-4ag, +-1 on tiny-4ag). No table of EPyMARL's paper (Papoudakis et
# al. 2021) or of the Sable paper (Mahjoub et al. 2025, Mava's MAT and Sable) was found.
PUBLISHED: dict[str, dict[str, str]] = {
    "epymarl": {
        "rware-tiny-2ag-v2/mappo": "~17 at 20M steps, 218 min (plot)",
        "rware-tiny-4ag-v2/mappo": "~42 at 20M steps, 240 min (plot)",
        "rware-small-4ag-v2/mappo": "~16 at 20M steps, 240 min (plot)",
    },
    "mava": {
        "rware-tiny-2ag-v2/mappo": "~19.5 at 20M steps, 21 min, GPU, Jumanji (plot)",
        "rware-tiny-4ag-v2/mappo": "~44 at 20M steps, 24 min, GPU, Jumanji (plot)",
        "rware-small-4ag-v2/mappo": "~18.5 at 20M steps, 28 min, GPU, Jumanji (plot)",
    },
}
PUBLISHED_NOTES: dict[str, str] = {
    "epymarl": (
        "EPyMARL's MAPPO as run and plotted by Mava (docs/benchmarks.md: 20M steps, 16 envs, "
        "hyperparameters of Papoudakis et al. 2021, on rware); the paper's own tables (on-policy "
        "learners 40M steps, off-policy 4M, per its authors in uoe-agents/epymarl issues 9 and "
        "24): not found"
    ),
    "mava": (
        "Mava's feedforward MAPPO, same plots, on Jumanji's RobotWarehouse without collision "
        "termination; MAT and Sable (Sable paper: 20M steps, 10 seeds, 32 evaluation "
        "episodes): not found"
    ),
}


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


class _Clock:
    """Stamps each finished training episode with the training seconds so far."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.stamps: list[float] = []

    def train_s(self) -> float:
        return time.perf_counter() - self.t0

    def on_event(self, event: base.Event) -> None:
        if event.kind == "episode":
            self.stamps.append(self.train_s())


def _quarters(
    stamps: Sequence[float], deliveries: Sequence[int], budget_s: float
) -> list[float | None]:
    """Deliveries per episode of the episodes that ended in each quarter of the budget."""
    out: list[float | None] = []
    edges = np.linspace(0.0, budget_s, QUARTERS + 1)
    t = np.asarray(stamps[: len(deliveries)])
    d = np.asarray(deliveries[: len(t)], dtype=np.float64)
    for q in range(QUARTERS):
        hi = edges[q + 1] if q + 1 < QUARTERS else np.inf
        sel = (t >= edges[q]) & (t < hi)
        out.append(float(d[sel].mean()) if sel.any() else None)
    return out


def train_one(
    algo: str,
    env_id: str,
    recipe: Recipe,
    *,
    seed: int,
    budget_s: float,
    shaping: float,
    eval_episodes: int,
) -> dict[str, Any]:
    """Train ``algo`` on the twin for ``budget_s`` seconds by ``recipe``; score it on rware."""
    module = importlib.import_module(MODULES[algo])
    # The seeds fleetmind train derives from its root seed (env, learner, evaluation).
    env_seed = int(np.random.SeedSequence(seed).spawn(3)[0].generate_state(1)[0])
    env = TwinBatch(env_id, recipe.num_envs, seed=env_seed, shaping=shaping)
    # fleetmind train's fields on rware ids: rware's individual reward, bound 1 per step.
    cfg = config_class(algo)(shared_reward=False, reward_bound=1.0, **recipe.overrides)
    steps = int(recipe.steps_per_s * budget_s * 2) if recipe.steps_per_s else 10**12
    clock = _Clock()
    load_before = os.getloadavg()[0]
    res = module.train(
        env, cfg, seed=seed, steps=steps, time_limit_s=budget_s, callbacks=[clock.on_event]
    )
    load_after = os.getloadavg()[0]
    n_ep = len(res.returns["robot_0"])
    per_episode = [sum(int(res.deliveries[a][k]) for a in res.deliveries) for k in range(n_ep)]
    t = time.perf_counter()
    s = evaluate(
        base.sampled_actions(res.policy, EVAL_SEED), env_id, episodes=eval_episodes, seed=EVAL_SEED
    )
    g = evaluate(base.greedy_actions(res.policy), env_id, episodes=eval_episodes, seed=EVAL_SEED)
    return {
        "task": env_id,
        "algo": algo,
        "seed": seed,
        "num_envs": recipe.num_envs,
        "overrides": dict(recipe.overrides),
        "figure": recipe.figure,
        "world_steps": res.steps,
        "updates": res.updates,
        "train_wall_s": round(res.wall_s, 1),
        "world_steps_per_s": round(res.samples_per_s, 1),
        # The machine is shared: the 1-minute load average before and after training.
        "load_avg": [round(load_before, 1), round(load_after, 1)],
        "train_episodes": n_ep,
        "train_deliveries_by_quarter": _quarters(clock.stamps, per_episode, budget_s),
        "sampled": s["deliveries_per_episode"],
        "greedy": g["deliveries_per_episode"],
        "deliveries_per_episode": s["deliveries_per_episode"]
        if recipe.figure == "sampled"
        else g["deliveries_per_episode"],
        "per_agent": s["per_agent"] if recipe.figure == "sampled" else g["per_agent"],
        "eval_on": s["eval_on"],
        "eval_s": round(time.perf_counter() - t, 1),
        # PPO's entropy, QMIX's epsilon at the end: what a collapsed or still-random run shows.
        "final_losses": {k: round(float(v[-1]), 4) for k, v in res.losses.items() if v},
    }


def run(
    *,
    quick: bool = False,
    tasks: Sequence[str] | None = None,
    algos: Sequence[str] = ALGOS,
    seeds: Sequence[int] = (0,),
    budget_s: float | None = None,
    shaping: float = SHAPING,
    eval_episodes: int | None = None,
    threads: int = 1,
    progress: Callable[[str], None] | None = None,
    recipes: Mapping[str, Recipe] | None = None,
) -> dict[str, Any]:
    """Train each learner for the same wall time on the twin, score it on real rware.

    Args:
        quick: tiny-2ag only, 30 s per learner and 4 evaluation episodes.
        tasks: rware ids (default :data:`TASKS`; quick: tiny-2ag).
        algos: learners (names of ``fleetmind train --algo`` with a recipe).
        seeds: one training run per task, learner and seed.
        budget_s: seconds of training per run (default 300; quick 30).
        shaping: the guide's weight, the same for every learner.
        eval_episodes: 500-step episodes per evaluation (default 20; quick 4).
        threads: torch intra-op threads.
        progress: called with one line after each run.
        recipes: learner -> :class:`Recipe`, replacing :data:`RECIPES`' entries (smaller runs).

    Returns:
        ``{"rows": [...], "random": {task: {...}}, "comparison": [...], "budget_s", ...}``.

    Raises:
        ConfigError: an unknown learner or task, or a bad budget, weight or count.
    """
    book = dict(RECIPES) | dict(recipes or {})
    unknown = [a for a in algos if a not in book]
    if unknown or not algos:
        raise ConfigError(f"--algos: unknown {unknown or '(none)'}; known: {sorted(book)}")
    chosen = list(tasks) if tasks is not None else (list(TASKS[:1]) if quick else list(TASKS))
    bad = [t for t in chosen if not RWARE_ID.match(t)]
    if bad or not chosen:
        raise ConfigError(
            f"--tasks: expected rware -v2 ids (e.g. {TASKS[0]}), got {bad or '(none)'}"
        )
    if not seeds:
        raise ConfigError("--seeds: at least one seed")
    budget = budget_s if budget_s is not None else (30.0 if quick else 300.0)
    if not budget > 0:
        raise ConfigError(f"--minutes: must be > 0, got {budget / 60:g}")
    if not 0.0 <= shaping <= 10.0:
        raise ConfigError(f"--shaping: must be in [0, 10], got {shaping:g}")
    episodes = eval_episodes if eval_episodes is not None else (4 if quick else 20)
    if episodes < 1:
        raise ConfigError(f"--eval-episodes: must be >= 1, got {episodes}")
    if threads < 1:
        raise ConfigError(f"--threads: must be >= 1, got {threads}")
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    baseline: dict[str, dict[str, Any]] = {}
    try:
        for task in chosen:
            n_actions = TwinBatch(task, 1, seed=0).n_actions
            baseline[task] = evaluate(
                random_policy(EVAL_SEED, n_actions), task, episodes=episodes, seed=EVAL_SEED
            )
            for seed in seeds:
                for algo in algos:
                    row = train_one(
                        algo, task, book[algo], seed=seed, budget_s=budget, shaping=shaping,
                        eval_episodes=episodes,
                    )  # fmt: skip
                    log.info("bench marl: %s", row)
                    if progress is not None:
                        progress(
                            f"{task} {algo} seed {seed}: {row['world_steps']:,} steps, "
                            f"sampled {row['sampled']:.2f} greedy {row['greedy']:.2f}"
                        )
                    rows.append(row)
    finally:
        torch.set_num_threads(saved)
    result = {
        "tasks": chosen,
        "algos": list(algos),
        "budget_s": budget,
        "shaping": shaping,
        "eval_episodes": episodes,
        "seeds": list(seeds),
        "threads": threads,
        "rows": rows,
        "random": baseline,
        "wall_s": round(time.perf_counter() - t0, 1),
        "quick": quick,
    }
    result["comparison"] = compare(result)
    return result


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def compare(result: dict[str, Any]) -> list[dict[str, Any]]:
    """MAT against MAPPO per task at equal wall time (means over seeds), where both ran."""
    out = []
    for task in result["tasks"]:
        mat = [r for r in result["rows"] if r["task"] == task and r["algo"] == "mat"]
        mappo = [r for r in result["rows"] if r["task"] == task and r["algo"] == "mappo"]
        if not mat or not mappo:
            continue
        m, p = _mean(mat, "sampled"), _mean(mappo, "sampled")
        out.append({
            "task": task,
            "mat": m,
            "mappo": p,
            "mat_greedy": _mean(mat, "greedy"),
            "mappo_greedy": _mean(mappo, "greedy"),
            "mat_world_steps": _mean(mat, "world_steps"),
            "mappo_world_steps": _mean(mappo, "world_steps"),
            "mat_at_least_mappo": m >= p,
        })  # fmt: skip
    return out


def _published(source: str, task: str, algo: str) -> str:
    return PUBLISHED[source].get(f"{task}/{algo}", "not found")


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def format_table(result: dict[str, Any]) -> str:
    """Markdown: one table of every run beside random and the published figures; MAT vs MAPPO."""
    b = result["budget_s"]
    lines = [
        f"{b / 60:g} min of training per run (evaluations excluded), shaping {result['shaping']:g} "
        f"for every learner, {result['threads']} torch thread(s); real rware, "
        f"{result['eval_episodes']} seeded {EPISODE}-step episodes per evaluation",
        "",
        "| task | learner | seed | worlds | world steps | steps/s "
        "| training deliveries/episode by quarter (twin) "
        "| real rware: figure | sampled / greedy | EPyMARL | Mava |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | --- | --- |",
    ]
    for task in result["tasks"]:
        rnd = result["random"][task]
        for r in (r for r in result["rows"] if r["task"] == task):
            q = " / ".join(_f(v) for v in r["train_deliveries_by_quarter"])
            lines.append(
                f"| {task} | {r['algo']} | {r['seed']} | {r['num_envs']} | {r['world_steps']:,} "
                f"| {r['world_steps_per_s']:,.0f} | {q} | **{r['deliveries_per_episode']:.2f}** "
                f"({r['figure']}) | {r['sampled']:.2f} / {r['greedy']:.2f} "
                f"| {_published('epymarl', task, r['algo'])} "
                f"| {_published('mava', task, r['algo'])} |"
            )
        lines.append(
            f"| {task} | random | - | - | - | - | - | {rnd['deliveries_per_episode']:.2f} | - "
            "| - | - |"
        )
    lines += ["", f"EPyMARL: {PUBLISHED_NOTES['epymarl']}", f"Mava: {PUBLISHED_NOTES['mava']}"]
    if result["comparison"]:
        lines += [
            "",
            "| task | mat (sampled / greedy) | mappo (sampled / greedy) | world steps mat / mappo "
            "| mat >= mappo |",
            "| --- | --- | --- | --- | --- |",
        ]
        for c in result["comparison"]:
            lines.append(
                f"| {c['task']} | {c['mat']:.2f} / {c['mat_greedy']:.2f} "
                f"| {c['mappo']:.2f} / {c['mappo_greedy']:.2f} "
                f"| {c['mat_world_steps']:,.0f} / {c['mappo_world_steps']:,.0f} "
                f"| {'yes' if c['mat_at_least_mappo'] else 'no'} |"
            )
    return "\n".join(lines)
