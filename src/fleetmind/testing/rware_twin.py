"""The RWARE twin against the real ``rware`` package, step by step.

:func:`compare_with_rware` runs :class:`~fleetmind.envs.rware_twin.RwareTwinParallelEnv` and
the real rware env (through :class:`~fleetmind.envs.rware.RwareParallelEnv`) from the same
seed on the same random actions and compares, at every step, everything either returns
(observations bit for bit, rewards, terminations, truncations, infos, the live agents) and
the hidden state behind it (robot cells, headings, carried shelves, shelf cells, the request
queue in order). Episodes restart with ``reset()`` (no seed: both generators continue), as a
training loop would. :func:`compare_vector_with_rware` does the same for every world of
:class:`~fleetmind.envs.rware_twin.RwareTwinVectorEnv` against one real env per world (seeded
``seed + k``), the vector env's in-place resets included.

Actions are uniform over the 5 by default; ``action_p`` reweights them (e.g. more forward and
toggle moves to deliver more often). Needs rware (``pip install fleetmind[rware]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.envs.rware import RwareParallelEnv, make_rware
from fleetmind.envs.rware_twin import (
    RwareTwinParallelEnv,
    RwareTwinVectorEnv,
    make_rware_twin,
    make_rware_vector,
)
from fleetmind.errors import ConfigError
from fleetmind.sim.rware_twin import RwareWorlds

__all__ = ["TwinComparison", "compare_vector_with_rware", "compare_with_rware", "record_actions"]


@dataclass(frozen=True)
class TwinComparison:
    """How the twin and rware agreed.

    Attributes:
        env_id: the rware id.
        worlds: worlds compared side by side (1 for the ParallelEnv).
        steps: steps compared per world.
        episodes: episodes started per world (the first included).
        mismatches: checks (one after every reset and step, per world) where anything
            differed (0 when the twin is exact).
        first_mismatch: what differed first, or None.
        reward_total: rewards summed over robots, steps and worlds (deliveries exercised).
    """

    env_id: str
    worlds: int
    steps: int
    episodes: int
    mismatches: int
    first_mismatch: str | None
    reward_total: float


def _same(a: Any, b: Any) -> bool:
    """Equal values and types, arrays bit for bit (dtype and shape included)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_same(a[k], b[k]) for k in a)
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return type(a) is type(b) and bool(a == b)


def _real_state(env: RwareParallelEnv) -> tuple[list[int], ...]:
    w = env.rware
    width = int(w.grid_size[1])
    return (
        [int(a.y) * width + int(a.x) for a in w.agents],
        [int(a.dir.value) for a in w.agents],
        [a.carrying_shelf.id - 1 if a.carrying_shelf else -1 for a in w.agents],
        [int(s.y) * width + int(s.x) for s in w.shelfs],
        [s.id - 1 for s in w.request_queue],
    )


def _twin_state(worlds: RwareWorlds, k: int) -> tuple[list[int], ...]:
    return (
        worlds.pos[k].tolist(),
        worlds.heading[k].tolist(),
        worlds.carrying[k].tolist(),
        worlds.shelf_pos[k].tolist(),
        worlds.queue[k].tolist(),
    )


def _diff(
    step: int, what: str, twin_value: Any, real_value: Any, world: int | None = None
) -> str | None:
    if _same(twin_value, real_value):
        return None
    where = f"step {step}" + ("" if world is None else f", world {world}")
    return f"{where}: {what} differ: twin {twin_value!r} vs rware {real_value!r}"[:2000]


