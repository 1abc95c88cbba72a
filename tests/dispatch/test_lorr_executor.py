"""The LoRR 2026 executors: the learned GO/STOP policy, its early GO, its learner, the bench."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.bench import lorr as bench
from fleetmind.dispatch.lorr import PibtPlanner
from fleetmind.dispatch.lorr2026 import LearnedExecutor, RuleExecutor, StagedPlanner
from fleetmind.errors import ConfigError
from fleetmind.rl import lorr_executor as rx
from fleetmind.sim import lorr
from fleetmind.sim.lorr import FW, WAIT
from fleetmind.sim.lorr.world2026 import NONE, Executor2026, State, output2026, simulate2026

DATA = Path(__file__).resolve().parents[1] / "data" / "lorr"
MAZE = DATA / "2026/maze.domain/maze-example_40.json"


def play(
    executor: Executor2026, ticks: int = 300, seed: int = 3
) -> tuple[lorr.Instance, dict[str, Any]]:
    inst = lorr.read_instance(MAZE)
    run = simulate2026(
        inst, StagedPlanner(PibtPlanner(seed=0)), executor, ticks=ticks, delay_seed=seed
    )
    return inst, output2026(run)


def test_the_rule_weights_reproduce_the_rule_executor_tick_for_tick() -> None:
    _, rules = play(RuleExecutor())
    _, learned = play(LearnedExecutor(rx.LinearPolicy(rx.RULES)))
    assert learned["actualPaths"] == rules["actualPaths"]
    assert learned["numTaskFinished"] == rules["numTaskFinished"] > 0


@pytest.mark.parametrize("weights", [rx.EARLY, None])
def test_learned_and_early_runs_validate_without_collisions(weights: object) -> None:
    policy = rx.load()[0] if weights is None else rx.LinearPolicy(weights)  # type: ignore[arg-type]
    inst, out = play(LearnedExecutor(policy))
    check = lorr.validate(out, inst, time_limit=None)
    assert check.ok, check.problems
    assert check.executed_conflicts == 0
    assert out["numTaskFinished"] > 0


def corridor(tmp_path: Path, rows: tuple[str, ...] = ("......",)) -> lorr.Instance:
    path = lorr.write_instance(tmp_path, list(rows), [0, 1], [[5]], name="c")
    spec = json.loads(path.read_text()) | {"version": "2026 LoRR", "agentCounter": 3}
    spec["delayConfig"] = {
        "seed": 0, "minDelay": 1, "maxDelay": 1, "eventModel": "bernoulli", "pDelay": 0.0,
        "durationModel": "uniform", "gaussMeanRatio": 0.5, "gaussStdRatio": 0.2,
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    return lorr.read_instance(path)


def state(inst: lorr.Instance) -> State:
    n = inst.team_size
    return State(
        loc=inst.starts.copy(), ori=np.zeros(n, dtype=np.int64),
        cur=np.full(n, NONE, dtype=np.int64), count=np.zeros(n, dtype=np.int64),
        delayed=np.zeros(n, dtype=bool),
    )  # fmt: skip


def test_early_go_lets_a_follower_start_with_its_leader(tmp_path: Path) -> None:
    inst = corridor(tmp_path)
    plan = np.array([[FW, FW], [FW, FW]])  # robot 1 leads east along the row, robot 0 follows
    s = state(inst)
    rules, early = RuleExecutor(), LearnedExecutor(rx.LinearPolicy(rx.EARLY))
    for ex in (rules, early):
        ex.initialize(inst)
        ex.process_new_plan(plan, [[], []], s)
    # The rule executor holds the follower until the leader has left its cell; early GO lets
    # both squares slide together (touching, never overlapping).
    assert rules.next_command([[FW, FW], [FW, FW]], s).tolist() == [False, True]
    assert early.next_command([[FW, FW], [FW, FW]], s).tolist() == [True, True]
    # A delayed leader does not start: the follower's early GO is withdrawn.
    s.delayed[1] = True
    assert early.next_command([[FW, FW], [FW, FW]], s).tolist() == [False, True]


def test_early_go_never_jumps_the_cells_visiting_order(tmp_path: Path) -> None:
    inst = corridor(tmp_path, ("......", "......"))
    ex = LearnedExecutor(rx.LinearPolicy(rx.EARLY))
    ex.initialize(inst)
    s = state(inst)
    # Robot 1 turns south in place first, so robot 0 (behind it) may not go early.
    plan = np.array([[FW, WAIT], [1, FW]])  # 1 = CR
    ex.process_new_plan(plan, [[], []], s)
    x, admissible = ex.observe([[FW], [1, FW]], s)
    assert admissible.tolist() == [False, True]
    assert x[0, 2] == 0.0


def test_the_shipped_weights_load_and_a_bad_file_is_one_line(tmp_path: Path) -> None:
    policy, meta = rx.load()
    assert policy.weights.shape == (len(rx.FEATURES),)
    assert meta["objective"].startswith("tasks finished")
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps({"features": ["bias"], "weights": [1.0]}))
    with pytest.raises(ConfigError, match=r"w\.json: field 'features'"):
        rx.load(bad)
    with pytest.raises(ConfigError, match="executor policy: 13 weights expected"):
        rx.LinearPolicy(np.zeros(3))


def test_cem_climbs_a_known_optimum() -> None:
    target = np.array([1.0, -2.0, 0.5])
    w, history = rx.cem(
        lambda v, g: -float(((v - target) ** 2).sum()), np.zeros(3), seed=0, generations=25
    )
    assert np.abs(w - target).max() < 0.2
    assert history[-1]["incumbent"] > history[0]["incumbent"]


def test_training_problems_are_seeded_and_fully_reachable(tmp_path: Path) -> None:
    a = rx.training_problems(5, 2, tmp_path / "a")
    b = rx.training_problems(5, 2, tmp_path / "b")
    c = rx.training_problems(6, 2, tmp_path / "c")
    assert [p.starts.tolist() for p in a] == [p.starts.tolist() for p in b]
    assert a[0].starts.tolist() != c[0].starts.tolist()
    for p in a:
        assert p.edition == "2026"
        assert p.delay is not None
        free = ~p.grid.blocked.ravel()
        assert free[p.starts].all()
        assert free[p.tasks[p.tasks >= 0]].all()
        # one connected free region: every task reachable from every start
        from scipy.ndimage import label

        _labels, count = label(~p.grid.blocked)
        assert count == 1


def test_bench_2026_quick_rows_targets_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = bench.run_2026_bench(
        data=DATA, executors=("rules", "learned"), quick=True, out=tmp_path
    )
    rows = {r["executor"]: r for r in result["rows"]}
    assert set(rows) == {"rules", "learned"}
    for r in rows.values():
        assert r["problem"] == "maze-example_40"
        assert r["ticks"] == 200
        assert len(r["delays_on"]) == 2
        assert r["validated"]
        assert r["collisions"] == 0
        assert r["delays_on_mean"] == np.mean(r["delays_on"])
    (target,) = bench.targets_2026(result)
    assert target["executor"] == "learned"
    assert target["off_delta"] == rows["learned"]["delays_off"] - rows["rules"]["delays_off"]
    assert "target maze-example_40 learned vs rules" in bench.format_2026(result)

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("a finished run was played again")

    monkeypatch.setattr(bench, "run_2026", boom)
    again = bench.run_2026_bench(
        data=DATA, executors=("rules", "learned"), quick=True, out=tmp_path
    )
    assert again["rows"] == result["rows"]
    with pytest.raises(ConfigError, match="--executors: unknown 'magic'"):
        bench.run_2026_bench(data=DATA, executors=("magic",), quick=True)


def test_bench_2026_resumes_only_runs_with_the_same_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bench26(steps: int) -> dict[str, object]:
        return bench.run_2026_bench(
            data=DATA, problems=("maze-example_40",), executors=("rules",), seeds=(0,),
            steps=steps, out=tmp_path,
        )  # fmt: skip

    first = bench26(60)
    played: list[int] = []
    real = bench.run_2026

    def counting(*a: object, **k: object) -> dict[str, object]:
        played.append(int(k["ticks"]))  # type: ignore[call-overload]
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(bench, "run_2026", counting)
    assert bench26(60)["rows"] == first["rows"]  # same settings: read back
    assert played == []
    other = bench26(40)  # other settings: both runs (delays off, seed 0) play again
    assert played == [40, 40]
    assert other["rows"][0]["ticks"] == 40
    saved = json.loads((tmp_path / "maze-example_40/rules/off" / bench.RUN_FILE_2026).read_text())
    assert saved["settings"]["ticks"] == 40
    bench26(60)  # and back: the folder now holds the 40-tick run, so 60 plays again
    assert played == [40, 40, 60, 60]


def test_lorr_run_takes_the_executor_and_names_a_bad_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fleetmind.cli import app

    runner = CliRunner()
    args = ["lorr", "run", str(MAZE), "--steps", "100", "--delay-seed", "1", "--json", "-q"]
    done = runner.invoke(app, [*args, "--executor", "learned", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["executor"] == "learned"
    assert m["validated"]
    assert m["collisions"] == 0
    bad = runner.invoke(app, [*args, "--executor", "magic"])
    assert bad.exit_code != 0
    assert isinstance(bad.exception, ConfigError)
    assert "--executor: unknown 'magic' (known: rules, early, learned)" in str(bad.exception)


def test_train_executor_writes_weights_the_learned_executor_loads(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fleetmind.cli import app

    out = tmp_path / "w.json"
    args = ["lorr", "train-executor", "--generations", "1", "--population", "5"]
    args += ["--problems", "1", "--ticks", "60", "--out", str(out), "--json"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    policy, meta = rx.load(out)
    assert meta["objective"] == "tasks finished, delays on (training problems only)"
    assert len(meta["history"]) == 1
    assert set(meta["validation"]) == {"learned", "rules", "early"}
    assert not np.array_equal(policy.weights, rx.RULES)  # the mean moved to the elites
    m = bench.run_2026(MAZE, executor="learned", weights=out, ticks=60)
    assert m["validated"]
