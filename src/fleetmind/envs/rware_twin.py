r"""The RWARE twin behind fleetmind's faces: a PettingZoo ParallelEnv and a batched vector env.

The twin (:mod:`fleetmind.sim.rware_twin`) follows rware 2.0's rules exactly and needs no
rware installed. Its env ids are rware's own ``-v2`` ids:

- ``rware-{tiny,small,medium,large}-{N}ag[-easy|-hard]-v2``, ``N`` = 1..19 (flattened
  observations), plus rware's image variants ``rware-img-...``, ``rware-imgdict-...`` and
  ``rware-img-Nd-...`` / ``rware-imgdict-Nd-...`` (image not turned to the robot's heading).
  Sizes are ``shelf_rows`` x ``shelf_columns`` = 1x3, 2x3, 2x5, 3x5 with ``column_height`` 8;
  the request queue holds ``N`` shelves (``-easy`` 2N, ``-hard`` N // 2); 500 steps; sensor
  range 1; individual rewards.
- Keyword options override rware's constructor arguments of the id (``layout``,
  ``max_steps``, ``max_inactivity_steps``, ``sensor_range``, ``request_queue_size``,
  ``reward_type``, ``observation_type``, ``image_observation_layers``,
  ``image_observation_directional``, ``normalised_coordinates``; enum values may be rware's
  enums or their lower-case names), so ``make_rware_twin(id, **kw)`` and rware's
  ``gymnasium.make(id, **kw)`` describe the same env.

:class:`RwareTwinParallelEnv` (``fleetmind/rware-twin-v0``; ``make_parallel("rware-tiny-2ag-v2")``
returns one) answers exactly as :class:`~fleetmind.envs.rware.RwareParallelEnv` does on the real
package: agents ``robot_0..``; rware's per-agent observation and action spaces; rewards as
floats; termination never; truncation for every agent at rware's ``done`` (``max_steps`` or
``max_inactivity_steps``, both time limits); infos ``{}`` per agent (rware 2.0's info is
empty); missing agents do nothing. Seeding: ``seed=`` seeds the first reset,
``reset(seed=s)`` reseeds, ``reset()`` continues the generator.

:class:`RwareTwinVectorEnv` (``fleetmind/rware-twin-vector-v0``; ``make_rware_vector`` or
``make_vector("rware-...-v2", N, B)``) steps ``B`` worlds as arrays:
``reset(seed) -> (obs (B, N, D), info)`` where world ``k`` is seeded ``seed + k``;
``step(actions (B, N)) -> (obs, rewards (B, N) float32, terminated (B,), truncated (B,),
info)``. A world that ends reports ``truncated`` and is reset in place, continuing its own
generator (what rware's ``reset()`` does), and ``info["final_obs"]`` then holds every world's
observation before those resets (Gymnasium's convention). ``global_state()`` is every
robot's observation side by side, ``(B, N * D)``. ``observe=False`` skips observations.

Version history: v0, first release (rware 2.0.0's rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from pettingzoo import ParallelEnv

from fleetmind.envs.rware import FirstSeed
from fleetmind.envs.vector import BatchStep
from fleetmind.envs.warehouse import ParallelStep
from fleetmind.errors import ConfigError, check_range
from fleetmind.sim import rware_twin as twin

__all__ = [
    "RWARE_ID",
    "RwareTwinParallelEnv",
    "RwareTwinSpec",
    "RwareTwinVectorEnv",
    "is_rware_id",
    "make_rware_twin",
    "make_rware_vector",
    "rware_spec",
]

RWARE_ID = re.compile(
    r"rware(?P<obs>-img|-imgdict)?(?P<nd>-Nd)?-(?P<size>tiny|small|medium|large)"
    r"-(?P<agents>\d+)ag(?P<diff>-easy|-hard)?-v2"
)
"""rware 2.0's registered ids with the default column height and sensor range."""

_SIZES = {"tiny": (1, 3), "small": (2, 3), "medium": (2, 5), "large": (3, 5)}
_DIFFICULTY = {"-easy": 2.0, "": 1.0, "-hard": 0.5}
ObservationType = Literal["flattened", "image", "image_dict"]
_OBS_TYPES: dict[str, ObservationType] = {
    "flattened": "flattened",
    "image": "image",
    "image_dict": "image_dict",
}
_KNOWN = {
    "shelf_columns",
    "column_height",
    "shelf_rows",
    "n_agents",
    "msg_bits",
    "sensor_range",
    "request_queue_size",
    "max_inactivity_steps",
    "max_steps",
    "reward_type",
    "layout",
    "observation_type",
    "image_observation_layers",
    "image_observation_directional",
    "normalised_coordinates",
}


