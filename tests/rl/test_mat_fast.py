"""MAT's fast paths against a straightforward reference of the same model.

The reference is MAT as first written: ``nn.MultiheadAttention``'s own forward under boolean
causal masks, one-hot action tokens through the embedding layer, and autoregressive decoding
that re-runs the decoder over the whole prefix for every agent. The model computes the same
thing with ``scaled_dot_product_attention`` on the modules' projections, looked-up tokens and
cached keys and values; these tests hold the two together (same parameters, same seeds).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from fleetmind.rl.neural import base
from fleetmind.rl.neural.mat import MAT, DecodeBlock, EncodeBlock, MATConfig, MATPolicy

torch.set_num_threads(1)

Evaluate = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

SHAPES = [  # (agents, heads, blocks)
    (2, 1, 1),
    (4, 1, 1),
    (3, 2, 2),
]


def _mask(n: int) -> torch.Tensor:
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def ref_encode_block(block: EncodeBlock, x: torch.Tensor) -> torch.Tensor:
    x = block.ln1(x + block.attn(x, x, x, need_weights=False)[0])
    out: torch.Tensor = block.ln2(x + block.mlp(x))
    return out


def ref_decode_block(block: DecodeBlock, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
    mask = _mask(x.shape[1])
    x = block.ln1(x + block.attn1(x, x, x, attn_mask=mask, need_weights=False)[0])
    x = block.ln2(rep + block.attn2(rep, x, x, attn_mask=mask, need_weights=False)[0])
    out: torch.Tensor = block.ln3(x + block.mlp(x))
    return out


def ref_encode(model: MAT, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rep = model.enc_ln(model.obs_embed(base.with_agent_id(obs, model.n_agents)))
    for block in model.encoder:
        rep = ref_encode_block(block, rep)
    return rep, model.value_head(rep)[..., 0]


def ref_decode(model: MAT, tokens: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
    x = model.dec_ln(model.act_embed(tokens))
    for block in model.decoder:
        x = ref_decode_block(block, x, rep)
    out: torch.Tensor = model.action_head(x)
    return out


def ref_autoregressive(
    model: MAT, rep: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The prefix loop: agent ``i`` decodes the first ``i + 1`` tokens again."""
    m, n = rep.shape[0], model.n_agents
    tokens = torch.zeros(m, n, model.n_actions + 1)
    tokens[:, 0, 0] = 1.0
    actions: list[torch.Tensor] = []
    logits: list[torch.Tensor] = []
    for i in range(n):
        logits.append(ref_decode(model, tokens[:, : i + 1], rep[:, : i + 1])[:, i])
        actions.append(
            logits[i].argmax(-1)
            if generator is None
            else base.sample_categorical(logits[i], generator)
        )
        if i + 1 < n:
            tokens[:, i + 1, 1:] = nn.functional.one_hot(actions[i], model.n_actions)
    return torch.stack(actions, 1), torch.stack(logits, 1)


def ref_evaluate(
    model: MAT, obs: torch.Tensor, actions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rep, values = ref_encode(model, obs)
    logp_all = torch.log_softmax(ref_decode(model, model.shifted(actions), rep), -1)
    logp = logp_all.gather(-1, actions[..., None])[..., 0]
    return logp, -(logp_all.exp() * logp_all).sum(-1), values


def make(n_agents: int, heads: int, blocks: int, seed: int = 0) -> MAT:
    torch.manual_seed(seed)
    cfg = MATConfig(embed=16, heads=heads, blocks=blocks, hidden=(16,))
    return MAT(9, 5, n_agents, cfg)


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("n", "heads", "blocks"), SHAPES)
def test_encoder_and_teacher_forced_decoder_match_the_reference(
    n: int, heads: int, blocks: int
) -> None:
    model = make(n, heads, blocks)
    obs = torch.randn(32, n, 9)
    acts = torch.randint(5, (32, n))
    with torch.no_grad():
        rep, values = model.encode(obs)
        ref_rep, ref_values = ref_encode(model, obs)
        close(rep, ref_rep)
        close(values, ref_values)
        want = ref_decode(model, model.shifted(acts), rep)
        close(model.decode(model.shifted(acts), rep), want)
        close(model.decode_actions(acts, rep), want)
        # A prefix decodes as the full sequence's first positions.
        close(model.decode(model.shifted(acts)[:, :2], rep[:, :2]), want[:, :2])


