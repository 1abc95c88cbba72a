"""The static grid of a warehouse: walls, pickup cells, stations, chargers, start cells.

Cells are ``(row, col)`` everywhere. A :class:`GridMap` is immutable; the simulator keeps the
moving parts (robots, tasks) in arrays of its own.

Actions are integers shared by every tier::

    0 WAIT, 1 UP (row - 1), 2 DOWN (row + 1), 3 LEFT (col - 1), 4 RIGHT (col + 1)
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, range_message

Cell = tuple[int, int]

WAIT: Final = 0
UP: Final = 1
DOWN: Final = 2
LEFT: Final = 3
RIGHT: Final = 4
N_ACTIONS: Final = 5
ACTION_NAMES: Final = ("wait", "up", "down", "left", "right")
# (row, col) offset of each action, indexed by action id.
DELTAS: Final[NDArray[np.int32]] = np.array(
    [[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int32
)


def action_error(acts: NDArray[np.integer], where: str) -> ConfigError:
    """The error for ``acts`` holding an id outside ``0..4`` (ours and rware's), naming the first.

    Args:
        acts: the actions given, any shape, at least one id out of range.
        where: the prefix (the call at fault: ``"step"``, ``"actions"``).
    """
    flat = np.asarray(acts).reshape(-1)
    bad = flat[(flat < 0) | (flat >= N_ACTIONS)]
    message = range_message("action id", int(bad[0]), low=0, high=N_ACTIONS - 1)
    return ConfigError(f"{where}: {message}")


@dataclass(frozen=True, eq=False)
class GridMap:
    """An immutable warehouse grid.

    Attributes:
        name: a short name (preset name or file name).
        blocked: ``(H, W)`` bool, True where a robot can never stand (walls, racks, obstacles).
        pickups: ``(H, W)`` bool, shelf cells where loads are picked up (always free cells).
        stations: ``(H, W)`` bool, drop-off cells (always free cells).
        chargers: ``(H, W)`` bool, cells that recharge a robot's battery (free cells).
        starts: robot start cells given by the map, in reading order (may be empty).
    """

    name: str
    blocked: NDArray[np.bool_]
    pickups: NDArray[np.bool_]
    stations: NDArray[np.bool_]
    chargers: NDArray[np.bool_]
    starts: tuple[Cell, ...] = field(default=())

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)`` of the grid."""
        h, w = self.blocked.shape
        return int(h), int(w)

    @property
    def free(self) -> NDArray[np.bool_]:
        """``(H, W)`` bool, True where a robot may stand."""
        return ~self.blocked

    def free_cells(self) -> list[Cell]:
        """All free cells in reading order."""
        return [(int(r), int(c)) for r, c in np.argwhere(~self.blocked)]

    def pickup_cells(self) -> list[Cell]:
        """All pickup cells in reading order."""
        return [(int(r), int(c)) for r, c in np.argwhere(self.pickups)]

    def station_cells(self) -> list[Cell]:
        """All station cells in reading order."""
        return [(int(r), int(c)) for r, c in np.argwhere(self.stations)]

    def charger_cells(self) -> list[Cell]:
        """All charger cells in reading order."""
        return [(int(r), int(c)) for r, c in np.argwhere(self.chargers)]

    def in_bounds(self, cell: Cell) -> bool:
        """Whether ``cell`` lies on the grid."""
        h, w = self.shape
        return 0 <= cell[0] < h and 0 <= cell[1] < w

    def is_free(self, cell: Cell) -> bool:
        """Whether a robot may stand on ``cell`` (on the grid and not blocked)."""
        return self.in_bounds(cell) and not bool(self.blocked[cell])

    def free_beside(self, cell: Cell, taken: Collection[Cell] = ()) -> list[Cell]:
        """The free cells next to ``cell`` (up, down, left, right) not in ``taken``."""
        near = [(cell[0] + int(d[0]), cell[1] + int(d[1])) for d in DELTAS[1:]]
        return [c for c in near if self.is_free(c) and c not in taken]

    def with_walls(self, cells: Collection[Cell]) -> GridMap:
        """This map with ``cells`` blocked too (closed aisles, stopped robots); self if none."""
        if not cells:
            return self
        blocked = self.blocked.copy()
        for r, c in cells:
            blocked[r, c] = True
        return replace(self, blocked=blocked)
