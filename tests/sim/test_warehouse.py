"""The single-world simulator: tasks, deliveries, orders, rewards, snapshots, scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.errors import ConfigError, TaskFileError
from fleetmind.sim.grid import LEFT, RIGHT, UP, WAIT
from fleetmind.sim.maps import load_map, parse_text_map
from fleetmind.sim.notes import Constraint
from fleetmind.sim.orders import Order, OrderConfig, load_task_file
from fleetmind.sim.rewards import RewardConfig
from fleetmind.sim.warehouse import BatteryConfig, Warehouse, WarehouseConfig

LINE = parse_text_map("S...x")


def _one_order(**kw) -> list[Order]:
    return [Order(id="o0", tick=0, pickup=(0, 4), station=(0, 0), **kw)]


def _world(orders=None, **cfg) -> Warehouse:
    config = WarehouseConfig(n_robots=1, orders=OrderConfig(rate=0.5), **cfg)
    return Warehouse(
        LINE,
        config,
        seed=0,
        start=np.array([[0, 2]], dtype=np.int32),
        orders=orders if orders is not None else _one_order(),
    )


def test_pickup_then_delivery_counted_once() -> None:
    w = _world()
    assert w.has_task[0]
    assert w.task_of(0).id == "o0"
    out = [w.step([a]) for a in (RIGHT, RIGHT)]
    assert out[-1].picked == ("o0",)
    assert w.carrying[0]
    delivered = []
    for _ in range(6):
        delivered += w.step([LEFT]).delivered
    # Standing on the station after delivering does not deliver again.
    for _ in range(3):
        delivered += w.step([WAIT]).delivered
    assert delivered == ["o0"]
    m = w.metrics()
    assert m["tasks_completed"] == 1
    assert m["per_agent_deliveries"] == {"robot_0": 1}
    assert m["on_time_rate"] == 1.0


def test_rewards_follow_the_note_defaults() -> None:
    w = _world()
    r = [float(w.step([a]).rewards[0]) for a in (RIGHT, RIGHT, LEFT, LEFT, LEFT, LEFT)]
    assert r[:5] == pytest.approx([-0.01] * 5)
    assert r[5] == pytest.approx(1.0 - 0.01)


def test_text_only_violations_are_scored() -> None:
    orders = _one_order(constraints=(Constraint("hold", tick=100),))
    w = _world(orders)
    for a in (RIGHT, RIGHT, LEFT, LEFT, LEFT, LEFT):
        w.step([a])
    assert w.metrics()["constraint_violations"] == {"structured": 0, "text_only": 1}


def test_violations_count_undelivered_orders() -> None:
    # Loaded by the robot the note excludes, never delivered: still a violation.
    w = _world(_one_order(constraints=(Constraint("not_robot", robot="robot_0"),)))
    w.step([RIGHT])
    w.step([RIGHT])
    assert w.carrying[0]
    assert w.metrics()["constraint_violations"]["text_only"] == 1
    # Never served, deadline passed: made impossible, so a violation; and stranded once overdue.
    late = _world(
        _one_order(constraints=(Constraint("deadline", tick=3),), due=4), auto_assign=False
    )
    for _ in range(3):
        late.step([WAIT])
    assert late.metrics()["constraint_violations"]["text_only"] == 1
    assert late.metrics()["orders_stranded"] == 0
    late.step([WAIT])
    late.step([WAIT])
    m = late.metrics()
    assert m["orders_stranded"] == 1
    assert m["on_time_rate"] == 0.0  # a stranded order counts against the on-time rate
    # A deadline still ahead is not broken yet.
    early = _world(_one_order(constraints=(Constraint("deadline", tick=50),)), auto_assign=False)
    early.step([WAIT])
    assert early.metrics()["constraint_violations"]["text_only"] == 0


def test_load_gate_holds_the_robot_at_the_pickup() -> None:
    w = _world()
    w.gate("o0", None, "unread")
    for _ in range(4):
        w.step([RIGHT])
    assert not w.carrying[0]  # at the pickup, but gated
    w.ungate("o0")
    w.step([WAIT])
    assert w.carrying[0]
    assert w.metrics()["gates_expired"] == {}
    timed = _world()
    timed.gate("o0", 5, "unread")
    for _ in range(6):
        timed.step([RIGHT])
    assert timed.carrying[0]
    assert timed.order("o0").picked_tick >= 5
    assert timed.metrics()["gates_expired"] == {"unread": 1}


def test_structured_capability_violation() -> None:
    w = _world(_one_order(capability="cold"), capabilities=(frozenset(),))
    # auto_assign honours capabilities: nobody can take the order.
    assert not w.has_task[0]
    w2 = _world(_one_order(capability="cold"), capabilities=(frozenset(),), auto_assign=False)
    w2.assign("robot_0", "o0")  # a careless planner may still do it ...
    for a in (RIGHT, RIGHT, LEFT, LEFT, LEFT, LEFT):
        w2.step([a])
    assert w2.metrics()["constraint_violations"]["structured"] == 1  # ... and it is scored


def test_assign_rejects_bad_requests() -> None:
    w = _world(auto_assign=False)
    with pytest.raises(ConfigError, match="unknown order"):
        w.assign(0, "nope")
    with pytest.raises(ConfigError, match="unknown robot"):
        w.assign("robot_9", "o0")
    w.assign(0, "o0")
    with pytest.raises(ConfigError, match="not open"):
        w.assign(0, "o0")


def test_broken_robot_stops_and_releases_its_order() -> None:
    w = _world()
    w.break_robot(0, 3)
    assert w.open_orders()[0].id == "o0"
    w.step([RIGHT])
    assert w.cell_of(0) == (0, 2)


def test_battery_drains_and_stops_the_robot() -> None:
    w = _world(battery=BatteryConfig(capacity=2, drain_per_move=1, recharge_per_tick=0))
    w.step([RIGHT])
    w.step([RIGHT])
    w.step([LEFT])
    assert w.cell_of(0) == (0, 4)


def test_difference_reward_is_team_minus_team_without_me() -> None:
    grid = parse_text_map("S..x\n....")
    orders = [Order(id="o0", tick=0, pickup=(0, 3), station=(0, 0))]
    cfg = WarehouseConfig(
        n_robots=2,
        orders=OrderConfig(rate=0.1),
        reward=RewardConfig(mode="difference", pickup_bonus=0.2),
        auto_assign=False,
    )
    start = np.array([[0, 2], [1, 3]], dtype=np.int32)
    w = Warehouse(grid, cfg, seed=0, start=start, orders=orders)
    w.assign("robot_0", "o0")
    # Both enter (0, 3); robot_0 has priority at tick 0, loads (+0.2) and robot_1 loses (-0.5).
    # Team G = 0.19 - 0.51 = -0.32. Had robot_0 waited, robot_1 moves in freely: G = -0.02.
    # Had robot_1 waited, robot_0 loads: G = 0.19 - 0.01 = 0.18.
    # G_{-i} is what the rest earns in the counterfactual (the waiting robot's own -0.01 left
    # out): -0.01 without robot_0, 0.19 without robot_1. A waiting robot keeps its tick cost.
    out = w.step([RIGHT, UP])
    assert out.individual.tolist() == pytest.approx([0.19, -0.51])
    assert out.rewards.tolist() == pytest.approx([-0.31, -0.51])


def test_counterfactual_matches_replaying_with_a_wait() -> None:
    w = Warehouse(
        load_map("warehouse-tiny"),
        WarehouseConfig(n_robots=4, orders=OrderConfig(rate=None)),
        seed=3,
    )
    rng = np.random.default_rng(0)
    for _ in range(30):
        acts = rng.integers(0, 5, size=4)
        snap = w.snapshot()
        cf = w.counterfactual_team_rewards(acts)
        for i in range(4):
            w.restore(snap)
            alt = acts.copy()
            alt[i] = WAIT
            assert float(w.step(alt).individual.sum()) == pytest.approx(float(cf[i]), abs=1e-5)
        w.restore(snap)
        w.step(acts)


def test_snapshot_restore_reproduces_the_future() -> None:
    w = Warehouse(load_map("warehouse-small"), WarehouseConfig(n_robots=6), seed=1)
    rng = np.random.default_rng(1)
    for _ in range(20):
        w.step(rng.integers(0, 5, size=6))
    snap = w.snapshot()
    acts = rng.integers(0, 5, size=(40, 6))
    first = [w.step(a).delivered for a in acts]
    m1 = w.metrics()
    w.restore(snap)
    second = [w.step(a).delivered for a in acts]
    assert first == second
    assert w.metrics() == m1


def test_same_seed_same_orders() -> None:
    a = Warehouse(load_map("warehouse-small"), WarehouseConfig(n_robots=4), seed=7)
    b = Warehouse(load_map("warehouse-small"), WarehouseConfig(n_robots=4), seed=7)
    for _ in range(300):
        a.step(np.zeros(4, dtype=int))
        b.step(np.zeros(4, dtype=int))
    assert [r.order for r in a.records] == [r.order for r in b.records]
    assert any(r.order.constraints for r in a.records)


@given(seed=st.integers(0, 10_000), n=st.integers(1, 8), rate=st.floats(0.05, 1.0))
@settings(max_examples=25, deadline=None)
def test_robots_and_orders_are_conserved(seed: int, n: int, rate: float) -> None:
    w = Warehouse(
        load_map("warehouse-tiny"),
        WarehouseConfig(n_robots=n, orders=OrderConfig(rate=rate)),
        seed=seed,
    )
    rng = np.random.default_rng(seed)
    for _ in range(40):
        w.step(rng.integers(0, 5, size=n))
        cells = {tuple(p) for p in w.pos.tolist()}
        assert len(cells) == n
        assigned = sum(1 for r in w.records if r.robot >= 0 and r.delivered_tick < 0)
        delivered = sum(1 for r in w.records if r.delivered_tick >= 0)
        assert len(w.open) + assigned + delivered == len(w.records)
        assert assigned == int(w.has_task.sum())


def test_task_file_loads_and_reports_errors(tmp_path: Path) -> None:
    good = tmp_path / "tasks.jsonl"
    good.write_text(
        "# a comment\n"
        + json.dumps({"tick": 5, "pickup": [0, 4], "station": [0, 0], "priority": "urgent"})
        + "\n"
        + json.dumps(
            {
                "tick": 1,
                "pickup": [0, 4],
                "station": [0, 0],
                "constraints": [{"kind": "only_robot", "robot": "robot_0"}],
            }
        )
        + "\n"
    )
    orders = load_task_file(good, LINE)
    assert [o.tick for o in orders] == [1, 5]
    assert [o.id for o in orders] == ["o0", "o1"]
    assert orders[0].constraints == (Constraint("only_robot", robot="robot_0"),)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"tick": 0, "pickup": [0, 4], "station": [0, 0]}\n{"tick": 1, "pickup": "x"}\n')
    with pytest.raises(TaskFileError, match=r"bad.jsonl:2: field 'pickup'"):
        load_task_file(bad, LINE)
    wall = tmp_path / "wall.jsonl"
    wall.write_text('{"tick": 0, "pickup": [0, 9], "station": [0, 0]}\n')
    with pytest.raises(TaskFileError, match=r"wall.jsonl:1: field 'pickup'"):
        load_task_file(wall, LINE)


def test_bad_config_is_named() -> None:
    with pytest.raises(ConfigError, match=r"orders\.rate"):
        OrderConfig(rate=-1)
    with pytest.raises(ConfigError, match="reward mode"):
        RewardConfig.parse("greedy")
    assert RewardConfig.parse("mixed(0.25)").weight == 0.25
