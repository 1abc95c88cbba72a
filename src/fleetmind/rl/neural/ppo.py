"""The parameter-shared PPO loop behind IPPO and MAPPO (CleanRL's ``ppo.py``, multi-agent).

One actor shared by all agents (agent-id one-hot appended to each observation), one critic whose
input is the only difference between the two algorithms: the agent's own observation for IPPO
(:mod:`fleetmind.rl.neural.ippo`), the global state for MAPPO (:mod:`fleetmind.rl.neural.mappo`).
Each agent learns from its own reward (the env's reward mode decides what that is).

Per update: collect ``rollout_len`` batched steps of every world; GAE(lambda) advantages per
agent (bootstrap on truncation, none on termination; see :func:`fleetmind.rl.neural.buffers.gae`);
``epochs`` passes of clipped-surrogate PPO over ``minibatches`` shuffled minibatches of
(step, world) pairs, all agents of a pair together.

The loop drives an :class:`ActorCriticModel` (act, value, evaluate): :class:`ActorCritic` for
IPPO/MAPPO, where agents sample independently, and the Multi-Agent Transformer of
:mod:`fleetmind.rl.neural.mat`, which decodes agent after agent; the clipped objective is the
same per-agent one for both.

When a world hits its time limit the env resets it in place. If ``info`` carries
``final_obs`` (and ``final_state``), the critic's value of the final state bootstraps the
truncated step; otherwise the value of the state acted in stands in for it (a one-step-off
estimate; the warehouse vector env does not report final observations yet).

Hyperparameters follow FIELD-NOTES §3.3 through :func:`fleetmind.rl.hyper.resolve`: gamma by
horizon (the env's time limit), learning rate ``3e-4`` halved when several agents share one
reward, rewards scaled and clipped to ``[-1, 1]``. Any value in :class:`PPOConfig` overrides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Unpack

import numpy as np
import torch
from torch import nn

from fleetmind.errors import ConfigError, check_range
from fleetmind.rl import hyper
from fleetmind.rl.neural import base, buffers
from fleetmind.rl.neural.config import RuleConfig, resolved_record

BASE_LR = 3e-4
CriticKind = Literal["local", "global"]


@dataclass(frozen=True)
class PPOConfig(RuleConfig):
    """PPO hyperparameters, on top of the §3.3 rule inputs of :class:`.config.RuleConfig`.

    The learning-rate rule's base rate is 3e-4 (halved for several agents on one shared reward).

    Attributes:
        rollout_len: batched steps per update.
        epochs: passes over each rollout.
        minibatches: minibatches per pass.
        lam: GAE lambda.
        clip: PPO ratio clip.
        ent_coef: entropy bonus weight (at the start, when ``ent_coef_final`` is set).
        ent_coef_final: when set, the entropy weight moves linearly from ``ent_coef`` to this
            value over the run's ``steps`` (explore early, sharpen late).
        vf_coef: value loss weight.
        max_grad_norm: gradient clipping.
        hidden: hidden layer widths of actor and critic.
        agent_id: append the agent-id one-hot to actor (and critic) inputs.
        activation: hidden activation of actor and critic (``tanh`` or ``relu``).
        feature_norm: a ``LayerNorm`` over actor and critic inputs (MAPPO's default).
        value_norm: the critic learns normalised targets (:class:`~.base.ValueNorm`).
    """

    rollout_len: int = 64
    epochs: int = 4
    minibatches: int = 4
    lam: float = 0.95
    clip: float = 0.2
    ent_coef: float = 0.01
    ent_coef_final: float | None = None
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: tuple[int, ...] = (64, 64)
    agent_id: bool = True
    activation: str = "tanh"
    feature_norm: bool = False
    value_norm: bool = False

    def net_options(self) -> base.NetOptions:
        """The actor's and critic's network options."""
        return {"activation": self.activation, "feature_norm": self.feature_norm}

    def __post_init__(self) -> None:
        cls = type(self).__name__  # MAT's config extends this one
        if self.activation not in base.ACTIVATIONS:
            raise ConfigError(
                f"{cls}.activation must be one of {sorted(base.ACTIVATIONS)}, "
                f"got {self.activation!r}"
            )
        for name in ("rollout_len", "epochs", "minibatches"):
            check_range(f"{cls}.{name}", getattr(self, name), low=1)
        if self.lr is not None:
            check_range(f"{cls}.lr", self.lr, above=0)
        check_range(f"{cls}.lam", self.lam, low=0, high=1)


class Actor(base.AgentMLP):
    """Shared policy: ``(..., N, D)`` observations -> ``(..., N, A)`` logits."""

    def __init__(
        self,
        obs_size: int,
        n_actions: int,
        n_agents: int,
        hidden: Sequence[int],
        agent_id: bool,
        **options: Unpack[base.NetOptions],
    ) -> None:
        super().__init__(obs_size, n_actions, n_agents, hidden, agent_id, out_gain=0.01, **options)
        self.obs_size = obs_size
        self.n_actions = n_actions
        self.hidden = tuple(hidden)


class ActorCriticModel(nn.Module):
    """What the PPO loop trains: acts, values and re-scores a batch of worlds' joint actions.

    The loop needs three things of a model (all on ``(..., N, D)`` observations and, when
    ``needs_state``, ``(..., S)`` global states): :meth:`act` while collecting (sampled actions,
    their log-probabilities and the values, one per agent), :meth:`value` for bootstraps, and
    :meth:`evaluate` in the update (log-probabilities and entropies of stored actions, values).
    :class:`ActorCritic` is IPPO's and MAPPO's (independent per-agent sampling);
    :class:`fleetmind.rl.neural.mat.MAT` decodes the agents' actions one after another.
    """

    needs_state: bool = False

    def act(
        self, obs: torch.Tensor, state: torch.Tensor | None, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample: ``(actions (..., N), log-probs (..., N), values (..., N))``."""
        raise NotImplementedError

    def value(self, obs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """Values ``(..., N)``."""
        raise NotImplementedError

    def evaluate(
        self, obs: torch.Tensor, state: torch.Tensor | None, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log-probs (M, N), entropies (M, N), values (M, N))`` of stored ``actions (M, N)``."""
        raise NotImplementedError

    def checkpoint_state(self) -> dict[str, Any]:
        """State dicts by checkpoint key."""
        raise NotImplementedError

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`checkpoint_state` saved."""
        raise NotImplementedError

    def policy(self) -> nn.Module:
        """The module a :class:`~fleetmind.rl.neural.base.TrainResult` holds: obs -> logits."""
        raise NotImplementedError


class ActorCritic(ActorCriticModel):
    """The shared :class:`Actor` (agents sample independently) and a critic.

    Args:
        actor: the policy.
        critic: ``(..., N, D)`` observations (``"local"``) or ``(..., S)`` states (``"global"``)
            -> ``(..., N)`` values.
        critic_kind: what the critic reads.
    """

    def __init__(self, actor: Actor, critic: nn.Module, critic_kind: CriticKind) -> None:
        super().__init__()
        # Registered in this order so parameters() lists the actor's first, as before.
        self.actor = actor
        self.critic = critic
        self.critic_kind = critic_kind
        self.needs_state = critic_kind == "global"

    def value(self, obs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """The critic on the observations or the global state."""
        out: torch.Tensor = self.critic(state if self.needs_state else obs)
        return out

    def act(
        self, obs: torch.Tensor, state: torch.Tensor | None, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every agent samples from its own logits."""
        logits = self.actor(obs)
        act = base.sample_categorical(logits, generator)
        logp = torch.log_softmax(logits, -1).gather(-1, act[..., None])[..., 0]
        return act, logp, self.value(obs, state)

    def evaluate(
        self, obs: torch.Tensor, state: torch.Tensor | None, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs and entropies of each agent's own categorical."""
        logp_all = torch.log_softmax(self.actor(obs), -1)
        logp = logp_all.gather(-1, actions[..., None])[..., 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, entropy, self.value(obs, state)

    def checkpoint_state(self) -> dict[str, Any]:
        """``actor`` and ``critic`` state dicts."""
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict()}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Restore actor and critic."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])

    def policy(self) -> nn.Module:
        """The actor."""
        return self.actor


def resolve_hyper(
    config: PPOConfig | Any, n_agents: int, horizon: int
) -> tuple[hyper.Hyper, float]:
    """The §3.3 rules applied to a config; returns ``(hyper, learning rate)``."""
    resolved: tuple[hyper.Hyper, float] = config.resolve(n_agents, horizon, base_lr=BASE_LR)
    return resolved


def env_horizon(env: Any) -> int:
    """The env's time limit (``env.sim.max_steps`` or ``env.max_steps``), else 500."""
    for holder in (getattr(env, "sim", None), env):
        value = getattr(holder, "max_steps", None)
        if isinstance(value, int) and value > 0:
            return value
    return 500


def split_seed(seed: int) -> list[np.random.SeedSequence]:
    """The run's named streams: env, actor init, critic init, action sampling, minibatch shuffle."""
    return np.random.SeedSequence(seed).spawn(5)


def train_ppo(
    env: base.BatchEnv,
    config: PPOConfig,
    *,
    model: ActorCriticModel,
    algo: str,
    run: base.RunOptions,
    describe: dict[str, Any] | None = None,
) -> base.TrainResult:
    """Run parameter-shared PPO on a batched multi-agent env.

    Args:
        env: the batched env (see :class:`fleetmind.rl.neural.base.BatchEnv`).
        config: hyperparameters.
        model: the actor-critic (an :class:`ActorCritic`, or MAT's transformer), built by the
            caller from ``split_seed(seed)`` (actor stream ``[1]``, critic stream ``[2]``).
        algo: name recorded in results and checkpoints.
        run: seed, steps (world steps to reach in total, resumes included), checkpoint folder
            and cadence, callbacks, resume.
        describe: extra entries for the resolved config (e.g. ``{"critic": "global"}``).

    Returns:
        Curves, losses, ``model.policy()`` and the resolved config.
    """
    t0 = time.perf_counter()
    n, d, b = env.n_robots, env.obs_size, env.num_envs
    h, lr = resolve_hyper(config, n, env_horizon(env))
    env_seq, _actor_seq, _critic_seq, sample_seq, shuffle_seq = split_seed(run.seed)
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=lr, eps=1e-5)
    g_sample = base.torch_generator(sample_seq)
    g_shuffle = base.torch_generator(shuffle_seq)
    vnorm = base.ValueNorm() if config.value_norm else None

    def denorm(v: torch.Tensor) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = v.numpy()
        return vnorm.denormalise(out) if vnorm is not None else out

    loop = base.TrainLoop(
        algo,
        env,
        run,
        losses=("policy", "value", "entropy", "approx_kl"),
        parts={"optimizer": optimizer, "g_sample": g_sample, "g_shuffle": g_shuffle},
        config=resolved_record(algo, config, lr, h, env, **(describe or {})),
        t0=t0,
        extra=lambda: {
            **model.checkpoint_state(),
            **({"value_norm": vnorm.state_dict()} if vnorm is not None else {}),
        },
    )
    ck = loop.resume()
    if ck is not None:
        model.load_checkpoint_state(ck)
        # Checkpoints written before value normalisation have no moments to restore.
        if vnorm is not None and "value_norm" in ck:
            vnorm.load_state_dict(ck["value_norm"])

    obs = loop.reset(env, env_seq)
    state = env.global_state() if model.needs_state else None
    buf = buffers.RolloutBuffer(
        config.rollout_len, b, n, d, state.shape[-1] if state is not None else 0
    )

    def tensor(x: np.ndarray[Any, Any] | None) -> torch.Tensor | None:
        return torch.from_numpy(x) if x is not None else None

    while loop.going():
        buf.reset()
        with torch.no_grad():
            for _ in range(config.rollout_len):
                act, logp, value = model.act(torch.from_numpy(obs), tensor(state), g_sample)
                next_obs, rewards, term, trunc, info = env.step(act.numpy())
                values = denorm(value)
                final_values = values
                has_final = "final_obs" in info and (not model.needs_state or "final_state" in info)
                if trunc.any() and has_final:
                    final_values = denorm(
                        model.value(
                            torch.from_numpy(info["final_obs"]), tensor(info.get("final_state"))
                        )
                    )
                learned = h.normalise(rewards).astype(np.float32)
                buf.add(
                    obs=obs,
                    state=state,
                    actions=act.numpy(),
                    logprobs=logp.numpy(),
                    rewards=learned,
                    values=values,
                    terminated=term,
                    truncated=trunc,
                    final_values=final_values,
                )
                loop.record(rewards, term | trunc, info, learned)
                obs = next_obs
                state = env.global_state() if model.needs_state else None
            last_value = denorm(model.value(torch.from_numpy(obs), tensor(state)))
        adv_np, ret_np = buf.compute(last_value, h.gamma, config.lam)

        t_len = config.rollout_len
        flat_obs = torch.from_numpy(buf.obs.reshape(t_len * b, n, d))
        flat_state = torch.from_numpy(buf.state.reshape(t_len * b, -1))
        flat_act = torch.from_numpy(buf.actions.reshape(t_len * b, n))
        flat_logp = torch.from_numpy(buf.logprobs.reshape(t_len * b, n))
        flat_adv = torch.from_numpy(adv_np.reshape(t_len * b, n).astype(np.float32))
        flat_ret = torch.from_numpy(ret_np.reshape(t_len * b, n).astype(np.float32))
        if vnorm is not None:
            vnorm.update(flat_ret)
            flat_ret = vnorm.normalise(flat_ret)
        stats: dict[str, list[float]] = {k: [] for k in loop.losses}
        ent_coef = config.ent_coef
        if config.ent_coef_final is not None:
            frac = min(1.0, loop.steps / run.steps)
            ent_coef += frac * (config.ent_coef_final - config.ent_coef)
        for _ in range(config.epochs):
            for idx in buf.minibatches(config.minibatches, g_shuffle):
                new_logp, entropies, new_values = model.evaluate(
                    flat_obs[idx], flat_state[idx] if model.needs_state else None, flat_act[idx]
                )
                entropy = entropies.mean()
                # Per-agent ratios and advantages (each agent's own reward and value; MAT's
                # clipped objective is written per agent too).
                log_ratio = new_logp - flat_logp[idx]
                ratio = log_ratio.exp()
                mb_adv = flat_adv[idx]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio, -mb_adv * ratio.clamp(1 - config.clip, 1 + config.clip)
                ).mean()
                v_loss = 0.5 * ((new_values - flat_ret[idx]) ** 2).mean()
                loss = pg_loss - ent_coef * entropy + config.vf_coef * v_loss
                base.descend(optimizer, loss, params, config.max_grad_norm)
                with torch.no_grad():
                    kl = ((ratio - 1) - log_ratio).mean()
                stats["policy"].append(pg_loss.item())
                stats["value"].append(v_loss.item())
                stats["entropy"].append(entropy.item())
                stats["approx_kl"].append(kl.item())
        for k, v in stats.items():
            loop.losses[k].append(float(np.mean(v)))
        loop.updated(every=1, window=1, policy=model.policy())
    return loop.finish(model.policy())


def learner(
    algo: str,
    critic_kind: CriticKind,
    make_critic: Callable[[base.BatchEnv, PPOConfig], nn.Module],
    doc: str,
) -> base.Learner[PPOConfig]:
    """A PPO learner's ``train``: actor and critic built from the run's seed, then train_ppo.

    Args:
        algo: name recorded in results and checkpoints.
        critic_kind: what the critic reads (see :class:`ActorCritic`).
        make_critic: builds the critic for an env and config.
        doc: the ``train`` docstring.
    """

    def run(env: base.BatchEnv, cfg: PPOConfig, options: base.RunOptions) -> base.TrainResult:
        seqs = split_seed(options.seed)
        critic = base.build_seeded(seqs[2], lambda: make_critic(env, cfg))
        actor = base.build_seeded(
            seqs[1],
            lambda: Actor(
                env.obs_size,
                env.n_actions,
                env.n_robots,
                cfg.hidden,
                cfg.agent_id,
                **cfg.net_options(),
            ),
        )
        assert isinstance(actor, Actor)
        model = ActorCritic(actor, critic, critic_kind)
        return train_ppo(
            env, cfg, model=model, algo=algo, run=options, describe={"critic": critic_kind}
        )

    return base.Learner(run, PPOConfig, doc)
