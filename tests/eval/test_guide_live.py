"""A live learned-guidance fleet learning its cost map from its own orders (eval/guide_live.py)."""

from __future__ import annotations

import pytest

from fleetmind.dispatch.executors import LearnedGuidanceExecutor
from fleetmind.errors import ConfigError
from fleetmind.eval.guide_live import LiveGuideLearner, LiveLearnConfig
from fleetmind.eval.runner import RunConfig, execute, replay_tasks
from fleetmind.rl.guide import GuideModel, default_guide_path
from fleetmind.sim.maps import load_map

LORR_SMALL = "benchmarks/data/lorr/maps/warehouse_small.map"


def _run(**kw):
    cfg = RunConfig(map=LORR_SMALL, robots=40, steps=160, executor="learned-guidance", seed=5, **kw)
    return execute(cfg, None)


def test_a_live_fleet_updates_its_model_from_its_own_orders_and_repeats_exactly() -> None:
    first = _run(learn_every=40)
    stats = first["executor_stats"]
    assert first["collisions"] == 0
    # A window every 40 ticks, each followed by a search generation scored on replays.
    assert [(r["start"], r["end"]) for r in stats["curve"]] == [
        (0, 40),
        (40, 80),
        (80, 120),
        (120, 160),
    ]
    assert stats["updates"] == sum(1 for r in stats["curve"] if "update" in r) >= 3
    assert sum(r["deliveries"] for r in stats["curve"]) == first["tasks_completed"]
    applied = [r for r in stats["curve"] if "applied_tick" in r]
    for r in applied:  # the search's mean took over only where it replayed better
        assert r["update"]["mean"] > r["update"]["current"]
    assert _run(learn_every=40)["executor_stats"] == stats  # the same seed, the same run


def test_without_updates_the_curve_is_recorded_and_the_model_never_changes() -> None:
    m = _run(learn_every=40, learn_lr=0.0)
    stats = m["executor_stats"]
    assert stats["updates"] == 0
    assert len(stats["curve"]) == 4
    assert stats["model"]["theta"] == GuideModel.load(default_guide_path()).theta
    plain = execute(
        RunConfig(map=LORR_SMALL, robots=40, steps=160, executor="learned-guidance", seed=5), None
    )
    assert plain["tasks_completed"] == m["tasks_completed"]  # watching changes nothing


def test_an_update_beside_the_loop_takes_over_lag_ticks_later_whatever_the_timing() -> None:
    a = _run(learn_every=40, learn_lag=10)["executor_stats"]
    for r in a["curve"]:
        if "applied_tick" in r:
            assert r["applied_tick"] == r["end"] + 10
    assert _run(learn_every=40, learn_lag=10)["executor_stats"] == a


class _World:
    """What the learner reads of the simulator: deliveries so far and the order records."""

    def __init__(self) -> None:
        self.done = 0
        self.records: list = []

    def metrics(self) -> dict:
        return {"tasks_completed": self.done}


def test_the_guard_brings_back_the_model_before_an_update_that_lowered_throughput() -> None:
    grid = load_map(LORR_SMALL)
    ex = LearnedGuidanceExecutor(grid, robots=40)
    world = _World()
    cfg = RunConfig(map=LORR_SMALL, robots=40, executor="learned-guidance")
    settings = LiveLearnConfig(every=10, guard=0.1, updates=False)
    learner = LiveGuideLearner(cfg, world, ex, settings, replay_tasks)
    world.done = 20
    learner.after_tick(10)  # 2.0 a tick: the reference
    before = ex.model
    learner._backup = before  # an update on trial, as _finish leaves it
    learner._use(GuideModel.neutral())
    world.done = 38
    learner.after_tick(20)  # 1.8 a tick: within the guard, kept
    assert ex.model == GuideModel.neutral()
    assert learner.rollbacks == 0
    learner._backup = before
    world.done = 48
    learner.after_tick(30)  # 1.0 a tick, under 0.9 x 1.8: rolled back
    assert ex.model == before
    assert learner.rollbacks == 1
    assert learner.curve[-1]["rolled_back"] is True


_KNEES: list[float] = []


def _scored_by_change(run: dict, model: str, seed: int, tasks: str) -> int:
    """A replay scoring 1 for a model whose weights left the shipped ones; notes each knee."""
    m = GuideModel.load(model)
    _KNEES.append(m.knee)
    return int(m.theta != GuideModel.load(default_guide_path()).theta)


def test_a_live_search_moves_the_weights_and_holds_the_knee() -> None:
    shipped = GuideModel.load(default_guide_path())
    ex = LearnedGuidanceExecutor(load_map(LORR_SMALL), robots=40)
    world = _World()
    cfg = RunConfig(map=LORR_SMALL, robots=40, executor="learned-guidance")
    learner = LiveGuideLearner(cfg, world, ex, LiveLearnConfig(every=10), _scored_by_change)
    _KNEES.clear()
    for tick in (10, 20, 30):
        world.done += 20
        learner.after_tick(tick)
    # The first generation's mean is the shipped model; the second's took over.
    assert learner.updates == 3
    assert learner.version >= 1
    assert ex.model.theta != shipped.theta
    # The knee says how weights fade with fleet density; one fleet has one density, so every
    # model scored, and the one the fleet runs now, keep the shipped knee.
    assert len(_KNEES) > 10
    assert set(_KNEES) == {shipped.knee}
    assert ex.model.knee == shipped.knee


def test_learning_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="lag"):
        LiveLearnConfig(every=10, lag=10)
    with pytest.raises(ValueError, match="learn"):
        RunConfig(map=LORR_SMALL, executor="guidance", learn_every=10)
