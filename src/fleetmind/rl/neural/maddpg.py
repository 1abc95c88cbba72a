"""MADDPG for discrete actions (Lowe et al., 2017), the off-policy CTDE actor-critic.

Execution is decentralised: one actor shared by all agents (agent-id one-hot appended, the
:class:`~fleetmind.rl.neural.ppo.Actor` of the PPO learners) maps each agent's own observation
to logits over its 5 actions. Training is centralised: a critic reads *all* agents' observations
and *all* agents' actions (one-hot) and returns each agent's ``Q_i``, learnt on that agent's own
reward.

**One shared critic with an agent id**, not one critic per agent: the actors are shared already
(as in every fleetmind learner), one network's cost does not grow with the fleet, and the agent
id keeps ``Q_i`` apart where the agents' rewards differ; EPyMARL's MADDPG shares its critic the
same way.

Discrete actions are made differentiable with the **straight-through Gumbel-softmax**
(:func:`gumbel_softmax`; Jang et al., 2017): the forward value is a one-hot sample of the
policy, the gradient is that of the tempered softmax. Per gradient step, on a minibatch of joint
transitions from :class:`~fleetmind.rl.neural.buffers.ReplayBuffer`:

- critic: ``y_i = r_i + gamma * (1 - terminated) * Q'_i(o', a'_1..a'_N)`` with ``a'_j`` one-hot
  samples of the target actor, squared error to ``Q_i(o, a_1..a_N)``;
- actor: ``-Q_i(o, a_1.. pi(o_i) ..a_N)`` for every agent ``i``, its own action replaced by a
  Gumbel-softmax sample of the current actor and the others' taken from the buffer (the original
  algorithm), plus ``actor_reg * logits**2`` (the reference code's logit penalty);
- targets follow by Polyak averaging (``tau``).

Exploration is the stochastic policy itself: each agent acts on a Gumbel-max sample of its
logits. A time-limit truncation bootstraps from ``final_obs`` when the env reports it, else the
transition is dropped (as in :mod:`~fleetmind.rl.neural.dqn`). Hyperparameters follow
FIELD-NOTES §3.3 through :func:`fleetmind.rl.hyper.resolve` (gamma by horizon, learning rate
``5e-4`` halved for several agents on one shared reward, rewards scaled and clipped to
``[-1, 1]``); :class:`MADDPGConfig` overrides any of them.

Since the actor reads only the agent's own observation (and takes no agent id when trained with
``agent_id=False``), it is a navigation policy as :class:`fleetmind.rl.nav.NavPolicy` takes one
on the warehouse's 111-float observation: ``NavPolicy(result.policy).save(path)`` makes it the
dispatch tier's RL executor (``fleetmind run --executor rl --policy PATH``).

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import maddpg
    env = make_vector("warehouse-tiny", 2, 8, seed=0)
    result = maddpg.train(env, maddpg.MADDPGConfig(), seed=0, steps=20_000)
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fleetmind.errors import check_range
from fleetmind.rl.neural import base, buffers
from fleetmind.rl.neural.config import ReplayConfig, resolved_record
from fleetmind.rl.neural.ppo import Actor, env_horizon

__all__ = ["CentralQCritic", "MADDPGConfig", "gumbel_softmax", "train"]

BASE_LR = 5e-4
"""Actor and critic learning rate before the §3.3 factor (EPyMARL's MADDPG value)."""


@dataclass(frozen=True)
class MADDPGConfig(ReplayConfig):
    """MADDPG hyperparameters: :class:`~fleetmind.rl.neural.config.ReplayConfig`'s and these.

    The learning rate (actor and critic) has the base 5e-4; ``tau`` updates both targets,
    ``max_grad_norm`` clips actor and critic apart, ``hidden`` and ``agent_id`` shape both.

    Attributes:
        temperature: Gumbel-softmax temperature of the actor update.
        actor_reg: weight of the mean squared logits in the actor loss.
    """

    temperature: float = 1.0
    actor_reg: float = 1e-3

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("MADDPGConfig.learning_starts", self.learning_starts, low=0)
        if self.lr is not None:
            check_range("MADDPGConfig.lr", self.lr, above=0)
        check_range("MADDPGConfig.temperature", self.temperature, above=0)
        check_range("MADDPGConfig.actor_reg", self.actor_reg, low=0)
        check_range("MADDPGConfig.max_grad_norm", self.max_grad_norm, above=0)


def gumbel_softmax(
    logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0
) -> torch.Tensor:
    """Straight-through Gumbel-softmax: one-hot samples of ``(..., A)`` logits, soft gradients.

    ``torch.nn.functional.gumbel_softmax`` draws from the global generator; this one draws from
    ``generator`` so a run replays from its seed.
    """
    u = torch.rand(logits.shape, generator=generator)
    # Keep log(-log(u)) finite at the ends of [0, 1).
    gumbel = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
    soft = torch.softmax((logits + gumbel) / temperature, dim=-1)
    hard = nn.functional.one_hot(soft.argmax(-1), logits.shape[-1]).to(soft.dtype)
    return hard - soft.detach() + soft


class CentralQCritic(nn.Module):
    """Shared centralised critic: all observations and a joint action -> each agent's ``Q_i``.

    ``forward(obs (..., N, D), joint (..., N, N, A)) -> (..., N)``: ``joint[..., i, :, :]`` is
    the joint action (one-hot per agent) at which agent ``i``'s ``Q_i`` is evaluated, so the
    actor update can put a different agent's fresh action into each row.

    Args:
        obs_size: ``D``.
        n_actions: ``A``.
        n_agents: ``N``.
        hidden: hidden layer widths.
    """

    def __init__(self, obs_size: int, n_actions: int, n_agents: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.net = base.mlp(
            n_agents * (obs_size + n_actions) + n_agents, 1, hidden, activation=nn.ReLU
        )

    def forward(self, obs: torch.Tensor, joint: torch.Tensor) -> torch.Tensor:
        """``Q_i`` of every agent ``i`` at its row of ``joint``."""
        n = self.n_agents
        all_obs = obs.flatten(-2).unsqueeze(-2).expand(*obs.shape[:-2], n, -1)
        x = torch.cat([all_obs, joint.flatten(-2)], dim=-1)
        out: torch.Tensor = self.net(base.with_agent_id(x, n))[..., 0]
        return out


def split_seed(seed: int) -> list[np.random.SeedSequence]:
    """The run's named streams: env, actor init, critic init, acting, replay, update noise."""
    return np.random.SeedSequence(seed).spawn(6)


def _run(env: base.BatchEnv, config: MADDPGConfig, run: base.RunOptions) -> base.TrainResult:
    algo = "maddpg"
    t0 = time.perf_counter()
    n, d, a = env.n_robots, env.obs_size, env.n_actions
    h, lr = config.resolve(n, env_horizon(env), base_lr=BASE_LR)
    env_seq, actor_seq, critic_seq, act_seq, replay_seq, noise_seq = split_seed(run.seed)
    actor = base.build_seeded(actor_seq, lambda: Actor(d, a, n, config.hidden, config.agent_id))
    critic = base.build_seeded(critic_seq, lambda: CentralQCritic(d, a, n, config.hidden))
    target_actor, target_critic = copy.deepcopy(actor), copy.deepcopy(critic)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=lr)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=lr)
    g_act = base.torch_generator(act_seq)
    g_replay = base.torch_generator(replay_seq)
    g_noise = base.torch_generator(noise_seq)
    buffer = buffers.ReplayBuffer(config.buffer_size, n, d)
    loop = base.TrainLoop(
        algo,
        env,
        run,
        losses=("critic", "actor", "q_mean"),
        parts={
            "actor": actor,
            "critic": critic,
            "target_actor": target_actor,
            "target_critic": target_critic,
            "actor_opt": actor_opt,
            "critic_opt": critic_opt,
            "g_act": g_act,
            "g_replay": g_replay,
            "g_noise": g_noise,
        },
        config=resolved_record(
            algo, config, lr, h, env, critic="shared, all observations and actions + agent id"
        ),
        t0=t0,
    )
    loop.resume(" (replay starts empty)")
    batched_steps = 0
    obs = loop.reset(env, env_seq)
    learn_from = loop.steps + config.learning_starts
    eye = torch.eye(n)[..., None]  # (N, N, 1): row i puts agent i's fresh action in slot i

    while loop.going():
        # ---- act: a Gumbel-max sample of each agent's policy
        with torch.no_grad():
            act = gumbel_softmax(actor(torch.from_numpy(obs)), g_act).argmax(-1).numpy()
        next_obs, rewards, term, trunc, info = env.step(act)

        # ---- store: truncated worlds need their final observation, else they are dropped
        real_next, _, keep = buffers.final_transitions(next_obs, None, trunc, info)
        learned = h.normalise(rewards).astype(np.float32)
        buffer.add(
            obs=obs[keep],
            actions=act[keep],
            rewards=learned[keep],
            next_obs=real_next[keep],
            terminated=term[keep],
        )
        batched_steps += 1
        loop.record(rewards, term | trunc, info, learned)
        obs = next_obs

        if loop.steps < learn_from or batched_steps % config.train_every or buffer.size == 0:
            continue
        batch = buffer.sample(config.batch_size, g_replay)
        m = batch["obs"].shape[0]
        taken = nn.functional.one_hot(batch["actions"], a).float()  # (M, N, A)

        # ---- critic: every agent's Q at the stored joint action
        with torch.no_grad():
            next_act = gumbel_softmax(target_actor(batch["next_obs"]), g_noise)
            q_next = target_critic(batch["next_obs"], next_act[:, None].expand(m, n, n, a))
            not_done = (1.0 - batch["terminated"])[:, None]
            target = batch["rewards"] + h.gamma * not_done * q_next  # (M, N)
        q = critic(batch["obs"], taken[:, None].expand(m, n, n, a))
        critic_loss = 0.5 * ((q - target) ** 2).mean()
        base.descend(critic_opt, critic_loss, critic.parameters(), config.max_grad_norm)

        # ---- actor: agent i's own action fresh from the policy, the others' from the buffer
        logits = actor(batch["obs"])
        fresh = gumbel_softmax(logits, g_noise, config.temperature)
        joint = eye * fresh[:, None] + (1.0 - eye) * taken[:, None]  # (M, N, N, A)
        actor_loss = -critic(batch["obs"], joint).mean() + config.actor_reg * (logits**2).mean()
        base.descend(actor_opt, actor_loss, actor.parameters(), config.max_grad_norm)

        base.polyak(actor, target_actor, config.tau)
        base.polyak(critic, target_critic, config.tau)
        loop.losses["critic"].append(critic_loss.item())
        loop.losses["actor"].append(actor_loss.item())
        loop.losses["q_mean"].append(q.mean().item())
        loop.updated()
    return loop.finish(actor)


train = base.Learner(
    _run,
    MADDPGConfig,
    """Train MADDPG on a batched multi-agent env (``make_vector(...)`` or an adapter).

    The result's ``policy`` is the shared actor (logits); see
    :class:`fleetmind.rl.neural.base.Learner` for the arguments. Checkpoints count gradient
    steps; a resumed run's replay buffer starts empty.
    """,
)
