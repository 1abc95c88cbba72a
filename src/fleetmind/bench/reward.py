"""FIELD-NOTES §6's lesson as an experiment (``fleetmind bench reward``): an LLM scoring RL.

§6: "an LLM scoring RL every minute made training unstable; fixing the reward and letting the
LLM only reorder tasks stabilised it". Here: independent Q-learners (``iql``, one table per
robot) on ``warehouse-tiny`` with 2 robots, trained three ways over the same seeds:

- ``env``: the fixed environment reward (delivery +1, step -0.01, conflict -0.5), the baseline;
- ``llm-mixed``: the same plus ``weight`` x the LLM's score every ``every`` ticks of the
  stretch since its last score (the state before and after, :func:`fleetmind.rl.reward.transition`;
  ``fleetmind train --reward llm:every=K,weight=W``);
- ``llm-alone``: the LLM's score every ``every`` ticks is the whole reward
  (``llm:every=K,weight=1,alone``).

Beside them, the shortest-path robot (no learning, no shield; :func:`fleetmind.rl.nav.evaluate`)
on the same map, as the simple reference of what a delivery rate should be.

Per run: each agent's variance of its per-episode environment return over the second half of
training (how unsteady the task reward is once learning is under way) and of the return it
trained on; team deliveries per tick in the last quarter of training (exploration at its floor)
and in a greedy evaluation; wall time; model calls, cache hits, fallbacks and tokens; and the
doctor's findings (:func:`fleetmind.rl.diagnostics.diagnose`, with the §5.4 ``reward_drift``
check on the score and environment parts of each return). Mean and Student-t 95% interval over
seeds per arm.

The scorer is :class:`fleetmind.llm.reward.LLMReward` on the embedded model (one server for the
whole experiment, sampling seeded) unless a base URL is given; its cache by state text is shared
by every run of the experiment, so a situation already scored is not asked again (counts per run
therefore depend on run order: runs go seed by seed, mixed before alone). Each run folder
(``out/<arm>/seed-<s>/``) is a ``fleetmind train`` folder with its own ``calls.jsonl``.

Beside each LLM arm two controls trained the same way with a score blind to the state
(``const-*``: the LLM arm's mean score; ``random-*``: seeded draws from its scores).

Default size: 60,000 ticks per run (300 episodes of 200 ticks), seeds 0 to 4, a score every 50
ticks; about 15 to 20 minutes on 2 shared cores. ``quick``: 2,000 ticks, one seed, for tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import ConfigError
from fleetmind.eval.compare import confidence as ci95
from fleetmind.llm.reward import ControlScorer, recorded_reward, reward_backend
from fleetmind.rl import nav
from fleetmind.rl.reward import GOAL, RewardSpec
from fleetmind.rl.train import TrainRun, train

log = logging.getLogger(__name__)

MAP = "warehouse-tiny"
ROBOTS = 2
EPISODE = 200
ARMS = (
    "env",
    "llm-mixed",
    "const-mixed",
    "random-mixed",
    "llm-alone",
    "const-alone",
    "random-alone",
)
CONTROLS = {
    "const-mixed": ("llm-mixed", "constant"),
    "random-mixed": ("llm-mixed", "random"),
    "const-alone": ("llm-alone", "constant"),
    "random-alone": ("llm-alone", "random"),
}
"""Control arm -> (the LLM arm whose scores it takes, ``ControlScorer`` mode)."""


def arm_specs(every: int, weight: float) -> dict[str, str]:
    """The ``--reward`` spec of each arm (a control arm has its LLM arm's)."""
    specs = {
        "env": "env",
        "llm-mixed": f"llm:every={every},weight={weight:g}",
        "llm-alone": f"llm:every={every},weight=1,alone",
    }
    for control, (llm_arm, _) in CONTROLS.items():
        specs[control] = specs[llm_arm]
    return specs


def arm_label(arm: str, specs: Mapping[str, str]) -> str:
    """The table's name of an arm: its spec, and for a control what scores it."""
    if arm in CONTROLS:
        llm_arm, mode = CONTROLS[arm]
        what = "mean" if mode == "constant" else "random draw"
        return f"{specs[arm]}, {what} of {llm_arm}'s scores"
    return specs[arm]


class _Taped:
    """A scorer that keeps every score its inner scorer gave (the controls' source)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.values: list[float] = []

    def evaluate(self, state_text: str, *, tick: int | None = None) -> float | None:
        value: float | None = self.inner.evaluate(state_text, tick=tick)
        if value is not None:
            self.values.append(float(value))
        return value

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = self.inner.summary()
        return out


def _exploration(steps: int) -> dict[str, float]:
    """Epsilon 1.0 decaying to 0.05 at 60% of training (as ``bench free-riding``)."""
    episodes = max(1, steps // EPISODE)
    return {
        "eps_start": 1.0,
        "eps_min": 0.05,
        "eps_decay": 0.05 ** (1.0 / max(1.0, 0.6 * episodes)),
    }


_LLM_COUNTS = (
    "scored_ticks",
    "calls",
    "evaluations",
    "cache_hits",
    "parse_fallbacks",
    "variance_fallbacks",
)
"""Counters of the LLM scorer (``metrics.json``'s ``llm_reward``) reported as ``llm_<name>``."""


def _run_figures(run: TrainRun, wall_s: float) -> dict[str, Any]:
    """One run's figures from its curves and metrics."""
    import csv

    with (run.out_dir / "curves.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    agents = list(run.returns)
    n = len(rows)
    half, quarter = rows[n // 2 :], rows[-max(1, n // 4) :]

    def column(part: Sequence[Mapping[str, str]], name: str) -> Any:
        return np.asarray([float(r[name]) for r in part], dtype=np.float64)

    env_col = "_env" if f"{agents[0]}_env" in rows[0] else "_return"
    env_var = {a: float(column(half, a + env_col).var(ddof=1)) for a in agents}
    trained_var = {a: float(column(half, a + "_return").var(ddof=1)) for a in agents}
    late = {a: int(column(quarter, a + "_deliveries").sum()) for a in agents}
    m = run.metrics
    lr = m.get("llm_reward", {})
    return {
        "out_dir": str(run.out_dir),
        "episodes": n,
        "env_return_var": env_var,
        "env_return_var_mean": float(np.mean(list(env_var.values()))),
        "trained_return_var": trained_var,
        "trained_return_var_mean": float(np.mean(list(trained_var.values()))),
        "late_deliveries": late,
        "late_deliveries_per_tick": sum(late.values()) / (len(quarter) * EPISODE),
        "greedy_deliveries_per_tick": float(m["throughput"]),
        "train_wall_s": float(m["train_wall_s"]),
        "wall_s": wall_s,
        **{f"llm_{key}": int(lr.get(key, 0)) for key in _LLM_COUNTS},
        "llm_tokens": int(lr.get("prompt_tokens", 0)) + int(lr.get("completion_tokens", 0)),
        "llm_score_mean": lr.get("score_mean"),
        "score_mean": float(lr.get("score_mean") or 0.0),
        "score_std": float(lr.get("score_std") or 0.0),
        "findings": [
            {"kind": f["kind"], "agents": f["agents"], "message": f["message"]}
            for f in m.get("diagnostics", [])
        ],
    }


SUMMARY_KEYS = (
    "env_return_var_mean",
    "trained_return_var_mean",
    "late_deliveries_per_tick",
    "greedy_deliveries_per_tick",
    "wall_s",
    "llm_calls",
    "llm_tokens",
    "llm_variance_fallbacks",
    "llm_parse_fallbacks",
    "score_mean",
    "score_std",
)


def _summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: ci95([float(r[k]) for r in runs]) for k in SUMMARY_KEYS}
    kinds: dict[str, int] = {}
    for r in runs:
        for kind in sorted({f["kind"] for f in r["findings"]}):
            kinds[kind] = kinds.get(kind, 0) + 1
    out["findings"] = {k: f"{v} of {len(runs)} runs" for k, v in sorted(kinds.items())}
    return out


def run(
    *,
    quick: bool = False,
    seeds: Sequence[int] | None = None,
    steps: int | None = None,
    every: int = 50,
    weight: float = 0.5,
    out_dir: str | Path = "runs/bench-reward",
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
) -> dict[str, Any]:
    """Train every arm on every seed and summarise (see the module docstring).

    Args:
        quick: 2,000 ticks and seed 0 (unless ``steps``/``seeds`` say otherwise).
        seeds: root seeds (default 0 to 4).
        steps: ticks per run (default 60,000).
        every: ticks between two LLM scores.
        weight: the score's weight in ``llm-mixed``.
        out_dir: where the run folders go.
        base_url: an OpenAI-compatible server instead of the embedded model.
        model: the model name to request.
        api_key: the server's key (never recorded).

    Returns:
        ``config``, ``runs`` (arm -> one figure dict per seed), ``summary`` (arm -> mean and
        95% interval of each figure, findings counted), ``shortest_path`` (the reference).

    Raises:
        ConfigError: bad sizes or a bad spec.
    """
    seeds = list(seeds if seeds is not None else ([0] if quick else [0, 1, 2, 3, 4]))
    steps = steps if steps is not None else (2_000 if quick else 60_000)
    if not seeds:
        raise ConfigError("seeds: give at least one seed")
    if steps < 4 * EPISODE:
        # The variances are taken over the second half of training: at least two episodes.
        raise ConfigError(f"steps: at least {4 * EPISODE} ticks (four episodes), got {steps}")
    specs = arm_specs(every, weight)
    # Parsed first: a bad every/weight is refused before the model starts.
    parsed = {arm: RewardSpec.parse(text) for arm, text in specs.items()}
    out = Path(out_dir)
    t0 = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    shared_cache: dict[str, float] = {}
    common: dict[str, Any] = {
        "steps": steps,
        "max_steps": EPISODE,
        "overrides": _exploration(steps),
        "progress": False,
        "eval_ticks": 500,
    }
    with reward_backend(base_url=base_url, model=model, api_key=api_key) as (client, secrets):
        for seed in seeds:
            taped: dict[str, list[float]] = {}
            for arm in ARMS:
                folder = out / arm / f"seed-{seed}"
                spec = parsed[arm]
                start = time.perf_counter()
                if not spec.scored:
                    result = train(MAP, ROBOTS, "iql", seed=seed, out_dir=folder, **common)
                elif arm in CONTROLS:
                    # The same training, its scores blind to the state: the LLM arm's mean, or
                    # draws from what it gave on this seed.
                    llm_arm, mode = CONTROLS[arm]
                    values = taped.get(llm_arm) or [0.0]
                    control = ControlScorer(values, mode=mode, seed=seed)
                    result = train(
                        MAP, ROBOTS, "iql", seed=seed, out_dir=folder, reward=spec,
                        scorer=control, **common,
                    )  # fmt: skip
                else:
                    calls = folder / "calls.jsonl"
                    calls.unlink(missing_ok=True)
                    with recorded_reward(
                        client, calls, goal=GOAL, secrets=secrets, seed=seed,
                        samples=spec.samples, temperature=spec.temperature, cache=shared_cache,
                    ) as scorer:  # fmt: skip
                        tape = _Taped(scorer)
                        result = train(
                            MAP, ROBOTS, "iql", seed=seed, out_dir=folder, reward=spec,
                            scorer=tape, **common,
                        )  # fmt: skip
                    taped[arm] = tape.values
                figures = _run_figures(result, time.perf_counter() - start)
                runs[arm].append({"seed": seed, **figures})
                log.info("bench reward: %s seed %d done in %.0f s", arm, seed, figures["wall_s"])
    summary = {arm: _summary(rs) for arm, rs in runs.items()}
    reference = nav.evaluate(
        nav.shortest_path_actions, MAP, ROBOTS, seeds=seeds, num_envs=4, ticks=EPISODE
    )
    return {
        "config": {
            "map": MAP,
            "robots": ROBOTS,
            "algo": "iql",
            "episode_ticks": EPISODE,
            "steps": steps,
            "seeds": seeds,
            "every": every,
            "weight": weight,
            "specs": specs,
            "backend": base_url or "embedded SmolLM2-135M (127.0.0.1)",
            "exploration": common["overrides"],
            "quick": quick,
        },
        "runs": runs,
        "summary": summary,
        "versus_controls": versus_controls(summary),
        "shortest_path": {
            "deliveries_per_tick": reference["deliveries_per_robot_tick"] * ROBOTS,
            "collision_attempts_per_tick": reference["collision_attempts_per_robot_tick"] * ROBOTS,
        },
        "wall_s": time.perf_counter() - t0,
    }


COMPARED = ("late_deliveries_per_tick", "greedy_deliveries_per_tick", "trained_return_var_mean")
"""The figures on which an LLM arm is set against its controls."""


def versus_controls(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per control arm and figure: the LLM arm's mean minus the control's, and whether they differ.

    ``differs``: their 95% intervals do not overlap (None with one seed: no interval). A §6
    conclusion about an LLM arm stands only on a figure where it differs from both controls.
    """
    out: dict[str, dict[str, Any]] = {}
    for control, (llm_arm, _) in CONTROLS.items():
        if control not in summary or llm_arm not in summary:
            continue
        row: dict[str, Any] = {"llm_arm": llm_arm}
        for key in COMPARED:
            a, b = summary[llm_arm][key], summary[control][key]
            gap = a["mean"] - b["mean"]
            differs = (
                None if a["ci95"] is None or b["ci95"] is None else abs(gap) > a["ci95"] + b["ci95"]
            )
            row[key] = {"llm_minus_control": gap, "differs": differs}
        out[control] = row
    return out


def _fmt(cell: Mapping[str, Any], digits: int) -> str:
    half = cell["ci95"]
    text = f"{cell['mean']:.{digits}f}"
    return text if half is None else f"{text} +-{half:.{digits}f}"


COLUMNS = (
    ("env return var", "env_return_var_mean", 2),
    ("trained return var", "trained_return_var_mean", 2),
    ("deliveries/tick, last 25%", "late_deliveries_per_tick", 4),
    ("greedy deliveries/tick", "greedy_deliveries_per_tick", 4),
    ("wall s", "wall_s", 0),
    ("model calls", "llm_calls", 0),
    ("tokens", "llm_tokens", 0),
    ("variance fallbacks", "llm_variance_fallbacks", 0),
    ("score mean", "score_mean", 2),
)


def format_table(result: Mapping[str, Any]) -> str:
    """The summary as a Markdown table (one row per arm), the reference and the findings."""
    cfg = result["config"]
    head = ["reward", *(c for c, _, _ in COLUMNS), "doctor findings"]
    lines = [
        f"{cfg['map']}, {cfg['robots']} robots, iql, {cfg['steps']} ticks per run, seeds "
        f"{','.join(map(str, cfg['seeds']))}, a score every {cfg['every']} ticks; mean +- 95% CI",
        "",
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    for arm, s in result["summary"].items():
        cells = [_fmt(s[key], digits) for _, key, digits in COLUMNS]
        found = "; ".join(f"{k} {v}" for k, v in s["findings"].items()) or "none"
        label = arm_label(arm, result["config"]["specs"])
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {found} |")
    ref = result["shortest_path"]
    lines.append(
        f"| shortest path (no learning) | - | - | {ref['deliveries_per_tick']:.4f} | - | - | - "
        "| - | - | - | - |"
    )
    lines.append("")
    for control, row in result.get("versus_controls", {}).items():
        parts = []
        for key in COMPARED:
            cell = row[key]
            verdict = {True: "differs", False: "within noise", None: "one seed"}[cell["differs"]]
            parts.append(f"{key} {cell['llm_minus_control']:+.4f} ({verdict})")
        lines.append(f"{row['llm_arm']} - {control}: " + "; ".join(parts))
    return "\n".join(lines)
