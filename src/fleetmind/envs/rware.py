r"""PettingZoo ParallelEnv face of rware, the multi-robot warehouse of Papoudakis et al.

rware (``pip install fleetmind[rware]``, version 2.0) is the peer benchmark: its gymnasium env
takes a tuple of actions and returns tuples of observations and a list of rewards, and it reports
its time limit as ``done`` (termination). :func:`make_rware` wraps it so that it looks like
every other multi-robot env of fleetmind.

- Agents: ``robot_0`` .. ``robot_{N-1}`` (rware's agent ``i + 1``); all act every tick.
- Observation and action spaces: rware's own, per agent (with the default flattened
  observations ``Box(-inf, inf, (D,), float32)``; actions ``Discrete(5)``: 0 no-op, 1 forward,
  2 turn left, 3 turn right, 4 toggle load; rware robots have a heading, fleetmind robots do not).
- Reward: rware's reward of each agent, as a float.
- Termination: never for rware 2.0 (it has no terminal state). Truncation: every agent when
  rware's step limit (``max_steps``) or inactivity limit (``max_inactivity_steps``) ends the
  episode; rware reports both as ``done``, and both are time limits, so they are truncations
  here. A ``done`` without either limit would be passed on as termination.
- infos: rware's info dict (empty in 2.0), a copy for each agent.
- Seeding: ``make_rware(seed=s)`` seeds the first ``reset()``; ``reset(seed=s)`` reseeds;
  ``reset()`` afterwards continues the generator (the Gymnasium convention). The same seed and
  actions give the same episode, bit for bit.

:func:`grid_from_rware` turns an rware layout into a :class:`~fleetmind.sim.grid.GridMap` (shelf
cells -> pickup cells, goals -> stations, every cell free: rware robots drive under shelves), so
both simulators can run on one layout.

rware is imported only inside :func:`make_rware`: ``import fleetmind.envs`` never needs it.

Version history: v0, first release (wraps rware 2.0).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from pettingzoo import ParallelEnv

from fleetmind.envs.warehouse import ParallelStep
from fleetmind.errors import ConfigError
from fleetmind.sim.grid import GridMap
from fleetmind.sim.maps import parse_rware_layout

__all__ = ["FirstSeed", "RwareParallelEnv", "grid_from_rware", "layout_from_rware", "make_rware"]

_INSTALL_HINT = "rware is not installed; install the extra with: pip install fleetmind[rware]"


def _import_rware() -> Any:
    """Import rware (which registers its env ids with gymnasium) or raise ConfigError."""
    try:
        import rware
    except ImportError as error:
        raise ConfigError(_INSTALL_HINT) from error
    return rware


class FirstSeed:
    """The seed of an env's first reset when that reset is given none (the constructor's seed).

    Args:
        seed: the constructor's seed.
    """

    def __init__(self, seed: int | None) -> None:
        self._seed = seed
        self._used = False

    def take(self, seed: int | None) -> int | None:
        """``seed``, or the constructor's seed on the first reset that gets none."""
        if seed is None and not self._used:
            seed = self._seed
        self._used = True
        return seed