def is_rware_id(name: object) -> bool:
    """Whether ``name`` is one of rware's ``-v2`` ids the twin serves."""
    return isinstance(name, str) and RWARE_ID.fullmatch(name) is not None


@dataclass(frozen=True)
class RwareTwinSpec:
    """An rware env id (with overrides) as the twin runs it.

    Attributes:
        env_id: the id.
        config: world rules.
        observation_type: ``flattened``, ``image`` or ``image_dict``.
        image_layers: image layers, in order.
        image_directional: turn image windows to the robot's heading.
    """

    env_id: str
    config: twin.RwareConfig
    observation_type: ObservationType
    image_layers: tuple[twin.ImageLayer, ...]
    image_directional: bool


def _name(value: Any, field: str) -> str:
    """An rware enum member or its name, as the lower-case name."""
    name = getattr(value, "name", value)
    if not isinstance(name, str):
        raise ConfigError(f"{field}: expected a name or an rware enum, got {value!r}")
    return name.lower()


def rware_spec(env_id: str, **overrides: Any) -> RwareTwinSpec:
    """The twin's reading of an rware id and rware constructor overrides.

    Raises:
        ConfigError: not an rware ``-v2`` id, an unknown or unsupported option (message bits,
            dict observations), or a value rware would reject.
    """
    match = RWARE_ID.fullmatch(env_id)
    if match is None:
        raise ConfigError(
            f"env id: {env_id!r} is not an rware -v2 id; expected e.g. 'rware-tiny-2ag-v2' "
            "or 'rware-large-19ag-hard-v2' (sizes tiny/small/medium/large, 1..19 agents)"
        )
    agents = int(match["agents"])
    # rware registers ids for 1 to 19 agents only.
    check_range("agents", agents, low=1, high=19, where=f"env id {env_id!r}")
    rows, cols = _SIZES[match["size"]]
    obs_kind = {None: "flattened", "-img": "image", "-imgdict": "image_dict"}[match["obs"]]
    if match["nd"] and obs_kind == "flattened":
        raise ConfigError(f"env id: {env_id!r}: -Nd goes with -img or -imgdict only")
    args: dict[str, Any] = {
        "shelf_columns": cols,
        "column_height": 8,
        "shelf_rows": rows,
        "n_agents": agents,
        "msg_bits": 0,
        "sensor_range": 1,
        "request_queue_size": int(agents * _DIFFICULTY[match["diff"] or ""]),
        "max_inactivity_steps": None,
        "max_steps": 500,
        "reward_type": "individual",
        "layout": None,
        "observation_type": obs_kind,
        "image_observation_layers": twin.IMAGE_LAYERS,
        "image_observation_directional": not match["nd"],
        "normalised_coordinates": False,
    }
    unknown = sorted(set(overrides) - _KNOWN)
    if unknown:
        raise ConfigError(f"rware options: unknown {unknown}; known: {sorted(_KNOWN)}")
    args.update(overrides)
    if args["msg_bits"]:
        raise ConfigError("msg_bits: the twin has no message bits (rware's ids use 0)")
    layout = (
        twin.layout_from_string(args["layout"])
        if args["layout"]
        else twin.layout_from_params(
            shelf_columns=int(args["shelf_columns"]),
            column_height=int(args["column_height"]),
            shelf_rows=int(args["shelf_rows"]),
        )
    )
    reward = _name(args["reward_type"], "reward_type")
    if reward not in ("individual", "global", "two_stage"):
        raise ConfigError(f"reward_type: expected individual, global or two_stage, got {reward!r}")
    kind = _OBS_TYPES.get(_name(args["observation_type"], "observation_type"))
    if kind is None:
        raise ConfigError(
            "observation_type: expected flattened, image or image_dict "
            f"(rware's dict type is not served), got {args['observation_type']!r}"
        )
    layers = tuple(_name(v, "image_observation_layers") for v in args["image_observation_layers"])
    valid_layers = ("shelves", "requests", "agents", "agent_direction", "agent_load", "goals")
    for layer in layers:
        if layer not in (*valid_layers, "accessible"):
            raise ConfigError(f"image_observation_layers: unknown layer {layer!r}")
    config = twin.RwareConfig(
        layout,
        int(args["n_agents"]),
        int(args["request_queue_size"]),
        sensor_range=int(args["sensor_range"]),
        max_steps=args["max_steps"],
        max_inactivity_steps=args["max_inactivity_steps"],
        reward_type=reward,  # type: ignore[arg-type]  # checked above
        normalised_coordinates=bool(args["normalised_coordinates"]),
    )
    return RwareTwinSpec(
        env_id,
        config,
        kind,
        layers,  # type: ignore[arg-type]  # checked above
        bool(args["image_observation_directional"]),
    )


