"""``fleetmind bench desk --quick``: the suite runs, every figure is there, the guarantees hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fleetmind.bench import desk
from fleetmind.eval.store import load_latency, load_metrics


def test_quick_desk_bench_without_the_embedded_model(tmp_path: Path) -> None:
    result = desk.run(
        quick=True, modes=("off", "rules", "hostile"), tick_period_s=0.05, out_dir=tmp_path
    )
    modes = result["modes"]
    assert set(modes) == {"off", "rules", "hostile"}
    for r in modes.values():
        assert r["incidents"] >= 3
        assert r["collisions"] == 0
        assert r["orders_lost"] == 0
    assert modes["off"]["resolved_by_rules"] == 0
    assert modes["rules"]["resolved_by_rules"] >= 3
    # The misbehaving model never decides: every incident it took falls back to the rules.
    hostile = modes["hostile"]
    assert hostile["resolved_by_desk"] == 0
    assert hostile["fallbacks"] >= 3
    # Every fallback is counted under its reason, with no details left in the reason.
    reasons = hostile["fallback_reasons"]
    assert sum(reasons.values()) == hostile["fallbacks"]
    assert all(":" not in k and "(" not in k for k in reasons)
    assert not modes["rules"]["fallback_reasons"]
    assert "step_p99_vs_off" in hostile
    # The suite's own incidents are the injected ones (deadlock reports come up by themselves).
    for mode in ("rules", "hostile"):
        log = [i for m in [load_metrics(tmp_path / f"{mode}-s0")] for i in m["incident_log"]]
        assert modes[mode]["suite_incidents"] == sum(i["kind"] != "deadlock" for i in log) >= 3
    assert hostile["suite_resolved_by_desk"] == 0
    assert hostile["desk_rate_suite"] == 0.0
    table = desk.format_table(result)
    assert "hostile" in table
    assert "target collisions == 0: 0" in table
    assert "hostile  the suite's injected incidents (no deadlock reports): 0 of" in table
    assert "hostile  fallbacks: " in table
    # Every run's folder is kept; the step p99 is over all of a mode's ticks.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile-s0", "off-s0", "rules-s0"]
    ticks = load_latency(tmp_path / "off-s0")
    assert ticks is not None
    want = float(np.percentile(ticks.column("step_ms").to_pylist(), 99))
    assert modes["off"]["step_p99_ms"] == want
    # The suite's incidents are the desk's kind of trouble: the breakdown strikes a loaded
    # robot and the block closes a pickup a robot is heading for, so the rules act on both.
    log = load_metrics(tmp_path / "rules-s0")["incident_log"]
    acts = {i["kind"]: [a["tool"] for a in i["actions"]] for i in log if i["kind"] != "deadlock"}
    assert acts["breakdown"][0] in ("reassign", "hand_over")
    assert acts["block"][0] == "hold"


def test_rules_delayed_by_the_desks_own_latency(tmp_path: Path) -> None:
    result = desk.run(
        quick=True, modes=("follower", "rules-delayed"), tick_period_s=0.05, out_dir=tmp_path
    )
    follower, delayed = result["modes"]["follower"], result["modes"]["rules-delayed"]
    # The scripted follower takes the rules' proposal: it decides, and never deviates.
    assert follower["desk_decided"] >= 1
    assert follower["deviation_rate"] == 0.0
    lag = follower["desk_latency_ticks"]
    assert lag is not None
    assert delayed["rules_delay_ticks"] == lag
    # Each incident's rules act no sooner than the delay after it.
    log = load_metrics(tmp_path / "rules-delayed-s0")["incident_log"]
    firsts = [min(a["tick"] for a in i["actions"]) - i["tick"] for i in log if i["actions"]]
    assert firsts
    assert min(firsts) >= lag
    assert "rules-delayed: the rules acted" in desk.format_table(result)
