"""IPPO: independent PPO with parameter sharing (de Witt et al., 2020; Yu et al., 2022).

Every agent acts from its own observation and is judged by a *decentralised* critic that also
sees only that observation: each agent is an independent learner that happens to share weights
with the others (the agent-id one-hot lets the shared network specialise). The training loop is
:func:`fleetmind.rl.neural.ppo.train_ppo`; this file holds what is IPPO's own, the critic.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import ippo
    env = make_vector("warehouse-tiny", 2, 8, seed=0)
    result = ippo.train(env, ippo.PPOConfig(), seed=0, steps=20_000)
    result.returns["robot_0"]  # per-agent episode returns
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

import torch

from fleetmind.rl.neural import base
from fleetmind.rl.neural.ppo import PPOConfig, learner

__all__ = ["LocalCritic", "PPOConfig", "train"]


class LocalCritic(base.AgentMLP):
    """Decentralised critic: ``(..., N, D)`` observations -> ``(..., N)`` values."""

    def __init__(
        self,
        obs_size: int,
        n_agents: int,
        hidden: Sequence[int],
        agent_id: bool,
        **options: Unpack[base.NetOptions],
    ) -> None:
        super().__init__(obs_size, 1, n_agents, hidden, agent_id, **options)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Value of each agent's observation."""
        return super().forward(x)[..., 0]


train = learner(
    "ippo",
    "local",
    lambda env, cfg: LocalCritic(
        env.obs_size, env.n_robots, cfg.hidden, cfg.agent_id, **cfg.net_options()
    ),
    """Train IPPO on a batched multi-agent env (``make_vector(...)`` or an adapter).

    The result's ``policy`` is the shared actor; see :class:`fleetmind.rl.neural.base.Learner`
    for the arguments.
    """,
)
