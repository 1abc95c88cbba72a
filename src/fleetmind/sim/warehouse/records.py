"""What the world records and returns: an order's fate, what a tick did."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.grid import Cell
from fleetmind.sim.orders import Order


@dataclass
class OrderRecord:
    """What happened to one order (mutable bookkeeping, copied by snapshots)."""

    order: Order
    robot: int = -1
    assigned_tick: int = -1
    assigned_cell: Cell | None = None
    picked_tick: int = -1
    delivered_tick: int = -1

    def __deepcopy__(self, memo: dict[int, Any]) -> OrderRecord:
        # Its fields are immutable (the order, ticks, a cell): a shallow copy is a deep one.
        new = copy.copy(self)
        memo[id(self)] = new
        return new


@dataclass(frozen=True)
class StepResult:
    """What one tick did.

    Attributes:
        rewards: ``(N,)`` rewards after the reward mode.
        individual: ``(N,)`` individual rewards.
        moved: ``(N,)`` robots that changed cell.
        conflict: ``(N,)`` robots whose move failed because of another robot.
        wall_bump: ``(N,)`` robots that bumped a wall or the border.
        picked: ids of orders loaded this tick.
        delivered: ids of orders delivered this tick.
        arrived: ids of orders that arrived this tick.
        idle: indices of robots that became idle this tick.
        truncated: the time limit was reached.
        released: ids of parked orders that came back to the open list this tick.
    """

    rewards: NDArray[np.float32]
    individual: NDArray[np.float32]
    moved: NDArray[np.bool_]
    conflict: NDArray[np.bool_]
    wall_bump: NDArray[np.bool_]
    picked: tuple[str, ...]
    delivered: tuple[str, ...]
    arrived: tuple[str, ...]
    idle: tuple[int, ...]
    truncated: bool
    released: tuple[str, ...] = ()


class Tick(NamedTuple):
    """What one tick did, as :meth:`Warehouse.advance` returns it.

    Attributes:
        rewards: ``(N,)`` rewards after the reward mode.
        individual: ``(N,)`` individual rewards.
        flags: ``(5, N)`` per robot: moved, wall bump, conflict, picked, delivered.
        picked: ids of orders loaded this tick.
        delivered: ids of orders delivered this tick.
        arrived: ids of orders that arrived this tick.
        idle: indices of robots that became idle this tick.
        released: ids of parked orders that came back to the open list this tick.
        truncated: the time limit was reached.
        observed: the ``out`` given to :meth:`Warehouse.advance` holds the observations after
            the tick.
    """

    rewards: NDArray[np.float32]
    individual: NDArray[np.float32]
    flags: NDArray[np.bool_]
    picked: tuple[str, ...]
    delivered: tuple[str, ...]
    arrived: tuple[str, ...]
    idle: tuple[int, ...]
    released: tuple[str, ...]
    truncated: bool
    observed: bool
