"""The goal-conditioned navigation policy: the RL executor of the dispatch tier.

A small MLP, shared by every robot, that maps one robot's local observation to logits over the
5 actions (wait, up, down, left, right). The observation is that of
:class:`fleetmind.sim.observe.LocalObserver` with radius 2 and the shortest-path heuristic on
(``4 * 5 * 5 + 6 + 5 = 111`` floats: walls, robots, shelves, own target in a 5x5 window; carrying,
has-task, direction to the target; the DHC heuristic value of each action). There is no agent
id in the input, so one policy serves any fleet size; the dispatch tier sets each robot's target
and the shield turns the rankings into a collision-free joint move.

- :meth:`NavPolicy.rank` ``(N, D) -> (N, 5)`` int rankings, best first; :meth:`NavPolicy.logits`.
- :meth:`NavPolicy.save` / :meth:`NavPolicy.load`: ``policy.pt`` (weights, loaded with
  ``weights_only=True``) beside ``policy.json`` (obs layout, radius, training run, version).
- :func:`default_policy_path`: the policy shipped in ``fleetmind/data/nav_policy.pt``.
- :func:`evaluate` / :func:`shortest_path_actions`: deliveries per robot per tick of a policy and
  of the shortest-path baseline (always the action with the best heuristic value).

Training lives in :mod:`fleetmind.rl.nav_train` (behind ``fleetmind nav train``), the
dispatch-like training env in :mod:`fleetmind.rl.nav_env`.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import torch
from numpy.typing import NDArray

import fleetmind
from fleetmind.envs import make_vector
from fleetmind.errors import ConfigError, read_input
from fleetmind.rl.neural.ppo import Actor
from fleetmind.sim import observe
from fleetmind.sim.grid import GridMap

RADIUS = 2
N_ACTIONS = 5
NAV_ENT_COEF = 0.03
"""Entropy bonus at the start of nav training. With a constant 0.01 some seeds collapse to
waiting (a wait never pays the -0.5 conflict penalty and deliveries are rare early on): seed 1
delivered nothing after 400k steps; with 0.03 it delivered from 100k steps on."""
NAV_ENT_COEF_FINAL = 0.0
"""Entropy bonus at the end (linear anneal): a constant 0.03 left the greedy policy less sharp
(0.0175 deliveries per robot per tick on warehouse-small, 4 robots, against 0.0213 annealed)."""
FORMAT = "fleetmind-nav-policy-v1"
OBS_LAYOUT = (
    "LocalObserver radius 2, heuristic on: 4 channels x 5 x 5 window (walls, robots, shelves, "
    "own target; channel-major), 6 scalars (carrying, has_task, dr/H, dc/W, sign dr, sign dc), "
    "5 heuristic values (wait, up, down, left, right: -1 closer, 0, +1 farther, 2 blocked)"
)


def default_policy_path() -> Path:
    """The navigation policy shipped with fleetmind (``fleetmind/data/nav_policy.pt``)."""
    return Path(str(importlib.resources.files("fleetmind") / "data" / "nav_policy.pt"))


class PolicyFile:
    """A policy saved as a file pair (:func:`write_policy`): one ``save`` and one ``load``.

    Subclasses set ``file_format`` and ``file_what`` (named in errors), give their weights
    (:meth:`policy_weights`) and their ``metadata``, and build themselves from a file
    (:meth:`from_file`).
    """

    file_format: ClassVar[str]
    file_what: ClassVar[str]
    metadata: dict[str, Any]

    def policy_weights(self) -> dict[str, Any]:
        """The weights :meth:`save` writes (a torch state dict)."""
        raise NotImplementedError

    @classmethod
    def from_file(cls, path: Path, meta: dict[str, Any], blob: dict[str, Any]) -> Self:
        """The policy of the file ``path``'s metadata and weights blob (may raise on bad fields)."""
        raise NotImplementedError

    def save(self, path: str | Path) -> Path:
        """Write weights to ``path`` and metadata to ``path`` with suffix ``.json``."""
        return write_policy(path, self.file_format, self.policy_weights(), self.metadata)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Load a policy written by :meth:`save`.

        Raises:
            ConfigError: naming the file, when a file is missing or not a policy of this kind.
        """
        p = Path(path)
        meta, blob = read_policy(p, cls.file_format, cls.file_what)
        try:
            return cls.from_file(p, meta, blob)
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            # A missing field, or weights of another shape (torch raises RuntimeError).
            first = str(error).splitlines()[0][:160] if str(error) else ""
            raise ConfigError(
                f"{p}: not a {cls.file_what} ({type(error).__name__}: {first})"
            ) from None


class NavPolicy(PolicyFile):
    """A shared goal-conditioned navigation policy (see the module docstring).

    Args:
        actor: the network, ``(..., D) -> (..., 5)`` logits, without agent id.
        metadata: what :meth:`save` writes beside the weights.
    """

    file_format = FORMAT
    file_what = "navigation policy"

    def __init__(self, actor: Actor, metadata: dict[str, Any] | None = None) -> None:
        if actor.agent_id:
            raise ConfigError("a navigation policy must not take an agent id (any fleet size)")
        self.actor = actor.eval()
        self.radius = int((metadata or {}).get("radius", RADIUS))
        self.obs_size = actor.obs_size
        self.metadata: dict[str, Any] = {
            "format": FORMAT,
            "obs_layout": OBS_LAYOUT,
            "obs_size": actor.obs_size,
            "radius": self.radius,
            "heuristic": True,
            "n_actions": actor.n_actions,
            "hidden": list(actor.hidden),
            "fleetmind_version": fleetmind.__version__,
            **(metadata or {}),
        }

    def _check(self, obs: NDArray[np.floating]) -> NDArray[np.float32]:
        x = np.asarray(obs, dtype=np.float32)
        if x.ndim < 1 or x.shape[-1] != self.obs_size:
            raise ConfigError(
                f"nav policy: observations must end in {self.obs_size} features "
                f"(LocalObserver radius {self.radius}, heuristic on), got shape {x.shape}"
            )
        return x

    def logits(self, obs: NDArray[np.floating]) -> NDArray[np.float32]:
        """``(..., D)`` observations -> ``(..., 5)`` logits."""
        x = self._check(obs)
        with torch.no_grad():
            out: NDArray[np.float32] = self.actor.net(torch.from_numpy(x)).numpy()
        return out

    def rank(self, obs: NDArray[np.floating]) -> NDArray[np.int64]:
        """``(N, D)`` observations -> ``(N, 5)`` actions, best first (ties: lower action id)."""
        ranking: NDArray[np.int64] = np.argsort(-self.logits(obs), axis=-1, kind="stable")
        return ranking.astype(np.int64)

    def act(self, obs: NDArray[np.floating]) -> NDArray[np.int64]:
        """Greedy action of every row."""
        return self.rank(obs)[..., 0]

    def observer(self, grid: GridMap) -> observe.LocalObserver:
        """A :class:`~fleetmind.sim.observe.LocalObserver` producing this policy's input."""
        return observe.LocalObserver.for_map(grid, self.radius)

    def policy_weights(self) -> dict[str, Any]:
        """The actor's state dict."""
        return self.actor.state_dict()

    @classmethod
    def from_file(cls, path: Path, meta: dict[str, Any], blob: dict[str, Any]) -> Self:
        """The policy of a navigation policy file (its observation size checked)."""
        expected = observe.local_size(int(meta["radius"]), heuristic=True)
        if int(meta["obs_size"]) != expected:
            raise ConfigError(
                f"{path.with_suffix('.json')}: field 'obs_size' {meta['obs_size']} != {expected}"
            )
        actor = Actor(int(meta["obs_size"]), int(meta["n_actions"]), 1, meta["hidden"], False)
        actor.load_state_dict(blob["state_dict"])
        return cls(actor, meta)


