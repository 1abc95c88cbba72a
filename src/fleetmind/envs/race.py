"""The two-robot race of FIELD-NOTES §3.2, as a PettingZoo ``ParallelEnv``.

Spec (id ``fleetmind/race-4x4-v0``):

- Grid: the 4x4 grid of :mod:`fleetmind.envs.gridworld` (state ``row * 4 + col``, moves clipped
  at the border). Agents ``robot_0`` and ``robot_1`` both start on cell 0; the goal is cell 15.
- Observation: each agent observes the joint state ``s0 * 16 + s1`` (``Discrete(256)``, a numpy
  ``int64`` scalar), ``s0`` being ``robot_0``'s cell and ``s1`` ``robot_1``'s.
- Action: ``Discrete(4)`` per agent: 0 up, 1 down, 2 left, 3 right (as in the gridworld).
- Joint step: both robots move at once (each clipped at the border). Then, in this order:

  1. Collision: both land on the same cell. Both robots *are* on that cell afterwards (the note
     models no blocking: the penalty is the only consequence). Reward ``-0.5``.
     Staying put counts as landing: a robot bumping into the border stays, so two robots on cell 0
     that both push against the wall collide. Swapping cells (crossing) is not a collision.
  2. Goal: exactly one robot lands on cell 15. Reward ``+1.0`` and the episode ends.
  3. Otherwise ``-0.01`` (step cost).

  ``reward_mode="shared"`` (the note's setting) gives both agents the same number above.
  ``reward_mode="individual"``: on a goal step the winner gets ``+1.0`` and the other ``0.0``; a
  collision costs each ``-0.5``; other steps cost each ``-0.01``.
- Termination: any robot is on cell 15 after the step. Normally that is the single winner; if both
  land on 15 together it is a collision (``-0.5`` each, no winner) and the episode still ends,
  since a robot has reached the goal.
- Truncation: after ``max_steps`` joint steps (default 100) without termination.
- Infos (every agent, every step): ``winner`` (the agent that reached 15 alone this step, else
  ``None``), ``collision`` (bool), ``cells`` (each agent's ``(row, col)``), ``steps``.

Version history:
    v0: first version.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fleetmind.envs.gridworld import (
    GOAL,
    N_ACTIONS,
    N_STATES,
    SIZE,
    START,
    TRANSITIONS,
    grid_text,
)
from fleetmind.envs.warehouse import ParallelStep
from fleetmind.errors import ConfigError, check_range

ENV_ID: Final = "fleetmind/race-4x4-v0"
AGENTS: Final = ("robot_0", "robot_1")
N_JOINT_STATES: Final = N_STATES * N_STATES
COLLISION_REWARD: Final = -0.5
GOAL_REWARD: Final = 1.0
STEP_COST: Final = -0.01
LOSER_REWARD: Final = 0.0
DEFAULT_MAX_STEPS: Final = 100

RewardMode = Literal["shared", "individual"]


def race_rewards(
    cell0: int, cell1: int, *, reward_mode: RewardMode = "shared"
) -> tuple[float, float, bool, int]:
    """Score one joint landing of the race (the rules of the module docstring).

    Args:
        cell0: ``robot_0``'s cell after the move.
        cell1: ``robot_1``'s cell after the move.
        reward_mode: ``"shared"`` or ``"individual"``.

    Returns:
        ``(reward_0, reward_1, terminated, winner)`` with ``winner`` 0, 1 or -1 for none.
    """
    terminated = cell0 == GOAL or cell1 == GOAL
    if cell0 == cell1:
        return COLLISION_REWARD, COLLISION_REWARD, terminated, -1
    if terminated:
        winner = 0 if cell0 == GOAL else 1
        if reward_mode == "shared":
            return GOAL_REWARD, GOAL_REWARD, True, winner
        if winner == 0:
            return GOAL_REWARD, LOSER_REWARD, True, 0
        return LOSER_REWARD, GOAL_REWARD, True, 1
    return STEP_COST, STEP_COST, False, -1


class RaceEnv(ParallelEnv[str, np.int64, np.int64]):  # type: ignore[misc]
    """The §3.2 two-robot race (see the module docstring for the spec).

    Attributes:
        reward_mode: ``"shared"`` or ``"individual"``.
        max_steps: joint steps before truncation.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012
        "name": "fleetmind_race_4x4_v0",
        "render_modes": ["ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        *,
        reward_mode: RewardMode = "shared",
        max_steps: int = DEFAULT_MAX_STEPS,
        render_mode: str | None = None,
    ) -> None:
        if reward_mode not in ("shared", "individual"):
            raise ConfigError(
                f"race: reward_mode must be 'shared' or 'individual', got {reward_mode!r}"
            )
        check_range("max_steps", max_steps, low=1, where="race")
        if render_mode is not None and render_mode != "ansi":
            raise ConfigError(f"race: render_mode must be None or 'ansi', got {render_mode!r}")
        self.reward_mode: RewardMode = reward_mode
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        # Typed as the base Space: gymnasium 1.2 and 1.4 type Discrete differently.
        self._observation_spaces: dict[str, spaces.Space[Any]] = {
            a: spaces.Discrete(N_JOINT_STATES) for a in AGENTS
        }
        self._action_spaces: dict[str, spaces.Space[Any]] = {
            a: spaces.Discrete(N_ACTIONS) for a in AGENTS
        }
        self._cells = [START, START]
        self._steps = 0
        self.np_random = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """``Discrete(256)``: the joint state ``s0 * 16 + s1``."""
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """``Discrete(4)``: 0 up, 1 down, 2 left, 3 right."""
        return self._action_spaces[agent]

    @property
    def joint_state(self) -> int:
        """The joint state number ``s0 * 16 + s1``."""
        return self._cells[0] * N_STATES + self._cells[1]

    def state(self) -> np.int64:
        """The global state (the same joint state number every agent observes)."""
        return np.int64(self.joint_state)

    def _infos(self, winner: int, collision: bool) -> dict[str, dict[str, Any]]:
        info = {
            "winner": AGENTS[winner] if winner >= 0 else None,
            "collision": collision,
            "cells": {a: divmod(c, SIZE) for a, c in zip(AGENTS, self._cells, strict=True)},
            "steps": self._steps,
        }
        return {a: dict(info) for a in self.agents}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.int64], dict[str, dict[str, Any]]]:
        """Put both robots on cell 0.

        Args:
            seed: seeds ``self.np_random`` (the dynamics themselves are deterministic).
            options: unused.

        Returns:
            Observations and infos per agent.
        """
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.agents = list(AGENTS)
        self._cells = [START, START]
        self._steps = 0
        obs = np.int64(self.joint_state)
        return dict.fromkeys(self.agents, obs), self._infos(-1, False)

    def step(self, actions: dict[str, Any]) -> ParallelStep[np.int64]:
        """Move both robots at once.

        Args:
            actions: one action in ``[0, 4)`` per live agent.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)`` per agent.

        Raises:
            ConfigError: the episode is over (call ``reset``) or an action is missing or invalid.
        """
        if not self.agents:
            raise ConfigError("race: step() called on a finished episode; call reset() first")
        for agent in AGENTS:
            if agent not in actions:
                raise ConfigError(f"race: actions has no entry for {agent!r}")
            if not self._action_spaces[agent].contains(actions[agent]):
                raise ConfigError(
                    f"race: actions[{agent!r}] must be an int in [0, 4), got {actions[agent]!r}"
                )
        self._cells = [
            int(TRANSITIONS[self._cells[i], int(actions[agent])]) for i, agent in enumerate(AGENTS)
        ]
        self._steps += 1
        r0, r1, terminated, winner = race_rewards(
            self._cells[0], self._cells[1], reward_mode=self.reward_mode
        )
        truncated = (not terminated) and self._steps >= self.max_steps
        obs = np.int64(self.joint_state)
        observations = dict.fromkeys(self.agents, obs)
        rewards = {AGENTS[0]: r0, AGENTS[1]: r1}
        terminations = dict.fromkeys(self.agents, terminated)
        truncations = dict.fromkeys(self.agents, truncated)
        infos = self._infos(winner, self._cells[0] == self._cells[1])
        if terminated or truncated:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        """Return the grid as text (``0``/``1`` robots, ``X`` both, ``G`` goal) in ``ansi`` mode."""
        if self.render_mode != "ansi":
            return None

        def glyph(s: int) -> str:
            here = [str(i) for i, c in enumerate(self._cells) if c == s]
            return "X" if len(here) == 2 else (here[0] if here else "G" if s == GOAL else ".")

        return grid_text(glyph)

    def close(self) -> None:
        """Nothing to release."""


def make_race(
    *,
    seed: int | None = None,
    reward_mode: RewardMode = "shared",
    max_steps: int = DEFAULT_MAX_STEPS,
    render_mode: str | None = None,
) -> RaceEnv:
    """Build the §3.2 race and seed it.

    Args:
        seed: seed for the env's generator (the dynamics are deterministic).
        reward_mode: ``"shared"`` (the note) or ``"individual"`` (winner +1, other 0).
        max_steps: time limit (truncation) in joint steps.
        render_mode: ``None`` or ``"ansi"``.

    Returns:
        A fresh :class:`RaceEnv` (reset it before stepping).
    """
    env = RaceEnv(reward_mode=reward_mode, max_steps=max_steps, render_mode=render_mode)
    if seed is not None:
        env.np_random = np.random.default_rng(seed)
    return env
