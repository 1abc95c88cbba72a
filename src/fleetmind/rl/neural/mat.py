"""MAT: the Multi-Agent Transformer (Wen et al., 2022), trained with PPO.

Multi-agent decision making as sequence modelling. The agents' observations form a sequence of
``N`` tokens (agent id appended, so agents are told apart):

- the **encoder** (self-attention blocks over all agents) turns them into representations
  ``ô_1..ô_N`` and a value per agent, ``V(ô_i)``;
- the **decoder** emits the actions agent after agent: agent ``i``'s logits depend on all
  representations and on the actions ``a_1..a_{i-1}`` already chosen (a start token, then the
  previous agents' one-hot actions, under causal masks). Acting is autoregressive (``N``
  decoder passes, one per agent, each on its own position with the earlier positions' keys
  and values cached); training is teacher-forced (one pass over the stored joint action gives
  every agent's log-probability). The decoder block is MAT's: masked
  self-attention over the action tokens, then masked attention with the encoder's
  representations as queries and the action tokens as keys and values, then an MLP.

The joint policy factorises as ``pi(a | o) = prod_i pi_i(a_i | o, a_1..a_{i-1})``. Training is
the shared PPO loop (:func:`fleetmind.rl.neural.ppo.train_ppo`: rollouts over every world of
the vector env, GAE from :mod:`~fleetmind.rl.neural.buffers`, the §3.3 rules): its clipped
objective is written on the per-agent ratios
``pi_i(a_i | o, a_<i) / pi_i_old(a_i | o, a_<i)`` with each agent's own advantage, as MAT's
code does. Value normalisation is :class:`~fleetmind.rl.neural.ppo.PPOConfig`'s
``value_norm`` (off by default; MAT's own code uses PopArt-style value norms).

Execution needs all agents' observations at once (the encoder attends over them, and agent
``i`` waits for the actions of agents before it), so MAT is not a decentralised policy and does
not fit the dispatch tier's RL executor, which ranks each robot's actions from that robot's own
111-float observation (:class:`fleetmind.rl.nav.NavPolicy`).

Kept small for 2 CPU cores: one block, 64 wide, one head by default (:class:`MATConfig`).

Speed without new maths (``tests/rl/test_mat_fast.py`` holds each against the plain forms):
attention runs through ``scaled_dot_product_attention`` on the ``nn.MultiheadAttention``
modules' own weights (the modules stay, so parameter names and checkpoints are unchanged),
action tokens are looked up in :meth:`MAT.token_table` rather than embedded as one-hots, and
acting caches keys and values instead of re-decoding each agent's prefix.

Usage::

    from fleetmind.envs import make_vector
    from fleetmind.rl.neural import mat
    result = mat.train(make_vector("warehouse-tiny", 2, 8, seed=0), seed=0, steps=20_000)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from fleetmind.errors import ConfigError, check_range
from fleetmind.rl.neural import base
from fleetmind.rl.neural.ppo import ActorCriticModel, PPOConfig, split_seed, train_ppo

__all__ = ["MAT", "MATConfig", "MATPolicy", "train"]


@dataclass(frozen=True)
class MATConfig(PPOConfig):
    """MAT's hyperparameters: :class:`~fleetmind.rl.neural.ppo.PPOConfig`'s plus the model's.

    Attributes:
        embed: token width.
        heads: attention heads (must divide ``embed``).
        blocks: encoder blocks and decoder blocks (as many of each).
        hidden: hidden layer widths of the value head and the action head.
    """

    embed: int = 64
    heads: int = 1
    blocks: int = 1
    hidden: tuple[int, ...] = (64,)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("embed", "heads", "blocks"):
            check_range(f"MATConfig.{name}", getattr(self, name), low=1)
        if self.embed % self.heads:
            raise ConfigError(
                f"MATConfig.embed must be a multiple of heads, got {self.embed} and {self.heads}"
            )


def _mlp_block(embed: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(embed, embed), nn.GELU(), nn.Linear(embed, embed))


# Attention. The blocks keep ``nn.MultiheadAttention`` modules as their parameter holders (so
# the initialisation and the state-dict names are those of every MAT checkpoint), but compute
# with ``F.scaled_dot_product_attention`` on those modules' own projections: the module's
# forward spends more time checking its arguments than attending over 2-4 tokens. The maths is
# the module's (no dropout, no bias_k/v, scale 1/sqrt(head width)).


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``(M, L, E) -> (M, H, L, E / H)``."""
    m, length, e = x.shape
    return x.view(m, length, heads, e // heads).transpose(1, 2)


def _queries(attn: nn.MultiheadAttention, x: torch.Tensor) -> torch.Tensor:
    """The attention's query projection of ``x (M, L, E)``, split into heads."""
    e = attn.embed_dim
    return _heads(F.linear(x, attn.in_proj_weight[:e], attn.in_proj_bias[:e]), attn.num_heads)


def _keys_values(attn: nn.MultiheadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention's key and value projections of ``x (M, L, E)``, split into heads."""
    e, w, b = attn.embed_dim, attn.in_proj_weight, attn.in_proj_bias
    k = F.linear(x, w[e : 2 * e], b[e : 2 * e])
    v = F.linear(x, w[2 * e :], b[2 * e :])
    return _heads(k, attn.num_heads), _heads(v, attn.num_heads)


def _attend(
    attn: nn.MultiheadAttention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
) -> torch.Tensor:
    """Heads ``(M, H, Lq, d)`` attend over ``(M, H, Lk, d)``; merged and projected ``(M, Lq, E)``.

    ``causal``: query ``i`` sees keys ``0..i`` only (``Lq == Lk``).
    """
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    m, h, length, d = out.shape
    merged: torch.Tensor = attn.out_proj(out.transpose(1, 2).reshape(m, length, h * d))
    return merged


def _self_attention(attn: nn.MultiheadAttention, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """``attn(x, x, x)`` (under a causal mask if ``causal``), ``(M, L, E) -> (M, L, E)``."""
    e, h = attn.embed_dim, attn.num_heads
    w, b = attn.in_proj_weight, attn.in_proj_bias
    q, k, v = (F.linear(x, w[j * e : (j + 1) * e], b[j * e : (j + 1) * e]) for j in range(3))
    return _attend(attn, _heads(q, h), _heads(k, h), _heads(v, h), causal)


class EncodeBlock(nn.Module):
    """Self-attention over all agents' tokens, then an MLP (post-norm, as MAT)."""

    def __init__(self, embed: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.ln1 = nn.LayerNorm(embed)
        self.ln2 = nn.LayerNorm(embed)
        self.mlp = _mlp_block(embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(M, N, E) -> (M, N, E)``."""
        x = self.ln1(x + _self_attention(self.attn, x, causal=False))
        out: torch.Tensor = self.ln2(x + self.mlp(x))
        return out


class DecodeCache:
    """What incremental decoding keeps of one decode block for the positions done so far.

    Keys and values of both attentions (``(M, H, i, E / H)`` after ``i`` positions; grown by
    concatenation, not written in place, so decoding stays differentiable) and the cross
    attention's queries (from the encoder's representations, known before decoding starts).

    Args:
        block: the decode block.
        rep: the encoder's representations ``(M, N, E)``.
    """

    def __init__(self, block: DecodeBlock, rep: torch.Tensor) -> None:
        m, _, e = rep.shape
        h = block.attn1.num_heads
        none = rep.new_empty(m, h, 0, e // h)
        self.k1, self.v1, self.k2, self.v2 = none, none, none, none
        self.q2 = _queries(block.attn2, rep)
        self.rep = rep


class DecodeBlock(nn.Module):
    """Masked self-attention over action tokens, masked attention from the encoder, an MLP."""

    def __init__(self, embed: int, heads: int) -> None:
        super().__init__()
        self.attn1 = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.attn2 = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.ln1 = nn.LayerNorm(embed)
        self.ln2 = nn.LayerNorm(embed)
        self.ln3 = nn.LayerNorm(embed)
        self.mlp = _mlp_block(embed)

    def forward(self, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        """Action tokens ``x (M, K, E)`` and encoder outputs ``rep (M, K, E)`` -> ``(M, K, E)``.

        Position ``i`` sees action tokens ``0..i`` only (start token and ``a_1..a_i``).
        """
        x = self.ln1(x + _self_attention(self.attn1, x, causal=True))
        k, v = _keys_values(self.attn2, x)
        x = self.ln2(rep + _attend(self.attn2, _queries(self.attn2, rep), k, v, causal=True))
        out: torch.Tensor = self.ln3(x + self.mlp(x))
        return out

    def step(self, x: torch.Tensor, cache: DecodeCache, i: int) -> torch.Tensor:
        """Position ``i`` alone: its action token ``x (M, 1, E)`` -> its output ``(M, 1, E)``.

        Exactly :meth:`forward`'s position ``i``: under the causal masks it reads positions
        ``0..i`` only, whose keys and values ``cache`` holds from the earlier calls (positions
        ``0..i-1``, in order) and this one; no mask is needed.
        """
        h = self.attn1.num_heads
        q, k, v = F.linear(x, self.attn1.in_proj_weight, self.attn1.in_proj_bias).chunk(3, -1)
        cache.k1 = torch.cat([cache.k1, _heads(k, h)], 2)
        cache.v1 = torch.cat([cache.v1, _heads(v, h)], 2)
        x = self.ln1(x + _attend(self.attn1, _heads(q, h), cache.k1, cache.v1, causal=False))
        k, v = _keys_values(self.attn2, x)
        cache.k2, cache.v2 = torch.cat([cache.k2, k], 2), torch.cat([cache.v2, v], 2)
        q2 = cache.q2[:, :, i : i + 1]
        x = self.ln2(
            cache.rep[:, i : i + 1] + _attend(self.attn2, q2, cache.k2, cache.v2, causal=False)
        )
        out: torch.Tensor = self.ln3(x + self.mlp(x))
        return out


class MAT(ActorCriticModel):
    """The Multi-Agent Transformer: encoder (values) and autoregressive decoder (actions).

    Args:
        obs_size: ``D``.
        n_actions: ``A``.
        n_agents: ``N``.
        config: the model's sizes (``embed``, ``heads``, ``blocks``, ``hidden``, ``agent_id``).
    """

    needs_state = False

    def __init__(self, obs_size: int, n_actions: int, n_agents: int, config: MATConfig) -> None:
        super().__init__()
        e, heads = config.embed, config.heads
        self.n_agents = n_agents
        self.n_actions = n_actions
        self.agent_id = config.agent_id
        in_dim = obs_size + (n_agents if config.agent_id else 0)
        self.obs_embed = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, e), nn.GELU())
        self.enc_ln = nn.LayerNorm(e)
        self.encoder = nn.ModuleList(EncodeBlock(e, heads) for _ in range(config.blocks))
        self.value_head = base.mlp(e, 1, config.hidden, activation=nn.GELU)
        # Action tokens: one-hot over A actions plus a start flag (the first agent's input).
        self.act_embed = nn.Sequential(nn.Linear(n_actions + 1, e, bias=False), nn.GELU())
        self.dec_ln = nn.LayerNorm(e)
        self.decoder = nn.ModuleList(DecodeBlock(e, heads) for _ in range(config.blocks))
        self.action_head = base.mlp(e, n_actions, config.hidden, activation=nn.GELU, out_gain=0.01)

    # ----------------------------------------------------------------- the two halves

    def encode(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(M, N, D)`` -> representations ``(M, N, E)`` and values ``(M, N)``."""
        x = base.with_agent_id(obs, self.n_agents) if self.agent_id else obs
        rep = self.enc_ln(self.obs_embed(x))
        for block in self.encoder:
            rep = block(rep)
        return rep, self.value_head(rep)[..., 0]

    def decode(self, tokens: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        """Tokens ``(M, K, A + 1)`` and representations ``(M, K, E)`` -> logits ``(M, K, A)``.

        ``K <= N``: the first ``K`` agents (a prefix decodes as the full sequence would).
        """
        return self._decode_embedded(self.dec_ln(self.act_embed(tokens)), rep)

    def decode_actions(self, actions: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits ``(M, N, A)`` of the joint ``actions (M, N)``.

        :meth:`decode` of :meth:`shifted`, the tokens looked up in :meth:`token_table` instead
        of embedded one by one.
        """
        idx = torch.cat([torch.zeros_like(actions[:, :1]), actions[:, :-1] + 1], 1)
        return self._decode_embedded(F.embedding(idx, self.token_table()), rep)

    def _decode_embedded(self, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        for block in self.decoder:
            x = block(x, rep)
        out: torch.Tensor = self.action_head(x)
        return out

    def shifted(self, actions: torch.Tensor) -> torch.Tensor:
        """``(M, N)`` actions -> ``(M, N, A + 1)`` decoder input: start, then ``a_1..a_{N-1}``."""
        m = actions.shape[0]
        tokens = torch.zeros(m, self.n_agents, self.n_actions + 1)
        tokens[:, 0, 0] = 1.0
        tokens[:, 1:, 1:] = nn.functional.one_hot(actions[:, :-1], self.n_actions).float()
        return tokens

    def token_table(self) -> torch.Tensor:
        """The decoder's embedded input for each token: ``(A + 1, E)``, row 0 the start token.

        Row ``1 + a`` is action ``a``'s one-hot, embedded as :meth:`decode` embeds it (a linear
        map of a one-hot is a column of the weight, and GELU and LayerNorm act row by row), so
        decoding can look tokens up instead of embedding them.
        """
        out: torch.Tensor = self.dec_ln(self.act_embed(torch.eye(self.n_actions + 1)))
        return out

    def decode_greedy_or_sampled(
        self, rep: torch.Tensor, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Autoregressive decoding: actions ``(M, N)`` and each agent's logits ``(M, N, A)``.

        ``generator`` None: each agent takes its most likely action; else it samples.

        Agent ``i``'s logits are :meth:`decode`'s position ``i`` given the actions of agents
        ``0..i-1``; each decoder pass runs on position ``i`` alone, the earlier positions' keys
        and values kept from the passes before (:class:`DecodeCache`), so decoding ``N`` agents
        costs ``N`` one-token passes instead of prefixes of ``1..N`` tokens.
        """
        m, n = rep.shape[0], self.n_agents
        table = self.token_table()
        blocks = cast(list[DecodeBlock], list(self.decoder))
        caches = [DecodeCache(block, rep) for block in blocks]
        x = table[:1].expand(m, 1, -1)  # the start token
        actions: list[torch.Tensor] = []
        logits: list[torch.Tensor] = []
        for i in range(n):
            h = x
            for block, cache in zip(blocks, caches, strict=True):
                h = block.step(h, cache, i)
            logits.append(self.action_head(h)[:, 0])
            actions.append(
                logits[i].argmax(-1)
                if generator is None
                else base.sample_categorical(logits[i], generator)
            )
            if i + 1 < n:
                x = F.embedding(actions[i] + 1, table)[:, None]
        return torch.stack(actions, 1), torch.stack(logits, 1)

    # ----------------------------------------------------------------- the PPO loop's interface

    def act(
        self, obs: torch.Tensor, state: torch.Tensor | None, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample agent after agent; ``obs (..., N, D)``."""
        lead = obs.shape[:-2]
        rep, values = self.encode(obs.reshape(-1, *obs.shape[-2:]))
        actions, logits = self.decode_greedy_or_sampled(rep, generator)
        logp = torch.log_softmax(logits, -1).gather(-1, actions[..., None])[..., 0]
        return actions.reshape(*lead, -1), logp.reshape(*lead, -1), values.reshape(*lead, -1)

    def value(self, obs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """The encoder's value of every agent."""
        lead = obs.shape[:-2]
        return self.encode(obs.reshape(-1, *obs.shape[-2:]))[1].reshape(*lead, -1)

    def evaluate(
        self, obs: torch.Tensor, state: torch.Tensor | None, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher-forced: one decoder pass over the stored joint ``actions (M, N)``."""
        rep, values = self.encode(obs)
        logp_all = torch.log_softmax(self.decode_actions(actions, rep), -1)
        logp = logp_all.gather(-1, actions[..., None])[..., 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, entropy, values

    def checkpoint_state(self) -> dict[str, Any]:
        """``{"mat": state_dict}``."""
        return {"mat": self.state_dict()}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Restore the model."""
        self.load_state_dict(state["mat"])

    def policy(self) -> nn.Module:
        """A :class:`MATPolicy` on this model."""
        return MATPolicy(self)


class MATPolicy(nn.Module):
    """Greedy autoregressive MAT as a policy: ``(..., N, D)`` observations -> ``(..., N, A)``.

    Agent ``i``'s logits are computed given the greedy actions of agents ``1..i-1``, so the
    argmax of the output is the greedy joint action. :meth:`sample` draws the joint action as
    training does (each agent given the earlier agents' sampled actions); evaluations of the
    sampled policy use it (:func:`fleetmind.rl.neural.base.sampled_actions`).
    """

    def __init__(self, mat: MAT) -> None:
        super().__init__()
        self.mat = mat

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Logits of every agent, decoded greedily agent after agent."""
        lead = obs.shape[:-2]
        rep, _ = self.mat.encode(obs.reshape(-1, *obs.shape[-2:]))
        _, logits = self.mat.decode_greedy_or_sampled(rep, None)
        return logits.reshape(*lead, *logits.shape[-2:])

    def sample(self, obs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Joint actions ``(..., N)`` sampled as in training: agent after agent.

        Agent ``i`` samples from its logits given the actions agents ``1..i-1`` *sampled*
        (:meth:`MAT.act`'s decoding), so the policy scored is the policy trained; sampling
        :meth:`forward`'s logits would condition each agent on the earlier greedy actions.
        """
        lead = obs.shape[:-2]
        rep, _ = self.mat.encode(obs.reshape(-1, *obs.shape[-2:]))
        actions, _ = self.mat.decode_greedy_or_sampled(rep, generator)
        return actions.reshape(*lead, -1)


def _run(env: base.BatchEnv, config: MATConfig, run: base.RunOptions) -> base.TrainResult:
    if not isinstance(config, MATConfig):
        raise ConfigError(f"mat: config must be a MATConfig, got {type(config).__name__}")
    model = base.build_seeded(
        split_seed(run.seed)[1], lambda: MAT(env.obs_size, env.n_actions, env.n_robots, config)
    )
    assert isinstance(model, MAT)
    return train_ppo(
        env, config, model=model, algo="mat", run=run, describe={"model": describe(config)}
    )


def describe(config: MATConfig) -> str:
    """One line naming the model's sizes (recorded in the run's config)."""
    return (
        f"MAT: {config.blocks} encoder + {config.blocks} decoder block(s), "
        f"{config.embed} wide, {config.heads} head(s)"
    )


train = base.Learner(
    _run,
    MATConfig,
    """Train the Multi-Agent Transformer with PPO on a batched multi-agent env.

    The result's ``policy`` is a :class:`MATPolicy` (greedy autoregressive decoding); see
    :class:`fleetmind.rl.neural.base.Learner` for the arguments.
    """,
)
