"""The equal-wall-time MARL benchmark on trimmed runs (the real one is in docs/rware.md)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.bench import marl
from fleetmind.errors import ConfigError
from fleetmind.rl.train import RWARE_PPO, rware_defaults

TINY = "rware-tiny-2ag-v2"


def test_twin_batch_reports_what_the_learners_read() -> None:
    env = marl.TwinBatch(TINY, 2, seed=0)
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


def test_recipes_are_fleetmind_trains_on_rware_ids() -> None:
    assert set(marl.RECIPES) == set(marl.ALGOS)
    assert dict(marl.RECIPES["mappo"].overrides) == RWARE_PPO
    # MAT takes the RWARE_PPO fields its model reads (the rest do not apply to it) and a
    # narrower model than MATConfig's default, as fleetmind train does on rware ids.
    mat = marl.RECIPES["mat"].overrides
    assert dict(mat) == rware_defaults("mat")
    assert {k: mat[k] for k in ("value_norm", "ent_coef", "lr")} == {
        k: RWARE_PPO[k] for k in ("value_norm", "ent_coef", "lr")
    }
    assert (mat["embed"], mat["hidden"]) == (32, (32,))
    assert not {"activation", "feature_norm"} & set(mat)
    assert marl.RECIPES["qmix"].figure == "greedy"
    assert marl.SHAPING == 0.2


def test_quarters_bin_episodes_by_training_time() -> None:
    stamps = [1.0, 2.0, 26.0, 80.0, 99.0, 130.0]  # the last one ended after the budget
    deliveries = [0, 2, 4, 1, 3, 5]
    # The last quarter keeps the episodes a run finishes past its budget (a rollout in flight).
    assert marl._quarters(stamps, deliveries, 100.0) == [1.0, 4.0, None, 3.0]


def _small(num_envs: int, **kw: object) -> marl.Recipe:
    return marl.Recipe(num_envs, {"rollout_len": 8, **kw})


def test_trimmed_run_scores_every_learner_beside_random() -> None:
    pytest.importorskip("rware")
    recipes = {
        "mat": _small(2, value_norm=True),
        "mappo": _small(2, **RWARE_PPO),
        # The cap ends this run before its clock: 2 x 20 steps/s x 1 s.
        "qmix": marl.Recipe(2, {"learning_starts": 10}, figure="greedy", steps_per_s=20.0),
    }
    result = marl.run(
        tasks=[TINY], algos=("mat", "mappo", "qmix"), budget_s=1.0, eval_episodes=1,
        recipes=recipes,
    )  # fmt: skip
    rows = result["rows"]
    assert [r["algo"] for r in rows] == ["mat", "mappo", "qmix"]
    for row in rows:
        assert row["task"] == TINY
        assert row["eval_on"] == "rware"
        assert row["world_steps"] % 2 == 0  # whole batched steps of 2 worlds
        assert set(row["per_agent"]) == {"robot_0", "robot_1"}
        assert row["deliveries_per_episode"] == sum(row["per_agent"].values())
        assert row["deliveries_per_episode"] == row[row["figure"]]
        assert len(row["train_deliveries_by_quarter"]) == 4
    mat, mappo, qmix = rows
    assert mat["train_wall_s"] >= 1.0
    assert mappo["train_wall_s"] >= 1.0
    assert qmix["world_steps"] == 40
    assert qmix["train_wall_s"] < 1.0
    assert {"policy", "value", "entropy"} <= set(mappo["final_losses"])
    # Epsilon reaches its floor at a quarter of the cap (it never left 1.0 under a 10^12 cap).
    assert qmix["final_losses"]["epsilon"] == pytest.approx(0.05)
    assert result["random"][TINY]["eval_on"] == "rware"
    (cmp,) = result["comparison"]
    assert (cmp["task"], cmp["mat"], cmp["mappo"]) == (TINY, mat["sampled"], mappo["sampled"])
    assert cmp["mat_at_least_mappo"] == (mat["sampled"] >= mappo["sampled"])
    table = marl.format_table(result)
    assert f"| {TINY} | mat | 0 | 2 |" in table
    assert f"| {TINY} | random |" in table
    assert "| mat >= mappo |" in table
    mappo_line = next(line for line in table.splitlines() if f"| {TINY} | mappo |" in line)
    assert marl.PUBLISHED["epymarl"][f"{TINY}/mappo"] in mappo_line
    mat_line = next(line for line in table.splitlines() if f"| {TINY} | mat |" in line)
    assert mat_line.endswith("| not found | not found |")


def test_comparison_averages_seeds_and_skips_tasks_without_both() -> None:
    def row(task: str, algo: str, s: float) -> dict[str, object]:
        return {"task": task, "algo": algo, "sampled": s, "greedy": s / 2, "world_steps": 10}

    result = {
        "tasks": ["a", "b"],
        "rows": [row("a", "mat", 1.0), row("a", "mat", 3.0), row("a", "mappo", 2.5),
                 row("b", "mat", 1.0)],
    }  # fmt: skip
    (c,) = marl.compare(result)
    assert (c["task"], c["mat"], c["mappo"], c["mat_greedy"]) == ("a", 2.0, 2.5, 1.0)
    assert c["mat_at_least_mappo"] is False


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="--algos: unknown"):
        marl.run(algos=("ppo",), budget_s=1.0)
    with pytest.raises(ConfigError, match="--tasks: expected rware -v2 ids"):
        marl.run(tasks=["warehouse-tiny"], budget_s=1.0)
    with pytest.raises(ConfigError, match="--minutes: must be > 0"):
        marl.run(budget_s=0.0)
    with pytest.raises(ConfigError, match="--shaping: must be in"):
        marl.run(budget_s=1.0, shaping=-1.0)
    with pytest.raises(ConfigError, match="--eval-episodes"):
        marl.run(budget_s=1.0, eval_episodes=0)
    with pytest.raises(ConfigError, match="--seeds"):
        marl.run(budget_s=1.0, seeds=())


def test_cli_bad_input_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetmind.cli import main

    for args, start in (
        (["--tasks", "rware-tiny-2ag"], "error: --tasks: "),
        (["--minutes", "0"], "error: --minutes: "),
        (["--seeds", "0,x"], "error: --seeds: "),
    ):
        monkeypatch.setattr("sys.argv", ["fleetmind", "bench", "marl", *args])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert err[0].startswith(start)
