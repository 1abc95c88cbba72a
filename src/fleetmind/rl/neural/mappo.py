"""MAPPO: PPO with a centralised critic (Yu et al., 2022), the CTDE actor-critic.

Execution is decentralised: the shared actor sees only each agent's own observation. Training is
centralised: the critic reads the env's ``global_state()`` (for the warehouse, walls, robots,
loads, targets, pickups and stations over the whole grid) plus the agent-id one-hot, and returns
one value per agent, so each agent's own reward keeps its own baseline. The training loop is
:func:`fleetmind.rl.neural.ppo.train_ppo`; this file holds what is MAPPO's own, the critic.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import mappo
    env = make_vector("warehouse-tiny", 2, 8, seed=0)
    result = mappo.train(env, seed=0, steps=20_000)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fleetmind.rl.neural import base
from fleetmind.rl.neural.ppo import PPOConfig, learner

__all__ = ["CentralCritic", "PPOConfig", "train"]


class CentralCritic(nn.Module):
    """Centralised critic: ``(..., S)`` global state -> ``(..., N)`` values (one per agent)."""

    def __init__(
        self,
        state_size: int,
        n_agents: int,
        hidden: Sequence[int],
        *,
        activation: str = "tanh",
        feature_norm: bool = False,
    ) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.net = base.mlp(
            state_size + n_agents,
            1,
            hidden,
            activation=base.ACTIVATIONS[activation],
            in_norm=feature_norm,
        )

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Value of the state for each agent."""
        per_agent = state.unsqueeze(-2).expand(*state.shape[:-1], self.n_agents, state.shape[-1])
        out: torch.Tensor = self.net(base.with_agent_id(per_agent, self.n_agents))[..., 0]
        return out


train = learner(
    "mappo",
    "global",
    lambda env, cfg: CentralCritic(
        int(env.global_state().shape[-1]),
        env.n_robots,
        cfg.hidden,
        activation=cfg.activation,
        feature_norm=cfg.feature_norm,
    ),
    """Train MAPPO on a batched multi-agent env with ``global_state()``.

    The result's ``policy`` is the shared actor; see :class:`fleetmind.rl.neural.base.Learner`
    for the arguments.
    """,
)
