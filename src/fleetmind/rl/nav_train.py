"""Training the navigation policy (:func:`train_nav`), behind ``fleetmind nav train``.

:func:`train_nav` trains one with IPPO, MAPPO or MADDPG on ``make_vector`` (lifelong tasks), or on
:class:`~fleetmind.rl.nav_env.FallbackVectorEnv` (failed moves fall back down a heuristic
ranking, as the shield executes the policy in dispatch), optionally starting from a policy
(``init``).

The shipped policy was made in two stages (dense LoRR traffic, then the small preset)::

    fleetmind nav train --fallback --map benchmarks/data/lorr/maps/warehouse_small.map \
        --robots 100 --num-envs 8 --steps 60000 --seed 0 --out stage1.pt
    fleetmind nav train --fallback --map warehouse-small --robots 16 \
        --steps 150000 --seed 0 --init stage1.pt --ent-coef 0.005 \
        --out src/fleetmind/data/nav_policy.pt
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch

from fleetmind.envs import make_vector
from fleetmind.errors import ConfigError
from fleetmind.rl.nav import NAV_ENT_COEF, NAV_ENT_COEF_FINAL, RADIUS, NavPolicy
from fleetmind.rl.nav_env import FallbackVectorEnv
from fleetmind.rl.neural import base
from fleetmind.rl.neural.maddpg import MADDPGConfig
from fleetmind.rl.neural.ppo import Actor, PPOConfig, env_horizon, resolve_hyper, split_seed

log = logging.getLogger(__name__)


def train_nav(
    map: str = "warehouse-small",
    robots: int = 4,
    *,
    algo: Literal["ippo", "mappo", "maddpg"] = "ippo",
    steps: int = 600_000,
    seed: int = 0,
    num_envs: int = 16,
    max_steps: int = 256,
    config: PPOConfig | MADDPGConfig | None = None,
    callbacks: Sequence[base.Callback] = (),
    fallback: bool = False,
    override_penalty: float = 0.0,
    progress: float = 0.0,
    init: NavPolicy | None = None,
) -> tuple[NavPolicy, base.TrainResult]:
    """Train a navigation policy with IPPO, MAPPO or MADDPG on lifelong tasks.

    Args:
        map: training map (a preset name or map file).
        robots: robots per world.
        algo: ``"ippo"``, ``"mappo"`` or ``"maddpg"`` (its critic reads every robot's
            observation and action: small fleets only).
        steps: world steps.
        seed: root seed.
        num_envs: worlds stepped together.
        max_steps: episode length of a world.
        config: PPO hyperparameters (default: no agent id, 128x128 hidden layers, entropy
            bonus annealed from :data:`NAV_ENT_COEF` to :data:`NAV_ENT_COEF_FINAL`), or a
            :class:`~fleetmind.rl.neural.maddpg.MADDPGConfig` for ``maddpg`` (default: no agent
            id, 128x128).
        callbacks: receive training events.
        fallback: train in :class:`FallbackVectorEnv` (moves as the dispatch tier executes them)
            instead of the plain vector env.
        override_penalty: with ``fallback``, reward for a sampled move that was replaced.
        progress: with ``fallback``, reward per cell of distance gained toward the target.
        init: start the actor from this policy (IPPO only; same hidden layers and obs size);
            the critic, the optimiser and the seeded streams start as in a fresh run.

    Returns:
        The policy and the training result.
    """
    from fleetmind.rl.neural import ippo, maddpg, mappo

    cfg: PPOConfig | MADDPGConfig
    if algo == "maddpg":
        cfg = config or MADDPGConfig(agent_id=False, hidden=(128, 128))
    else:
        cfg = config or PPOConfig(
            agent_id=False,
            hidden=(128, 128),
            ent_coef=NAV_ENT_COEF,
            ent_coef_final=NAV_ENT_COEF_FINAL,
        )
    if isinstance(cfg, MADDPGConfig) != (algo == "maddpg"):
        raise ConfigError(f"train_nav: algo {algo!r} does not take a {type(cfg).__name__}")
    if cfg.agent_id:
        raise ConfigError("train_nav: config.agent_id must be False (the policy serves any N)")
    env: base.BatchEnv
    if fallback:
        env = FallbackVectorEnv(
            map,
            robots,
            num_envs,
            seed=seed,
            max_steps=max_steps,
            override_penalty=override_penalty,
            progress=progress,
        )
    elif override_penalty or progress:
        raise ConfigError("train_nav: override_penalty and progress need fallback=True")
    else:
        env = make_vector(map, robots, num_envs, seed=seed, max_steps=max_steps, radius=RADIUS)
    learner = {"ippo": ippo, "mappo": mappo, "maddpg": maddpg}.get(algo)
    if learner is None:
        raise ConfigError(f"algo: expected 'ippo', 'mappo' or 'maddpg', got {algo!r}")
    if init is None:
        result = learner.train(env, cfg, seed=seed, steps=steps, callbacks=callbacks)
    else:
        if not isinstance(cfg, PPOConfig):
            raise ConfigError(f"train_nav: init needs algo 'ippo', got {algo!r}")
        with tempfile.TemporaryDirectory(prefix="fleetmind-nav-") as tmp:
            _warm_start(Path(tmp), init, env, cfg, algo, seed)
            result = learner.train(
                env,
                cfg,
                seed=seed,
                steps=steps,
                callbacks=callbacks,
                out_dir=Path(tmp),
                resume=True,
            )
    actor = result.policy
    assert isinstance(actor, Actor)
    meta = {
        "algo": algo,
        "train_ent_coef": getattr(cfg, "ent_coef", None),
        "train_ent_coef_final": getattr(cfg, "ent_coef_final", None),
        "train_map": map,
        "train_robots": robots,
        "train_steps": result.steps,
        "train_seed": seed,
        "train_num_envs": num_envs,
        "train_max_steps": max_steps,
        "train_wall_s": round(result.wall_s, 1),
        "train_env": "fallback" if fallback else "plain",
        "train_override_penalty": override_penalty,
        "train_progress": progress,
    }
    if init is not None:
        meta["train_init"] = {
            k: v for k, v in init.metadata.items() if k.startswith("train_") or k == "algo"
        }
    return NavPolicy(actor, meta), result


def _warm_start(
    out_dir: Path, init: NavPolicy, env: base.BatchEnv, cfg: PPOConfig, algo: str, seed: int
) -> None:
    """Write a step-0 checkpoint holding ``init``'s actor, for ``train(..., resume=True)``."""
    from fleetmind.rl.neural import ippo

    if algo != "ippo":
        raise ConfigError(f"train_nav: init needs algo 'ippo', got {algo!r}")
    if init.obs_size != env.obs_size or tuple(init.actor.hidden) != tuple(cfg.hidden):
        raise ConfigError(
            f"train_nav: init has obs size {init.obs_size} and hidden {list(init.actor.hidden)}, "
            f"the run needs {env.obs_size} and {list(cfg.hidden)}"
        )
    n, d = env.n_robots, env.obs_size
    _, lr = resolve_hyper(cfg, n, env_horizon(env))
    _, _, critic_seq, sample_seq, shuffle_seq = split_seed(seed)
    critic = base.build_seeded(critic_seq, lambda: ippo.LocalCritic(d, n, cfg.hidden, False))
    actor = Actor(d, env.n_actions, n, cfg.hidden, False)
    actor.load_state_dict(init.actor.state_dict())
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=lr, eps=1e-5)
    agents = [f"robot_{i}" for i in range(n)]
    base.save_checkpoint(
        out_dir,
        {
            "algo": algo,
            "actor": actor.state_dict(),
            "critic": critic.state_dict(),
            "optimizer": optimizer.state_dict(),
            "g_sample": base.torch_generator(sample_seq).get_state(),
            "g_shuffle": base.torch_generator(shuffle_seq).get_state(),
            "tracker": base.EpisodeTracker(env.num_envs, agents).state_dict(),
            "losses": {"policy": [], "value": [], "entropy": [], "approx_kl": []},
            "steps": 0,
            "updates": 0,
            "config": {},
        },
    )
