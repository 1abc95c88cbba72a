"""QMIX: monotonic value factorisation (Rashid et al., 2018).

``Q_tot = mix(Q_1(o_1, a_1), ..., Q_N(o_N, a_N); s)``: a two-layer mixing network whose weights
are produced by hypernetworks from the global state ``s`` and forced non-negative (absolute
value), so ``dQ_tot / dQ_i >= 0`` and every agent's greedy action on its own ``Q_i`` is also the
greedy joint action of ``Q_tot``. Trained on the team reward (the mean of the agents' normalised
rewards); executed on local observations. The loop is :func:`fleetmind.rl.neural.dqn.train_dqn`;
this file holds the mixer.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import qmix
    result = qmix.train(make_vector("warehouse-tiny", 2, 8, seed=0), seed=0, steps=20_000)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from fleetmind.rl.neural import core
from fleetmind.rl.neural.dqn import DQNConfig, train_with

__all__ = ["DQNConfig", "QMixer", "train"]


class QMixer(nn.Module):
    """The QMIX mixing network.

    Args:
        n_agents: ``N``.
        state_size: ``S``.
        embed: width of the mixing layer.
    """

    def __init__(self, n_agents: int, state_size: int, embed: int = 32) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.embed = embed
        self.hyper_w1 = core.mlp(state_size, n_agents * embed, (embed,), activation=nn.ReLU)
        self.hyper_b1 = nn.Linear(state_size, embed)
        self.hyper_w2 = core.mlp(state_size, embed, (embed,), activation=nn.ReLU)
        self.hyper_b2 = core.mlp(state_size, 1, (embed,), activation=nn.ReLU)

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``(batch, N)`` chosen Q-values and ``(batch, S)`` states -> ``(batch,)`` ``Q_tot``."""
        m = q.shape[0]
        w1 = self.hyper_w1(state).abs().view(m, self.n_agents, self.embed)
        b1 = self.hyper_b1(state).view(m, 1, self.embed)
        hidden = nn.functional.elu(torch.bmm(q.view(m, 1, self.n_agents), w1) + b1)  # (M, 1, E)
        w2 = self.hyper_w2(state).abs().view(m, self.embed, 1)
        b2 = self.hyper_b2(state).view(m, 1, 1)
        out: torch.Tensor = (torch.bmm(hidden, w2) + b2).view(m)
        return out


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
    """Train QMIX.

    Args:
        env: the batched env with ``global_state()``.
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
    state_size = int(env.global_state().shape[-1])
    return train_with(
        lambda cfg: QMixer(env.n_robots, state_size, cfg.mixing_embed),
        "qmix",
        env,
        config,
        seed=seed,
        steps=steps,
        out_dir=out_dir,
        callbacks=callbacks,
        checkpoint_every=checkpoint_every,
        resume=resume,
    )
