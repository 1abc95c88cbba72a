from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fleetmind.envs import make_vector
from fleetmind.errors import ConfigError
from fleetmind.rl.neural import ippo, mappo
from fleetmind.scale.rollout import ShardedVectorEnv, shard_seeds, shard_sizes


def test_shard_sizes_split_evenly() -> None:
    assert shard_sizes(7, 3) == [3, 2, 2]
    assert shard_sizes(4, 1) == [4]
    with pytest.raises(ConfigError, match="workers <= num_envs"):
        shard_sizes(2, 3)


def test_local_shards_are_vector_envs_seeded_from_the_root() -> None:
    env = ShardedVectorEnv("warehouse-tiny", 2, 5, workers=2, seed=7, max_steps=20)
    parts = [
        make_vector("warehouse-tiny", 2, n, seed=s, max_steps=20)
        for n, s in zip((3, 2), shard_seeds(7, 2), strict=True)
    ]
    obs, _ = env.reset()
    ref = np.concatenate([p.reset()[0] for p in parts])
    np.testing.assert_array_equal(obs, ref)
    rng = np.random.default_rng(0)
    for _ in range(25):  # crosses the 20-step time limit
        acts = rng.integers(0, 5, size=(5, 2))
        got = env.step(acts)
        outs = [p.step(a) for p, a in zip(parts, (acts[:3], acts[3:]), strict=True)]
        for i in range(4):
            np.testing.assert_array_equal(got[i], np.concatenate([o[i] for o in outs]))
        np.testing.assert_array_equal(
            got[4]["delivered"], np.concatenate([o[4]["delivered"] for o in outs])
        )
    np.testing.assert_array_equal(
        env.global_state(), np.concatenate([p.global_state() for p in parts])
    )
    assert (env.obs_size, env.n_actions, env.max_steps) == (parts[0].obs_size, 5, 20)
    with pytest.raises(ConfigError, match="actions must have shape"):
        env.step(np.zeros((4, 2), dtype=np.int64))


def _train(algo: Any, env: ShardedVectorEnv) -> Any:
    cfg = algo.PPOConfig(rollout_len=16, epochs=1, minibatches=2)
    return algo.train(env, cfg, seed=3, steps=2 * 16 * env.num_envs)


@pytest.mark.parametrize("algo", [ippo, mappo], ids=["ippo", "mappo"])
def test_learner_on_ray_rollout_actors_matches_local_shards(ray_instance: Any, algo: Any) -> None:
    kw = {"workers": 2, "seed": 11, "max_steps": 24}
    local = _train(algo, ShardedVectorEnv("warehouse-tiny", 2, 4, **kw))
    with ShardedVectorEnv("warehouse-tiny", 2, 4, backend="ray", **kw) as env:
        remote = _train(algo, env)
    assert remote.steps == local.steps == 128
    assert remote.returns == local.returns
    assert len(local.returns["robot_0"]) >= 4  # episodes ended (and were bootstrapped) inside
    assert remote.losses == local.losses
    for (k, a), (_, b) in zip(
        local.policy.state_dict().items(), remote.policy.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), k


def test_worker_side_collection_matches_between_backends(ray_instance: Any) -> None:
    from fleetmind.rl.neural.ppo import Actor

    kw = {"workers": 2, "seed": 5, "max_steps": 10}
    actor = Actor(111, 5, 2, (32,), agent_id=True)
    local = ShardedVectorEnv("warehouse-tiny", 2, 3, **kw)
    local.reset()
    with ShardedVectorEnv("warehouse-tiny", 2, 3, backend="ray", **kw) as remote:
        remote.reset()
        for call in range(2):  # the second rollout continues where the first stopped
            a = local.collect(actor, 12, seed=call)
            b = remote.collect(actor, 12, seed=call)
            assert sorted(a) == sorted(b)
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert a["obs"].shape == (12, 3, 2, 111)
    assert a["truncated"].sum() == 3  # each world hit its 10-step limit once in 12 steps
    assert a["last_obs"].shape == (3, 2, 111)
    # Actions are the policy's: their log-probabilities are those of the actor's logits.
    logits = actor(torch.from_numpy(a["obs"][0]))
    ref = torch.log_softmax(logits, -1).gather(-1, torch.from_numpy(a["actions"][0])[..., None])
    np.testing.assert_allclose(a["logprobs"][0], ref[..., 0].detach().numpy(), rtol=1e-6)
