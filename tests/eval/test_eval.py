"""The evaluation tier: recording, kill-safety, strict replay, counterfactuals, compare, reports."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.errors import ConfigError
from fleetmind.eval.compare import compare, confidence
from fleetmind.eval.decisions import counterfactual, decision_replay
from fleetmind.eval.offpolicy import rl_replay
from fleetmind.eval.replay import strict_replay
from fleetmind.eval.report import SECTIONS, build_report
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.eval.signals import recovery_costs
from fleetmind.eval.store import (
    export_trajectories,
    load_calls,
    load_episode,
    load_events,
    query,
)
from fleetmind.sim.maps import load_map
from fleetmind.sim.orders import Order, OrderConfig
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig
from fleetmind.testing.fake_server import FakeChatServer


def _first_pair(request) -> str:  # type: ignore[no-untyped-def]
    """A deterministic 'model': the first idle robot takes the first open order in the prompt."""
    text = next(
        str(m.get("content", ""))
        for m in request.messages
        if "Idle robots:" in str(m.get("content"))
    )
    robots = re.findall(r"(robot_\d+) at", text.split("Idle robots:")[1].split("\n")[0])
    orders = re.findall(r"^(o\w+):", text.split("Open orders:")[1], flags=re.M)
    pairs = [{"robot": r, "order": o, "priority": 1} for r, o in zip(robots, orders, strict=False)]
    return json.dumps({"assignments": pairs})


def test_record_then_strict_replay_reproduces_an_llm_run(tmp_path: Path) -> None:
    cfg = RunConfig(
        robots=4, steps=80, planner="llm", executor="shortest-path", planner_mode="sync", seed=3
    )
    with FakeChatServer(_first_pair) as srv:
        metrics = execute(cfg, tmp_path / "rec", client=srv.client())
        n_requests = len(srv.requests)
    assert metrics["llm_calls"] > 0
    assert n_requests == len(load_calls(tmp_path / "rec"))
    # No server any more: the replay can only be served from calls.jsonl.
    res = strict_replay(tmp_path / "rec", tmp_path / "replay")
    assert res.identical, res.mismatches
    a = load_episode(tmp_path / "rec")
    b = load_episode(tmp_path / "replay")
    assert a.equals(b)
    assert res.episode_rows == 4 * 80


def test_strict_replay_detects_a_different_run(tmp_path: Path) -> None:
    execute(RunConfig(robots=4, steps=60, planner_mode="sync", seed=1), tmp_path / "a")
    cfg_path = tmp_path / "a" / "config.json"
    data = json.loads(cfg_path.read_text())
    data["config"]["seed"] = 2  # the recording now claims another seed
    cfg_path.write_text(json.dumps(data))
    res = strict_replay(tmp_path / "a", tmp_path / "b")
    assert not res.identical
    assert res.mismatches


def test_strict_replay_refuses_async_runs(tmp_path: Path) -> None:
    execute(RunConfig(robots=3, steps=20, planner_mode="async"), tmp_path / "a")
    with pytest.raises(ConfigError, match="planner_mode=sync"):
        strict_replay(tmp_path / "a", tmp_path / "b")


def test_sigkill_leaves_every_file_readable(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [
        str(Path(sys.executable).with_name("fleetmind")),
        "run",
        "--steps",
        "200000",
        "--robots",
        "4",
        "--out",
        str(out),
        "--json",
    ]
    # Small flushes so several happen within a second.
    (tmp_path / "cfg.yaml").write_text("flush_every: 20\nsnapshot_every: 50\n")
    cmd += ["--config", str(tmp_path / "cfg.yaml")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if len(list((out / "episode.parquet").glob("part-*.parquet"))) >= 3:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run never flushed three parts")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    episode = load_episode(out)
    ticks = np.unique(episode.column("tick").to_numpy())
    assert len(ticks) >= 60
    assert np.array_equal(ticks, np.arange(len(ticks)))  # no gap up to the last flush
    assert not episode.column("done").to_numpy().any()  # killed: nothing is marked done
    load_events(out)
    load_calls(out)
    assert query(out, "SELECT count(*) AS n FROM episode").to_pylist()[0]["n"] == episode.num_rows
    manifest = json.loads(export_trajectories(out).read_text())
    traj = np.load(out / "trajectories" / manifest["agents"]["robot_0"])
    assert traj["truncated"][-1]


def _corridor_world(orders: list[Order]) -> Warehouse:
    grid = load_map("warehouse-small")
    cfg = WarehouseConfig(
        n_robots=2, max_steps=400, orders=OrderConfig(rate=0.1), auto_assign=False
    )
    pickups = grid.pickup_cells()
    start = np.array([pickups[0], pickups[-1]], dtype=np.int32)
    return Warehouse(grid, cfg, seed=0, orders=orders, start=start)


def test_counterfactual_gain_on_a_hand_built_case() -> None:
    grid = load_map("warehouse-small")
    pickups = grid.pickup_cells()
    stations = grid.station_cells()
    # One order right where robot_0 stands; robot_1 starts at the far end of the map.
    order = Order(id="o0", tick=0, pickup=pickups[0], station=stations[0])
    world = _corridor_world([order])
    state = world.snapshot()
    ex = ShortestPathExecutor(grid)
    near = counterfactual(world, state, [("robot_0", "o0")], executor=ex, horizon=40)
    far = counterfactual(world, state, [("robot_1", "o0")], executor=ex, horizon=40)
    d_near = abs(pickups[0][0] - stations[0][0]) + abs(pickups[0][1] - stations[0][1])
    d_far = abs(pickups[-1][0] - pickups[0][0]) + abs(pickups[-1][1] - pickups[0][1])
    assert d_near < 40 <= d_near + d_far  # the horizon separates the two plans
    assert near.deliveries == 1
    assert far.deliveries == 0
    assert near.applied == far.applied == 1
    # Restoring is exact: the same plan gives the same branch again.
    assert counterfactual(world, state, [("robot_0", "o0")], executor=ex, horizon=40) == near


def test_decision_replay_and_rl_replay(tmp_path: Path) -> None:
    execute(RunConfig(robots=4, steps=120, planner_mode="sync", seed=0), tmp_path / "r")
    same = decision_replay(tmp_path / "r", horizon=20, limit=4)
    assert same["summary"]["agreement_mean"] == 1.0  # the same solver on the same snapshots
    assert same["summary"]["gain_total"] == 0
    other = decision_replay(tmp_path / "r", planner="greedy", horizon=20, limit=4)
    assert other["summary"]["decisions"] == 4
    rl = rl_replay(tmp_path / "r")
    assert rl["pooled"]["transitions"] == 4 * 120
    assert set(rl["curve_variance"]) == {f"robot_{i}" for i in range(4)}
    assert np.isfinite(rl["pooled"]["fqe_value"])


def test_recovery_cost_on_a_built_curve() -> None:
    per_tick = np.r_[np.full(100, 0.2), np.zeros(30), np.full(100, 0.2)]
    rec = recovery_costs(per_tick, [{"spec": "x", "start": 100, "end": 120}], window=20)[0]
    assert rec.baseline == pytest.approx(0.2)
    assert rec.recovered
    # Back to >= 0.18 once 18 of the last 20 ticks are healthy: tick 130 + 17.
    assert rec.recovery_tick == 147
    assert rec.extra_ticks == 27
    never = recovery_costs(
        np.r_[np.full(100, 0.2), np.zeros(50)], [{"spec": "y", "start": 100, "end": 110}], window=20
    )[0]
    assert not never.recovered


def test_confidence_interval() -> None:
    c = confidence([1.0, 2.0, 3.0])
    assert c["mean"] == 2.0
    assert c["ci95"] == pytest.approx(4.302652729911275 * 1.0 / np.sqrt(3))
    assert confidence([5.0])["ci95"] is None


def test_compare_two_strategies_two_seeds_and_report(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = compare(
        ["classical", "classical:noshield"],
        robots=6,
        steps=80,
        seeds=2,
        out=out,
        common={"faults": ["breakdown:1@30+10"]},
    )
    assert json.loads((out / "comparison.json").read_text())["strategies"] == result["strategies"]
    # Same seed, same orders: the order stream does not depend on the strategy.
    for s in (0, 1):
        a = [e for e in load_events(out / "classical" / f"seed-{s}") if e["kind"] == "orders"]
        b = [
            e
            for e in load_events(out / "classical-noshield" / f"seed-{s}")
            if e["kind"] == "orders"
        ]
        assert a[:3] == b[:3]
    t = result["table"]
    assert t["classical"]["collisions"]["mean"] == 0.0
    assert t["classical"]["throughput"]["n"] == 2
    assert t["classical"]["throughput"]["ci95"] is not None
    with pytest.raises(ConfigError, match=r"needs fleetmind\.scale"):
        compare(["classical"], out=out, backend="ray")
    page = build_report(out).read_text()
    for sec in SECTIONS:
        assert f'id="{sec}"' in page
    assert "classical:noshield" in page
    assert "<script src" not in page
    assert "http://" not in page
    assert "https://" not in page


def test_report_of_a_real_run_has_sections_and_images(tmp_path: Path) -> None:
    run = tmp_path / "run"
    execute(RunConfig(robots=4, steps=100, faults=["breakdown:0@40+15"]), run)
    path = build_report(run)
    page = path.read_text()
    for sec in SECTIONS:
        assert f'<h2 id="{sec}">' in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 4  # throughput, rewards, latency, shield
    import base64

    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert "breakdown:0@40+15" in page
    assert "Highest throughput" in page
