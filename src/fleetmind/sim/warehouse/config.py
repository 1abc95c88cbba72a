"""What defines a warehouse episode besides the map: fleet, time limit, orders, battery."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.sim import rewards as rw
from fleetmind.sim.orders import OrderConfig


@dataclass(frozen=True)
class BatteryConfig:
    """Optional battery model.

    Attributes:
        capacity: charge of a full battery.
        drain_per_move: charge used by each executed move.
        recharge_per_tick: charge gained per tick on a charger cell.
    """

    capacity: float = 200.0
    drain_per_move: float = 1.0
    recharge_per_tick: float = 10.0


@dataclass(frozen=True)
class WarehouseConfig:
    """Everything that defines a warehouse episode besides the map.

    Attributes:
        n_robots: fleet size.
        max_steps: time limit (truncation, never termination).
        orders: order stream settings.
        reward: reward constants and mode.
        battery: battery model, or None for unlimited.
        auto_assign: hand open orders to idle robots without a planner.
        capabilities: per robot capabilities; default: every third robot ``cold``, every fourth
            ``heavy``.
    """

    n_robots: int = 4
    max_steps: int = 500
    orders: OrderConfig = field(default_factory=OrderConfig)
    reward: rw.RewardConfig = field(default_factory=rw.RewardConfig)
    battery: BatteryConfig | None = None
    auto_assign: bool = True
    capabilities: tuple[frozenset[str], ...] | None = None

    def __post_init__(self) -> None:
        check_range("robots", self.n_robots, low=1)
        check_range("steps", self.max_steps, low=1)
        if self.capabilities is not None and len(self.capabilities) != self.n_robots:
            raise ConfigError(
                f"capabilities: expected {self.n_robots} entries, got {len(self.capabilities)}"
            )


def default_capabilities(n_robots: int) -> tuple[frozenset[str], ...]:
    """Every third robot (from robot_2) is ``cold``, every fourth (from robot_3) ``heavy``."""
    caps = []
    for i in range(n_robots):
        c = set()
        if i % 3 == 2:
            c.add("cold")
        if i % 4 == 3:
            c.add("heavy")
        caps.append(frozenset(c))
    return tuple(caps)


class TickPlan(NamedTuple):
    """What a tick reads from the config, worked out once per config (``Warehouse.advance``)."""

    config: WarehouseConfig
    n: int
    actions_shape: tuple[int]
    pos_shape: tuple[int, int]
    flags_shape: tuple[int, int]
    mode: str
    individual: bool  # the rewards are the individual rewards
    reward_terms: NDArray[np.float64]  # (4,) step cost, delivery, pickup, conflict penalty
    battery: BatteryConfig | None
    lifelong: bool  # a fresh task for every idle robot: no arrivals to admit
    eventful: bool  # every tick has work after the kernel: a battery model or arrivals
    max_steps: int

    @classmethod
    def of(cls, config: WarehouseConfig, n: int, fixed_orders: object) -> TickPlan:
        """The plan of ``config`` for ``n`` robots (``fixed_orders``: the task file's, or None)."""
        r = config.reward
        lifelong = fixed_orders is None and config.orders.rate is None
        return cls(
            config,
            n,
            (n,),
            (n, 2),
            (5, n),
            r.mode,
            r.mode == "individual",
            np.array(
                [r.step_cost, r.delivery_bonus, r.pickup_bonus, r.conflict_penalty],
                dtype=np.float64,
            ),
            config.battery,
            lifelong,
            config.battery is not None or not lifelong,
            config.max_steps,
        )
