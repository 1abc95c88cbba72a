"""bench scale: a small fleet through the same rows, the fast path checked against the reference."""

from __future__ import annotations

from fleetmind.bench import scale


def test_a_small_scale_row_has_every_tier_and_the_reference_ratio() -> None:
    result = scale.run(robots=(12,), steps=15, map_spec="warehouse-small", compare_ticks=4)
    (row,) = result["rows"]
    assert row["robots"] == 12
    assert row["collisions"] == 0
    assert set(row["tiers"]) == {"tick", "executor", "shield", "sim", "planner"}
    for tier in row["tiers"].values():
        assert 0.0 <= tier["p50"] <= tier["p99"] <= tier["max"]
    # Every tick compared the fast path with the per-robot reference (a mismatch raises).
    assert set(row["speedup"]) == {
        "priorities",
        "distances",
        "executor",
        "referee",
        "shield",
        "bfs",
        "snapshot",
    }
    assert all(v > 0 for v in row["reference_ms"].values())
    assert row["peak_rss_mb"] > 0
    assert row["meets"] is None  # no target for 12 robots
    assert "12" in str(scale.format_table(result).columns[0]._cells)