def _image_box(spec: RwareTwinSpec) -> spaces.Box:
    side = 2 * spec.config.sensor_range + 1
    high = np.stack(
        [
            np.full((side, side), 4.0 if layer == "agent_direction" else 1.0, np.float32)
            for layer in spec.image_layers
        ]
    )
    return spaces.Box(np.zeros_like(high), high, dtype=np.float32)


def _single_space(spec: RwareTwinSpec) -> spaces.Space[Any]:
    """The observation space of one rware agent."""
    if spec.observation_type == "flattened":
        size = twin.flat_obs_size(spec.config.sensor_range)
        return spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)
    image = _image_box(spec)
    if spec.observation_type == "image":
        return image
    features = spaces.Box(-np.inf, np.inf, shape=(6,), dtype=np.float32)
    return spaces.Dict({"image": image, "features": features})


def _observe(worlds: twin.RwareWorlds, spec: RwareTwinSpec) -> Any:
    """Observations of every world: an array ``(B, N, ...)`` or, for image_dict, a dict."""
    if spec.observation_type == "flattened":
        return worlds.observe_flat()
    image = worlds.observe_image(spec.image_layers, directional=spec.image_directional)
    if spec.observation_type == "image":
        return image
    return {"image": image, "features": worlds.image_features()}


