"""Neural multi-agent learners (PyTorch, CPU), CleanRL-style.

Each algorithm is one module exposing
``train(env, config=None, *, seed, steps, out_dir=None, callbacks=(), checkpoint_every=0,
resume=False, time_limit_s=None) -> TrainResult`` on a batched multi-agent env
(:class:`base.BatchEnv`: ``make_vector(...)`` or :class:`adapters.ParallelBatch`):

- :mod:`.ippo`: parameter-shared PPO, decentralised critic on local observations;
- :mod:`.mappo`: parameter-shared PPO, centralised critic on ``global_state()``;
- :mod:`.iql_dqn`: independent double DQN learners, parameter-shared;
- :mod:`.vdn`: value decomposition, ``Q_tot = sum_i Q_i``;
- :mod:`.qmix`: monotonic mixing network conditioned on the global state;
- :mod:`.maddpg`: off-policy actor-critic, Gumbel-softmax actors, a centralised critic over all
  agents' observations and actions;
- :mod:`.mat`: the Multi-Agent Transformer, actions decoded agent by agent, trained with PPO.

Shared pieces (returns, GAE, buffers, networks, seeding, curves) live once in :mod:`.buffers`
and :mod:`.base`; the shared training loops in :mod:`.ppo` (IPPO, MAPPO, MAT) and
:mod:`.recurrent` (IQL-DQN, VDN, QMIX: GRU agents on episode replay; :mod:`.dqn` holds their
feed-forward ablation); MADDPG's loop is its own file. torch is imported only when a learner is.
"""

from __future__ import annotations

import importlib
from typing import Any

ALGOS: tuple[str, ...] = ("ippo", "mappo", "iql-dqn", "vdn", "qmix", "maddpg", "mat")
"""Names of the neural learners, as ``fleetmind train --algo`` takes them."""

MODULES: dict[str, str] = {
    "ippo": "fleetmind.rl.neural.ippo",
    "mappo": "fleetmind.rl.neural.mappo",
    "iql-dqn": "fleetmind.rl.neural.iql_dqn",
    "vdn": "fleetmind.rl.neural.vdn",
    "qmix": "fleetmind.rl.neural.qmix",
    "maddpg": "fleetmind.rl.neural.maddpg",
    "mat": "fleetmind.rl.neural.mat",
}
"""Algorithm name -> module path."""

ON_POLICY: frozenset[str] = frozenset({"ippo", "mappo", "mat"})
"""Algorithms trained by the PPO loop (:mod:`.ppo`); the others learn off-policy from replay."""

CONFIGS: dict[str, str] = {
    "ippo": "fleetmind.rl.neural.ppo:PPOConfig",
    "mappo": "fleetmind.rl.neural.ppo:PPOConfig",
    "iql-dqn": "fleetmind.rl.neural.dqn:DQNConfig",
    "vdn": "fleetmind.rl.neural.dqn:DQNConfig",
    "qmix": "fleetmind.rl.neural.dqn:DQNConfig",
    "maddpg": "fleetmind.rl.neural.maddpg:MADDPGConfig",
    "mat": "fleetmind.rl.neural.mat:MATConfig",
}
"""Algorithm name -> ``module:class`` of its config dataclass."""


def config_class(algo: str) -> type[Any]:
    """The config dataclass ``algo`` takes (imports torch)."""
    module, name = CONFIGS[algo].split(":")
    cls: type[Any] = getattr(importlib.import_module(module), name)
    return cls
