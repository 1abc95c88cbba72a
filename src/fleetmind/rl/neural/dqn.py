"""The Q-learners' config and the feed-forward loop (CleanRL's ``dqn.py``, multi-agent).

IQL-DQN, VDN and QMIX train by default with GRU agents on episode replay, EPyMARL's recipe
(:mod:`fleetmind.rl.neural.recurrent`, ``DQNConfig.recurrent``). This module holds their config
and, as the ``recurrent=False`` ablation, the feed-forward loop on single transitions:

One Q-network shared by all agents (agent-id one-hot appended), ``(..., N, D) -> (..., N, A)``,
a target network updated by Polyak averaging, epsilon-greedy exploration decaying linearly, a
replay buffer of joint transitions. The algorithms differ only in the *mixer* that turns the
agents' chosen Q-values into the quantity the TD target is written for:

- no mixer (:mod:`~fleetmind.rl.neural.iql_dqn`): each agent's own Q on its own reward;
- sum (:mod:`~fleetmind.rl.neural.vdn`): ``Q_tot = sum_i Q_i`` on the team reward;
- monotonic hypernetwork mixer on the global state (:mod:`~fleetmind.rl.neural.qmix`).

The team reward of VDN/QMIX is the mean of the agents' normalised rewards (as the tabular CTDE
learners use). Targets use double Q-learning (online argmax, target evaluation) and do not
bootstrap on termination; a time-limit truncation bootstraps from the final observation when
the env reports ``final_obs``, else the transition is dropped (the next observation the env
returns then belongs to a new episode).

Hyperparameters follow FIELD-NOTES §3.3 through :func:`fleetmind.rl.hyper.resolve` (gamma by
horizon, learning rate 1e-3 halved for several agents on one shared reward, rewards scaled and
clipped to ``[-1, 1]``); :class:`DQNConfig` overrides any of them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

import numpy as np
import torch
from torch import nn

from fleetmind.errors import check_range
from fleetmind.rl.neural import base, buffers
from fleetmind.rl.neural.config import ReplayConfig, resolved_record
from fleetmind.rl.neural.ppo import env_horizon

BASE_LR = 1e-3


@dataclass(frozen=True)
class DQNConfig(ReplayConfig):
    """Value-based hyperparameters: :class:`~fleetmind.rl.neural.config.ReplayConfig`'s and these.

    The learning rate's base is 1e-3 (halved for several agents on one shared reward).

    The recurrent fields' defaults are EPyMARL's (uoe-agents/epymarl, ``src/config/default.yaml``
    and ``src/config/algs/qmix.yaml``, read at commit 4bcbb1c): GRU hidden 64, last action in the
    agent's input, a buffer of 5,000 episodes, batches of 32 episodes, one gradient step per
    episode collected, a hard target update every 200 gradient steps, epsilon 1.0 -> 0.05 over
    50,000 steps, rewards standardised by running moments.

    Attributes:
        eps_start: initial exploration rate.
        eps_end: final exploration rate (also the ``sample`` policy's rate at evaluation).
        eps_fraction: fraction of the run over which epsilon decays linearly, when
            ``eps_anneal_steps`` is 0.
        eps_anneal_steps: world steps over which epsilon decays linearly (0: ``eps_fraction``
            of the run's steps instead); a fixed count keeps ``--minutes`` runs meaningful.
        mixing_embed: width of the QMIX mixing layer.
        recurrent: GRU agents trained on episode replay (:mod:`~fleetmind.rl.neural.recurrent`);
            False: feed-forward agents on single-transition replay (this module's loop).
        rnn_hidden: width of the recurrent agent (its input layer and GRU).
        last_action: the recurrent agent's input carries its previous action, one-hot.
        episodes_buffer: recurrent: replay capacity in episodes.
        episodes_batch: recurrent: episodes per gradient step.
        updates_per_episode: recurrent: gradient steps per episode collected.
        target_every: recurrent: gradient steps between hard target copies (0: Polyak ``tau``
            after every step).
        standardise_rewards: recurrent: divide the learned rewards by their running standard
            deviation after removing their running mean (EPyMARL's ``standardise_rewards``).
    """

    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.5
    eps_anneal_steps: int = 50_000
    mixing_embed: int = 32
    recurrent: bool = True
    rnn_hidden: int = 64
    last_action: bool = True
    episodes_buffer: int = 5_000
    episodes_batch: int = 32
    updates_per_episode: float = 1.0
    target_every: int = 200
    standardise_rewards: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("DQNConfig.eps_fraction", self.eps_fraction, above=0, high=1)
        for name in ("rnn_hidden", "episodes_buffer", "episodes_batch"):
            check_range(f"DQNConfig.{name}", getattr(self, name), low=1)
        for name in ("eps_anneal_steps", "target_every"):
            check_range(f"DQNConfig.{name}", getattr(self, name), low=0)
        check_range("DQNConfig.updates_per_episode", self.updates_per_episode, above=0)


class QNetwork(base.AgentMLP):
    """Shared Q-network: ``(..., N, D)`` observations -> ``(..., N, A)`` Q-values."""

    def __init__(
        self, obs_size: int, n_actions: int, n_agents: int, hidden: Sequence[int], agent_id: bool
    ) -> None:
        super().__init__(obs_size, n_actions, n_agents, hidden, agent_id, activation="relu")


Mixer = nn.Module
"""``forward(q (batch, N), state (batch, S)) -> (batch,)``; None means independent learners.

A mixer with ``needs_state = False`` gets a placeholder instead of the state, and the replay
buffer then stores no states (VDN on a big map would otherwise store ``6 * H * W`` floats twice
per transition for nothing)."""


NetT = TypeVar("NetT", bound=nn.Module)


@dataclass
class QParts(Generic[NetT]):
    """What both Q-learning loops (this one and the recurrent one) build and use alike.

    The fields but ``params`` are the parts a :class:`~fleetmind.rl.neural.base.TrainLoop`
    checkpoints, under their names.

    Attributes:
        q: the agents' Q-network.
        target_q: its target copy.
        mixer: the mixer, or None for independent learners.
        target_mixer: the target copy of ``mixer`` (None without one).
        optimizer: Adam over ``params``.
        g_explore: the exploration generator.
        g_sample: the replay sampling generator.
        params: the trained parameters (``q``'s, then ``mixer``'s).
    """

    q: NetT
    target_q: NetT
    mixer: Mixer | None
    target_mixer: Mixer | None
    optimizer: torch.optim.Optimizer
    g_explore: torch.Generator
    g_sample: torch.Generator
    params: list[nn.Parameter]

    @classmethod
    def build(cls, q: NetT, mixer: Mixer | None, *, lr: float, seed: int) -> QParts[NetT]:
        """Targets copied from ``q`` and ``mixer``, Adam at ``lr``, the generators of ``seed``.

        The generators are the run seed's exploration and sampling streams (:func:`split_seed`).
        """
        explore_seq, sample_seq = split_seed(seed)[3:]
        params = [*q.parameters(), *(mixer.parameters() if mixer is not None else [])]
        return cls(
            q=q,
            target_q=copy.deepcopy(q),
            mixer=mixer,
            target_mixer=copy.deepcopy(mixer) if mixer is not None else None,
            optimizer=torch.optim.Adam(params, lr=lr),
            g_explore=base.torch_generator(explore_seq),
            g_sample=base.torch_generator(sample_seq),
            params=params,
        )

    @property
    def use_state(self) -> bool:
        """Whether the mixer reads the global state (see :data:`Mixer`)."""
        return self.mixer is not None and bool(getattr(self.mixer, "needs_state", True))

    def loop_parts(self) -> dict[str, Any]:
        """The parts a :class:`~fleetmind.rl.neural.base.TrainLoop` checkpoints."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "params"}

    def explore(self, greedy: torch.Tensor, eps: float, n_actions: int) -> torch.Tensor:
        """Epsilon-greedy per agent: each of ``greedy``'s actions replaced at random w.p. eps."""
        explore = torch.rand(greedy.shape, generator=self.g_explore) < eps
        random_act = torch.randint(n_actions, greedy.shape, generator=self.g_explore)
        return torch.where(explore, random_act, greedy)

    def soft_update(self, tau: float) -> None:
        """Polyak-average the targets toward ``q`` and ``mixer``."""
        base.polyak(self.q, self.target_q, tau)
        if self.mixer is not None and self.target_mixer is not None:
            base.polyak(self.mixer, self.target_mixer, tau)


def epsilon_at(step: int, total: int, config: DQNConfig) -> float:
    """Linear decay from ``eps_start`` to ``eps_end`` over ``eps_anneal_steps`` steps.

    With ``eps_anneal_steps`` 0 the decay spans ``eps_fraction * total`` steps instead.
    """
    span = max(1.0, float(config.eps_anneal_steps) or config.eps_fraction * total)
    frac = min(1.0, step / span)
    return config.eps_start + frac * (config.eps_end - config.eps_start)


def train_dqn(
    env: base.BatchEnv, config: DQNConfig, *, mixer: Mixer | None, algo: str, run: base.RunOptions
) -> base.TrainResult:
    """Run the shared Q-learning loop.

    Args:
        env: the batched env.
        config: hyperparameters.
        mixer: None (independent learners) or a module mixing ``(batch, N)`` Q-values with the
            ``(batch, S)`` global state into ``(batch,)``, built by the caller from
            ``split_seed(seed)[2]``.
        algo: name recorded in results and checkpoints.
        run: seed, steps (world steps to reach in total, resumes included), checkpoint folder
            and cadence (in gradient steps), callbacks, resume.

    Returns:
        Curves, losses, the Q-network (as ``policy``) and the resolved config.
    """
    t0 = time.perf_counter()
    n, d, a = env.n_robots, env.obs_size, env.n_actions
    h, lr = config.resolve(
        n,
        env_horizon(env),
        base_lr=BASE_LR,
        shared_reward=config.shared_reward or mixer is not None,
    )
    env_seq, q_seq = split_seed(run.seed)[:2]
    q_net = base.build_seeded(q_seq, lambda: QNetwork(d, a, n, config.hidden, config.agent_id))
    qp = QParts.build(q_net, mixer, lr=lr, seed=run.seed)
    target_q, target_mixer, use_state = qp.target_q, qp.target_mixer, qp.use_state
    state = env.global_state() if use_state else None
    state_size = state.shape[-1] if state is not None else 0
    buffer = buffers.ReplayBuffer(config.buffer_size, n, d, state_size)
    loop = base.TrainLoop(
        algo,
        env,
        run,
        losses=("td", "q_mean", "epsilon"),
        parts=qp.loop_parts(),
        config=resolved_record(
            algo, config, lr, h, env, mixer=type(mixer).__name__ if mixer is not None else None
        ),
        t0=t0,
    )
    loop.resume(" (replay starts empty)")
    batched_steps = 0
    obs = loop.reset(env, env_seq)
    state = env.global_state() if use_state else None
    learn_from = loop.steps + config.learning_starts

    while loop.going():
        # ---- act: epsilon-greedy per agent
        eps = epsilon_at(loop.steps, run.steps, config)
        with torch.no_grad():
            greedy = q_net(torch.from_numpy(obs)).argmax(-1)
        act = qp.explore(greedy, eps, a).numpy()
        next_obs, rewards, term, trunc, info = env.step(act)
        next_state = env.global_state() if use_state else None

        # ---- store: truncated worlds need their final observation, else they are dropped
        real_next, real_next_state, keep = buffers.final_transitions(
            next_obs, next_state, trunc, info
        )
        buffer.add(
            obs=obs[keep],
            actions=act[keep],
            rewards=h.normalise(rewards[keep]).astype(np.float32),
            next_obs=real_next[keep],
            terminated=term[keep],
            state=state[keep] if state is not None else None,
            next_state=real_next_state[keep] if real_next_state is not None else None,
        )
        batched_steps += 1
        loop.record(rewards, term | trunc, info, h.normalise(rewards))
        obs, state = next_obs, next_state

        # ---- learn
        if loop.steps < learn_from or batched_steps % config.train_every or buffer.size == 0:
            continue
        batch = buffer.sample(config.batch_size, qp.g_sample)
        q_taken = q_net(batch["obs"]).gather(-1, batch["actions"][..., None])[..., 0]  # (M, N)
        with torch.no_grad():
            next_act = q_net(batch["next_obs"]).argmax(-1, keepdim=True)
            q_next = target_q(batch["next_obs"]).gather(-1, next_act)[..., 0]  # (M, N)
            not_done = 1.0 - batch["terminated"]
            if mixer is None:
                target = batch["rewards"] + h.gamma * not_done[:, None] * q_next
            else:
                assert target_mixer is not None
                team = batch["rewards"].mean(-1)
                mixed_next = batch.get("next_state", batch["rewards"])
                target = team + h.gamma * not_done * target_mixer(q_next, mixed_next)
        pred = q_taken if mixer is None else mixer(q_taken, batch.get("state", batch["rewards"]))
        loss = nn.functional.smooth_l1_loss(pred, target)
        base.descend(qp.optimizer, loss, qp.params, config.max_grad_norm)
        qp.soft_update(config.tau)
        loop.losses["td"].append(loss.item())
        loop.losses["q_mean"].append(q_taken.mean().item())
        loop.losses["epsilon"].append(eps)
        loop.updated()
    return loop.finish(q_net)


def split_seed(seed: int) -> list[np.random.SeedSequence]:
    """The run's named streams: env, Q-net init, mixer init, exploration, replay sampling."""
    return np.random.SeedSequence(seed).spawn(5)