def write_policy(
    path: str | Path, fmt: str, state_dict: dict[str, Any], metadata: dict[str, Any]
) -> Path:
    """Write a policy file pair: weights to ``path``, ``metadata`` beside it as ``.json``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": fmt, "state_dict": state_dict}, p)
    p.with_suffix(".json").write_text(json.dumps(metadata, indent=2, sort_keys=True))
    return p


def read_policy(path: Path, fmt: str, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata and the weights blob of a pair written by :func:`write_policy`.

    Raises:
        ConfigError: naming the file: missing, not JSON, another ``format``, unreadable weights.
    """
    meta_path = path.with_suffix(".json")
    if not path.exists():
        raise ConfigError(f"{path}: no such {what} file")
    if not meta_path.exists():
        raise ConfigError(f"{meta_path}: metadata of {path.name} is missing")
    try:
        meta = json.loads(read_input(meta_path, what="policy metadata", limit=1 << 20))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{meta_path}:{error.lineno}: not valid JSON ({error.msg})") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise ConfigError(f"{meta_path}: field 'format' must be {fmt!r}")
    try:
        blob = torch.load(path, weights_only=True)
    except Exception as error:  # torch raises several types for a bad file
        raise ConfigError(f"{path}: cannot read weights ({error})") from None
    return meta, blob


# --------------------------------------------------------------------------- baseline and eval


def shortest_path_actions(obs: NDArray[np.floating]) -> NDArray[np.int64]:
    """The baseline: the action with the best (lowest) heuristic value, first on ties."""
    out: NDArray[np.int64] = np.argmin(np.asarray(obs)[..., -observe.N_HEURISTIC :], axis=-1)
    return out.astype(np.int64)


def evaluate(
    act: Callable[[NDArray[np.float32]], NDArray[np.int64]],
    map: str | GridMap = "warehouse-small",
    robots: int = 4,
    *,
    seeds: Sequence[int] = (0, 1),
    num_envs: int = 8,
    ticks: int = 500,
) -> dict[str, float]:
    """Deliveries and collision attempts per robot per tick of ``act`` on lifelong tasks.

    No shield runs: a move into another robot fails and counts as a collision attempt (the env's
    ``conflict`` flag). The same seeds give the same starts and task streams to every policy.

    Args:
        act: ``(B, N, D)`` observations -> ``(B, N)`` actions.
        map: the map.
        robots: robots per world.
        seeds: one batch of ``num_envs`` worlds per seed.
        num_envs: worlds per batch.
        ticks: ticks per world.

    Returns:
        ``deliveries_per_robot_tick``, ``collision_attempts_per_robot_tick``, ``deliveries``.
    """
    delivered = conflicts = 0
    for seed in seeds:
        env = make_vector(map, robots, num_envs, seed=seed, max_steps=ticks + 1)
        obs, _ = env.reset()
        for _ in range(ticks):
            obs, _r, _te, _tr, info = env.step(act(obs))
            delivered += int(info["delivered"].sum())
            conflicts += int(info["conflict"].sum())
    denom = len(seeds) * num_envs * robots * ticks
    return {
        "deliveries_per_robot_tick": delivered / denom,
        "collision_attempts_per_robot_tick": conflicts / denom,
        "deliveries": float(delivered),
    }
