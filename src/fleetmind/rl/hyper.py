"""The seed's first-tuning rules (FIELD-NOTES §3.3) as overridable defaults.

Three things are set before anything else when moving to a richer simulator:

- gamma by horizon: 0.95 when episodes last tens of steps, 0.99 when they last hundreds
  (``horizon >= LONG_HORIZON`` steps counts as hundreds);
- learning rate: 0.1 for one learner, halved (0.05) when several learners share one reward,
  since they disturb each other (§3.2); several learners with their own rewards keep 0.1;
- reward scale: rewards are multiplied by ``reward_scale`` and clipped to ``[-1, 1]`` before
  learning; by default the scale maps the largest absolute reward the env can give
  (``reward_bound``) to 1, and is 1.0 when no bound is known or the bound is already <= 1.

Every value can be overridden; :meth:`Hyper.to_dict` records the resolved values and where each came
from, for a run folder.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fleetmind.errors import check_range

LONG_HORIZON: Final = 100
GAMMA_SHORT: Final = 0.95
GAMMA_LONG: Final = 0.99
ALPHA_SINGLE: Final = 0.1
ALPHA_SHARED_FACTOR: Final = 0.5


@dataclass(frozen=True)
class Hyper:
    """Resolved hyperparameters.

    Attributes:
        horizon: typical episode length in steps.
        n_learners: number of learning agents.
        shared_reward: whether the learners share one reward.
        alpha: learning rate.
        gamma: discount.
        reward_scale: multiplier applied to raw rewards before clipping to ``[-1, 1]``.
        sources: field -> ``"rule: ..."`` or ``"override"``, how each value was chosen.
    """

    horizon: int
    n_learners: int
    shared_reward: bool
    alpha: float
    gamma: float
    reward_scale: float
    sources: dict[str, str] = field(default_factory=dict)

    def normalise(self, reward: ArrayLike) -> NDArray[np.float64]:
        """Scale and clip rewards to ``[-1, 1]``.

        Args:
            reward: a reward or an array of rewards.

        Returns:
            ``clip(reward * reward_scale, -1, 1)`` as a float array (0-d for a scalar).
        """
        return np.clip(np.asarray(reward, dtype=np.float64) * self.reward_scale, -1.0, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of the resolved values and their sources."""
        return asdict(self)


def resolve(
    *,
    horizon: int,
    n_learners: int,
    shared_reward: bool,
    alpha: float | None = None,
    gamma: float | None = None,
    reward_scale: float | None = None,
    reward_bound: float | None = None,
) -> Hyper:
    """Apply the §3.3 rules, keeping any value given explicitly.

    Args:
        horizon: typical episode length in steps (the time limit, or a lifelong task's window).
        n_learners: number of learning agents (1 for single-agent).
        shared_reward: whether the learners are trained on one shared reward.
        alpha: learning rate override, in ``(0, 1]``.
        gamma: discount override, in ``[0, 1]``.
        reward_scale: reward multiplier override, ``> 0``.
        reward_bound: largest absolute reward the env can give in one step; sets the default scale.

    Returns:
        The resolved :class:`Hyper`.

    Raises:
        ConfigError: naming the field out of range.
    """
    check_range("horizon", horizon, low=1)
    check_range("n_learners", n_learners, low=1)
    sources: dict[str, str] = {}

    if gamma is None:
        long = horizon >= LONG_HORIZON
        gamma = GAMMA_LONG if long else GAMMA_SHORT
        sources["gamma"] = (
            f"rule: horizon {horizon} {'>=' if long else '<'} {LONG_HORIZON} steps -> {gamma}"
        )
    else:
        check_range("gamma", gamma, low=0, high=1)
        sources["gamma"] = "override"

    if alpha is None:
        halve = n_learners > 1 and shared_reward
        alpha = ALPHA_SINGLE * (ALPHA_SHARED_FACTOR if halve else 1.0)
        sources["alpha"] = (
            f"rule: {n_learners} learners sharing one reward -> halved to {alpha}"
            if halve
            else f"rule: {'single learner' if n_learners == 1 else 'own rewards'} -> {alpha}"
        )
    else:
        check_range("alpha", alpha, above=0, high=1)
        sources["alpha"] = "override"

    if reward_scale is None:
        if reward_bound is None:
            reward_scale = 1.0
            sources["reward_scale"] = "rule: no reward bound given -> 1.0 (clip only)"
        else:
            # below=inf: a finite bound (inf would scale every reward to 0).
            check_range("reward_bound", reward_bound, above=0, below=math.inf)
            reward_scale = 1.0 / reward_bound if reward_bound > 1.0 else 1.0
            sources["reward_scale"] = f"rule: reward bound {reward_bound} -> scale {reward_scale}"
    else:
        check_range("reward_scale", reward_scale, above=0, below=math.inf)
        sources["reward_scale"] = "override"

    return Hyper(
        horizon=horizon,
        n_learners=n_learners,
        shared_reward=shared_reward,
        alpha=float(alpha),
        gamma=float(gamma),
        reward_scale=float(reward_scale),
        sources=sources,
    )
