"""The equal-wall-time MARL benchmark on trimmed runs (the real one is in docs/rware.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleetmind.bench import marl
from fleetmind.errors import ConfigError
from fleetmind.rl.train import RWARE_PPO, RWARE_WORLDS, rware_defaults

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
    for algo, recipe in marl.RECIPES.items():
        assert recipe.num_envs == RWARE_WORLDS[algo]
        assert recipe.figure == "greedy"  # EPyMARL's test_greedy
    assert dict(marl.RECIPES["mappo"].overrides) == RWARE_PPO
    assert dict(marl.RECIPES["ippo"].overrides) == RWARE_PPO
    mat = marl.RECIPES["mat"].overrides
    assert dict(mat) == rware_defaults("mat")
    assert (mat["embed"], mat["hidden"]) == (32, (32,))
    # rware's own reward is the benchmark's: no dense guide unless asked for as an ablation.
    assert marl.SHAPING == 0.0


def _small(num_envs: int, **kw: object) -> marl.Recipe:
    return marl.Recipe(num_envs, {"rollout_len": 8, **kw})


def test_trimmed_runs_score_every_learner_beside_random_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("rware")
    recipes = {
        "mat": _small(2, value_norm=True),
        "mappo": _small(2, **RWARE_PPO),
        # The cap ends this run before its clock: 2 x 20 steps/s x 1 s.
        "qmix": marl.Recipe(2, {"learning_starts": 10}, steps_per_s=20.0),
    }
    kw = {
        "tasks": [TINY], "algos": ("mat", "mappo", "qmix"), "budget_s": 1.0,
        "eval_episodes": 1, "recipes": recipes, "out_dir": tmp_path, "seeds": (0,),
    }  # fmt: skip
    result = marl.run(workers=1, **kw)  # type: ignore[arg-type]
    rows = result["rows"]
    assert [r["algo"] for r in rows] == ["mat", "mappo", "qmix"]
    for row in rows:
        folder = tmp_path / TINY / row["algo"] / "seed-0"
        # Each run is a fleetmind train run folder with its evaluation curve and its row.
        for name in ("row.json", "eval_curve.csv", "curves.csv", "policy.pt", "metrics.json"):
            assert (folder / name).is_file(), name
        assert row["task"] == TINY
        assert row["eval_on"] == "rware"
        assert row["shaping"] == 0.0
        assert row["world_steps"] % 2 == 0  # whole batched steps of 2 worlds
        assert set(row["per_agent"]) == {"robot_0", "robot_1"}
        assert row["greedy"] == pytest.approx(sum(row["per_agent"].values()))
        assert row["deliveries_per_episode"] == row["greedy"]
        assert row["curve"][-1][2:] == [row["sampled"], row["greedy"]]
    mat, mappo, qmix = rows
    assert mat["train_wall_s"] >= 1.0
    assert mappo["train_wall_s"] >= 1.0
    assert qmix["world_steps"] == 40
    assert {"policy", "value", "entropy"} <= set(mappo["final_losses"])
    assert result["random"][TINY]["eval_on"] == "rware"
    (cmp,) = result["comparison"]
    assert (cmp["task"], cmp["mat"], cmp["mappo"]) == (TINY, mat["greedy"], mappo["greedy"])
    table = marl.format_table(result)
    assert "rware's own reward" in table
    assert "ABLATION" not in table
    assert f"| {TINY} | mat | 0 | 2 |" in table
    assert f"| {TINY} | random |" in table
    mappo_line = next(line for line in table.splitlines() if f"| {TINY} | mappo |" in line)
    assert marl.PUBLISHED["epymarl"][f"{TINY}/mappo"] in mappo_line

    # A rerun keeps every finished run: nothing trains again.
    def no_training(*_a: object, **_k: object) -> None:
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(marl, "train_one", no_training)
    again = marl.run(workers=1, **kw)  # type: ignore[arg-type]
    assert again["rows"] == rows
    # Another budget is another run.
    with pytest.raises(AssertionError, match="trained again"):
        marl.run(workers=1, **{**kw, "budget_s": 2.0})  # type: ignore[arg-type]


def test_a_shaped_run_is_labelled_an_ablation() -> None:
    result = {
        "tasks": [], "rows": [], "random": {}, "budget_s": 60.0, "shaping": 0.2,
        "threads": 1, "workers": 2, "eval_episodes": 100, "out_dir": "x", "comparison": [],
    }  # fmt: skip
    assert "ABLATION" in marl.format_table(result)


def test_comparison_averages_seeds_and_skips_tasks_without_both() -> None:
    def row(task: str, algo: str, g: float) -> dict[str, object]:
        return {"task": task, "algo": algo, "greedy": g, "sampled": g / 2, "world_steps": 10}

    result = {
        "tasks": ["a", "b"],
        "rows": [row("a", "mat", 1.0), row("a", "mat", 3.0), row("a", "mappo", 2.5),
                 row("b", "mat", 1.0)],
    }  # fmt: skip
    (c,) = marl.compare(result)
    assert (c["task"], c["mat"], c["mappo"], c["mat_sampled"]) == ("a", 2.0, 2.5, 1.0)
    assert c["mat_at_least_mappo"] is False


def test_summary_gives_a_t_interval_over_seeds() -> None:
    rows = [
        {"task": "a", "algo": "mappo", "greedy": g, "sampled": g, "agent_steps_per_s": 1.0,
         "world_steps": 1}
        for g in (10.0, 12.0, 14.0)
    ]  # fmt: skip
    (m,) = marl.summarise({"tasks": ["a"], "algos": ["mappo"], "rows": rows})
    assert m["greedy"] == pytest.approx(12.0)
    # t(0.975, 2) = 4.303; sd 2; sqrt(3)
    assert m["greedy_ci"] == pytest.approx(4.303 * 2 / np.sqrt(3), rel=1e-3)


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="--algos: unknown"):
        marl.run(algos=("ppo",), budget_s=1.0)
    with pytest.raises(ConfigError, match="--tasks: expected rware -v2 ids"):
        marl.run(tasks=["warehouse-tiny"], budget_s=1.0)
    with pytest.raises(ConfigError, match="--minutes must be above 0"):
        marl.run(budget_s=0.0)
    with pytest.raises(ConfigError, match="--shaping must be between 0 and 10"):
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
        (["--minutes", "0"], "error: --minutes must be above 0"),
        (["--seeds", "0,x"], "error: --seeds: "),
    ):
        monkeypatch.setattr("sys.argv", ["fleetmind", "bench", "marl", *args])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert err[0].startswith(start)
