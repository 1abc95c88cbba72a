"""Per-robot rewards and the reward modes used for credit assignment.

Individual reward of robot ``i`` at a tick (defaults from FIELD-NOTES §3.2)::

    r_i = delivery_bonus * delivered_i + pickup_bonus * picked_i + step_cost
          + conflict_penalty * conflict_i

Modes turn individual rewards ``r`` (shape ``(..., N)``) into the rewards the learners see:

- ``individual``: ``r_i``;
- ``shared``: the team reward ``G = sum_j r_j`` for every robot (as in §3.2, where one robot
  reaching the goal pays both);
- ``mixed``: ``weight * r_i + (1 - weight) * G``;
- ``difference``: ``G - G_{-i}``, the team reward minus what the *rest* of the team earns had
  robot ``i`` waited this tick (the simulator's exact counterfactual step), so robot ``i``'s own
  tick cost stays in its reward. Wolpert and Tumer's difference reward removes agent ``i``; a
  robot cannot vanish from a grid, so it waits, and its own terms leave the sum as a removed
  robot's would. Counting the waiting robot's step cost in ``G_{-i}`` instead (robot ``i``
  "present but idle") cancels the step cost exactly: waiting then earns 0, the zero-initialised
  tables never prefer an untried move, and the learners stall (docs/rl.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range

RewardMode = Literal["individual", "shared", "mixed", "difference"]
REWARD_MODES: tuple[RewardMode, ...] = ("individual", "shared", "mixed", "difference")


@dataclass(frozen=True)
class RewardConfig:
    """Reward constants and mode.

    Attributes:
        mode: how individual rewards are combined (see the module docstring).
        weight: the individual weight of the ``mixed`` mode.
        delivery_bonus: paid on delivery.
        pickup_bonus: paid on pickup (0 by default, as in the note).
        step_cost: paid every tick by every robot.
        conflict_penalty: paid by a robot whose move failed because of another robot.
    """

    mode: RewardMode = "individual"
    weight: float = 0.5
    delivery_bonus: float = 1.0
    pickup_bonus: float = 0.0
    step_cost: float = -0.01
    conflict_penalty: float = -0.5

    def __post_init__(self) -> None:
        if self.mode not in REWARD_MODES:
            raise ConfigError(
                f"reward mode: expected one of {', '.join(REWARD_MODES)}, got {self.mode!r}"
            )
        check_range("reward weight", self.weight, low=0, high=1)

    @staticmethod
    def parse(spec: str) -> RewardConfig:
        """Parse ``individual``, ``shared``, ``difference`` or ``mixed(0.3)``."""
        text = spec.strip()
        if text.startswith("mixed"):
            inner = text[len("mixed") :].strip()
            if not inner:
                return RewardConfig(mode="mixed")
            if not (inner.startswith("(") and inner.endswith(")")):
                raise ConfigError(f"reward mode: expected mixed(WEIGHT), got {spec!r}")
            try:
                weight = float(inner[1:-1])
            except ValueError:
                raise ConfigError(f"reward mode: weight of {spec!r} is not a number") from None
            return RewardConfig(mode="mixed", weight=weight)
        return RewardConfig(mode=text)  # type: ignore[arg-type]


def individual(
    cfg: RewardConfig,
    *,
    delivered: NDArray[np.bool_],
    picked: NDArray[np.bool_],
    conflict: NDArray[np.bool_],
) -> NDArray[np.float32]:
    """Individual rewards, same shape as the masks."""
    r = np.full(delivered.shape, cfg.step_cost, dtype=np.float32)
    r += cfg.delivery_bonus * delivered
    r += cfg.pickup_bonus * picked
    r += cfg.conflict_penalty * conflict
    return r


def combine(
    cfg: RewardConfig,
    rewards: NDArray[np.float32],
    *,
    team_without: NDArray[np.float32] | None = None,
) -> NDArray[np.float32]:
    """Apply the reward mode to individual rewards ``(..., N)``.

    Args:
        cfg: the reward configuration.
        rewards: individual rewards.
        team_without: for ``difference``: ``(..., N)`` team reward had robot ``i`` waited,
            robot ``i``'s own reward included (what the simulator's counterfactual step pays).
    """
    if cfg.mode == "individual":
        return rewards
    team = rewards.sum(axis=-1, keepdims=True, dtype=np.float32)
    if cfg.mode == "shared":
        shared: NDArray[np.float32] = np.broadcast_to(team, rewards.shape).astype(np.float32)
        return shared
    if cfg.mode == "mixed":
        mixed: NDArray[np.float32] = (cfg.weight * rewards + (1.0 - cfg.weight) * team).astype(
            np.float32
        )
        return mixed
    if team_without is None:
        raise ConfigError("difference rewards need the counterfactual team rewards")
    # A waiting robot earns exactly the step cost (no delivery, pickup or failed move): take it
    # out so that G_{-i} is the rest of the team's reward.
    diff: NDArray[np.float32] = (team - (team_without - cfg.step_cost)).astype(np.float32)
    return diff