def _rware(env_id: str, seed: int, options: dict[str, Any]) -> RwareParallelEnv:
    """The real rware env; option names (``"global"``, ``"image"``) become rware's enums."""
    import rware
    from rware.warehouse import ImageLayer, ObservationType, RewardType

    if env_id.startswith(("rware-img", "rware-imgdict")):
        import gymnasium

        if env_id not in gymnasium.registry:
            rware.image_registration()  # rware registers its image ids only on request
    real = dict(options)
    for key, enum in (("reward_type", RewardType), ("observation_type", ObservationType)):
        if isinstance(real.get(key), str):
            real[key] = enum[real[key].upper()]
    if "image_observation_layers" in real:
        real["image_observation_layers"] = [
            ImageLayer[v.upper()] if isinstance(v, str) else v
            for v in real["image_observation_layers"]
        ]
    return make_rware(env_id, seed=seed, **real)


def _sampler(
    n: int, action_seed: int, action_p: Sequence[float] | None
) -> Callable[[int], NDArray[np.int64]]:
    rng = np.random.default_rng(action_seed)
    p = None if action_p is None else np.asarray(action_p, dtype=np.float64) / sum(action_p)

    def draw(worlds: int) -> NDArray[np.int64]:
        return rng.choice(5, size=(worlds, n), p=p).astype(np.int64)

    return draw


def compare_with_rware(
    env_id: str,
    *,
    steps: int,
    seed: int = 0,
    action_seed: int | None = None,
    action_p: Sequence[float] | None = None,
    actions: NDArray[np.int64] | None = None,
    **options: Any,
) -> TwinComparison:
    """Run the twin's ParallelEnv and rware side by side for ``steps`` steps.

    Args:
        env_id: an rware ``-v2`` id.
        steps: steps to compare.
        seed: seed of the first reset of both.
        action_seed: seed of the random actions (default ``seed``).
        action_p: weights of the 5 actions (default uniform).
        actions: ``(steps, N)`` joint actions to replay instead of random ones (a trained
            policy's, recorded with :func:`record_actions`: the states learning reaches,
            where random actions almost never deliver).
        **options: rware constructor overrides, given to both.

    Returns:
        The comparison; ``mismatches == 0`` when the twin agreed at every step.
    """
    real = _rware(env_id, seed, options)
    twin: RwareTwinParallelEnv = make_rware_twin(env_id, seed=seed, **options)
    n = len(real.possible_agents)
    draw = _sampler(n, seed if action_seed is None else action_seed, action_p)
    if actions is not None and np.shape(actions) != (steps, n):
        raise ConfigError(f"actions: expected shape ({steps}, {n}), got {np.shape(actions)}")
    mismatches, first, total, episodes = 0, None, 0.0, 1

    def check(t: int, twin_out: tuple[Any, ...], real_out: tuple[Any, ...]) -> None:
        nonlocal mismatches, first
        names = _FIELDS if len(real_out) == len(_FIELDS) else ("observations", "infos")
        found = [
            _diff(t, "state", _twin_state(twin.world, 0), _real_state(real)),
            _diff(t, "agents", twin.agents, real.agents),
            *(_diff(t, name, a, b) for name, a, b in zip(names, twin_out, real_out, strict=True)),
        ]
        bad = [p for p in found if p]
        if bad:
            mismatches += 1
            first = first or bad[0]

    outs: tuple[tuple[Any, ...], tuple[Any, ...]] = (twin.reset(), real.reset())
    for t in range(steps):
        check(t, *outs)
        if not real.agents or not twin.agents:
            # The last step ended the episode: both start again, their generators continue.
            outs = (twin.reset(), real.reset())
            episodes += 1
            check(t, *outs)
        chosen = draw(1)[0] if actions is None else actions[t]
        joint = {a: int(chosen[i]) for i, a in enumerate(real.possible_agents)}
        outs = (twin.step(joint), real.step(joint))
        total += sum(outs[1][1].values())
    check(steps, *outs)
    real.close()
    return TwinComparison(env_id, 1, steps, episodes, mismatches, first, total)


_FIELDS = ("observations", "rewards", "terminations", "truncations", "infos")