@pytest.mark.parametrize(("n", "heads", "blocks"), SHAPES)
def test_cached_sampling_draws_the_reference_actions(n: int, heads: int, blocks: int) -> None:
    model = make(n, heads, blocks, seed=1)
    obs = torch.randn(64, n, 9)
    with torch.no_grad():
        actions, logp, values = model.act(obs, None, torch.Generator().manual_seed(3))
        rep, ref_values = ref_encode(model, obs)
        ref_actions, ref_logits = ref_autoregressive(model, rep, torch.Generator().manual_seed(3))
    ref_logp = torch.log_softmax(ref_logits, -1).gather(-1, ref_actions[..., None])[..., 0]
    # Same generator, same draws: the actions are equal, not merely close.
    assert torch.equal(actions, ref_actions)
    close(logp, ref_logp)
    close(values, ref_values)
    # The actions must depend on the draws (else equality above says little).
    other, _, _ = model.act(obs, None, torch.Generator().manual_seed(4))
    assert not torch.equal(other, actions)


@pytest.mark.parametrize(("n", "heads", "blocks"), SHAPES)
def test_greedy_policy_matches_the_reference(n: int, heads: int, blocks: int) -> None:
    model = make(n, heads, blocks, seed=2)
    obs = torch.randn(2, 16, n, 9)  # leading (T, B) dims
    with torch.no_grad():
        logits = MATPolicy(model)(obs)
        rep, _ = ref_encode(model, obs.reshape(-1, n, 9))
        _, ref_logits = ref_autoregressive(model, rep, None)
    close(logits, ref_logits.reshape(2, 16, n, 5))


@pytest.mark.parametrize(("n", "heads", "blocks"), SHAPES)
def test_update_gradients_match_the_reference(n: int, heads: int, blocks: int) -> None:
    """The PPO update sees the same losses and the same gradient for every parameter."""
    model = make(n, heads, blocks, seed=3)
    obs = torch.randn(48, n, 9)
    acts = torch.randint(5, (48, n))
    weights = torch.randn(3, 48, n)

    def grads(fn: Evaluate) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        model.zero_grad()
        outs = fn(obs, acts)
        sum((w * o).sum() for w, o in zip(weights, outs, strict=True)).backward()
        got = [p.grad for p in model.parameters()]
        assert all(g is not None for g in got)
        return [o.detach() for o in outs], [g.clone() for g in got if g is not None]

    fast_out, fast = grads(lambda o, a: model.evaluate(o, None, a))
    ref_out, ref = grads(lambda o, a: ref_evaluate(model, o, a))
    for a, b in zip(fast_out, ref_out, strict=True):
        close(a, b)
    assert len(fast) == len(ref) == len(list(model.parameters()))
    for a, b in zip(fast, ref, strict=True):
        close(a, b)
    # Every parameter takes part (a detached path would leave zeros in both).
    assert all(g.abs().sum() > 0 for g in fast)


def test_state_dict_names_are_those_of_earlier_checkpoints() -> None:
    """Checkpoints saved before the fast paths load: the attention keeps its parameter names."""
    keys = set(make(2, 1, 1).state_dict())
    for prefix in ("encoder.0.attn.", "decoder.0.attn1.", "decoder.0.attn2."):
        assert {prefix + k for k in ("in_proj_weight", "in_proj_bias")} <= keys
        assert {prefix + k for k in ("out_proj.weight", "out_proj.bias")} <= keys
    assert not any("cache" in k or "mask" in k for k in keys)
