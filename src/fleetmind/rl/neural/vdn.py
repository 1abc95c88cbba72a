"""VDN: value decomposition networks (Sunehag et al., 2017).

The team value is the sum of per-agent utilities, ``Q_tot(s, a) = sum_i Q_i(o_i, a_i)``, trained
end to end on the team reward (the mean of the agents' normalised rewards); each agent executes
greedily on its own ``Q_i``, so execution needs only local observations. The neural counterpart
of :func:`fleetmind.rl.ctde.ctde_q` with ``method="vdn"``. The loop and its use are
:mod:`fleetmind.rl.neural.qmix`'s (``vdn.train`` for ``qmix.train``); this file holds the mixer.
"""

from __future__ import annotations

import torch
from torch import nn

from fleetmind.rl.neural.dqn import DQNConfig
from fleetmind.rl.neural.recurrent import learner

__all__ = ["DQNConfig", "SumMixer", "train"]


class SumMixer(nn.Module):
    """``Q_tot = sum_i Q_i`` (the state is ignored, and not stored)."""

    needs_state = False

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``(batch, N)`` chosen Q-values -> ``(batch,)``."""
        del state
        return q.sum(-1)


train = learner(
    "vdn",
    lambda env, cfg: SumMixer(),
    """Train VDN (the env's ``global_state()`` is stored but unused by the sum).

    The result's ``policy`` is the shared Q-network; see
    :class:`fleetmind.rl.neural.base.Learner` for the arguments.
    """,
)
