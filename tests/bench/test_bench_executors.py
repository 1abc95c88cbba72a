"""fleetmind bench executors: every executor on the same seeds, ratios to the best simple one."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fleetmind.bench import executors as bench
from fleetmind.cli import app


def test_quick_bench_through_the_cli() -> None:
    res = CliRunner().invoke(app, ["bench", "executors", "--quick", "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    (row,) = result["cases"]
    assert row["robots"] == 12
    assert set(row["executors"]) == set(bench.EXECUTORS)
    best = row["best_simple"]
    assert best in bench.SIMPLE
    means = {n: c["tasks_mean"] for n, c in row["executors"].items()}
    assert means[best] == max(means[n] for n in bench.SIMPLE) > 0
    for name, cell in row["executors"].items():
        assert len(cell["tasks"]) == len(result["seeds"]) == 1
        assert cell["collisions"] == 0, name  # the shield is on
        assert cell["vs_best_simple"] == cell["tasks_mean"] / means[best]
        assert 0 < cell["executor_ms"]["p50"] <= cell["executor_ms"]["p99"]
    scale = result["scale"]
    assert set(scale["executor_ms"]) == set(bench.EXECUTORS)
    ms = scale["executor_ms"]
    assert scale["rl_vs_shortest_path_p50"] == ms["rl"]["p50"] / ms["shortest-path"]["p50"]
    targets = result["targets"]
    assert targets["collisions"] == {"value": 0, "target": 0, "met": True}
    assert targets["rl_vs_best_simple/warehouse-small/12"]["best_simple"] == best


def test_table_names_every_executor_and_target() -> None:
    res = CliRunner().invoke(
        app, ["bench", "executors", "--quick", "--seeds", "3", "--scale-robots", "0"]
    )
    assert res.exit_code == 0, res.output
    for name in bench.EXECUTORS:
        assert f"  {name} " in res.stdout
    assert "seeds 3 (tasks delivered)" in res.stdout
    assert "Executor time per tick" not in res.stdout  # no scale row asked for
    assert "rl_vs_best_simple/warehouse-small/12" in res.stdout
    # A learned executor alone has no simple one to be compared with: a dash, not a crash.
    alone = ["bench", "executors", "--quick", "--seeds", "3", "--scale-robots", "0"]
    res = CliRunner().invoke(app, [*alone, "--executors", "learned-guidance"])
    assert res.exit_code == 0, res.output
    assert "best simple None" in res.stdout
    assert "  learned-guidance " in res.stdout


def test_bad_seeds_get_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetmind.cli import main

    for seeds, why in (("0,x", "expected integers"), (",", "at least one seed")):
        monkeypatch.setattr("sys.argv", ["fleetmind", "bench", "executors", "--seeds", seeds])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert err[0].startswith("error: --seeds: ")
        assert why in err[0]


def test_scale_row_reuses_a_case_of_its_map_and_size() -> None:
    cases = (bench.Case("warehouse-small", 20, 1.0, held_out=False),)
    result = bench.run(quick=True, cases=cases, scale_robots=20, executors=("shortest-path", "rl"))
    (row,) = result["cases"]
    scale = result["scale"]
    assert (scale["robots"], scale["steps"], scale["seeds"]) == (20, 40, [0])
    assert scale["executor_ms"] == {n: c["executor_ms"] for n, c in row["executors"].items()}
    assert row["best_simple"] == "shortest-path"
    assert result["targets"]["rl_time_vs_shortest_path"]["value"] == (
        scale["executor_ms"]["rl"]["p50"] / scale["executor_ms"]["shortest-path"]["p50"]
    )


def test_maps_made_beside_the_loop_are_counted_for_each_executor() -> None:
    from fleetmind.eval.runner import RunConfig, execute

    # Shortest path makes plain maps only (the loop's, shared); learned-guidance also makes
    # maps of its own graph. Both workers' CPU time lands in the run's metrics.
    run = {"map": "warehouse-small", "robots": 20, "steps": 60, "seed": 0}
    plain = execute(RunConfig(**run, executor="shortest-path"), None)["distance_maps"]
    own = execute(RunConfig(**run, executor="learned-guidance"), None)["distance_maps"]
    assert set(plain) == {"plain"}
    assert set(own) == {"plain", "executor"}
    for counts in (plain["plain"], own["plain"], own["executor"]):
        made = counts["made_ahead"] + counts["made_in_caller"]
        assert made > 0
        assert (counts["made_ahead_cpu_s"] > 0) == (counts["made_ahead"] > 0)
    cases = (bench.Case("warehouse-small", 20, 1.0, held_out=False),)
    both = ("shortest-path", "learned-guidance")
    result = bench.run(quick=True, cases=cases, scale_robots=20, executors=both)
    ahead = result["scale"]["maps_ahead_ms"]
    assert set(ahead) == set(both)
    assert all(v >= 0 for v in ahead.values())
    assert " maps" in bench.format_table(result)


@pytest.mark.parametrize("learner", ["learned-guidance", "rl-guided"])
def test_learning_bench_compares_learning_with_the_same_runs_without_updates(learner) -> None:
    args = ["bench", "executors", "--learn", "--quick", "--learn-executor", learner]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    (result,) = json.loads(res.stdout)["cases"]
    assert (result["map"], result["robots"]) == ("warehouse-small", 12)
    runs = result["runs"]
    greedy = {"rl-guided greedy"} if learner == "rl-guided" else set()
    assert set(runs) == {"learning", "no updates", "guidance"} | greedy
    learn, control = runs["learning"], runs["no updates"]
    # Ten 30-tick windows in 300 ticks: rl-guided closes a window at the tick after it (the
    # last one after the run), learned-guidance as its last tick is done.
    windows = 9 if learner == "rl-guided" else 10
    assert [len(c) for c in learn["curve"]] == [windows] == [len(c) for c in control["curve"]]
    # An update at the end of each window (the run's last tick aside) but one that rolls an
    # update back; the last window can roll one back too.
    assert learn["updates"][0] >= 1
    assert 9 <= learn["updates"][0] + learn["rollbacks"][0] <= 10
    if learner == "rl-guided":  # sampled actions and new weights: the runs part
        assert learn["tasks"] != control["tasks"] or learn["curve"] != control["curve"]
    else:  # the control only watches (rl-guided's makes updates at learning rate 0)
        assert control["updates"] == [0]
    assert learn["last_vs_first"][0] == learn["last_20"][0] / learn["first_20"][0]
    f = result["figures"]
    assert f["collisions"] == 0
    assert f["target/last_vs_first"]["target"] == 1.05
    assert f["last_20/learning_vs_no_updates"] == pytest.approx(
        learn["last_20"][0] / control["last_20"][0]
    )
    table = " ".join(CliRunner().invoke(app, args).stdout.split())  # rich wraps lines
    assert "the same run without updates" in table
    verdict = "met" if f["target/last_vs_first"]["met"] else "MISSED"
    assert f"(target 1.05 {verdict};" in table


def test_cases_and_executors_can_be_chosen_and_bad_names_are_refused() -> None:
    from fleetmind.errors import ConfigError

    chosen = bench.select("warehouse_small,sortation_large.map", "guidance,rl-guided")
    assert [(bench.Path(c.map).name, c.robots) for c in chosen["cases"]] == [
        ("warehouse_small.map", 100),
        ("warehouse_small.map", 200),
        ("sortation_large.map", 1000),
    ]
    assert chosen["executors"] == ("guidance", "rl-guided")
    assert bench.select(None, None) == {}
    with pytest.raises(ConfigError, match="--cases: no case on map 'nowhere'"):
        bench.select("nowhere", None)
    with pytest.raises(ConfigError, match="--executors: unknown executor 'magic'"):
        bench.select(None, "magic")


def test_layouts_are_held_out_maps_that_load_and_serve_orders() -> None:
    from fleetmind.rl.guide import GuideModel, default_guide_path
    from fleetmind.sim.maps import load_map, require_tasks

    chosen = bench.select("layouts", None)
    assert chosen["cases"] == bench.LAYOUT_CASES
    search = GuideModel.load(default_guide_path()).metadata["search"]
    # Written by `fleetmind nav guide`: its training maps (older searches: "maps").
    maps = [m for m, _ in search["cases"]] if "cases" in search else search["maps"]
    trained = {bench.Path(m).stem for m in maps}
    assert "warehouse_small" in trained
    for case in bench.LAYOUT_CASES:
        assert case.held_out
        assert case.target == 1.0
        assert bench.Path(case.map).stem not in trained  # never a training map
        grid = load_map(case.map)
        require_tasks(grid)  # pickups and stations: orders can be served
        assert case.robots < int((~grid.blocked).sum()) // 4


def test_a_guide_model_file_replaces_the_shipped_one(tmp_path) -> None:
    from fleetmind.rl.guide import GuideModel

    neutral = tmp_path / "neutral.json"
    GuideModel.neutral().save(neutral)
    args = ["bench", "executors", "--quick", "--json", "--scale-robots", "0"]
    args += ["--executors", "guidance,learned-guidance"]
    res = CliRunner().invoke(app, [*args, "--guide", str(neutral)])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["cases"]
    ex = row["executors"]
    # The neutral model is guidance move for move; the shipped one is not.
    assert ex["learned-guidance"]["tasks"] == ex["guidance"]["tasks"]
    assert (
        ex["learned-guidance"]["shield_interventions_mean"]
        == (ex["guidance"]["shield_interventions_mean"])
    )
    shipped = json.loads(CliRunner().invoke(app, args).stdout)["cases"][0]["executors"]
    assert (
        shipped["learned-guidance"]["shield_interventions_mean"]
        != (ex["guidance"]["shield_interventions_mean"])
    )
    missing = CliRunner().invoke(app, [*args, "--guide", str(tmp_path / "none.json")])
    assert missing.exit_code == 2


def test_training_maps_load_serve_orders_and_stay_apart_from_the_held_out_ones() -> None:
    # benchmarks/data/train/: the maps `fleetmind nav guide --cases` trains on (the commands in
    # docs/executors.md name them). None may be a held-out map, and every one must serve orders
    # from one connected floor (an unreachable pickup would make orders nobody can serve).
    from scipy.ndimage import label

    from fleetmind.sim.maps import load_map, require_tasks

    train = sorted(p for p in (bench.HELDOUT.parent / "train").iterdir() if p.suffix != ".md")
    assert {p.name for p in train} >= {"warehouse-1wide.txt", "random-48-48-20-errands.map"}
    held_out = {p.stem for p in bench.HELDOUT.iterdir()} | {"sortation_large", "warehouse_large"}
    for path in train:
        assert path.stem not in held_out
        grid = load_map(str(path))
        require_tasks(grid)
        _, floors = label(~grid.blocked)
        assert floors == 1, path.name