def compare_vector_with_rware(
    env_id: str,
    *,
    num_envs: int,
    steps: int,
    seed: int = 0,
    action_seed: int | None = None,
    action_p: Sequence[float] | None = None,
    **options: Any,
) -> TwinComparison:
    """Run the twin's vector env against one rware env per world for ``steps`` steps.

    World ``k`` and its rware env start from ``seed + k``; when an episode ends, the vector
    env's ``final_obs`` is compared with rware's last observation, rware restarts with
    ``reset()`` and the world's restarted observation is compared with rware's.

    Args:
        env_id: an rware ``-v2`` id (flattened or ``-img``).
        num_envs: worlds.
        steps: steps to compare.
        seed: root seed.
        action_seed: seed of the random actions (default ``seed``).
        action_p: weights of the 5 actions (default uniform).
        **options: rware constructor overrides, given to both.
    """
    vec: RwareTwinVectorEnv = make_rware_vector(env_id, num_envs, seed=seed, **options)
    reals = [_rware(env_id, seed + k, options) for k in range(num_envs)]
    agents = reals[0].possible_agents
    draw = _sampler(len(agents), seed if action_seed is None else action_seed, action_p)
    obs, _ = vec.reset()
    real_obs = [r.reset()[0] for r in reals]
    mismatches, first, total, episodes = 0, None, 0.0, 1

    def stack(o: dict[str, Any]) -> Any:
        return np.stack([o[a] for a in agents])

    for t in range(steps):
        actions = draw(num_envs)
        checks: list[list[str | None]] = [[] for _ in range(num_envs)]
        for k in range(num_envs):
            checks[k] += [
                _diff(t, "state", _twin_state(vec.worlds, k), _real_state(reals[k]), k),
                _diff(t, "observations", obs[k], stack(real_obs[k]), k),
            ]
        obs, rewards, terminated, truncated, info = vec.step(actions)
        for k, real in enumerate(reals):
            real_obs[k], r, term, trunc, _ = real.step(
                {a: int(actions[k, i]) for i, a in enumerate(agents)}
            )
            total += sum(r.values())
            checks[k] += [
                _diff(t, "rewards", rewards[k], np.array([r[a] for a in agents], np.float32), k),
                _diff(t, "terminations", bool(terminated[k]), any(term.values()), k),
                _diff(t, "truncations", bool(truncated[k]), all(trunc.values()), k),
            ]
            if not real.agents:
                checks[k].append(
                    _diff(t, "final observations", info["final_obs"][k], stack(real_obs[k]), k)
                )
                real_obs[k] = real.reset()[0]
                episodes += 1
        for found in checks:
            bad = [p for p in found if p]
            if bad:
                mismatches += 1
                first = first or bad[0]
    for real in reals:
        real.close()
    return TwinComparison(
        env_id, num_envs, steps, -(-episodes // num_envs), mismatches, first, total
    )


def record_actions(
    act: Callable[[NDArray[np.float32]], NDArray[np.int64]],
    env_id: str,
    *,
    steps: int,
    seed: int,
) -> NDArray[np.int64]:
    """A policy's joint actions over ``steps`` steps of the real rware from ``seed``.

    The recording replays with :func:`compare_with_rware` (``actions=``, the same ``seed``):
    the episodes restart as there, and the policy sees rware's own observations.

    Args:
        act: ``(N, D)`` observations -> ``(N,)`` actions (e.g.
            :func:`fleetmind.rl.neural.base.greedy_actions` of a trained policy).
        env_id: an rware ``-v2`` id with flattened observations.
        steps: steps to record.
        seed: seed of the first reset.

    Returns:
        ``(steps, N)`` actions.
    """
    real = _rware(env_id, seed, {})
    agents = real.possible_agents
    obs, _ = real.reset()
    out = np.zeros((steps, len(agents)), dtype=np.int64)
    for t in range(steps):
        if not real.agents:
            obs, _ = real.reset()
        out[t] = act(np.stack([np.asarray(obs[a], dtype=np.float32) for a in agents]))
        obs = real.step({a: int(out[t, i]) for i, a in enumerate(agents)})[0]
    real.close()
    return out
