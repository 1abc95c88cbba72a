"""What ``fleetmind train`` is asked and what it answers: the learners, defaults, the request.

:class:`Request` is :func:`~fleetmind.rl.train.train`'s arguments once checked, handed to
either loop; :class:`TrainRun` is what a run returns. :func:`reward_bound` is the largest
one-step reward a warehouse reward mode gives (the §3.3 scaling of both loops).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from fleetmind.rl.reward import RewardSpec, Scorer

TABULAR_ALGOS: tuple[str, ...] = ("q", "iql", "ctde")
NEURAL_ALGOS: tuple[str, ...] = ("ippo", "mappo", "iql-dqn", "vdn", "qmix", "maddpg", "mat")
ALGOS: tuple[str, ...] = TABULAR_ALGOS + NEURAL_ALGOS
BACKENDS: tuple[str, ...] = ("local", "ray")


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


class Request(NamedTuple):
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
