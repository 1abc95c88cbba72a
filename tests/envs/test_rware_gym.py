"""The twin under rware's Gymnasium ids and interface, stepped beside rware's own env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from fleetmind.envs import rware_gym
from fleetmind.errors import ConfigError


def _same_obs(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]


@pytest.mark.parametrize("env_id", ["rware-tiny-2ag-v2", "rware-small-4ag-hard-v2"])
def test_gymnasium_make_steps_like_rware(env_id: str) -> None:
    pytest.importorskip("rware")
    # The key EPyMARL's gymma env takes: "module:namespace/id".
    twin = gym.make(f"fleetmind:fleetmind/{env_id}")
    real = gym.make(env_id)
    assert twin.observation_space == real.observation_space
    assert twin.action_space == real.action_space
    assert twin.unwrapped.n_agents == real.unwrapped.n_agents  # type: ignore[attr-defined]
    o1, i1 = twin.reset(seed=7)
    o2, i2 = real.reset(seed=7)
    assert _same_obs(o1, o2)
    assert i1 == i2 == {}
    rng = np.random.default_rng(0)
    n = real.unwrapped.n_agents  # type: ignore[attr-defined]
    episodes = 0
    for _ in range(1_200):
        actions = tuple(int(a) for a in rng.integers(5, size=n))
        s1, s2 = twin.step(actions), real.step(actions)
        assert _same_obs(s1[0], s2[0])
        assert s1[1] == s2[1]
        assert s1[2:] == s2[2:]
        assert isinstance(s1[1], list)
        assert s1[3] is False
        if s2[2]:
            episodes += 1
            # reset() without a seed continues each env's generator the same way.
            assert _same_obs(twin.reset()[0], real.reset()[0])
    assert episodes == 2


def test_seed_method_seeds_the_next_reset_as_rware() -> None:
    env = gym.make("fleetmind:fleetmind/rware-tiny-2ag-v2")
    env.unwrapped.seed(3)  # type: ignore[attr-defined]  # what EPyMARL's gymma calls
    first = env.reset()[0]
    assert _same_obs(first, env.reset(seed=3)[0])


def test_every_rware_id_is_registered_and_bad_actions_are_refused() -> None:
    ids = rware_gym.rware_ids()
    assert len(ids) == len(set(ids))
    assert "rware-tiny-2ag-v2" in ids
    assert "rware-imgdict-Nd-large-19ag-hard-v2" in ids
    assert all(f"fleetmind/{i}" in gym.envs.registration.registry for i in ids)
    rware = pytest.importorskip("rware")
    del rware
    registered = {k for k in gym.envs.registration.registry if k.startswith("rware")}
    assert registered <= set(ids)
    env = rware_gym.RwareTwinGymEnv("rware-tiny-2ag-v2")
    with pytest.raises(ConfigError, match="reset"):
        env.step((0, 0))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="2 actions in Discrete"):
        env.step((0, 7))
