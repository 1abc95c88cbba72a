"""The recurrent Q-learning loop behind QMIX, VDN and IQL-DQN: GRU agents on episode replay.

rware and the warehouse are partially observed: a robot sees a few cells around it, so what it
did a few steps ago (which shelf it was heading for) is not in its observation. EPyMARL's
value learners (Papoudakis et al., 2021; uoe-agents/epymarl) give each agent a GRU and learn
from whole episodes; this is that recipe on fleetmind's batched envs:

- **Agent** (:class:`RecurrentQ`, EPyMARL's ``modules/agents/rnn_agent.py``): input = the
  observation, the agent-id one-hot and the agent's previous action one-hot (zeros at an
  episode's first step); a linear layer and ReLU, a GRU cell, a linear layer to Q-values.
  Shared by all agents. Its hidden state starts at zero at each episode's first step and is
  carried from step to step inside the episode (:class:`Actor` while acting; one unroll from
  zero over the stored episode while learning, so both see the same hidden states).
- **Replay** (:class:`~fleetmind.rl.neural.buffers.EpisodeBuffer`): whole episodes; ``B``
  worlds step together and their episodes enter the buffer as they end (rware's all end
  together at 500 steps). One gradient step per episode collected (EPyMARL runs one episode,
  then trains once on a batch of 32).
- **Targets** (:func:`double_q_targets`, EPyMARL's ``learners/q_learner.py``): double Q-learning
  (the online network's argmax, the target network's value), mixed by the target mixer on the
  next global state; no bootstrap past termination; steps past an episode's end (and a
  truncated last step with no final observation) are masked out of the squared TD error
  (:func:`td_loss`). The target networks are hard copies every ``target_every`` gradient steps.
- **Rewards**: rware's own, the §3.3 scale and clip (:mod:`fleetmind.rl.hyper`, a no-op on
  rware's 0/1), then standardised by running moments (EPyMARL's ``standardise_rewards``); the
  mixers train on the team reward, the mean over agents.
- **Exploration**: epsilon-greedy, 1.0 -> 0.05 linearly over 50,000 world steps.

Where the numbers come from: ``DQNConfig``'s docstring (EPyMARL's ``src/config/default.yaml``
and ``src/config/algs/qmix.yaml``, commit 4bcbb1c). The mixers are
:class:`~fleetmind.rl.neural.qmix.QMixer` and :class:`~fleetmind.rl.neural.vdn.SumMixer`; the
feed-forward single-transition loop (:func:`fleetmind.rl.neural.dqn.train_dqn`) stays as the
``recurrent=False`` ablation.

The trained policy (:class:`RecurrentPolicy`) keeps each agent's hidden state and last action
between calls: ``policy(obs)`` steps every agent once and returns its Q-values (its argmax is
taken as the action played); ``policy.sample(obs, generator)`` plays epsilon-greedy at
``eps_end``; ``policy.reset_state()`` starts new episodes (the evaluators call it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fleetmind.rl.neural import base, buffers
from fleetmind.rl.neural.config import resolved_record
from fleetmind.rl.neural.dqn import (
    BASE_LR,
    DQNConfig,
    Mixer,
    QParts,
    epsilon_at,
    split_seed,
    train_dqn,
)
from fleetmind.rl.neural.ppo import env_horizon

__all__ = [
    "Actor",
    "RecurrentPolicy",
    "RecurrentQ",
    "RunningMoments",
    "double_q_targets",
    "learner",
    "td_loss",
    "train_recurrent",
]


class RecurrentQ(nn.Module):
    """EPyMARL's RNN agent, shared by all agents: ``fc -> ReLU -> GRU -> fc`` to Q-values.

    Args:
        obs_size: ``D``.
        n_actions: ``A``.
        n_agents: ``N``.
        hidden: width of the first layer and of the GRU.
        agent_id: append the agent-id one-hot to the input.
        last_action: append the previous action's one-hot to the input.
    """

    def __init__(
        self,
        obs_size: int,
        n_actions: int,
        n_agents: int,
        hidden: int = 64,
        *,
        agent_id: bool = True,
        last_action: bool = True,
    ) -> None:
        super().__init__()
        self.n_agents, self.n_actions, self.hidden = n_agents, n_actions, hidden
        self.agent_id, self.last_action = agent_id, last_action
        in_dim = obs_size + (n_agents if agent_id else 0) + (n_actions if last_action else 0)
        self.fc1 = nn.Linear(in_dim, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.fc2 = nn.Linear(hidden, n_actions)

    def inputs(self, obs: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """``(M, T, N, D)`` observations and ``(M, T, N)`` previous actions (-1: none) -> inputs."""
        parts = [obs]
        if self.agent_id:
            eye = torch.eye(self.n_agents, dtype=obs.dtype)
            parts.append(eye.expand(*obs.shape[:-1], self.n_agents))
        if self.last_action:
            onehot = nn.functional.one_hot(prev.clamp(min=0), self.n_actions).to(obs.dtype)
            parts.append(onehot * (prev >= 0).unsqueeze(-1).to(obs.dtype))
        return torch.cat(parts, dim=-1)

    def forward(
        self, x: torch.Tensor, h0: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Unroll over time: ``(M, T, N, in)`` inputs, ``(M, N, H)`` start state (None: zeros).

        Returns:
            ``(q (M, T, N, A), h (M, N, H))``, the hidden state after the last step.
        """
        m, t, n, _ = x.shape
        z = torch.relu(self.fc1(x)).permute(0, 2, 1, 3).reshape(m * n, t, self.hidden)
        h_in = h0.reshape(1, m * n, self.hidden) if h0 is not None else None
        out, h = self.gru(z, h_in)
        q = self.fc2(out.reshape(m, n, t, self.hidden).permute(0, 2, 1, 3))
        return q, h.reshape(m, n, self.hidden)

    def unroll(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q-values along stored episodes, from a zero hidden state at their first step.

        Args:
            obs: ``(M, T + 1, N, D)``.
            actions: ``(M, T, N)`` actions taken (the input of the step after).

        Returns:
            ``(M, T + 1, N, A)``.
        """
        m, _, n = actions.shape
        prev = torch.cat([torch.full((m, 1, n), -1, dtype=actions.dtype), actions], dim=1)
        q: torch.Tensor = self(self.inputs(obs, prev))[0]
        return q


class Actor:
    """Steps a :class:`RecurrentQ` one env step at a time for ``B`` worlds.

    Holds each world's agents' hidden state and previous action; :meth:`reset` starts new
    episodes in the worlds given (zero hidden state, no previous action).

    Args:
        net: the agent network.
        num_envs: ``B``.
    """

    def __init__(self, net: RecurrentQ, num_envs: int) -> None:
        self.net = net
        self.h = torch.zeros(num_envs, net.n_agents, net.hidden)
        self.prev = torch.full((num_envs, net.n_agents), -1, dtype=torch.int64)

    def q(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, N, D)`` observations -> ``(B, N, A)`` Q-values; the hidden state moves on."""
        with torch.no_grad():
            x = self.net.inputs(obs[:, None], self.prev[:, None])
            q, self.h = self.net(x, self.h)
        out: torch.Tensor = q[:, 0]
        return out

    def commit(self, actions: torch.Tensor) -> None:
        """Record the ``(B, N)`` actions played (the next step's input)."""
        self.prev = actions.to(torch.int64)

    def reset(self, worlds: NDArray[np.bool_] | None = None) -> None:
        """Start new episodes in ``worlds (B,)`` (None: every world)."""
        if worlds is None:
            self.h.zero_()
            self.prev.fill_(-1)
            return
        mask = torch.from_numpy(np.asarray(worlds, dtype=bool))
        self.h[mask] = 0.0
        self.prev[mask] = -1


class RecurrentPolicy(nn.Module):
    """A trained :class:`RecurrentQ` as a stateful policy ``(..., N, D) -> (..., N, A)``.

    Each call is one env step of every world: the hidden states move on and the argmax is
    recorded as the action played (:meth:`sample` records the action it draws instead). A
    call with another batch shape, or :meth:`reset_state`, starts new episodes.

    Args:
        net: the agent network.
        epsilon: exploration rate of :meth:`sample`.
    """

    def __init__(self, net: RecurrentQ, epsilon: float) -> None:
        super().__init__()
        self.net = net
        self.epsilon = epsilon
        self._actor: Actor | None = None
        self._shape: tuple[int, ...] = ()

    def reset_state(self) -> None:
        """Forget the hidden states: the next call starts new episodes."""
        self._actor = None

    def _q(self, obs: torch.Tensor) -> torch.Tensor:
        lead = tuple(obs.shape[:-2])
        if self._actor is None or lead != self._shape:
            self._actor = Actor(self.net, int(np.prod(lead, dtype=np.int64)))
            self._shape = lead
        return self._actor.q(obs.reshape(-1, *obs.shape[-2:]))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """One step: Q-values ``(..., N, A)``; the greedy action is taken as played."""
        q = self._q(obs)
        assert self._actor is not None
        self._actor.commit(q.argmax(-1))
        return q.reshape(*obs.shape[:-1], q.shape[-1])

    def sample(self, obs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One step of epsilon-greedy play at ``epsilon``: actions ``(..., N)``."""
        q = self._q(obs)
        greedy = q.argmax(-1)
        explore = torch.rand(greedy.shape, generator=generator) < self.epsilon
        drawn = torch.where(
            explore, torch.randint(q.shape[-1], greedy.shape, generator=generator), greedy
        )
        assert self._actor is not None
        self._actor.commit(drawn)
        return drawn.reshape(obs.shape[:-1])


class RunningMoments:
    """Running mean and variance of every value seen (Chan et al.'s parallel update)."""

    def __init__(self) -> None:
        self.count = 1e-4  # EPyMARL's RunningMeanStd starts here too: no division by zero
        self.mean = 0.0
        self.var = 1.0

    def update(self, x: torch.Tensor) -> None:
        """Fold the values of ``x`` in."""
        n = float(x.numel())
        if n == 0:
            return
        mean, var = float(x.mean()), float(x.var(unbiased=False))
        delta = mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total
        self.var, self.count = m2 / total, total

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / std``."""
        out: torch.Tensor = (x - self.mean) / max(self.var, 1e-8) ** 0.5
        return out

    def state_dict(self) -> dict[str, float]:
        """The moments, for checkpoints."""
        return {"count": self.count, "mean": self.mean, "var": self.var}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Restore :meth:`state_dict`."""
        self.count, self.mean, self.var = state["count"], state["mean"], state["var"]


MixFn = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]
"""``(q (M, T, N), state (M, T, S) or None) -> (M, T)`` (mixed) or ``(M, T, N)`` (no mixer)."""


def mix_with(mixer: Mixer | None) -> MixFn:
    """A mixer applied over ``(M, T)``; the identity (per-agent values) without one."""

    def mix(q: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        if mixer is None:
            return q
        m, t, n = q.shape
        s = state.reshape(m * t, -1) if state is not None else q.new_zeros(m * t, 0)
        out: torch.Tensor = mixer(q.reshape(m * t, n), s).reshape(m, t)
        return out

    return mix


def double_q_targets(
    online_next: torch.Tensor,
    target_next: torch.Tensor,
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
    mix_next: MixFn,
    next_state: torch.Tensor | None,
) -> torch.Tensor:
    """One-step double-Q targets ``r + gamma * (1 - terminated) * mix'(Q'(o', argmax Q(o')))``.

    Args:
        online_next: ``(M, T, N, A)`` the online network's Q-values at the next steps (picks
            the actions).
        target_next: ``(M, T, N, A)`` the target network's (values them).
        rewards: ``(M, T)`` team rewards (with a mixer) or ``(M, T, N)`` per agent.
        terminated: ``(M, T)`` the step ended its episode (no future).
        gamma: discount.
        mix_next: the target mixer (:func:`mix_with`).
        next_state: ``(M, T, S)`` global states at the next steps (None: not stored).

    Returns:
        Targets shaped like ``rewards``, without gradient.
    """
    with torch.no_grad():
        pick = online_next.argmax(-1, keepdim=True)
        value = mix_next(target_next.gather(-1, pick)[..., 0], next_state)
        alive = 1.0 - terminated
        if value.dim() == 3:
            alive = alive[..., None]
        return rewards + gamma * alive * value


def td_loss(pred: torch.Tensor, target: torch.Tensor, filled: torch.Tensor) -> torch.Tensor:
    """Mean squared TD error over the filled steps only (``filled (M, T)``)."""
    mask = filled if pred.dim() == 2 else filled[..., None].expand_as(pred)
    err = (pred - target) * mask
    return (err**2).sum() / mask.sum().clamp(min=1.0)


def train_recurrent(
    env: base.BatchEnv, config: DQNConfig, *, mixer: Mixer | None, algo: str, run: base.RunOptions
) -> base.TrainResult:
    """Run the recurrent Q-learning loop (see the module docstring).

    The arguments are :func:`~fleetmind.rl.neural.dqn.train_dqn`'s (``config``'s ``recurrent``
    fields included).

    Returns:
        Curves, losses, the :class:`RecurrentPolicy` (as ``policy``) and the resolved config.
    """
    t0 = time.perf_counter()
    n, d, a, b = env.n_robots, env.obs_size, env.n_actions, env.num_envs
    horizon = env_horizon(env)
    h, lr = config.resolve(
        n, horizon, base_lr=BASE_LR, shared_reward=config.shared_reward or mixer is not None
    )
    env_seq, q_seq = split_seed(run.seed)[:2]
    built = base.build_seeded(
        q_seq,
        lambda: RecurrentQ(
            d, a, n, config.rnn_hidden, agent_id=config.agent_id, last_action=config.last_action
        ),
    )
    assert isinstance(built, RecurrentQ)
    net = built
    qp = QParts.build(net, mixer, lr=lr, seed=run.seed)
    target_net, target_mixer, use_state = qp.target_q, qp.target_mixer, qp.use_state
    moments = RunningMoments()
    state_size = int(env.global_state().shape[-1]) if use_state else 0
    buffer = buffers.EpisodeBuffer(config.episodes_buffer, horizon, b, n, d, state_size)
    mix, mix_target = mix_with(mixer), mix_with(target_mixer)
    counters = {"since_target": 0}
    loop = base.TrainLoop(
        algo,
        env,
        run,
        losses=("td", "q_mean", "epsilon"),
        parts={**qp.loop_parts(), "reward_moments": moments},
        config=resolved_record(
            algo,
            config,
            lr,
            h,
            env,
            mixer=type(mixer).__name__ if mixer is not None else None,
            agent="gru",
        ),
        t0=t0,
        extra=lambda: {"since_target": counters["since_target"]},
    )
    ck = loop.resume(" (replay starts empty)")
    if ck is not None:
        counters["since_target"] = int(ck.get("since_target", 0))
    live = RecurrentPolicy(net, config.eps_end)  # what callbacks evaluate mid-run
    obs = loop.reset(env, env_seq)
    state = env.global_state() if use_state else None
    actor = Actor(net, b)
    learn_from = loop.steps + config.learning_starts
    pending = 0.0  # gradient steps owed to the episodes collected

    def learn(eps: float) -> None:
        batch = buffer.sample(config.episodes_batch, qp.g_sample)
        q_all = net.unroll(batch["obs"], batch["actions"])  # (M, T + 1, N, A)
        q_taken = q_all[:, :-1].gather(-1, batch["actions"][..., None])[..., 0]  # (M, T, N)
        with torch.no_grad():
            q_target = target_net.unroll(batch["obs"], batch["actions"])
        rewards = batch["rewards"] if mixer is None else batch["rewards"].mean(-1)
        if config.standardise_rewards:
            filled = batch["filled"] if mixer is not None else batch["filled"][..., None]
            moments.update(rewards[filled.expand_as(rewards) > 0])
            rewards = moments.standardise(rewards)
        states = batch.get("state")
        target = double_q_targets(
            q_all[:, 1:].detach(),
            q_target[:, 1:],
            rewards,
            batch["terminated"],
            h.gamma,
            mix_target,
            states[:, 1:] if states is not None else None,
        )
        pred = mix(q_taken, states[:, :-1] if states is not None else None)
        loss = td_loss(pred, target, batch["filled"])
        base.descend(qp.optimizer, loss, qp.params, config.max_grad_norm)
        counters["since_target"] += 1
        if config.target_every:
            if counters["since_target"] >= config.target_every:
                target_net.load_state_dict(net.state_dict())
                if mixer is not None and target_mixer is not None:
                    target_mixer.load_state_dict(mixer.state_dict())
                counters["since_target"] = 0
        else:
            qp.soft_update(config.tau)
        mask = batch["filled"][..., None]
        loop.losses["td"].append(loss.item())
        loop.losses["q_mean"].append(float((q_taken.detach() * mask).sum() / (mask.sum() * n)))
        loop.losses["epsilon"].append(eps)
        loop.updated(policy=live)

    while loop.going():
        # ---- act: epsilon-greedy per agent, the GRU carried from the episode's first step
        eps = epsilon_at(loop.steps, run.steps, config)
        greedy = actor.q(torch.from_numpy(obs)).argmax(-1)
        act_t = qp.explore(greedy, eps, a)
        actor.commit(act_t)
        act = act_t.numpy()
        next_obs, rewards, term, trunc, info = env.step(act)
        next_state = env.global_state() if use_state else None
        full = buffer.add_step(
            obs=obs,
            actions=act,
            rewards=h.normalise(rewards).astype(np.float32),
            terminated=term,
            state=state,
        )

        # ---- episodes that ended (or filled the staging area) enter the buffer
        done = term | trunc
        ending = done | full
        if ending.any():
            worlds = np.flatnonzero(ending)
            final_obs, final_state, bootstrap = _finals(
                worlds, next_obs, next_state, trunc, done, info
            )
            buffer.end(worlds, final_obs=final_obs, final_state=final_state, bootstrap=bootstrap)
            actor.reset(ending)
            pending += config.updates_per_episode * len(worlds)
        loop.record(rewards, done, info, h.normalise(rewards))
        obs, state = next_obs, next_state

        # ---- learn: the gradient steps owed, once enough steps and an episode are in
        while pending >= 1.0 and buffer.size and loop.steps >= learn_from:
            if run.out_of_time(t0):
                break
            pending -= 1.0
            learn(eps)
    return loop.finish(RecurrentPolicy(net, config.eps_end))


def _finals(
    worlds: NDArray[np.int64],
    next_obs: NDArray[np.float32],
    next_state: NDArray[np.float32] | None,
    trunc: NDArray[np.bool_],
    done: NDArray[np.bool_],
    info: dict[str, Any],
) -> tuple[NDArray[np.float32], NDArray[np.float32] | None, NDArray[np.bool_]]:
    """What the ending episodes of ``worlds`` reached, and whether a truncation can bootstrap.

    A world that did not end (its episode only filled the staging area) was not reset, so
    ``next_obs`` is its real next observation; a finished world was reset in place, so its
    final observation is ``info["final_obs"]`` (terminated: never bootstrapped anyway).
    """
    real_next, real_state, keep = buffers.final_transitions(next_obs, next_state, trunc, info)
    final_obs = real_next[worlds]
    final_state = real_state[worlds] if real_state is not None else None
    bootstrap = keep[worlds] | ~done[worlds]
    return final_obs, final_state, bootstrap


def learner(
    algo: str,
    make_mixer: Callable[[base.BatchEnv, DQNConfig], Mixer] | None,
    doc: str,
) -> base.Learner[DQNConfig]:
    """A Q-learner's ``train``: the mixer (if any) built from the run's seed, then the loop.

    The loop is :func:`train_recurrent` (GRU agents, episode replay) when ``config.recurrent``,
    else :func:`fleetmind.rl.neural.dqn.train_dqn` (feed-forward, transitions).

    Args:
        algo: name recorded in results and checkpoints.
        make_mixer: builds the mixer for an env and config; None for independent learners.
        doc: the ``train`` docstring.
    """

    def run(env: base.BatchEnv, cfg: DQNConfig, options: base.RunOptions) -> base.TrainResult:
        mixer = (
            base.build_seeded(split_seed(options.seed)[2], lambda: make_mixer(env, cfg))
            if make_mixer is not None
            else None
        )
        if cfg.recurrent:
            return train_recurrent(env, cfg, mixer=mixer, algo=algo, run=options)
        return train_dqn(env, cfg, mixer=mixer, algo=algo, run=options)

    return base.Learner(run, DQNConfig, doc)
