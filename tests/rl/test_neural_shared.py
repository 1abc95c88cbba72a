"""Shared neural pieces against plain Python reference loops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fleetmind.rl.neural import base, buffers

torch.set_num_threads(1)


def ref_returns(rewards: list[float], ends: list[bool], gamma: float, last: float) -> list[float]:
    out = [0.0] * len(rewards)
    g = last
    for t in reversed(range(len(rewards))):
        if ends[t]:
            g = 0.0
        g = rewards[t] + gamma * g
        out[t] = g
    return out


def ref_gae(
    rewards: list[float],
    values: list[float],
    last_value: float,
    final_values: list[float],
    term: list[bool],
    trunc: list[bool],
    gamma: float,
    lam: float,
) -> list[float]:
    """One world, one agent, written the slow obvious way."""
    n = len(rewards)
    adv = [0.0] * n
    following = 0.0  # advantage of step t + 1 within the same episode
    for t in reversed(range(n)):
        if term[t]:
            delta = rewards[t] - values[t]
            following = delta
        elif trunc[t]:
            delta = rewards[t] + gamma * final_values[t] - values[t]
            following = delta
        else:
            nxt = values[t + 1] if t + 1 < n else last_value
            following = rewards[t] + gamma * nxt - values[t] + gamma * lam * following
        adv[t] = following
    return adv


def test_discounted_returns_match_reference() -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(size=(12, 3))
    ends = rng.random((12, 3)) < 0.2
    last = rng.normal(size=3)
    got = buffers.discounted_returns(r, ends, 0.9, last)
    for j in range(3):
        want = ref_returns(list(r[:, j]), list(ends[:, j]), 0.9, float(last[j]))
        np.testing.assert_allclose(got[:, j], want, rtol=1e-12)


def test_discounted_returns_simple_numbers() -> None:
    got = buffers.discounted_returns(np.array([1.0, 1.0, 1.0]), np.array([False] * 3), 0.5, 4.0)
    # 1 + 0.5 * (1 + 0.5 * (1 + 0.5 * 4))
    np.testing.assert_allclose(got, [2.25, 2.5, 3.0])


@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_gae_matches_reference_with_termination_and_truncation(lam: float) -> None:
    rng = np.random.default_rng(1)
    t_len, b, n = 20, 3, 2
    r = rng.normal(size=(t_len, b, n))
    v = rng.normal(size=(t_len, b, n))
    fv = rng.normal(size=(t_len, b, n))
    last = rng.normal(size=(b, n))
    term = np.zeros((t_len, b, n), dtype=bool)
    trunc = np.zeros((t_len, b, n), dtype=bool)
    term[4, 0] = True
    trunc[9, 0] = True
    trunc[3, 1] = True
    term[15, 2] = True
    trunc[19, 2] = True  # truncated on the very last step
    nv = buffers.next_values(v, last, trunc, fv)
    adv, ret = buffers.gae(r, v, nv, term, trunc, 0.97, lam)
    for bi in range(b):
        for ai in range(n):
            want = ref_gae(
                list(r[:, bi, ai]),
                list(v[:, bi, ai]),
                float(last[bi, ai]),
                list(fv[:, bi, ai]),
                list(term[:, bi, ai]),
                list(trunc[:, bi, ai]),
                0.97,
                lam,
            )
            np.testing.assert_allclose(adv[:, bi, ai], want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ret, adv + v)


def test_gae_bootstraps_truncation_but_not_termination() -> None:
    r = np.array([1.0])
    v = np.array([0.5])
    final = np.array([10.0])
    t_adv, _ = buffers.gae(r, v, final, np.array([True]), np.array([False]), 0.9, 0.95)
    c_adv, _ = buffers.gae(r, v, final, np.array([False]), np.array([True]), 0.9, 0.95)
    assert t_adv[0] == pytest.approx(1.0 - 0.5)
    assert c_adv[0] == pytest.approx(1.0 + 0.9 * 10.0 - 0.5)


def test_gae_lambda_one_equals_bootstrapped_returns() -> None:
    rng = np.random.default_rng(2)
    r = rng.normal(size=10)
    v = rng.normal(size=10)
    nv = buffers.next_values(v, np.array(3.0), np.zeros(10, bool), np.zeros(10))
    _, ret = buffers.gae(r, v, nv, np.zeros(10, bool), np.zeros(10, bool), 0.9, 1.0)
    np.testing.assert_allclose(ret, buffers.discounted_returns(r, np.zeros(10, bool), 0.9, 3.0))


def test_rollout_buffer_compute_and_minibatches() -> None:
    rng = np.random.default_rng(3)
    t_len, b, n, d = 6, 2, 3, 4
    buf = buffers.RolloutBuffer(t_len, b, n, d, state_size=5)
    trunc_flags = np.zeros((t_len, b), dtype=bool)
    trunc_flags[2, 1] = True
    for t in range(t_len):
        buf.add(
            obs=rng.normal(size=(b, n, d)).astype(np.float32),
            state=rng.normal(size=(b, 5)).astype(np.float32),
            actions=rng.integers(0, 5, (b, n)),
            logprobs=np.zeros((b, n), np.float32),
            rewards=rng.normal(size=(b, n)).astype(np.float32),
            values=rng.normal(size=(b, n)).astype(np.float32),
            terminated=np.zeros(b, bool),
            truncated=trunc_flags[t],
            final_values=np.full((b, n), 7.0, np.float32),
        )
    assert buf.full
    assert buf.truncated[2, 1].all()  # a (B,) flag applies to every agent of the world
    with pytest.raises(IndexError):
        buf.add(
            obs=np.zeros((b, n, d), np.float32),
            actions=np.zeros((b, n), np.int64),
            logprobs=np.zeros((b, n), np.float32),
            rewards=np.zeros((b, n), np.float32),
            values=np.zeros((b, n), np.float32),
            terminated=np.zeros(b, bool),
            truncated=np.zeros(b, bool),
        )
    last = np.ones((b, n), np.float32)
    adv, _ = buf.compute(last, 0.9, 0.8)
    for bi in range(b):
        for ai in range(n):
            want = ref_gae(
                list(buf.rewards[:, bi, ai].astype(np.float64)),
                list(buf.values[:, bi, ai].astype(np.float64)),
                1.0,
                [7.0] * t_len,
                [False] * t_len,
                list(trunc_flags[:, bi]),
                0.9,
                0.8,
            )
            np.testing.assert_allclose(adv[:, bi, ai], want, rtol=1e-5, atol=1e-6)
    g = torch.Generator().manual_seed(0)
    parts = list(buf.minibatches(4, g))
    assert len(parts) == 4
    assert sorted(torch.cat(parts).tolist()) == list(range(t_len * b))


def test_replay_buffer_wraps_and_samples_stored_rows() -> None:
    buf = buffers.ReplayBuffer(5, n_agents=2, obs_size=3, state_size=4)
    for k in range(7):
        buf.add(
            obs=np.full((1, 2, 3), k, np.float32),
            actions=np.full((1, 2), k % 5),
            rewards=np.full((1, 2), k, np.float32),
            next_obs=np.full((1, 2, 3), k + 1, np.float32),
            terminated=np.array([k == 6]),
            state=np.full((1, 4), k + 0.5, np.float32),
            next_state=np.full((1, 4), k + 1.5, np.float32),
        )
    assert buf.size == 5
    assert buf.pos == 2
    assert sorted(buf.rewards[:, 0].tolist()) == [2, 3, 4, 5, 6]
    batch = buf.sample(64, torch.Generator().manual_seed(1))
    ks = batch["rewards"][:, 0]
    assert set(ks.tolist()) <= {2.0, 3.0, 4.0, 5.0, 6.0}
    torch.testing.assert_close(batch["next_obs"][:, 0, 0], ks + 1)
    torch.testing.assert_close(batch["state"][:, 0], ks + 0.5)
    torch.testing.assert_close(batch["terminated"], (ks == 6).float())
    with pytest.raises(IndexError):
        buffers.ReplayBuffer(3, 1, 1).sample(1, torch.Generator())


def test_agent_id_and_mlp_shapes() -> None:
    x = torch.zeros(4, 3, 7)
    y = base.with_agent_id(x, 3)
    assert y.shape == (4, 3, 10)
    torch.testing.assert_close(y[0, :, 7:], torch.eye(3))
    with pytest.raises(ValueError, match="3 agents"):
        base.with_agent_id(torch.zeros(4, 2, 7), 3)
    net = base.mlp(10, 5, (16,))
    assert net(y).shape == (4, 3, 5)


def test_seeding_is_reproducible_and_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    seq = np.random.SeedSequence(7)
    a = base.build_seeded(seq, lambda: base.mlp(4, 2))
    after = torch.rand(1)
    b = base.build_seeded(np.random.SeedSequence(7), lambda: base.mlp(4, 2))
    c = base.build_seeded(np.random.SeedSequence(8), lambda: base.mlp(4, 2))
    assert torch.equal(before, after)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(next(a.parameters()), next(c.parameters()))
    logits = torch.randn(50, 5)
    s1 = base.sample_categorical(logits, base.torch_generator(np.random.SeedSequence(3)))
    s2 = base.sample_categorical(logits, base.torch_generator(np.random.SeedSequence(3)))
    assert torch.equal(s1, s2)
    assert s1.shape == (50,)


def test_sample_categorical_follows_probabilities() -> None:
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1, 0.0, 0.0]]).expand(20000, 5))
    s = base.sample_categorical(logits, torch.Generator().manual_seed(0))
    freq = torch.bincount(s, minlength=5).float() / len(s)
    torch.testing.assert_close(freq, torch.tensor([0.7, 0.2, 0.1, 0.0, 0.0]), atol=0.02, rtol=0)


def test_episode_tracker_records_per_agent_returns() -> None:
    tr = base.EpisodeTracker(2, ["robot_0", "robot_1"])
    tr.update(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([False, False]), 2)
    closed = tr.update(
        np.array([[1.0, 0.0], [0.0, 1.0]]),
        np.array([False, True]),
        4,
        delivered=np.array([[False, False], [True, False]]),
    )
    assert closed == [{"robot_0": 3.0, "robot_1": 5.0}]
    assert tr.returns == {"robot_0": [3.0], "robot_1": [5.0]}
    assert tr.deliveries == {"robot_0": [1], "robot_1": [0]}
    assert tr.end_steps == [4]
    assert tr.running[1].tolist() == [0.0, 0.0]
    assert tr.running[0].tolist() == [2.0, 2.0]


def test_episode_tracker_keeps_peaks_of_learned_rewards() -> None:
    tr = base.EpisodeTracker(1, ["robot_0"])
    tr.update(np.array([[-3.0]]), np.array([False]), 1, learned=np.array([[-1.0]]))
    tr.update(np.array([[0.5]]), np.array([True]), 2, learned=np.array([[0.25]]))
    tr.update(np.array([[2.0]]), np.array([True]), 3)
    assert tr.peaks == {"robot_0": [1.0, 2.0]}


def test_final_transitions_store_final_observations_or_drop_the_world() -> None:
    next_obs = np.arange(3 * 2 * 1, dtype=np.float32).reshape(3, 2, 1)  # world 1 was reset
    next_state = np.zeros((3, 4), dtype=np.float32)
    trunc = np.array([False, True, False])
    final_obs = np.full((3, 2, 1), -1.0, dtype=np.float32)
    final_state = np.full((3, 4), 9.0, dtype=np.float32)
    info = {"final_obs": final_obs, "final_state": final_state}
    real, real_state, keep = buffers.final_transitions(next_obs, next_state, trunc, info)
    assert keep.tolist() == [True, True, True]
    assert real[1].tolist() == [[-1.0], [-1.0]]
    assert real[0].tolist() == next_obs[0].tolist()
    assert real_state is not None
    assert real_state[1].tolist() == [9.0] * 4
    assert next_obs[1].tolist() == [[2.0], [3.0]]  # the env's arrays are left alone
    # States are stored but the env reports no final state: the truncated world is dropped.
    _, _, keep = buffers.final_transitions(next_obs, next_state, trunc, {"final_obs": final_obs})
    assert keep.tolist() == [True, False, True]
    # No states stored: the final observation alone is enough.
    real, none, keep = buffers.final_transitions(next_obs, None, trunc, {"final_obs": final_obs})
    assert none is None
    assert keep.all()
    assert real[1, 0, 0] == -1.0


def test_train_loop_checkpoint_restores_parts_and_counters(tmp_path: Path) -> None:
    from fleetmind.envs import make_vector

    env = make_vector("warehouse-tiny", 2, 1, seed=0, max_steps=10)
    net = torch.nn.Linear(2, 1)
    gen = torch.Generator().manual_seed(3)
    run = base.RunOptions(out_dir=tmp_path, resume=True)
    loop = base.TrainLoop(
        "x", env, run, losses=("l",), parts={"net": net, "g": gen, "none": None}, config={}, t0=0.0
    )
    assert loop.resume() is None  # nothing saved yet
    loop.losses["l"].append(0.5)
    loop.record(np.ones((1, 2)), np.array([True]), {}, np.ones((1, 2)))
    loop.updated()
    loop.checkpoint()
    want = net.weight.detach().clone()
    draw = torch.rand(1, generator=gen)
    with torch.no_grad():
        net.weight.zero_()
    again = base.TrainLoop(
        "x", env, run, losses=("l",), parts={"net": net, "g": gen, "none": None}, config={}, t0=0.0
    )
    ck = again.resume()
    assert ck is not None
    assert ck["none"] is None
    assert torch.equal(net.weight, want)
    assert torch.equal(torch.rand(1, generator=gen), draw)
    assert (again.steps, again.updates, again.start_steps) == (1, 1, 1)
    assert again.losses == {"l": [0.5]}
    assert again.tracker.returns["robot_0"] == [1.0]
