"""RLlib trains fleetmind: multi-agent PPO on ``make_parallel`` through RLlib's PettingZoo wrapper.

The warehouse's PettingZoo ParallelEnv (:func:`fleetmind.envs.make_parallel`) goes to RLlib
unchanged, wrapped in ``ray.rllib.env.wrappers.pettingzoo_env.ParallelPettingZooEnv`` and
registered under :data:`ENV_NAME`. Every robot maps to one shared policy (:data:`POLICY`, the
parameter sharing of fleetmind's own IPPO); RLlib's env runners are Ray actors that each step
their own copy of the env. The env factory and the policy mapping are module-level functions of
this installed module, so remote env runners can import them.

- :func:`ppo_config`: the ``PPOConfig`` (current RLlib API: ``.environment``, ``.env_runners``,
  ``.training``, ``.multi_agent``, ``.rl_module``, ``build_algo``).
- :func:`train_rllib`: a few iterations on a local or remote Ray instance; saves the trained
  RLModule to ``out_dir/module`` and a summary to ``out_dir/rllib.json``.
- :class:`RLlibExecutor`: the saved module as a fleetmind executor (the
  :class:`fleetmind.dispatch.executors.Executor` protocol): it builds the same local
  observations as the env and ranks the 5 actions by the module's logits; the shield still has
  the last word. Loading needs the ``ray`` package but no Ray instance.

Example (``docs/ray.md``)::

    fleetmind rllib train --map warehouse-tiny --robots 2 --iterations 5 --out runs/rllib
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.executors import PolicyExecutor
from fleetmind.errors import ConfigError, check_range
from fleetmind.scale.backend import import_ray, ray_session
from fleetmind.sim.grid import GridMap
from fleetmind.sim.observe import LocalObserver

log = logging.getLogger(__name__)

ENV_NAME = "fleetmind-warehouse-v0"
"""The name the warehouse is registered under in RLlib's env registry."""
POLICY = "shared"
"""The one policy (RLModule id) every robot maps to."""
SUMMARY = "rllib.json"
MODULE_DIR = "module"


def env_creator(env_config: Mapping[str, Any]) -> Any:
    """RLlib's env factory: ``make_parallel`` wrapped in ``ParallelPettingZooEnv``.

    Args:
        env_config: ``map``, ``robots``, ``seed`` and any ``make_parallel`` option. RLlib passes
            an ``EnvContext`` whose ``worker_index`` / ``vector_index`` give every copy of the
            env its own seed.
    """
    from ray.rllib.env.wrappers import pettingzoo_env

    from fleetmind.envs import make_parallel

    wrapper: Any = pettingzoo_env.ParallelPettingZooEnv  # RLlib's own hints are partial

    cfg = dict(env_config)
    map_spec = cfg.pop("map")
    robots = int(cfg.pop("robots"))
    seed = cfg.pop("seed", None)
    if seed is not None:
        worker = int(getattr(env_config, "worker_index", 0))
        vector = int(getattr(env_config, "vector_index", 0))
        seed = int(seed) + 1000 * worker + vector
    return wrapper(make_parallel(map_spec, robots, seed=seed, **cfg))


def policy_mapping(agent_id: Hashable, episode: Any = None, **kwargs: Any) -> str:
    """Every robot acts with the shared policy."""
    return POLICY


def ppo_config(
    map: str,
    robots: int,
    *,
    seed: int = 0,
    num_env_runners: int = 1,
    train_batch: int = 400,
    minibatch: int = 100,
    epochs: int = 2,
    lr: float = 3e-4,
    gamma: float = 0.95,
    hidden: Sequence[int] = (64, 64),
    max_steps: int = 100,
    reward_mode: str = "individual",
) -> Any:
    """RLlib's multi-agent PPO on the warehouse, one policy shared by every robot.

    Args:
        map: a preset name, map file or rware layout string (workers load it themselves).
        robots: robots (agents).
        seed: root seed (env copies and RLlib's own seeding).
        num_env_runners: env runner actors (0: sample in the algorithm's process).
        train_batch: env steps per iteration.
        minibatch: SGD minibatch size.
        epochs: passes over each batch.
        lr: learning rate.
        gamma: discount (FIELD-NOTES §3.3: 0.95 for episodes of tens to a hundred steps).
        hidden: hidden layer widths of the policy and value networks.
        max_steps: episode length.
        reward_mode: ``individual``, ``shared``, ``mixed(w)`` or ``difference``.
    """
    for name, value, low in (
        ("robots", robots, 1),
        ("train_batch", train_batch, 1),
        ("minibatch", minibatch, 1),
        ("num_env_runners", num_env_runners, 0),
    ):
        check_range(name, value, low=low, where="rllib")
    import_ray()
    from ray.rllib.algorithms import ppo
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    env_config = {
        "map": map,
        "robots": robots,
        "seed": seed,
        "max_steps": max_steps,
        "reward_mode": reward_mode,
    }
    ppo_cls: Any = ppo.PPOConfig  # RLlib's own hints are partial
    return (
        ppo_cls()
        .environment(ENV_NAME, env_config=env_config)
        .env_runners(num_env_runners=num_env_runners, rollout_fragment_length="auto")
        .training(
            train_batch_size_per_learner=train_batch,
            minibatch_size=minibatch,
            num_epochs=epochs,
            lr=lr,
            gamma=gamma,
        )
        .multi_agent(policies={POLICY}, policy_mapping_fn=policy_mapping)
        .rl_module(
            rl_module_spec=MultiRLModuleSpec(
                rl_module_specs={POLICY: RLModuleSpec(model_config={"fcnet_hiddens": list(hidden)})}
            )
        )
        .debugging(seed=seed)
    )


