"""The recurrent Q-learners (GRU agents, episode replay): hidden state, targets, buffer, smoke."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fleetmind.envs import make_vector
from fleetmind.rl.neural import base, buffers, iql_dqn, qmix, recurrent, vdn
from fleetmind.rl.neural.dqn import DQNConfig
from fleetmind.rl.neural.recurrent import (
    Actor,
    RecurrentPolicy,
    RecurrentQ,
    double_q_targets,
    mix_with,
    td_loss,
)

torch.set_num_threads(1)

SMALL = DQNConfig(rnn_hidden=16, episodes_batch=4, learning_starts=0)


def net(seed: int = 0) -> RecurrentQ:
    torch.manual_seed(seed)
    return RecurrentQ(5, 4, 2, 8)


# --------------------------------------------------------------------------- hidden state


def test_hidden_state_is_carried_within_an_episode_and_reset_at_its_start() -> None:
    q_net = net()
    obs = torch.randn(3, 7, 2, 5)  # 3 episodes, 7 observations each
    acts = torch.randint(4, (3, 6, 2))
    actor = Actor(q_net, 3)
    stepped = []
    for t in range(7):
        stepped.append(actor.q(obs[:, t]))
        if t < 6:
            actor.commit(acts[:, t])
    # Acting step by step sees what learning's unroll from the episode's start sees.
    unrolled = q_net.unroll(obs, acts).detach()
    torch.testing.assert_close(torch.stack(stepped, 1), unrolled, rtol=1e-5, atol=1e-5)
    # A network reset every step would give each step its first-step value: it does not.
    first_only = q_net.unroll(obs[:, 3:4], acts[:, :0]).detach()[:, 0]
    assert (stepped[3] - first_only).abs().max() > 1e-3

    # reset() starts world 0 afresh; world 1 carries on.
    actor.reset(np.array([True, False, False]))
    again = actor.q(obs[:, 0])
    fresh = Actor(q_net, 3).q(obs[:, 0])
    torch.testing.assert_close(again[0], fresh[0])
    assert (again[1] - fresh[1]).abs().max() > 1e-3


def test_the_loop_resets_the_hidden_state_exactly_at_episode_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[int] = []
    resets: list[tuple[int, list[bool]]] = []
    real_q, real_reset = Actor.q, Actor.reset

    def q(self: Actor, obs: torch.Tensor) -> torch.Tensor:
        steps.append(1)
        return real_q(self, obs)

    def reset(self: Actor, worlds: Any = None) -> None:
        if worlds is not None:
            resets.append((len(steps), [bool(w) for w in worlds]))
        real_reset(self, worlds)

    monkeypatch.setattr(Actor, "q", q)
    monkeypatch.setattr(Actor, "reset", reset)
    env = make_vector("warehouse-tiny", 2, 2, seed=0, max_steps=10)
    qmix.train(env, SMALL, seed=0, steps=60)
    # 30 batched steps, 10-step episodes: both worlds restart after steps 10, 20 and 30 only.
    assert resets == [(10, [True, True]), (20, [True, True]), (30, [True, True])]


def test_policy_keeps_state_between_calls_and_evaluations_start_afresh() -> None:
    policy = RecurrentPolicy(net(), epsilon=0.0)
    obs = torch.randn(2, 2, 5)
    first = policy(obs).clone()
    second = policy(obs)
    assert (first - second).abs().max() > 1e-3  # the hidden state moved on
    act = base.greedy_actions(policy)  # an evaluation resets the memory
    np.testing.assert_array_equal(act(obs.numpy()), first.argmax(-1).numpy())
    drawn = base.sampled_actions(policy, seed=1)(obs.numpy())
    np.testing.assert_array_equal(drawn, first.argmax(-1).numpy())  # epsilon 0: greedy


# --------------------------------------------------------------------------- targets


def test_targets_are_double_q_from_the_target_network_and_padding_is_masked() -> None:
    # One episode, 3 steps, 1 agent, 2 actions. The online net prefers action 1 everywhere;
    # the target net values action 0 highest, so max-Q and double-Q targets differ.
    online_next = torch.tensor([[[[0.0, 1.0]], [[0.0, 1.0]], [[0.0, 1.0]]]])
    target_next = torch.tensor([[[[10.0, 2.0]], [[10.0, 3.0]], [[10.0, 4.0]]]])
    rewards = torch.tensor([[[1.0], [1.0], [5.0]]])
    terminated = torch.tensor([[0.0, 1.0, 0.0]])  # the episode ends at step 1; step 2 is padding
    target = double_q_targets(
        online_next, target_next, rewards, terminated, 0.5, mix_with(None), None
    )
    # step 0: r + gamma * Q_target(o', argmax_a Q_online(o', a)) = 1 + 0.5 * 2, not 1 + 0.5 * 10
    # step 1: terminated, no bootstrap
    torch.testing.assert_close(target[0, :2, 0], torch.tensor([2.0, 1.0]))

    filled = torch.tensor([[1.0, 1.0, 0.0]])
    pred = torch.tensor([[[2.0], [3.0], [0.0]]])
    loss = td_loss(pred, target, filled)
    torch.testing.assert_close(loss, torch.tensor(2.0))  # (0^2 + 2^2) / 2 filled steps
    wild = pred.clone()
    wild[0, 2, 0] = 1e6  # whatever is predicted past the end does not count
    torch.testing.assert_close(td_loss(wild, target, filled), loss)

    # With a mixer the target network's chosen values are mixed (VDN: summed over agents).
    two = double_q_targets(
        online_next.expand(1, 3, 2, 2),
        target_next.expand(1, 3, 2, 2),
        rewards[..., 0],
        terminated,
        0.5,
        mix_with(vdn.SumMixer()),
        None,
    )
    torch.testing.assert_close(two[0, 0], torch.tensor(1.0 + 0.5 * (2.0 + 2.0)))


# --------------------------------------------------------------------------- buffer


def test_episode_buffer_stores_episodes_ending_at_different_steps() -> None:
    buf = buffers.EpisodeBuffer(4, max_len=5, num_envs=2, n_agents=1, obs_size=1, state_size=1)
    for t in range(3):
        obs = np.array([[[t]], [[10 + t]]], dtype=np.float32)
        buf.add_step(
            obs=obs,
            actions=np.array([[t], [t]]),
            rewards=np.ones((2, 1), dtype=np.float32),
            terminated=np.array([t == 1, False]),
            state=obs[:, 0],
        )
        if t == 1:  # world 0 terminated after 2 steps
            buf.end(
                np.array([0]),
                final_obs=np.array([[[99.0]]], dtype=np.float32),
                final_state=np.array([[99.0]], dtype=np.float32),
                bootstrap=np.array([True]),
            )
    # world 1 truncated after 3 steps with no final observation: its last step cannot learn.
    buf.end(
        np.array([1]),
        final_obs=np.zeros((1, 1, 1), dtype=np.float32),
        final_state=np.zeros((1, 1), dtype=np.float32),
        bootstrap=np.array([False]),
    )
    assert buf.size == 2
    np.testing.assert_array_equal(buf.obs[0, :3, 0, 0], [0, 1, 99])
    np.testing.assert_array_equal(buf.filled[0], [True, True, False, False, False])
    np.testing.assert_array_equal(buf.terminated[0, :2], [False, True])
    np.testing.assert_array_equal(buf.obs[1, :3, 0, 0], [10, 11, 12])
    np.testing.assert_array_equal(buf.filled[1], [True, True, False, False, False])
    batch = buf.sample(2, torch.Generator().manual_seed(0))
    assert batch["obs"].shape == (2, 4, 1, 1)  # cut to the longest sampled episode
    assert batch["filled"].shape == batch["terminated"].shape == (2, 3)


# --------------------------------------------------------------------------- smoke


@pytest.mark.parametrize("map_name", ["rware-tiny-2ag-v2", "warehouse-tiny"])
def test_recurrent_qmix_runs_checkpoints_resumes_and_repeats(map_name: str, tmp_path: Path) -> None:
    from fleetmind.rl.neural.adapters import TwinBatch

    def env() -> base.BatchEnv:
        if map_name.startswith("rware"):
            return TwinBatch(map_name, 2, seed=0, max_steps=50)
        return make_vector(map_name, 2, 2, seed=0, max_steps=50)

    a = qmix.train(env(), SMALL, seed=3, steps=200, out_dir=tmp_path, checkpoint_every=2)
    assert a.config["agent"] == "gru"
    assert a.updates == 4  # 2 worlds x 2 episodes, one gradient step each
    assert len(a.returns["robot_0"]) == 4
    assert (tmp_path / "checkpoint.pt").exists()
    b = qmix.train(env(), SMALL, seed=3, steps=200)
    assert a.losses == b.losses
    c = qmix.train(env(), SMALL, seed=4, steps=200)
    assert a.losses != c.losses
    resumed = qmix.train(env(), SMALL, seed=3, steps=400, out_dir=tmp_path, resume=True)
    assert resumed.steps == 400
    assert resumed.updates == 8
    assert resumed.returns["robot_0"][:4] == a.returns["robot_0"]
    out = resumed.policy(torch.zeros(3, 2, env().obs_size))
    assert out.shape == (3, 2, 5)


@pytest.mark.parametrize("module", [vdn, iql_dqn])
def test_vdn_and_iql_share_the_recurrent_loop(module: Any) -> None:
    env = make_vector("warehouse-tiny", 2, 2, seed=0, max_steps=20)
    res = module.train(env, SMALL, seed=0, steps=80)
    assert res.updates == 4
    assert isinstance(res.policy, RecurrentPolicy)
    assert all(np.isfinite(res.losses["td"]))


def test_feed_forward_ablation_still_runs() -> None:
    env = make_vector("warehouse-tiny", 2, 2, seed=0, max_steps=20)
    res = qmix.train(env, DQNConfig(recurrent=False, learning_starts=8, batch_size=8), steps=40)
    assert res.updates > 0
    assert not isinstance(res.policy, RecurrentPolicy)


def test_epsilon_decays_over_a_fixed_step_count() -> None:
    from fleetmind.rl.neural.dqn import epsilon_at

    cfg = DQNConfig()
    assert epsilon_at(0, 10**12, cfg) == 1.0
    assert epsilon_at(25_000, 10**12, cfg) == pytest.approx(0.525)
    assert epsilon_at(50_000, 10**12, cfg) == pytest.approx(0.05)
    assert epsilon_at(50, 100, DQNConfig(eps_anneal_steps=0)) == pytest.approx(0.05)
    assert recurrent.RunningMoments().standardise(torch.tensor([1.0])).item() == 1.0
