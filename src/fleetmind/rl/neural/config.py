"""What the neural learners' configs share, written once.

:class:`RuleConfig` holds the FIELD-NOTES §3.3 rule inputs (learning rate, discount, horizon,
reward sharing and scale) and :meth:`RuleConfig.resolve` applies the rules; every learner's
config extends it (PPO's directly). :class:`ReplayConfig` adds the replay settings and the
network shape of the replay-based learners (DQN family, MADDPG). :func:`resolved_record` is the
resolved config a training result carries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fleetmind.errors import check_range
from fleetmind.rl import hyper

__all__ = ["ReplayConfig", "RuleConfig", "resolved_record"]


@dataclass(frozen=True)
class RuleConfig:
    """The §3.3 rule inputs every neural learner takes (None: resolved by the rules).

    Attributes:
        lr: Adam learning rate (None: the learner's base rate, halved for several agents on one
            shared reward).
        gamma: discount (None: by horizon).
        horizon: episode length for the gamma rule (None: the env's ``max_steps``).
        shared_reward: whether agents share one reward (for the learning-rate rule).
        reward_scale: reward multiplier before clipping (None: from ``reward_bound``).
        reward_bound: largest absolute one-step reward, sets the default scale.
    """

    lr: float | None = None
    gamma: float | None = None
    horizon: int | None = None
    shared_reward: bool = False
    reward_scale: float | None = None
    reward_bound: float | None = None

    def resolve(
        self, n_agents: int, horizon: int, *, base_lr: float, shared_reward: bool | None = None
    ) -> tuple[hyper.Hyper, float]:
        """The §3.3 rules applied to this config: ``(hyper, learning rate)``.

        Args:
            n_agents: learning agents.
            horizon: the env's time limit (used when ``self.horizon`` is None).
            base_lr: the learner's learning rate for one agent.
            shared_reward: overrides ``self.shared_reward`` (a mixer trains on the team reward).
        """
        h = hyper.resolve(
            horizon=self.horizon or horizon,
            n_learners=n_agents,
            shared_reward=self.shared_reward if shared_reward is None else shared_reward,
            gamma=self.gamma,
            reward_scale=self.reward_scale,
            reward_bound=self.reward_bound,
        )
        lr = float(self.lr) if self.lr is not None else base_lr * h.alpha / hyper.ALPHA_SINGLE
        h.sources["lr"] = "override" if self.lr is not None else f"rule: {base_lr} x alpha factor"
        return h, lr


@dataclass(frozen=True)
class ReplayConfig(RuleConfig):
    """Hyperparameters every replay-based learner takes, on top of the §3.3 rule inputs.

    Attributes:
        buffer_size: replay capacity in joint transitions (one per world step).
        batch_size: transitions per gradient step.
        learning_starts: world steps collected before the first gradient step.
        train_every: batched env steps between gradient steps.
        tau: Polyak factor of the target updates (1.0: hard copy).
        max_grad_norm: gradient clipping.
        hidden: hidden layer widths of the networks.
        agent_id: append the agent-id one-hot to the network inputs.
    """

    buffer_size: int = 10_000
    batch_size: int = 64
    learning_starts: int = 500
    train_every: int = 1
    tau: float = 0.01
    max_grad_norm: float = 10.0
    hidden: tuple[int, ...] = (64, 64)
    agent_id: bool = True

    def __post_init__(self) -> None:
        name_of = type(self).__name__
        for name in ("buffer_size", "batch_size", "train_every"):
            check_range(f"{name_of}.{name}", getattr(self, name), low=1)
        check_range(f"{name_of}.tau", self.tau, above=0, high=1)


def resolved_record(
    algo: str, config: Any, lr: float, h: hyper.Hyper, env: Any, **extra: Any
) -> dict[str, Any]:
    """The resolved config of a run: the config's fields, the resolved values, the env's sizes.

    Args:
        algo: the learner's name.
        config: the learner's config (a dataclass).
        lr: the resolved learning rate.
        h: the resolved §3.3 values.
        env: the batched env (``num_envs``, ``n_robots``, ``obs_size``, ``n_actions``).
        extra: learner-specific entries (``mixer``, ``critic``), last.
    """
    return {
        "algo": algo,
        **dataclasses.asdict(config),
        "lr": lr,
        "gamma": h.gamma,
        "reward_scale": h.reward_scale,
        "hyper": h.to_dict(),
        "num_envs": env.num_envs,
        "n_agents": env.n_robots,
        "obs_size": env.obs_size,
        "n_actions": env.n_actions,
        **extra,
    }