class RwareParallelEnv(ParallelEnv[str, NDArray[np.float32], int]):  # type: ignore[misc]
    """An rware env behind a PettingZoo ParallelEnv face (see the module docstring).

    Args:
        env: a gymnasium env whose ``unwrapped`` is an ``rware.Warehouse``.
        env_id: the id it was made from, used as the layout name.
        seed: seed of the first :meth:`reset` when that reset gets none.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "fleetmind/rware-parallel-v0", "render_modes": []}

    def __init__(self, env: Any, *, env_id: str, seed: int | None = None) -> None:
        self.env = env
        self.rware = env.unwrapped
        self.env_id = env_id
        n = int(self.rware.n_agents)
        self.possible_agents = [f"robot_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._obs_spaces: dict[str, spaces.Space[Any]] = dict(
            zip(self.possible_agents, env.observation_space.spaces, strict=True)
        )
        self._act_spaces: dict[str, spaces.Space[Any]] = dict(
            zip(self.possible_agents, env.action_space.spaces, strict=True)
        )
        self._first_seed = FirstSeed(seed)
        self.render_mode: str | None = None  # no render modes; PettingZoo's wrappers ask

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The rware observation space of ``agent`` (the same object on every call)."""
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """The rware action space of ``agent`` (the same object on every call)."""
        return self._act_spaces[agent]

    def _obs_dict(self, obs: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(self.possible_agents, obs, strict=True))

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start an episode (see the module docstring for how seeds are used)."""
        seed = self._first_seed.take(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        return self._obs_dict(obs), {a: dict(info) for a in self.agents}

    def _joint_action(self, actions: dict[str, Any]) -> list[Any]:
        unknown = sorted(set(actions) - set(self.agents))
        if unknown:
            live = ", ".join(self.agents) or "none (reset first)"
            raise ConfigError(f"actions: unknown or finished agents {unknown}; live agents: {live}")
        # Missing agents do nothing (rware's NOOP, with silent message bits if any).
        joint: list[Any] = [
            0 if isinstance(space, spaces.Discrete) else np.zeros(space.shape, dtype=np.int64)
            for space in self._act_spaces.values()
        ]
        for agent, action in actions.items():
            space = self._act_spaces[agent]
            if not space.contains(action):
                raise ConfigError(f"actions[{agent!r}]: {action!r} is not in {space}")
            joint[self._index[agent]] = (
                int(action) if isinstance(space, spaces.Discrete) else action
            )
        return joint

    def step(self, actions: dict[str, Any]) -> ParallelStep[Any]:
        """One tick of rware; agents missing from ``actions`` do nothing.

        Raises:
            ConfigError: an action names an unknown or finished agent, or lies outside the
                agent's action space.
        """
        if not self.agents:
            raise ConfigError("step: the episode is over (or never started); call reset() first")
        obs, rewards, done, truncated, info = self.env.step(self._joint_action(actions))
        w = self.rware
        time_limit = bool(w.max_steps and w._cur_steps >= w.max_steps) or bool(
            w.max_inactivity_steps and w._cur_inactive_steps >= w.max_inactivity_steps
        )
        is_truncated = bool(truncated) or (bool(done) and time_limit)
        is_terminated = bool(done) and not time_limit
        agents = self.agents
        out = (
            self._obs_dict(obs),
            {a: float(rewards[i]) for i, a in enumerate(agents)},
            dict.fromkeys(agents, is_terminated),
            dict.fromkeys(agents, is_truncated),
            {a: dict(info) for a in agents},
        )
        if is_truncated or is_terminated:
            self.agents = []
        return out

    def close(self) -> None:
        """Close the rware env."""
        self.env.close()


def make_rware(
    env_id: str = "rware-tiny-2ag-v2", *, seed: int | None = None, **kwargs: Any
) -> RwareParallelEnv:
    """An rware env as a PettingZoo ParallelEnv.

    Args:
        env_id: a registered rware id, e.g. ``rware-tiny-2ag-v2``, ``rware-large-19ag-v2``
            (sizes tiny, small, medium, large; 1 to 19 agents; optional ``-easy``/``-hard``).
        seed: seed of the first reset.
        **kwargs: passed to ``gymnasium.make`` (rware's constructor arguments, e.g.
            ``max_steps``, ``sensor_range``, ``layout``).

    Returns:
        The wrapped env.

    Raises:
        ConfigError: rware is not installed (the message says ``pip install fleetmind[rware]``),
            or ``env_id`` is not a registered rware env.
    """
    import gymnasium

    rware = _import_rware()
    try:
        env = gymnasium.make(env_id, disable_env_checker=True, **kwargs)
    except gymnasium.error.Error as error:
        raise ConfigError(
            f"env_id: cannot make {env_id!r} ({error}); rware ids look like "
            "'rware-tiny-2ag-v2' or 'rware-large-19ag-hard-v2'"
        ) from error
    if not isinstance(env.unwrapped, rware.warehouse.Warehouse):
        closer: Any = env  # gymnasium 1.2 leaves Env.close untyped
        closer.close()
        raise ConfigError(f"env_id: {env_id!r} is not an rware env")
    return RwareParallelEnv(env, env_id=env_id, seed=seed)


def _warehouse(env: Any) -> Any:
    """The ``rware.Warehouse`` behind an adapter, a gymnasium wrapper or the env itself."""
    inner = env.rware if isinstance(env, RwareParallelEnv) else getattr(env, "unwrapped", env)
    if not (hasattr(inner, "highways") and hasattr(inner, "goals") and hasattr(inner, "grid_size")):
        raise ConfigError(f"env: expected an rware env, got {type(env).__name__}")
    return inner


def layout_from_rware(env: Any) -> str:
    r"""The layout of an rware env as an rware layout string.

    Args:
        env: an :class:`RwareParallelEnv`, a gymnasium-made rware env or an ``rware.Warehouse``.

    Returns:
        Rows of ``x`` (shelf), ``.`` (corridor) and ``g`` (goal), joined by ``\n``; rware's
        ``layout=`` argument takes it back.

    Raises:
        ConfigError: ``env`` is not an rware env.
    """
    w = _warehouse(env)
    height, width = (int(v) for v in w.grid_size)
    chars = np.where(np.asarray(w.highways, dtype=bool), ".", "x").astype("<U1")
    for col, row in w.goals:  # rware keeps (x, y) = (col, row)
        chars[int(row), int(col)] = "g"
    assert chars.shape == (height, width)
    return "\n".join("".join(row) for row in chars)


def grid_from_rware(env: Any) -> GridMap:
    """The layout of an rware env as a fleetmind GridMap.

    Shelf cells become pickup cells, goals become stations, every cell is free (rware robots
    drive under shelves); no chargers, no starts.

    Args:
        env: an :class:`RwareParallelEnv`, a gymnasium-made rware env or an ``rware.Warehouse``.

    Returns:
        The grid, named after the env id (or ``rware-HxW``).

    Raises:
        ConfigError: ``env`` is not an rware env.
    """
    w = _warehouse(env)
    if isinstance(env, RwareParallelEnv):
        name = env.env_id
    else:
        spec = getattr(env, "spec", None)
        name = spec.id if spec is not None else "rware-{}x{}".format(*w.grid_size)
    return parse_rware_layout(layout_from_rware(env), source=name)
