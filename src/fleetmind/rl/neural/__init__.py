"""Neural multi-agent learners (PyTorch, CPU), CleanRL-style.

Each algorithm is one module exposing
``train(env, config=None, *, seed, steps, out_dir=None, callbacks=(), checkpoint_every=0,
resume=False) -> TrainResult`` on a batched multi-agent env (:class:`base.BatchEnv`:
``make_vector(...)`` or :class:`adapters.ParallelBatch`):

- :mod:`.ippo`: parameter-shared PPO, decentralised critic on local observations;
- :mod:`.mappo`: parameter-shared PPO, centralised critic on ``global_state()``;
- :mod:`.iql_dqn`: independent double DQN learners, parameter-shared;
- :mod:`.vdn`: value decomposition, ``Q_tot = sum_i Q_i``;
- :mod:`.qmix`: monotonic mixing network conditioned on the global state.

Shared pieces (returns, GAE, buffers, networks, seeding, curves) live once in :mod:`.buffers`
and :mod:`.base`; the two training loops in :mod:`.ppo` and :mod:`.dqn`. torch is imported only
when a learner is.
"""

from __future__ import annotations

ALGOS: tuple[str, ...] = ("ippo", "mappo", "iql-dqn", "vdn", "qmix")
"""Names of the neural learners, as ``fleetmind train --algo`` takes them."""

MODULES: dict[str, str] = {
    "ippo": "fleetmind.rl.neural.ippo",
    "mappo": "fleetmind.rl.neural.mappo",
    "iql-dqn": "fleetmind.rl.neural.iql_dqn",
    "vdn": "fleetmind.rl.neural.vdn",
    "qmix": "fleetmind.rl.neural.qmix",
}
"""Algorithm name -> module path."""

ON_POLICY: frozenset[str] = frozenset({"ippo", "mappo"})
"""Algorithms configured with ``PPOConfig`` (the others take ``DQNConfig``)."""
