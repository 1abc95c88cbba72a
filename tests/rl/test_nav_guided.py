"""The guided residual policy, its executor and the online learner with its rollback guard."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fleetmind.dispatch.executors import GuidanceExecutor, GuidedRLExecutor
from fleetmind.errors import ConfigError
from fleetmind.rl.nav_guided import (
    MASKED,
    GuidedPolicy,
    LearnConfig,
    OnlineLearner,
    features,
    prior_of,
)
from fleetmind.sim.grid import WAIT
from fleetmind.sim.maps import load_map


@pytest.fixture(scope="module")
def grid():
    return load_map("warehouse-small")


def test_prior_masks_walls_and_prefers_the_cheaper_move() -> None:
    cost = np.array([[5.0, 4.0, np.inf, 5.3, 6.0]])
    prior = prior_of(cost, scale=4.0)
    assert prior[0, 2] == MASKED
    assert prior[0, WAIT] == 0.0
    assert prior[0, 1] > prior[0, WAIT] > prior[0, 3] > prior[0, 4]
    obs = features(np.zeros((1, 111), dtype=np.float32), cost)
    assert obs[0, -5:].tolist() == pytest.approx([0.0, -1.0, 2.0, 0.3, 1.0])


def test_a_fresh_policy_ranks_as_guidance_does(grid, fleet_scene) -> None:
    pos, goal, active = fleet_scene(grid)
    idx = np.flatnonzero(active)
    guided = GuidedRLExecutor(grid, fresh=True, seed=0)
    twin = GuidanceExecutor(grid, guided.oracle, seed=0)  # the same costs, call for call
    plain = GuidanceExecutor(grid, guided.oracle, seed=0)
    for _ in range(3):
        ours, theirs = guided.rank(pos, goal, active), plain.rank(pos, goal, active)
        key, ties = twin.costs(pos, goal, idx)
        assert (np.sort(ours, axis=1) == np.arange(5)).all()
        assert (ours[~active, 0] == WAIT).all()
        # The zero residual leaves the prior: the first move is one of guidance's cheapest
        # (ties may fall the other way) and the other four keep guidance's order.
        first = np.take_along_axis(key, ours[idx, :1], axis=1)[:, 0]
        assert first == pytest.approx(key.min(axis=1))
        order = np.lexsort((ties, key), axis=1)
        rest = order[order != ours[idx, :1]].reshape(len(idx), 4)
        assert (ours[idx, 1:] == rest).all()
        assert (ours[:, 0] == theirs[:, 0]).mean() > 0.8


def test_save_and_load_round_trip(tmp_path) -> None:
    policy = GuidedPolicy(hidden=(16,))
    with torch.no_grad():
        policy.actor[-1].bias.fill_(0.5)
    path = policy.save(tmp_path / "p.pt")
    back = GuidedPolicy.load(path)
    obs = np.random.default_rng(0).random((7, 111), dtype=np.float32)
    prior = np.zeros((7, 5), dtype=np.float32)
    assert np.allclose(back.greedy(obs, prior), policy.greedy(obs, prior))
    assert back.hidden == (16,)


def test_bad_policy_files_are_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such guided policy file"):
        GuidedPolicy.load(tmp_path / "missing.pt")
    path = GuidedPolicy(hidden=(8,)).save(tmp_path / "p.pt")
    path.with_suffix(".json").write_text('{"format": "other"}')
    with pytest.raises(ConfigError, match="field 'format'"):
        GuidedPolicy.load(path)
    path.with_suffix(".json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"p\.json:1: not valid JSON"):
        GuidedPolicy.load(path)


def _play(learner, ticks, deliveries, n=6, seed=0):
    """Feed ``ticks`` steps; robot 0 always gains a cell when it moves up (action 1)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(ticks):
        obs = rng.random((n, 111), dtype=np.float32)
        prior = np.zeros((n, 5), dtype=np.float32)
        act = learner.act(obs, prior, np.ones(n, dtype=bool))
        progress = (act == 1).astype(np.float32)
        row = learner.outcome(progress, deliveries, t + 1)
        if row is not None:
            rows.append(row)
    return rows


