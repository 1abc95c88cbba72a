"""VDN: value decomposition networks (Sunehag et al., 2017).

The team value is the sum of per-agent utilities, ``Q_tot(s, a) = sum_i Q_i(o_i, a_i)``, trained
end to end on the team reward (the mean of the agents' normalised rewards); each agent executes
greedily on its own ``Q_i``, so execution needs only local observations. The neural counterpart
of :func:`fleetmind.rl.ctde.ctde_q` with ``method="vdn"``. The loop is
:func:`fleetmind.rl.neural.dqn.train_dqn`; this file holds the mixer.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import vdn
    result = vdn.train(make_vector("warehouse-tiny", 2, 8, seed=0), seed=0, steps=20_000)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from fleetmind.rl.neural import core
from fleetmind.rl.neural.dqn import DQNConfig, train_with

__all__ = ["DQNConfig", "SumMixer", "train"]


class SumMixer(nn.Module):
    """``Q_tot = sum_i Q_i`` (the state is ignored, and not stored)."""

    needs_state = False

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``(batch, N)`` chosen Q-values -> ``(batch,)``."""
        del state
        return q.sum(-1)


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
    """Train VDN.

    Args:
        env: the batched env (its ``global_state()`` is stored but unused by the sum).
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
        lambda cfg: SumMixer(),
        "vdn",
        env,
        config,
        seed=seed,
        steps=steps,
        out_dir=out_dir,
        callbacks=callbacks,
        checkpoint_every=checkpoint_every,
        resume=resume,
    )