class RwareTwinParallelEnv(ParallelEnv[str, Any, int]):  # type: ignore[misc]
    """One twin world as a PettingZoo ParallelEnv (see the module docstring).

    Args:
        spec: the rware setting.
        seed: seed of the first :meth:`reset` when that reset gets none.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "fleetmind/rware-twin-v0", "render_modes": []}

    def __init__(self, spec: RwareTwinSpec, *, seed: int | None = None) -> None:
        self.spec = spec
        self.env_id = spec.env_id
        self.world = twin.RwareWorlds(spec.config, 1)
        n = spec.config.n_robots
        self.possible_agents = [f"robot_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._obs_space = _single_space(spec)
        self._act_space: spaces.Space[Any] = spaces.Discrete(twin.N_ACTIONS)
        self._first_seed = FirstSeed(seed)
        self.render_mode: str | None = None

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The rware observation space (the same object for every agent)."""
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """``Discrete(5)``: no-op, forward, left, right, toggle load."""
        return self._act_space

    def _obs_dict(self) -> dict[str, Any]:
        obs = _observe(self.world, self.spec)
        if isinstance(obs, dict):
            image, features = obs["image"][0], obs["features"][0]
            return {
                a: {"image": image[i], "features": features[i]}
                for i, a in enumerate(self.possible_agents)
            }
        return {a: obs[0, i] for i, a in enumerate(self.possible_agents)}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start an episode (see the module docstring for how seeds are used)."""
        seed = self._first_seed.take(seed)
        self.world.reset([seed])
        self.agents = list(self.possible_agents)
        return self._obs_dict(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> ParallelStep[Any]:
        """One rware step; agents missing from ``actions`` do nothing.

        Raises:
            ConfigError: the episode is over, or an action names an unknown or finished
                agent or lies outside ``Discrete(5)``.
        """
        if not self.agents:
            raise ConfigError("step: the episode is over (or never started); call reset() first")
        unknown = sorted(set(actions) - set(self.agents))
        if unknown:
            raise ConfigError(f"actions: unknown or finished agents {unknown}")
        joint = [0] * len(self.possible_agents)
        for agent, action in actions.items():
            # A plain int in range is the common case; anything else asks the space.
            if not (type(action) is int and 0 <= action < twin.N_ACTIONS) and not (
                self._act_space.contains(action)
            ):
                raise ConfigError(f"actions[{agent!r}]: {action!r} is not in Discrete(5)")
            joint[self._index[agent]] = int(action)
        out = self.world.step(np.array([joint], dtype=np.int64))
        done = bool(out.done[0])
        agents = self.agents
        result: ParallelStep[Any] = (
            self._obs_dict(),
            dict(zip(agents, out.rewards[0].tolist(), strict=True)),
            dict.fromkeys(agents, False),
            dict.fromkeys(agents, done),
            {a: {} for a in agents},
        )
        if done:
            self.agents = []
        return result

    def close(self) -> None:
        """Nothing to release."""


class RwareTwinVectorEnv:
    """``num_envs`` twin worlds as one batch (see the module docstring).

    Args:
        spec: the rware setting (flattened or image observations).
        num_envs: worlds ``B``.
        observe: build observations (False: ``(B, N, 0)`` arrays, pure simulation speed).
        seed: seed of the first :meth:`reset` when that reset gets none.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "fleetmind/rware-twin-vector-v0"}

    def __init__(
        self,
        spec: RwareTwinSpec,
        num_envs: int,
        *,
        observe: bool = True,
        seed: int | None = None,
    ) -> None:
        if spec.observation_type == "image_dict":
            raise ConfigError(
                "observation_type: the vector env serves flattened or image observations; "
                "use the -img id, or make_rware_twin for image_dict"
            )
        self.spec = spec
        self.num_envs = num_envs
        self.n_robots = spec.config.n_robots
        self.observe = observe
        self.worlds = twin.RwareWorlds(spec.config, num_envs)
        self.single_observation_space = _single_space(spec)
        self.single_action_space: spaces.Space[Any] = spaces.Discrete(twin.N_ACTIONS)
        self.n_actions = twin.N_ACTIONS
        shape = self.single_observation_space.shape
        assert shape is not None
        self.obs_shape: tuple[int, ...] = tuple(shape)
        self._first_seed = FirstSeed(seed)

    def _obs(self) -> NDArray[np.float32]:
        if not self.observe:
            return np.zeros((self.num_envs, self.n_robots, 0), dtype=np.float32)
        obs: NDArray[np.float32] = _observe(self.worlds, self.spec)
        return obs

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every world; world ``k`` gets ``seed + k`` (None: continue each generator)."""
        seed = self._first_seed.take(seed)
        seeds = [None if seed is None else seed + k for k in range(self.num_envs)]
        self.worlds.reset(seeds)
        return self._obs(), {}

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world once with ``(B, N)`` actions; ended worlds restart in place."""
        out = self.worlds.step(actions)
        obs = self._obs()
        info: dict[str, Any] = {}
        done = np.flatnonzero(out.done)
        if len(done):
            info["final_obs"] = obs.copy()
            self.worlds.reset(worlds=done)
            obs = self._obs()
        terminated = np.zeros(self.num_envs, dtype=bool)
        return obs, out.rewards.astype(np.float32), terminated, out.done.copy(), info

    def global_state(self) -> NDArray[np.float32]:
        """Every robot's observation side by side, ``(B, N * D)`` (EPyMARL's rware state)."""
        return self._obs().reshape(self.num_envs, -1)


def make_rware_twin(
    env_id: str = "rware-tiny-2ag-v2", *, seed: int | None = None, **options: Any
) -> RwareTwinParallelEnv:
    """The twin of an rware env as a PettingZoo ParallelEnv.

    Args:
        env_id: an rware ``-v2`` id (see the module docstring).
        seed: seed of the first reset.
        **options: rware constructor overrides (see the module docstring).

    Raises:
        ConfigError: see :func:`rware_spec`.
    """
    return RwareTwinParallelEnv(rware_spec(env_id, **options), seed=seed)


def make_rware_vector(
    env_id: str,
    num_envs: int,
    *,
    seed: int | None = None,
    observe: bool = True,
    **options: Any,
) -> RwareTwinVectorEnv:
    """``num_envs`` twin worlds of an rware env stepped as one batch.

    Args:
        env_id: an rware ``-v2`` id (flattened or ``-img``).
        num_envs: worlds.
        seed: root seed (world ``k`` gets ``seed + k``).
        observe: build observations.
        **options: rware constructor overrides (see the module docstring).

    Raises:
        ConfigError: see :func:`rware_spec`; ``num_envs`` below 1.
    """
    return RwareTwinVectorEnv(rware_spec(env_id, **options), num_envs, observe=observe, seed=seed)