def register() -> None:
    """Register :data:`ENV_NAME` with RLlib (idempotent)."""
    import_ray()
    from ray.tune.registry import register_env

    register_env(ENV_NAME, env_creator)


@dataclass(frozen=True)
class RLlibRun:
    """What :func:`train_rllib` did.

    Attributes:
        out_dir: the run folder (``module/`` and ``rllib.json``).
        module_dir: the saved RLModule (load it with :class:`RLlibExecutor`).
        iterations: per iteration: ``env_steps`` (lifetime), ``episode_return_mean`` (summed
            over robots, NaN before the first finished episode), ``time_s``.
        config: map, robots, seed and PPO settings.
    """

    out_dir: Path
    module_dir: Path
    iterations: list[dict[str, float]]
    config: dict[str, Any]


def train_rllib(
    map: str,
    robots: int,
    *,
    iterations: int,
    out_dir: str | Path,
    seed: int = 0,
    num_env_runners: int = 1,
    address: str | None = None,
    **ppo: Any,
) -> RLlibRun:
    """Train RLlib's multi-agent PPO on the warehouse for ``iterations`` iterations.

    Uses the Ray instance already initialised, else starts one (``address`` None: local) and
    stops it at the end.

    Args:
        map: a preset name, map file or rware layout string.
        robots: robots (agents).
        iterations: ``algo.train()`` calls.
        out_dir: where ``module/`` and ``rllib.json`` go.
        seed: root seed.
        num_env_runners: env runner actors.
        address: Ray cluster to join when Ray is not initialised.
        **ppo: other :func:`ppo_config` arguments (``train_batch``, ``max_steps``, ...).
    """
    check_range("iterations", iterations, low=1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = ppo_config(map, robots, seed=seed, num_env_runners=num_env_runners, **ppo)
    history: list[dict[str, float]] = []
    with ray_session(address):
        register()
        algo = config.build_algo()
        try:
            for i in range(iterations):
                t0 = time.perf_counter()
                result = algo.train()
                runners = result.get("env_runners", {})
                row = {
                    "iteration": float(i + 1),
                    "env_steps": float(result.get("num_env_steps_sampled_lifetime", 0)),
                    "episode_return_mean": float(runners.get("episode_return_mean", np.nan)),
                    "time_s": time.perf_counter() - t0,
                }
                history.append(row)
                log.info("rllib: iteration %d %s", i + 1, row)
            module_dir = out / MODULE_DIR
            algo.get_module(POLICY).save_to_path(str(module_dir))
        finally:
            algo.stop()
    env_config = dict(config.env_config)
    summary = {
        "format": "fleetmind-rllib-v1",
        "policy": POLICY,
        "map": map,
        "robots": robots,
        "seed": seed,
        "num_env_runners": num_env_runners,
        "ppo": dict(ppo),
        "observation": {
            "radius": int(env_config.get("radius", 2)),
            "heuristic": bool(env_config.get("heuristic", True)),
        },
        "iterations": history,
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, default=str))
    return RLlibRun(out_dir=out, module_dir=module_dir, iterations=history, config=summary)


class RLlibExecutor(PolicyExecutor):
    """An RLlib-trained module as a fleetmind executor (ranks the 5 actions by its logits).

    Args:
        grid: the map the fleet runs on.
        run_dir: a :func:`train_rllib` folder (``module/`` + ``rllib.json``) or the module
            folder itself (then ``radius`` and ``heuristic`` must match its training env).
        radius: observation window radius when ``run_dir`` has no ``rllib.json``.
        heuristic: shortest-path heuristic values in the observation (same rule).

    Raises:
        ConfigError: no module in ``run_dir``, or a module whose input size does not match the
            observation built here.
    """

    name = "rllib"

    def __init__(
        self, grid: GridMap, run_dir: str | Path, *, radius: int = 2, heuristic: bool = True
    ) -> None:
        import_ray()
        import torch
        from ray.rllib.core.rl_module.rl_module import RLModule

        path = Path(run_dir)
        summary_path = path / SUMMARY
        module_dir = path / MODULE_DIR if summary_path.exists() else path
        if summary_path.exists():
            obs_cfg = json.loads(summary_path.read_text())["observation"]
            radius, heuristic = int(obs_cfg["radius"]), bool(obs_cfg["heuristic"])
        if not module_dir.is_dir():
            raise ConfigError(f"{module_dir}: no RLlib module here (train one with train_rllib)")
        torch.set_num_threads(1)  # the control loop shares its cores with the planner
        self._torch = torch
        loaded: Any = RLModule.from_checkpoint(str(module_dir))
        loaded.eval()  # a torch module: inference mode for dropout/normalisation layers
        self.module = loaded
        self.grid = grid
        self.observer = LocalObserver.for_map(grid, radius, heuristic=heuristic)
        space = getattr(self.module, "observation_space", None)
        expected = getattr(space, "shape", None)
        if expected is not None and tuple(expected) != (self.observer.size,):
            raise ConfigError(
                f"{module_dir}: module takes observations of shape {tuple(expected)}, the "
                f"executor builds {self.observer.size} floats (radius {radius}, heuristic "
                f"{heuristic})"
            )

    def logits(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """``(N, 5)`` action logits for ``(N, D)`` observations."""
        torch = self._torch
        with torch.no_grad():
            out = self.module.forward_inference({"obs": torch.from_numpy(obs)})
        logits: NDArray[np.float32] = out["action_dist_inputs"].numpy()
        return logits
