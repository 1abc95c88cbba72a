"""IQL-DQN: independent deep Q-learners with parameter sharing (Tan, 1993; Tampuu et al., 2017).

Each agent learns ``Q_i(o_i, a_i)`` from its own observation and its own reward, treating the
others as part of the environment: the neural counterpart of :func:`fleetmind.rl.tabular.
independent_q`. One network is shared by all agents (agent-id one-hot appended). The loop is
:func:`fleetmind.rl.neural.dqn.train_dqn` with no mixer: the TD target of agent ``i`` is
``r_i + gamma * Q_target_i(o_i', argmax_a Q_i(o_i', a))``.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import iql_dqn
    result = iql_dqn.train(make_vector("warehouse-tiny", 2, 8, seed=0), seed=0, steps=20_000)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fleetmind.rl.neural import core
from fleetmind.rl.neural.dqn import DQNConfig, train_with

__all__ = ["DQNConfig", "train"]


def train(
    env: core.BatchEnv,
    config: DQNConfig | None = None,
    *,
    seed: int = 0,
    steps: int = 100_000,
    out_dir: Path | None = None,
    callbacks: Sequence[core.Callback] = (),
    checkpoint_every: int = 0,
    resume: bool = False,
) -> core.TrainResult:
    """Train independent DQN learners.

    Args:
        env: the batched env.
        config: hyperparameters (default :class:`DQNConfig`).
        seed: root seed.
        steps: world steps to reach in total.
        out_dir: checkpoint folder.
        callbacks: receive training events.
        checkpoint_every: checkpoint every this many gradient steps (0: only at the end).
        resume: continue from ``out_dir/checkpoint.pt``.

    Returns:
        The training result (``policy`` is the shared Q-network).
    """
    return train_with(
        None,
        "iql-dqn",
        env,
        config,
        seed=seed,
        steps=steps,
        out_dir=out_dir,
        callbacks=callbacks,
        checkpoint_every=checkpoint_every,
        resume=resume,
    )
