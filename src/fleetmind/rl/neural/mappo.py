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
from pathlib import Path

import torch
from torch import nn

from fleetmind.rl.neural import core
from fleetmind.rl.neural.ppo import PPOConfig, split_seed, train_ppo

__all__ = ["CentralCritic", "PPOConfig", "train"]


class CentralCritic(nn.Module):
    """Centralised critic: ``(..., S)`` global state -> ``(..., N)`` values (one per agent)."""

    def __init__(self, state_size: int, n_agents: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.net = core.mlp(state_size + n_agents, 1, hidden)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Value of the state for each agent."""
        per_agent = state.unsqueeze(-2).expand(*state.shape[:-1], self.n_agents, state.shape[-1])
        out: torch.Tensor = self.net(core.with_agent_id(per_agent, self.n_agents))[..., 0]
        return out


def train(
    env: core.BatchEnv,
    config: PPOConfig | None = None,
    *,
    seed: int = 0,
    steps: int = 100_000,
    out_dir: Path | None = None,
    callbacks: Sequence[core.Callback] = (),
    checkpoint_every: int = 0,
    resume: bool = False,
) -> core.TrainResult:
    """Train MAPPO on a batched multi-agent env with ``global_state()``.

    Args:
        env: the batched env (``make_vector(...)`` or an adapter).
        config: hyperparameters (default :class:`PPOConfig`).
        seed: root seed.
        steps: world steps to reach in total.
        out_dir: checkpoint folder.
        callbacks: receive training events.
        checkpoint_every: checkpoint every this many updates (0: only at the end).
        resume: continue from ``out_dir/checkpoint.pt``.

    Returns:
        The training result (``policy`` is the shared actor).
    """
    cfg = config or PPOConfig()
    state_size = int(env.global_state().shape[-1])
    critic = core.build_seeded(
        split_seed(seed)[2], lambda: CentralCritic(state_size, env.n_robots, cfg.hidden)
    )
    return train_ppo(
        env,
        cfg,
        critic=critic,
        critic_kind="global",
        algo="mappo",
        seed=seed,
        steps=steps,
        out_dir=out_dir,
        callbacks=callbacks,
        checkpoint_every=checkpoint_every,
        resume=resume,
    )
