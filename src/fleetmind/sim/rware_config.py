"""rware's settings for the twin: actions, headings, observation sizes, layouts, the config.

:mod:`fleetmind.sim.rware_twin` (which re-exports every public name here) holds the worlds and
states the rules; this module holds what a world is made from: the action and heading values,
the floor plan (generated or from an rware layout string), the checked :class:`RwareConfig`,
and the observation tables. Callers import these names from :mod:`fleetmind.sim.rware_twin`,
whose ``__all__`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range

NOOP, FORWARD, LEFT, RIGHT, TOGGLE_LOAD = range(5)
N_ACTIONS = 5
"""rware's actions (``rware.warehouse.Action``)."""

# Headings are rware's Direction values: UP 0, DOWN 1, LEFT 2, RIGHT 3. A right turn follows
# rware's wrap list [UP, RIGHT, DOWN, LEFT], a left turn goes back along it.
_TURN_RIGHT = np.array([3, 2, 0, 1], dtype=np.int8)
_TURN_LEFT = np.array([2, 3, 1, 0], dtype=np.int8)

RewardType = Literal["individual", "global", "two_stage"]
ImageLayer = Literal[
    "shelves", "requests", "agents", "agent_direction", "agent_load", "goals", "accessible"
]
IMAGE_LAYERS: tuple[ImageLayer, ...] = ("shelves", "requests", "agents", "goals", "accessible")
"""rware's default image layers, in its order."""

_SELF_BITS = 8  # column, row, loaded, heading one-hot (4), on highway
_CELL_BITS = 7  # robot, its heading one-hot (4), shelf, requested (no message bits)


def _cell_codes() -> NDArray[np.float32]:
    """The 7 observation floats of each window-cell code ``robot * 3 + shelf``."""
    table = np.zeros((15, _CELL_BITS), dtype=np.float32)
    for robot in range(5):  # 0: nobody (heading one-hot 1 0 0 0, as rware), 1..4: heading + 1
        for shelf in range(3):  # 0: none, 1: a shelf, 2: a requested shelf
            row = table[robot * 3 + shelf]
            row[0] = robot > 0
            row[1 + max(robot - 1, 0)] = 1.0
            row[5] = shelf > 0
            row[6] = shelf == 2
    return table


_CELL_CODES = _cell_codes()


def flat_obs_size(sensor_range: int) -> int:
    """Length of rware's flattened observation (no message bits)."""
    return _SELF_BITS + _CELL_BITS * (2 * sensor_range + 1) ** 2


@dataclass(frozen=True, eq=False)
class RwareLayout:
    """An rware floor plan.

    Attributes:
        highways: ``(H, W)`` True where robots may put nothing down (corridors and goals).
        goals: goal cells ``(row, col)`` in rware's order.
    """

    highways: NDArray[np.bool_]  # (H, W)
    goals: tuple[tuple[int, int], ...]

    @property
    def shape(self) -> tuple[int, int]:
        """``(H, W)``."""
        h, w = self.highways.shape
        return int(h), int(w)

    @property
    def shelf_cells(self) -> NDArray[np.int64]:
        """Flat cells of the shelves at reset, in rware's shelf order (row by row)."""
        return np.flatnonzero(~self.highways.reshape(-1)).astype(np.int64)

    def text(self) -> str:
        """The layout as an rware layout string (``x`` shelf, ``.`` highway, ``g`` goal)."""
        chars = np.where(self.highways, ".", "x").astype("<U1")
        for row, col in self.goals:
            chars[row, col] = "g"
        return "\n".join("".join(r) for r in chars)


def layout_from_params(*, shelf_columns: int, column_height: int, shelf_rows: int) -> RwareLayout:
    """The generated layout of rware (``Warehouse._make_layout_from_params``).

    Raises:
        ConfigError: ``shelf_columns`` is even or a size is below 1.
    """
    for name, value in (
        ("shelf_columns", shelf_columns),
        ("column_height", column_height),
        ("shelf_rows", shelf_rows),
    ):
        check_range(name, value, low=1, where="rware layout")
    if shelf_columns % 2 != 1:
        raise ConfigError(f"rware layout: shelf_columns must be odd, got {shelf_columns}")
    h = (column_height + 1) * shelf_rows + 2
    w = 3 * shelf_columns + 1
    y, x = np.indices((h, w))
    queue = (y > h - (column_height + 3)) & ((x == w // 2 - 1) | (x == w // 2))
    highways = (x % 3 == 0) | (y % (column_height + 1) == 0) | (y == h - 1) | queue
    return RwareLayout(highways, ((h - 1, w // 2 - 1), (h - 1, w // 2)))


def layout_from_string(text: str) -> RwareLayout:
    """An rware layout string (``Warehouse._make_layout_from_str``).

    Raises:
        ConfigError: a character other than ``x . g``, ragged rows, or no goal.
    """
    lines = text.strip().replace(" ", "").split("\n")
    width = len(lines[0])
    highways = np.zeros((len(lines), width), dtype=bool)
    goals = []
    for row, line in enumerate(lines):
        if len(line) != width:
            raise ConfigError(f"rware layout: line {row + 1} has {len(line)} cells, not {width}")
        for col, char in enumerate(line.lower()):
            if char not in "gx.":
                raise ConfigError(f"rware layout: line {row + 1}: {char!r} is not x, . or g")
            if char == "g":
                goals.append((row, col))
            highways[row, col] = char != "x"
    if not goals:
        raise ConfigError("rware layout: at least one goal (g) is required")
    return RwareLayout(highways, tuple(goals))


@dataclass(frozen=True, eq=False)
class RwareConfig:
    """One rware setting (the arguments of ``rware.Warehouse``, without message bits).

    Attributes:
        layout: the floor plan.
        n_robots: robots per world (rware's ``n_agents``).
        request_queue_size: shelves requested at once.
        sensor_range: observation radius ``r`` (window ``2r+1`` cells wide).
        max_steps: episode length (None: none).
        max_inactivity_steps: steps without a delivery that end the episode (None: none).
        reward_type: ``individual``, ``global`` or ``two_stage``.
        normalised_coordinates: own column and row divided by ``W - 1`` and ``H - 1``.
    """

    layout: RwareLayout
    n_robots: int
    request_queue_size: int
    sensor_range: int = 1
    max_steps: int | None = 500
    max_inactivity_steps: int | None = None
    reward_type: RewardType = "individual"
    normalised_coordinates: bool = False

    def __post_init__(self) -> None:
        """Reject settings rware cannot reset with (it would raise inside numpy)."""
        h, w = self.layout.shape
        check_range("n_robots", self.n_robots, low=1, high=h * w, where=f"rware layout {h}x{w}")
        n_shelves = len(self.layout.shelf_cells)
        check_range(
            "request_queue_size",
            self.request_queue_size,
            low=0,
            high=n_shelves,
            where=f"rware layout with {n_shelves} shelves",
        )
        check_range("sensor_range", self.sensor_range, low=0)
        if self.reward_type not in get_args(RewardType):
            raise ConfigError(
                f"reward_type: expected one of {get_args(RewardType)}, got {self.reward_type!r}"
            )


@dataclass(frozen=True)
class RwareStep:
    """What one step of every world returns.

    Attributes:
        rewards: ``(B, N)`` float64.
        done: ``(B,)`` rware's ``done`` (a time limit: ``max_steps`` or inactivity).
    """

    rewards: NDArray[np.float64]
    done: NDArray[np.bool_]
