"""QMIX: monotonic value factorisation (Rashid et al., 2018).

``Q_tot = mix(Q_1(o_1, a_1), ..., Q_N(o_N, a_N); s)``: a two-layer mixing network whose weights
are produced by hypernetworks from the global state ``s`` and forced non-negative (absolute
value), so ``dQ_tot / dQ_i >= 0`` and every agent's greedy action on its own ``Q_i`` is also the
greedy joint action of ``Q_tot``. Trained on the team reward (the mean of the agents' normalised
rewards); executed on local observations. The loop is
:func:`fleetmind.rl.neural.recurrent.train_recurrent` (GRU agents, episode replay;
:func:`fleetmind.rl.neural.dqn.train_dqn` with ``recurrent=False``); this file holds the mixer.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import qmix
    result = qmix.train(make_vector("warehouse-tiny", 2, 8, seed=0), seed=0, steps=20_000)
"""

from __future__ import annotations

import torch
from torch import nn

from fleetmind.rl.neural import base
from fleetmind.rl.neural.dqn import DQNConfig
from fleetmind.rl.neural.recurrent import learner

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
        self.hyper_w1 = base.mlp(state_size, n_agents * embed, (embed,), activation=nn.ReLU)
        self.hyper_b1 = nn.Linear(state_size, embed)
        self.hyper_w2 = base.mlp(state_size, embed, (embed,), activation=nn.ReLU)
        self.hyper_b2 = base.mlp(state_size, 1, (embed,), activation=nn.ReLU)

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


train = learner(
    "qmix",
    lambda env, cfg: QMixer(env.n_robots, int(env.global_state().shape[-1]), cfg.mixing_embed),
    """Train QMIX on a batched multi-agent env with ``global_state()``.

    The result's ``policy`` is the shared Q-network; see
    :class:`fleetmind.rl.neural.base.Learner` for the arguments.
    """,
)
