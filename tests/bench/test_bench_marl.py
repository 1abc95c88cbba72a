"""The equal-wall-time MARL benchmark on a trimmed run (the real one is in docs/neural.md)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.bench import marl
from fleetmind.errors import ConfigError


def test_twin_batch_reports_what_the_learners_read() -> None:
    env = marl.TwinBatch("rware-tiny-2ag-v2", 2, seed=0)
    assert (env.n_robots, env.obs_size, env.n_actions, env.max_steps) == (2, 71, 5, 500)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 2, 71)
    assert env.global_state().shape == (2, 142)
    rng = np.random.default_rng(0)
    for _ in range(500):
        obs, r, _te, trunc, info = env.step(rng.integers(5, size=(2, 2)))
        np.testing.assert_array_equal(info["delivered"], r > 0)
    assert trunc.all()  # the 500-step limit
    assert info["final_state"].shape == (2, 142)
    np.testing.assert_array_equal(info["final_state"], info["final_obs"].reshape(2, -1))


def test_trimmed_run_scores_every_learner_beside_random() -> None:
    pytest.importorskip("rware")
    result = marl.run(algos=("mat", "maddpg"), budget_s=1.0, eval_episodes=1, num_envs=2)
    assert [r["algo"] for r in result["rows"]] == ["mat", "maddpg"]
    for row in result["rows"]:
        assert row["world_steps"] % 2 == 0  # whole batched steps of 2 worlds
        assert row["train_wall_s"] >= 1.0
        assert row["eval_on"] == "rware"
        assert set(row["per_agent"]) == {"robot_0", "robot_1"}
        assert row["deliveries_per_episode"] == sum(row["per_agent"].values())
    assert result["random"]["eval_on"] == "rware"
    table = marl.format_table(result)
    assert "| mat | 0 |" in table
    assert "| random |" in table


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="algos: unknown"):
        marl.run(algos=("ppo",), budget_s=1.0)
    with pytest.raises(ConfigError, match="budget_s: must be > 0"):
        marl.run(budget_s=0.0)
