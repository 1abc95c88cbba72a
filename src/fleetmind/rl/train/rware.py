"""rware ids: each learner's defaults there, the fleet an id names, the real-rware curve."""

from __future__ import annotations

import csv
import dataclasses
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.rl.neural import ON_POLICY

log = logging.getLogger(__name__)

RWARE_ID = re.compile(r"^rware-(tiny|small|medium|large)-(?P<agents>\d+)ag(-easy|-hard)?-v2$")


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