def test_the_learner_updates_every_window_toward_rewarded_actions() -> None:
    policy = GuidedPolicy(hidden=(16,))
    learner = OnlineLearner(policy, LearnConfig(every=50, epochs=8, lr=3e-3, guard=None, team=0))
    obs = np.random.default_rng(9).random((200, 111), dtype=np.float32)
    prior = np.zeros((200, 5), dtype=np.float32)
    before = torch.softmax(torch.from_numpy(policy.greedy(obs, prior)), -1)[:, 1].mean()
    rows = _play(learner, 200, deliveries=1)
    after = torch.softmax(torch.from_numpy(policy.greedy(obs, prior)), -1)[:, 1].mean()
    assert [r["end"] for r in rows] == [50, 100, 150, 200]
    assert learner.updates == 4
    assert learner.rollbacks == 0
    assert after > before + 0.05  # the rewarded action got likelier
    assert all(r["samples"] == 50 * 6 for r in rows)


def test_the_guard_rolls_back_an_update_that_lowers_deliveries() -> None:
    policy = GuidedPolicy(hidden=(16,))
    learner = OnlineLearner(policy, LearnConfig(every=20, lr=1e-2, guard=0.1))
    _play(learner, 20, deliveries=2)  # window 1: 40 deliveries, then an update
    assert learner.updates == 1
    updated = {k: v.clone() for k, v in policy.state_dict().items()}
    backup = learner._backup[0]
    assert any(not torch.equal(updated[k], backup[k]) for k in updated)
    rows = _play(learner, 20, deliveries=1, seed=1)  # window 2: half the deliveries
    assert rows[-1]["rolled_back"]
    assert learner.rollbacks == 1
    assert all(torch.equal(policy.state_dict()[k], backup[k]) for k in backup)
    # The next window is played under the restored weights and learned from again.
    rows = _play(learner, 20, deliveries=1, seed=2)
    assert not rows[-1]["rolled_back"]
    assert learner.updates == 2


def test_learn_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="every"):
        LearnConfig(every=0)
    with pytest.raises(ConfigError, match="guard"):
        LearnConfig(guard=1.5)
    with pytest.raises(ConfigError, match="lag"):
        LearnConfig(every=20, lag=20)


def _weights(policy: GuidedPolicy) -> list[torch.Tensor]:
    return [v.clone() for v in policy.state_dict().values()]


def test_a_lagged_update_runs_beside_the_loop_and_takes_over_lag_ticks_later() -> None:
    policy = GuidedPolicy(hidden=(16,))
    learner = OnlineLearner(policy, LearnConfig(every=20, lr=1e-2, guard=None, team=0, lag=5))
    rng = np.random.default_rng(0)
    changed_at = []
    last = _weights(policy)
    for t in range(1, 61):
        obs = rng.random((6, 111), dtype=np.float32)
        act = learner.act(obs, np.zeros((6, 5), dtype=np.float32), np.ones(6, dtype=bool))
        learner.outcome((act == 1).astype(np.float32), 1, t)
        now = _weights(policy)
        if any(not torch.equal(a, b) for a, b in zip(last, now, strict=True)):
            changed_at.append(t)
        last = now
    # Windows close at ticks 20, 40, 60; each update's weights arrive 5 ticks later, never
    # earlier; the last is still running when play stops.
    assert changed_at == [25, 45]
    stats = learner.stats()
    assert [r.get("applied_tick") for r in stats["curve"]] == [25, 45, None]
    assert all(r["samples"] == 20 * 6 for r in stats["curve"][:2])
    assert stats["learn"]["lag"] == 5
    assert learner.stats() == stats  # asking mid-run changes nothing


