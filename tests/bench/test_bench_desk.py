"""``fleetmind bench desk --quick``: the suite runs, every figure is there, the guarantees hold."""

from __future__ import annotations

from fleetmind.bench import desk


def test_quick_desk_bench_without_the_embedded_model() -> None:
    result = desk.run(quick=True, modes=("off", "rules", "hostile"), tick_period_s=0.05)
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
    table = desk.format_table(result)
    assert "hostile" in table
    assert "target collisions == 0: 0" in table
    assert "hostile  fallbacks: " in table
