"""IQL-DQN: independent deep Q-learners with parameter sharing (Tan, 1993; Tampuu et al., 2017).

Each agent learns ``Q_i(o_i, a_i)`` from its own observation and its own reward, treating the
others as part of the environment: the neural counterpart of :func:`fleetmind.rl.tabular.
independent_q`. One network is shared by all agents (agent-id one-hot appended). The loop is
:func:`fleetmind.rl.neural.recurrent.train_recurrent` (GRU agents, episode replay;
:func:`fleetmind.rl.neural.dqn.train_dqn` with ``recurrent=False``) with no mixer: the TD
target of agent ``i`` is
``r_i + gamma * Q_target_i(o_i', argmax_a Q_i(o_i', a))``.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import iql_dqn
    result = iql_dqn.train(make_vector("warehouse-tiny", 2, 8, seed=0), seed=0, steps=20_000)
"""

from __future__ import annotations

from fleetmind.rl.neural.dqn import DQNConfig
from fleetmind.rl.neural.recurrent import learner

__all__ = ["DQNConfig", "train"]


train = learner(
    "iql-dqn",
    None,
    """Train independent DQN learners on a batched multi-agent env.

    The result's ``policy`` is the shared Q-network; see
    :class:`fleetmind.rl.neural.base.Learner` for the arguments.
    """,
)
