"""MARL learners at equal wall time on RWARE, on rware's own reward (``fleetmind bench marl``).

Every run is a ``fleetmind train`` run on an rware id (:func:`fleetmind.rl.train.train`): the
learner trains on the RWARE twin (:class:`fleetmind.rl.neural.adapters.TwinBatch`: rware 2.0's
rules, many worlds at once) on **rware's own sparse reward**, with the recipe of
:data:`RECIPES` (worlds, each learner's rware options), for the same wall-clock budget
(evaluations excluded), one torch thread, two runs at once (one per core). Its policy plays
``eval_episodes`` seeded 500-step episodes of the **real** ``rware`` package five times during
training and at the end, greedily (EPyMARL's ``test_greedy``, the measure of the published
figures, 100 episodes as EPyMARL's ``test_nepisode``) and sampling (the policy as trained), and a
uniformly random policy plays the same episodes: the floor every published rware curve starts
from. The twin's dense guide (``shaping``) is an ablation, labelled as such, never the table.

Resumable: each run writes its folder ``OUT/<task>/<algo>/seed-<s>`` (policy, curves,
``eval_curve.csv``, ``row.json`` last); a rerun keeps the finished runs made with the same
settings and runs the rest.

Quick mode: tiny-2ag only, MAPPO, 30 s a run, 4 evaluation episodes, one seed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.eval.compare import mean_interval
from fleetmind.rl.neural.adapters import EPISODE, TwinBatch, evaluate_rware
from fleetmind.rl.train import RWARE_ID, RWARE_WORLDS, rware_defaults

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

ALGOS: tuple[str, ...] = ("mappo", "ippo", "mat", "maddpg", "qmix")
TASKS: tuple[str, ...] = ("rware-tiny-2ag-v2", "rware-tiny-4ag-v2", "rware-small-4ag-v2")
SHAPING = 0.0
"""The dense guide's weight: none. rware's own reward is the benchmark's; a weight above 0 is an
ablation (``--shaping``), reported apart."""

EVAL_SEED = 10_000
CURVE_EPISODES = 20
"""Real-rware episodes of each evaluation during a run (the curve); the figure plays all."""


@dataclass(frozen=True)
class Recipe:
    """How one learner trains on rware ids.

    Attributes:
        num_envs: twin worlds stepped together.
        overrides: config fields on top of the learner's defaults.
        figure: whose per-agent split the row keeps: ``greedy`` (EPyMARL's ``test_greedy``,
            the measure of the published figures, and the table's figure) or ``sampled``.
        steps_per_s: replay learners with an exploration schedule over the run's steps: the
            world steps per second expected on this machine; the run's step cap is twice that
            times the budget (so the clock, not the cap, ends it) and epsilon reaches its floor
            at a quarter of the cap (half the budget at the expected rate). None: no cap.
        why: one line on the choice.
    """

    num_envs: int
    overrides: Mapping[str, Any] = field(default_factory=dict)
    figure: Literal["sampled", "greedy"] = "greedy"
    steps_per_s: float | None = None
    why: str = ""


RECIPES: dict[str, Recipe] = {
    "mappo": Recipe(
        RWARE_WORLDS["mappo"],
        rware_defaults("mappo"),
        why="fleetmind train's rware PPO options (rl.train.RWARE_PPO), 256 worlds",
    ),
    "ippo": Recipe(
        RWARE_WORLDS["ippo"],
        rware_defaults("ippo"),
        why="as MAPPO, each agent's critic on its own observation",
    ),
    "mat": Recipe(
        RWARE_WORLDS["mat"],
        rware_defaults("mat"),
        why="fleetmind train's rware MAT options (rl.train.RWARE_MAT): RWARE_PPO's value_norm, "
        "ent_coef 0.03, lr 1e-3; embed 32, hidden (32,); 256 worlds",
    ),
    # Replay learners: a 10,000-transition buffer (the default) holds 39 batched steps of 256
    # worlds, so they get fewer worlds and a larger buffer (about 6 episodes per world).
    "maddpg": Recipe(
        RWARE_WORLDS["maddpg"],
        {"buffer_size": 100_000},
        why="32 worlds, buffer 100k; Gumbel exploration",
    ),
    # EPyMARL's recipe is DQNConfig's default (recurrent, rl/neural/recurrent.py): epsilon
    # decays over a fixed 50k steps, so the clock alone ends the run (no step cap).
    "qmix": Recipe(
        RWARE_WORLDS["qmix"],
        {},
        why="32 worlds; EPyMARL's QMIX: GRU agents (hidden 64, last action), replay of 5,000 "
        "episodes, batches of 32 episodes, one gradient step per episode, target copied every "
        "200 steps, epsilon 1 -> 0.05 over 50k steps, rewards standardised",
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


def train_one(
    algo: str,
    env_id: str,
    recipe: Recipe,
    *,
    seed: int,
    budget_s: float,
    shaping: float,
    eval_episodes: int,
    out_dir: Path,
    threads: int = 1,
) -> dict[str, Any]:
    """One ``fleetmind train`` run by ``recipe``, for ``budget_s`` seconds; its row.

    The run folder (``out_dir``) is ``fleetmind train``'s: policy, per-agent curves, and the
    evaluation curve on the real rware against training time and steps (five evaluations of
    :data:`CURVE_EPISODES` episodes, the last one, the figure, ``eval_episodes``). ``row.json`` is
    written last, so a folder without it is an unfinished run.
    """
    from fleetmind.rl.train import rware_robots, train

    steps = int(recipe.steps_per_s * budget_s * 2) if recipe.steps_per_s else 10**12
    load_before = os.getloadavg()[0]
    run = train(
        env_id,
        rware_robots(env_id) or 2,
        algo,
        steps=steps,
        seed=seed,
        out_dir=out_dir,
        num_envs=recipe.num_envs,
        overrides=dict(recipe.overrides),
        eval_episodes=eval_episodes,
        progress=False,
        time_limit_s=budget_s,
        eval_every_s=budget_s / 5,
        shaping=shaping,
        threads=threads,
        # The curve's points on 20 episodes; the figure, after training, on all of them.
        curve_episodes=min(CURVE_EPISODES, eval_episodes),
    )
    m = run.metrics
    sampled, greedy = m["deliveries_per_episode"], m["greedy_deliveries_per_episode"]
    curve = m["eval_curve"]
    row = {
        "task": env_id,
        "algo": algo,
        "seed": seed,
        "num_envs": recipe.num_envs,
        "overrides": {
            k: list(v) if isinstance(v, tuple) else v for k, v in recipe.overrides.items()
        },
        "figure": recipe.figure,
        "shaping": shaping,
        "budget_s": budget_s,
        "eval_episodes": eval_episodes,
        "world_steps": m["steps"],
        "train_wall_s": round(m["train_wall_s"], 1),
        "world_steps_per_s": round(m["samples_per_s"], 1),
        "agent_steps_per_s": round(m["samples_per_s"] * m["robots"], 1),
        # The machine is shared: the 1-minute load average before and after training.
        "load_avg": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "curve": [[r["train_s"], r["steps"], r["sampled"], r["greedy"]] for r in curve],
        "sampled": sampled,
        "greedy": greedy,
        "deliveries_per_episode": sampled if recipe.figure == "sampled" else greedy,
        "per_agent": {
            a: float(curve[-1][f"{recipe.figure}_{a}"]) for a in sorted(m["per_agent_reward"])
        },
        "eval_on": m["eval_on"],
        "final_losses": {k: round(float(v), 4) for k, v in m["final_losses"].items()},
        "run_dir": str(out_dir),
    }
    (out_dir / "row.json").write_text(json.dumps(row, indent=1))
    return row


def _train_job(kwargs: dict[str, Any]) -> dict[str, Any]:
    """:func:`train_one` in a worker process (module level, so spawned workers can import it)."""
    kwargs = dict(kwargs)
    return train_one(kwargs.pop("algo"), kwargs.pop("env_id"), kwargs.pop("recipe"), **kwargs)


def _finished(
    folder: Path, budget_s: float, shaping: float, episodes: int
) -> dict[str, Any] | None:
    """The row of a finished run in ``folder`` made with the same settings, else None."""
    path = folder / "row.json"
    if not path.is_file():
        return None
    try:
        row: dict[str, Any] = json.loads(path.read_text())
    except ValueError:
        return None
    same = (row.get("budget_s"), row.get("shaping"), row.get("eval_episodes"))
    return row if same == (budget_s, shaping, episodes) else None


def run(
    *,
    quick: bool = False,
    tasks: Sequence[str] | None = None,
    algos: Sequence[str] = ALGOS,
    seeds: Sequence[int] = (0, 1, 2),
    budget_s: float | None = None,
    shaping: float = SHAPING,
    eval_episodes: int | None = None,
    threads: int = 1,
    progress: Callable[[str], None] | None = None,
    recipes: Mapping[str, Recipe] | None = None,
    out_dir: str | Path = "runs/bench-marl",
    workers: int = 2,
) -> dict[str, Any]:
    """Train each learner for the same wall time on the twin, score it on real rware; resumable.

    Each run is a ``fleetmind train`` run folder ``out_dir/<task>/<algo>/seed-<s>``; a run
    whose folder already holds ``row.json`` made with the same budget, weight and episode
    count is not run again, so a long table is finished across sessions by rerunning the
    command. Runs go ``workers`` at a time, each in its own process with ``threads`` torch
    threads (two processes: both cores).

    Args:
        quick: tiny-2ag only, MAPPO, 30 s a run, 4 evaluation episodes, one seed.
        tasks: rware ids (default :data:`TASKS`; quick: tiny-2ag).
        algos: learners (names of ``fleetmind train --algo`` with a recipe).
        seeds: one training run per task, learner and seed.
        budget_s: seconds of training per run (default 900; quick 30).
        shaping: the dense guide's weight (0: rware's own reward, the headline; above 0 an
            ablation, never comparable with published figures).
        eval_episodes: 500-step episodes per evaluation (default 100 as EPyMARL; quick 4).
        threads: torch intra-op threads per run.
        progress: called with one line after each run.
        recipes: learner -> :class:`Recipe`, replacing :data:`RECIPES`' entries (smaller runs).
        out_dir: where the run folders go.
        workers: runs at once, each in its own process (1: in this process).

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
    budget = budget_s if budget_s is not None else (30.0 if quick else 900.0)
    check_range("--minutes", budget / 60, above=0)
    check_range("--shaping", shaping, low=0, high=10)
    episodes = eval_episodes if eval_episodes is not None else (4 if quick else 100)
    check_range("--eval-episodes", episodes, low=1)
    check_range("--threads", threads, low=1)
    check_range("--workers", workers, low=1)
    root = Path(out_dir)
    t0 = time.perf_counter()
    baseline: dict[str, dict[str, Any]] = {}
    for task in chosen:
        n_actions = TwinBatch(task, 1, seed=0).n_actions
        baseline[task] = evaluate(
            random_policy(EVAL_SEED, n_actions), task, episodes=episodes, seed=EVAL_SEED
        )
    done: dict[tuple[str, str, int], dict[str, Any]] = {}
    todo: list[dict[str, Any]] = []
    for task in chosen:
        for seed in seeds:
            for algo in algos:
                folder = root / task / algo / f"seed-{seed}"
                row = _finished(folder, budget, shaping, episodes)
                if row is not None:
                    done[(task, algo, seed)] = row
                    continue
                todo.append({
                    "algo": algo, "env_id": task, "recipe": book[algo], "seed": seed,
                    "budget_s": budget, "shaping": shaping, "eval_episodes": episodes,
                    "out_dir": folder, "threads": threads,
                })  # fmt: skip
    if progress is not None and done:
        progress(f"bench marl: {len(done)} finished run(s) kept, {len(todo)} to run")

    def landed(row: dict[str, Any]) -> None:
        done[(row["task"], row["algo"], row["seed"])] = row
        if progress is not None:
            progress(
                f"{row['task']} {row['algo']} seed {row['seed']}: {row['world_steps']:,} steps, "
                f"greedy {row['greedy']:.2f} sampled {row['sampled']:.2f}"
            )

    if workers == 1 or len(todo) <= 1:
        for job in todo:
            landed(_train_job(job))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = [pool.submit(_train_job, job) for job in todo]
            for fut in as_completed(futures):
                landed(fut.result())
    rows = [done[(t, a, s)] for t in chosen for s in seeds for a in algos if (t, a, s) in done]
    result = {
        "tasks": chosen,
        "algos": list(algos),
        "budget_s": budget,
        "shaping": shaping,
        "eval_episodes": episodes,
        "seeds": list(seeds),
        "threads": threads,
        "workers": workers,
        "out_dir": str(root),
        "rows": rows,
        "random": baseline,
        "wall_s": round(time.perf_counter() - t0, 1),
        "quick": quick,
    }
    result["comparison"] = compare(result)
    result["summary"] = summarise(result)
    return result


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def summarise(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task and learner over the seeds: mean and 95% interval of greedy and sampled."""
    out = []
    for task in result["tasks"]:
        for algo in result["algos"]:
            rows = [r for r in result["rows"] if r["task"] == task and r["algo"] == algo]
            if not rows:
                continue
            g, gh = mean_interval([r["greedy"] for r in rows])
            s, sh = mean_interval([r["sampled"] for r in rows])
            out.append({
                "task": task, "algo": algo, "seeds": len(rows), "greedy": g, "greedy_ci": gh,
                "sampled": s, "sampled_ci": sh,
                "agent_steps_per_s": _mean(rows, "agent_steps_per_s"),
                "world_steps": _mean(rows, "world_steps"),
            })  # fmt: skip
    return out


def compare(result: dict[str, Any]) -> list[dict[str, Any]]:
    """MAT against MAPPO per task at equal wall time (means over seeds), where both ran."""
    out = []
    for task in result["tasks"]:
        mat = [r for r in result["rows"] if r["task"] == task and r["algo"] == "mat"]
        mappo = [r for r in result["rows"] if r["task"] == task and r["algo"] == "mappo"]
        if not mat or not mappo:
            continue
        m, p = _mean(mat, "greedy"), _mean(mappo, "greedy")
        out.append({
            "task": task,
            "mat": m,
            "mappo": p,
            "mat_sampled": _mean(mat, "sampled"),
            "mappo_sampled": _mean(mappo, "sampled"),
            "mat_world_steps": _mean(mat, "world_steps"),
            "mappo_world_steps": _mean(mappo, "world_steps"),
            "mat_at_least_mappo": m >= p,
        })  # fmt: skip
    return out


def _published(source: str, task: str, algo: str) -> str:
    return PUBLISHED[source].get(f"{task}/{algo}", "not found")


def format_table(result: dict[str, Any]) -> str:
    """Markdown: every run beside random and the published figures; means; MAT vs MAPPO."""
    b = result["budget_s"]
    reward = (
        "rware's own reward"
        if not result["shaping"]
        else f"ABLATION: rware's reward + dense guide x{result['shaping']:g} (not comparable "
        "with published figures)"
    )
    lines = [
        f"{b / 60:g} min of training per run (evaluations excluded), {reward}, "
        f"{result['threads']} torch thread(s), {result['workers']} run(s) at once; real rware, "
        f"{result['eval_episodes']} seeded {EPISODE}-step episodes per evaluation; figure: "
        "greedy (EPyMARL's test_greedy), sampled beside it; run folders under "
        f"{result['out_dir']}",
        "",
        "| task | learner | seed | worlds | world steps | agent-steps/s "
        "| greedy (sampled) at each fifth of the budget "
        "| real rware: greedy / sampled | EPyMARL | Mava |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | --- | --- |",
    ]
    for task in result["tasks"]:
        rnd = result["random"][task]
        for r in (r for r in result["rows"] if r["task"] == task):
            c = " / ".join(f"{g:.1f} ({s:.1f})" for _t, _n, s, g in r["curve"][1:])
            lines.append(
                f"| {task} | {r['algo']} | {r['seed']} | {r['num_envs']} | {r['world_steps']:,} "
                f"| {r['agent_steps_per_s']:,.0f} | {c} | **{r['greedy']:.2f}** / "
                f"{r['sampled']:.2f} | {_published('epymarl', task, r['algo'])} "
                f"| {_published('mava', task, r['algo'])} |"
            )
        lines.append(
            f"| {task} | random | - | - | - | - | - | {rnd['deliveries_per_episode']:.2f} | - | - |"
        )
    lines += ["", f"EPyMARL: {PUBLISHED_NOTES['epymarl']}", f"Mava: {PUBLISHED_NOTES['mava']}"]
    if result.get("summary"):
        lines += [
            "",
            "| task | learner | seeds | greedy (95% CI) | sampled (95% CI) | agent-steps/s |",
            "| --- | --- | ---: | --- | --- | ---: |",
        ]
        for m in result["summary"]:
            lines.append(
                f"| {m['task']} | {m['algo']} | {m['seeds']} | {m['greedy']:.2f} "
                f"+- {m['greedy_ci']:.2f} | {m['sampled']:.2f} +- {m['sampled_ci']:.2f} "
                f"| {m['agent_steps_per_s']:,.0f} |"
            )
    if result["comparison"]:
        lines += [
            "",
            "| task | mat (greedy / sampled) | mappo (greedy / sampled) | world steps mat / mappo "
            "| mat >= mappo |",
            "| --- | --- | --- | --- | --- |",
        ]
        for c in result["comparison"]:
            lines.append(
                f"| {c['task']} | {c['mat']:.2f} / {c['mat_sampled']:.2f} "
                f"| {c['mappo']:.2f} / {c['mappo_sampled']:.2f} "
                f"| {c['mat_world_steps']:,.0f} / {c['mappo_world_steps']:,.0f} "
                f"| {'yes' if c['mat_at_least_mappo'] else 'no'} |"
            )
    return "\n".join(lines)
