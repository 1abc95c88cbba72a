"""The RWARE twin under rware's own Gymnasium interface and ids, in the ``fleetmind`` namespace.

Any code written against rware runs on the twin by swapping the env id::

    import gymnasium as gym
    env = gym.make("fleetmind:fleetmind/rware-tiny-2ag-v2")   # rware: "rware:rware-tiny-2ag-v2"

EPyMARL users set ``env_args.key="fleetmind:fleetmind/rware-tiny-2ag-v2"`` with its ``gymma``
env. Importing ``fleetmind.envs`` registers the ids; ``gymnasium.make("fleetmind:...")`` imports
``fleetmind`` first, which registers them when gymnasium is loaded.

:class:`RwareTwinGymEnv` answers as rware 2.0's ``Warehouse`` does: observation and action
spaces are ``Tuple``s of the per-agent spaces; ``reset(seed=None, options=None) -> (obs tuple,
{})``; ``step(actions) -> (obs tuple, rewards list, done, False, {})`` where ``done`` is rware's
(``max_steps`` or ``max_inactivity_steps`` reached: rware reports its time limits as ``done``);
``n_agents``; ``seed(s)`` seeds the next reset as rware's does. ``reset(seed=s)`` reseeds,
``reset()`` continues the generator. Keyword arguments of ``gymnasium.make`` override rware's
constructor arguments of the id (see :mod:`fleetmind.envs.rware_twin`).

Ids: every id rware 2.0 registers on import (``rware-{size}-{N}ag[-easy|-hard]-v2``, ``N`` =
1..19) and the image variants its ``image_registration()`` adds
(``rware-img|-imgdict[-Nd]-...``), prefixed ``fleetmind/``.

Version history: v2 ids, first release (rware 2.0.0's rules).
"""

from __future__ import annotations

import itertools
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fleetmind.envs.rware_twin import _observe, _single_space, rware_spec
from fleetmind.errors import ConfigError
from fleetmind.sim import rware_twin as twin

__all__ = ["NAMESPACE", "RwareTwinGymEnv", "register_ids", "rware_ids"]

NAMESPACE = "fleetmind"


class RwareTwinGymEnv(gym.Env[tuple[Any, ...], tuple[int, ...]]):
    """One twin world with rware's Gymnasium interface (see the module docstring).

    Args:
        env_id: the rware id (without the namespace).
        **overrides: rware constructor arguments.
    """

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium declares it an instance field)

    def __init__(self, env_id: str = "rware-tiny-2ag-v2", **overrides: Any) -> None:
        self.spec_ = rware_spec(env_id, **overrides)
        self.world = twin.RwareWorlds(self.spec_.config, 1)
        self.n_agents = self.spec_.config.n_robots
        single = _single_space(self.spec_)
        self.observation_space = spaces.Tuple([single] * self.n_agents)
        self.action_space = spaces.Tuple([spaces.Discrete(twin.N_ACTIONS)] * self.n_agents)
        self._pending: int | None = None
        self._started = False

    def seed(self, seed: int | None = None) -> None:
        """Seed the next :meth:`reset` (rware's ``seed``)."""
        if seed is not None:
            self._pending = int(seed)

    def _obs(self) -> tuple[Any, ...]:
        obs = _observe(self.world, self.spec_)
        if isinstance(obs, dict):
            return tuple(
                {"image": obs["image"][0, i], "features": obs["features"][0, i]}
                for i in range(self.n_agents)
            )
        return tuple(obs[0, i] for i in range(self.n_agents))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Start an episode: ``(observations, {})``."""
        if seed is None:
            seed = self._pending
        self._pending = None
        # None continues the world's own generator, as rware's reset() without a seed does.
        self.world.reset([seed])
        self._started = True
        return self._obs(), {}

    def step(  # type: ignore[override]  # rware returns one reward per agent, a list
        self, action: Any
    ) -> tuple[tuple[Any, ...], list[SupportsFloat], bool, bool, dict[str, Any]]:
        """One rware step: ``(observations, rewards, done, False, {})``.

        Raises:
            ConfigError: before the first reset, or an action outside ``Discrete(5)``.
        """
        if not self._started:
            raise ConfigError("step: call reset() first")
        joint = np.asarray([int(a) for a in action], dtype=np.int64)
        if joint.shape != (self.n_agents,) or ((joint < 0) | (joint >= twin.N_ACTIONS)).any():
            raise ConfigError(
                f"actions: expected {self.n_agents} actions in Discrete(5), got {list(action)}"
            )
        out = self.world.step(joint[None])
        return self._obs(), out.rewards[0].tolist(), bool(out.done[0]), False, {}


def rware_ids() -> list[str]:
    """The ids of rware 2.0: the flattened ones it registers on import, then the image variants."""
    sizes, diffs, counts = (
        ("tiny", "small", "medium", "large"),
        ("-easy", "", "-hard"),
        range(1, 20),
    )
    out = [f"rware-{s}-{n}ag{d}-v2" for s, d, n in itertools.product(sizes, diffs, counts)]
    for s, d, obs, nd, n in itertools.product(
        sizes, diffs, ("", "-img", "-imgdict"), ("", "-Nd"), counts
    ):
        if obs:
            out.append(f"rware{obs}{nd}-{s}-{n}ag{d}-v2")
    return out


def register_ids() -> None:
    """Register ``fleetmind/<rware id>`` for every rware id (idempotent)."""
    registry = gym.envs.registration.registry
    for env_id in rware_ids():
        name = f"{NAMESPACE}/{env_id}"
        if name not in registry:
            gym.register(
                id=name,
                entry_point="fleetmind.envs.rware_gym:RwareTwinGymEnv",
                kwargs={"env_id": env_id},
            )
