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
from typing import Unpack

import torch

from fleetmind.rl.neural import base
from fleetmind.rl.neural.ppo import PPOConfig, learner

__all__ = ["CentralCritic", "PPOConfig", "train"]


class CentralCritic(base.AgentMLP):
    """Centralised critic: ``(..., S)`` global state -> ``(..., N)`` values (one per agent).

    Every agent's row is the whole state and its agent id, so each agent's own reward keeps its
    own baseline.
    """

    def __init__(
        self,
        state_size: int,
        n_agents: int,
        hidden: Sequence[int],
        **options: Unpack[base.NetOptions],
    ) -> None:
        super().__init__(state_size, 1, n_agents, hidden, True, **options)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Value of the state for each agent."""
        per_agent = x.unsqueeze(-2).expand(*x.shape[:-1], self.n_agents, x.shape[-1])
        return super().forward(per_agent)[..., 0]


train = learner(
    "mappo",
    "global",
    lambda env, cfg: CentralCritic(
        int(env.global_state().shape[-1]), env.n_robots, cfg.hidden, **cfg.net_options()
    ),
    """Train MAPPO on a batched multi-agent env with ``global_state()``.

    The result's ``policy`` is the shared actor; see :class:`fleetmind.rl.neural.base.Learner`
    for the arguments.
    """,
)
