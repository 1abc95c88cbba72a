"""The goal-conditioned navigation policy: the shipped file, rankings, save/load, delivery."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from fleetmind.envs import make_vector
from fleetmind.errors import ConfigError
from fleetmind.rl import nav
from fleetmind.sim.maps import load_map

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def policy() -> nav.NavPolicy:
    return nav.NavPolicy.load(nav.default_policy_path())


def test_shipped_policy_is_small_and_described(policy: nav.NavPolicy) -> None:
    path = nav.default_policy_path()
    assert path.name == "nav_policy.pt"
    assert path.stat().st_size < 1_000_000
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["radius"] == 2
    assert meta["obs_size"] == 111
    assert meta["heuristic"] is True
    for key in ("obs_layout", "train_map", "train_robots", "train_steps", "train_seed"):
        assert key in meta, key
    assert meta["fleetmind_version"]
    assert policy.obs_size == 111


def test_ranks_are_permutations(policy: nav.NavPolicy) -> None:
    env = make_vector("warehouse-small", 6, 3, seed=1)
    obs, _ = env.reset()
    for _ in range(20):
        ranks = policy.rank(obs.reshape(-1, obs.shape[-1]))
        assert ranks.shape == (18, 5)
        assert ranks.dtype == np.int64
        assert (np.sort(ranks, axis=1) == np.arange(5)).all()
        logits = policy.logits(obs.reshape(-1, obs.shape[-1]))
        best = np.take_along_axis(logits, ranks[:, :1], axis=1)[:, 0]
        assert np.allclose(best, logits.max(axis=1))
        obs, *_ = env.step(ranks[:, 0].reshape(3, 6))


def test_policy_delivers_on_warehouse_small(policy: nav.NavPolicy) -> None:
    kw = {"seeds": (3,), "num_envs": 2, "ticks": 200}
    mine = nav.evaluate(policy.act, "warehouse-small", 4, **kw)
    base = nav.evaluate(nav.shortest_path_actions, "warehouse-small", 4, **kw)
    assert mine["deliveries"] > 0
    assert mine["deliveries_per_robot_tick"] >= 0.95 * base["deliveries_per_robot_tick"]


def test_observer_matches_env_observations(policy: nav.NavPolicy) -> None:
    env = make_vector("warehouse-tiny", 2, 1, seed=0)
    obs, _ = env.reset()
    s = env.sim
    again = policy.observer(load_map("warehouse-tiny"))(s.pos, s.goal, s.carrying, s.has_task)
    np.testing.assert_array_equal(obs, again)


def test_save_load_roundtrip_and_errors(policy: nav.NavPolicy, tmp_path: Path) -> None:
    path = policy.save(tmp_path / "p.pt")
    back = nav.NavPolicy.load(path)
    x = np.random.default_rng(0).normal(size=(7, 111)).astype(np.float32)
    np.testing.assert_array_equal(back.logits(x), policy.logits(x))
    with pytest.raises(ConfigError, match="111 features"):
        policy.rank(np.zeros((3, 110), np.float32))
    with pytest.raises(ConfigError, match="no such"):
        nav.NavPolicy.load(tmp_path / "missing.pt")
    shutil.copy(path, tmp_path / "lonely.pt")
    with pytest.raises(ConfigError, match="metadata"):
        nav.NavPolicy.load(tmp_path / "lonely.pt")
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["format"] = "something-else"
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="'format'"):
        nav.NavPolicy.load(path)


def test_shortest_path_baseline_picks_lowest_heuristic() -> None:
    obs = np.zeros((2, 111), np.float32)
    obs[0, -5:] = [0, 1, -1, 2, -1]
    obs[1, -5:] = [0, 2, 2, 1, 2]
    assert nav.shortest_path_actions(obs).tolist() == [2, 0]


@pytest.mark.slow
def test_training_reaches_the_baseline(tmp_path: Path) -> None:
    """IPPO from scratch (seed 1, which collapsed to waiting with ent_coef 0.01) reaches 95%."""
    policy, result = nav.train_nav("warehouse-small", 4, steps=300_000, seed=1)
    kw = {"seeds": (5, 6), "num_envs": 4, "ticks": 300}
    mine = nav.evaluate(policy.act, "warehouse-small", 4, **kw)
    base = nav.evaluate(nav.shortest_path_actions, "warehouse-small", 4, **kw)
    assert mine["deliveries_per_robot_tick"] >= 0.95 * base["deliveries_per_robot_tick"]
    assert result.steps >= 300_000