def test_a_learning_run_is_shielded_recorded_and_reproducible(tmp_path) -> None:
    from fleetmind.eval.runner import RunConfig, execute

    cfg = RunConfig(
        map="warehouse-small",
        robots=16,
        steps=120,
        seed=3,
        executor="rl-guided",
        fresh_policy=True,
        learn_every=40,
        save_policy=str(tmp_path / "learned.pt"),
    )
    a = execute(cfg, None)
    b = execute(cfg.model_copy(update={"save_policy": str(tmp_path / "again.pt")}), None)
    assert a["collisions"] == 0
    assert a["tasks_completed"] > 0
    curve = a["executor_stats"]["curve"]
    assert [r["end"] for r in curve] == [40, 80]  # the third window closes after the run
    assert curve == b["executor_stats"]["curve"]
    assert a["tasks_completed"] == b["tasks_completed"]
    # Learning beside the loop (--learn-lag): the same windows, each update's weights 10 ticks
    # after its window, and the run repeats (only the seconds waited may differ).
    lagged = cfg.model_copy(update={"learn_lag": 10, "save_policy": None})
    c, d = (
        [{k: v for k, v in r.items() if k != "wait_s"} for r in m["executor_stats"]["curve"]]
        for m in (execute(lagged, None), execute(lagged, None))
    )
    assert [r["end"] for r in c] == [r["end"] for r in curve]
    assert [r.get("applied_tick") for r in c] == [50, 90]
    assert c == d
    # What the run learned is a policy the executor can start from.
    learned = GuidedPolicy.load(tmp_path / "learned.pt")
    fresh = GuidedPolicy()
    assert any(
        not torch.equal(learned.state_dict()[k], fresh.state_dict()[k]) for k in fresh.state_dict()
    )
    later = execute(
        cfg.model_copy(
            update={
                "policy": str(tmp_path / "learned.pt"),
                "fresh_policy": False,
                "save_policy": None,
            }
        ),
        None,
    )
    assert later["collisions"] == 0


def test_learning_options_need_the_guided_executor() -> None:
    from pydantic import ValidationError

    from fleetmind.eval.runner import RunConfig

    with pytest.raises(ValidationError, match="rl-guided"):
        RunConfig(executor="shortest-path", learn_every=10)
    with pytest.raises(ValidationError, match="save_policy"):
        RunConfig(executor="rl", save_policy="x.pt")
    with pytest.raises(ValidationError, match="learn_lag"):
        RunConfig(executor="congestion", learn_lag=5)


def test_nav_learn_and_run_learn_through_the_cli(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from fleetmind.cli import app

    out = tmp_path / "g.pt"
    args = ["nav", "learn", "--out", str(out), "--maps", "warehouse-small", "--robots", "8,12"]
    res = CliRunner().invoke(app, [*args, "--episodes", "2", "--steps", "60", "--every", "20"])
    assert res.exit_code == 0, res.output
    meta = GuidedPolicy.load(out).metadata["train"]
    assert [r["robots"] for r in meta["runs"]] == [8, 12]
    assert [r["seed"] for r in meta["runs"]] == [100, 101]  # never the bench seeds 0-2
    assert all(r["collisions"] == 0 for r in meta["runs"])
    run = [
        "run", "--map", "warehouse-small", "--robots", "8", "--steps", "61",
        "--executor", "rl-guided", "--policy", str(out), "--learn-every", "20",
        "--out", str(tmp_path / "run"), "--json",
    ]  # fmt: skip
    res = CliRunner().invoke(app, run)
    assert res.exit_code == 0, res.output
    m = json.loads(res.stdout)
    assert [w["end"] for w in m["executor_stats"]["curve"]] == [20, 40, 60]
    assert m["executor_stats"]["learn"]["every"] == 20
    bad = CliRunner().invoke(app, ["run", "--executor", "guidance", "--learn-every", "5"])
    assert isinstance(bad.exception, ConfigError)  # main() prints it as one line, exit 2
    assert "learn_every" in str(bad.exception)
    assert "rl-guided" in str(bad.exception)
