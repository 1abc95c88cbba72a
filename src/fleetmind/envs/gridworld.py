"""The single-agent 4x4 gridworld of FIELD-NOTES §3.1, as a Gymnasium env.

Spec (id ``fleetmind/gridworld-4x4-v0``):

- Grid: 4 rows x 4 columns, no walls. Cells are ``(row, col)``; a cell's state number is
  ``row * 4 + col``. Start: cell 0 = ``(0, 0)`` (top-left). Goal: cell 15 = ``(3, 3)``
  (bottom-right).
- Observation: ``Discrete(16)``, the state number of the robot's cell (a numpy ``int64`` scalar).
- Action: ``Discrete(4)``: ``0`` up (row - 1), ``1`` down (row + 1), ``2`` left (col - 1),
  ``3`` right (col + 1). These are the movement actions of :mod:`fleetmind.sim.grid` shifted by one
  (there is no wait action here). A move off the grid is clipped: the robot stays where it is.
- Reward: ``+1.0`` on the step that reaches cell 15, else ``-0.01`` per step.
- Termination: on reaching cell 15.
- Truncation: after ``max_steps`` steps (default 100) without reaching the goal; the time limit is
  never reported as termination.
- Info: ``{"cell": (row, col), "steps": int}``.

Version history:
    v0: first version, exactly the note's grid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fleetmind.errors import ConfigError, check_range
from fleetmind.sim.grid import DELTAS

ENV_ID: Final = "fleetmind/gridworld-4x4-v0"
SIZE: Final = 4
N_STATES: Final = SIZE * SIZE
N_ACTIONS: Final = 4
START: Final = 0
GOAL: Final = N_STATES - 1
GOAL_REWARD: Final = 1.0
STEP_COST: Final = -0.01
DEFAULT_MAX_STEPS: Final = 100
ACTION_NAMES: Final = ("up", "down", "left", "right")


def move(state: int, action: int) -> int:
    """Return the state reached from ``state`` by ``action`` (0 up, 1 down, 2 left, 3 right).

    Moves off the 4x4 grid are clipped (the robot stays).

    Args:
        state: state number ``row * 4 + col`` in ``[0, 16)``.
        action: action id in ``[0, 4)``.

    Returns:
        The next state number.
    """
    row, col = divmod(state, SIZE)
    d_row, d_col = DELTAS[action + 1]  # sim.grid ids: 1 up, 2 down, 3 left, 4 right
    row = min(max(row + int(d_row), 0), SIZE - 1)
    col = min(max(col + int(d_col), 0), SIZE - 1)
    return row * SIZE + col


# (16, 4) next-state lookup; learners and the race env use it in their hot loops.
TRANSITIONS: Final = np.array(
    [[move(s, a) for a in range(N_ACTIONS)] for s in range(N_STATES)], dtype=np.int64
)


class GridworldEnv(gym.Env[np.int64, np.int64]):
    """The 4x4 gridworld of FIELD-NOTES §3.1 (see the module docstring for the spec).

    Attributes:
        max_steps: steps before truncation.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012

    def __init__(self, *, max_steps: int = DEFAULT_MAX_STEPS, render_mode: str | None = None):
        check_range("max_steps", max_steps, low=1, where="gridworld")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"gridworld: render_mode must be None or 'ansi', got {render_mode!r}")
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.observation_space = spaces.Discrete(N_STATES)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self._state = START
        self._steps = 0

    def _info(self) -> dict[str, Any]:
        return {"cell": divmod(self._state, SIZE), "steps": self._steps}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.int64, dict[str, Any]]:
        """Put the robot back on the start cell.

        Args:
            seed: seeds ``self.np_random`` (the dynamics themselves are deterministic).
            options: unused.

        Returns:
            The start observation and the info dict.
        """
        super().reset(seed=seed)
        self._state = START
        self._steps = 0
        return np.int64(self._state), self._info()

    def step(self, action: np.int64 | int) -> tuple[np.int64, float, bool, bool, dict[str, Any]]:
        """Move one cell.

        Args:
            action: 0 up, 1 down, 2 left, 3 right.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.

        Raises:
            ConfigError: the action is not in ``[0, 4)``.
        """
        if not self.action_space.contains(action):
            raise ConfigError(f"gridworld: action must be an int in [0, 4), got {action!r}")
        self._state = int(TRANSITIONS[self._state, int(action)])
        self._steps += 1
        terminated = self._state == GOAL
        reward = GOAL_REWARD if terminated else STEP_COST
        truncated = (not terminated) and self._steps >= self.max_steps
        return np.int64(self._state), reward, terminated, truncated, self._info()

    def render(self) -> Any:  # str or None; Any spans gymnasium 1.2 and 1.4 signatures
        """Return the grid as text (``R`` robot, ``G`` goal) when ``render_mode == 'ansi'``."""
        if self.render_mode != "ansi":
            return None
        return grid_text(lambda s: "R" if s == self._state else ("G" if s == GOAL else "."))


def grid_text(glyph: Callable[[int], str]) -> str:
    """The ``SIZE x SIZE`` grid as text: ``glyph(row * SIZE + col)`` in each cell."""
    rows = (" ".join(glyph(row * SIZE + col) for col in range(SIZE)) for row in range(SIZE))
    return "\n".join(rows) + "\n"


def make_gridworld(
    *, seed: int | None = None, max_steps: int = DEFAULT_MAX_STEPS, render_mode: str | None = None
) -> GridworldEnv:
    """Build the §3.1 gridworld and seed it.

    Args:
        seed: seed for the env's generator; the first ``reset()`` without a seed uses it.
        max_steps: time limit (truncation) in steps.
        render_mode: ``None`` or ``"ansi"``.

    Returns:
        A fresh :class:`GridworldEnv`.
    """
    env = GridworldEnv(max_steps=max_steps, render_mode=render_mode)
    if seed is not None:
        env.reset(seed=seed)
    return env
