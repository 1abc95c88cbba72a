"""PettingZoo ParallelEnv face of the warehouse simulator.

Environment id: ``fleetmind/warehouse-v0``.

- Agents: ``robot_0`` .. ``robot_{N-1}``; all act every tick.
- Observation (``obs="local"``, default): ``Box(low, high, float32)`` of length
  ``4 * (2r+1)^2 + 6`` (see :mod:`fleetmind.sim.observe`: walls, robots, shelves, own target
  in an egocentric window of radius ``r``, then carrying, has-task and direction to the target,
  then, with ``heuristic=True`` (default), 5 shortest-path heuristic values, one per action).
  Bounds per feature (:func:`~fleetmind.sim.observe.local_bounds`): window and flags ``[0, 1]``,
  direction ``[-1, 1]``, heuristic ``[-1, 2]`` (2 = the move is blocked).
  ``obs="tabular"``: ``Discrete(8192)``, the compact code of
  :meth:`~fleetmind.sim.observe.LocalObserver.tabular` (a numpy ``int64`` scalar; needs
  ``heuristic=True``).
- Action: ``Discrete(5)``: 0 wait, 1 up, 2 down, 3 left, 4 right.
- Reward: per robot, see :mod:`fleetmind.sim.rewards` (mode ``reward_mode``).
- Termination: never (lifelong orders). Truncation: every agent at ``max_steps``.
- ``state()``: the global state for centralised critics (``6 * H * W`` floats).
- infos per agent: ``delivered`` (this tick), ``deliveries`` (so far), ``conflict``, ``wall_bump``.

Version history: v0, first release. Within v0 the local observation space was corrected from
``Box(-1, 1)``, which the heuristic's blocked value 2 broke, to the per-feature bounds above; the
observations themselves did not change. The tabular code changed from direction signs (4608
states) to the heuristic's distance and closer moves (8192), with which tables learn to deliver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias, TypeVar

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from pettingzoo import ParallelEnv

from fleetmind.errors import ConfigError
from fleetmind.sim import observe
from fleetmind.sim.grid import GridMap
from fleetmind.sim.maps import load_map, require_tasks
from fleetmind.sim.orders import OrderConfig
from fleetmind.sim.rewards import RewardConfig
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig


def resolve_map(map_spec: str | GridMap) -> GridMap:
    """A GridMap from a GridMap, a preset name, a map file path or an rware layout string."""
    return map_spec if isinstance(map_spec, GridMap) else load_map(map_spec)


ObsT = TypeVar("ObsT")
_FLOAT32 = np.dtype(np.float32)  # a dtype object: quicker to pass
ParallelStep: TypeAlias = tuple[
    dict[str, ObsT],  # observations
    dict[str, float],  # rewards
    dict[str, bool],  # terminations
    dict[str, bool],  # truncations
    dict[str, dict[str, Any]],  # infos
]
"""What ``step`` of every ParallelEnv face returns, per agent id."""


class WarehouseParallelEnv(ParallelEnv[str, Any, int]):  # type: ignore[misc]
    """The warehouse as a PettingZoo ParallelEnv (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "fleetmind/warehouse-v0",
        "render_modes": ["ansi", "rgb_array"],
    }

    def __init__(
        self,
        grid: GridMap,
        n_robots: int,
        *,
        max_steps: int = 500,
        reward_mode: str = "individual",
        order_rate: float | None = None,
        obs: str = "local",
        radius: int = 2,
        heuristic: bool = True,
        render_mode: str | None = None,
        seed: int | None = None,
    ) -> None:
        require_tasks(grid)
        if obs not in ("local", "tabular"):
            raise ConfigError(f"obs: expected 'local' or 'tabular', got {obs!r}")
        if obs == "tabular" and not heuristic:
            raise ConfigError("obs 'tabular' is read from the heuristic: keep heuristic=True")
        self.grid = grid
        self.obs_kind = obs
        self.render_mode = render_mode
        self.config = WarehouseConfig(
            n_robots=n_robots,
            max_steps=max_steps,
            orders=OrderConfig(rate=order_rate),
            reward=RewardConfig.parse(reward_mode),
        )
        self.possible_agents = [f"robot_{i}" for i in range(n_robots)]
        self.agents = list(self.possible_agents)
        self._observer = observe.LocalObserver.for_map(grid, radius, heuristic=heuristic)
        # One world's observation buffer of a step (None: tabular codes, not the local window).
        self._obs_shape: tuple[int, int] | None = None
        if obs == "local":
            low, high = self._observer.bounds()
            self._obs_space: spaces.Space[Any] = spaces.Box(low, high, dtype=np.float32)
            self._obs_shape = (n_robots, self._observer.size)
        else:
            self._obs_space = spaces.Discrete(observe.N_TABULAR_STATES)
        self._act_space: spaces.Space[Any] = spaces.Discrete(5)
        h, w = grid.shape
        self.state_space = spaces.Box(
            0.0, float(n_robots), shape=(observe.N_GLOBAL_CHANNELS * h * w,), dtype=np.float32
        )
        self._seed = seed
        self.world = Warehouse(grid, self.config, seed=seed)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The observation space (the same for every agent)."""
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """``Discrete(5)`` for every agent."""
        return self._act_space

    def _batch(self) -> observe.Fleet:
        w = self.world
        return observe.Fleet(w.pos[None], w.goal[None], w.carrying[None], w.has_task[None])

    def _observations(self) -> dict[str, Any]:
        fleet = self._batch()
        if self.obs_kind == "local":
            obs = self._observer(*fleet)[0]
            return dict(zip(self.agents, obs, strict=True))
        codes = self._observer.tabular(fleet)[0]
        # numpy int64 scalars, as the gridworld and the race (PettingZoo's api_test wants numpy).
        return {a: np.int64(codes[i]) for i, a in enumerate(self.agents)}

    def state(self) -> NDArray[np.float32]:
        """The global state (see the module docstring)."""
        state: NDArray[np.float32] = observe.global_state(self.grid, self._batch())[0]
        return state

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start an episode; the same seed gives the same episode."""
        if seed is not None:
            self._seed = seed
        self.world.reset(self._seed)
        self.agents = list(self.possible_agents)
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        return self._observations(), infos

    def step(self, actions: dict[str, int]) -> ParallelStep[Any]:
        """One tick; missing agents wait."""
        # A list: advance makes the array, which it then knows to be a fresh int64 one.
        acts = [int(actions.get(a, 0)) for a in self.possible_agents]
        # Local observations come out of the tick's own compiled call when nothing happened
        # that Python must handle first (Warehouse.advance); else they are taken after it.
        out = None if self._obs_shape is None else np.empty(self._obs_shape, _FLOAT32)
        tick = self.world.advance(acts, observer=self._observer, out=out)
        agents = self.agents  # every robot, in order, or none once the episode is over
        if not agents:
            raise ValueError("step: the episode is over (no agents left); call reset() first")
        # Plain zips (the agents are all the robots, in order): a keyword argument puts zip on
        # its slow path, which costs more than building the dict.
        # The kernel's observations, or (after a pickup, a delivery...) the world's after the tick.
        obs = dict(zip(agents, out)) if out is not None and tick.observed else self._observations()  # noqa: B905
        # Python lists, not numpy scalars, per agent: a per-element numpy read costs more.
        rewards = dict(zip(agents, tick.rewards.tolist()))  # noqa: B905
        terminations = dict.fromkeys(agents, False)
        truncations = dict.fromkeys(agents, tick.truncated)
        _, wall_bump, conflict, _, delivered = tick.flags.tolist()
        per_agent = zip(agents, delivered, self.world.delivered_by.tolist(), conflict, wall_bump)  # noqa: B905
        infos = {
            a: {"delivered": d, "deliveries": n, "conflict": c, "wall_bump": b}
            for a, d, n, c, b in per_agent
        }
        if tick.truncated:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def render(self) -> str | NDArray[np.uint8] | None:
        """ASCII text (``ansi``) or an RGB frame (``rgb_array``)."""
        from fleetmind.sim import render

        draws: dict[str | None, Callable[..., str | NDArray[np.uint8]]] = {
            "ansi": render.ascii,
            "rgb_array": render.rgb,
        }
        draw = draws.get(self.render_mode)
        if draw is None:
            return None
        w = self.world
        return draw(
            self.grid, w.pos, carrying=w.carrying, targets=np.where(w.has_task[:, None], w.goal, -1)
        )

    def close(self) -> None:
        """Nothing to release."""
