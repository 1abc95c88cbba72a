"""Speed of the shield on the full-size warehouse grid (generous bounds: shared CI machines)."""

from __future__ import annotations

from fleetmind.safety.bench import time_resolve


def test_thousand_robots_on_140x500_resolve_fast() -> None:
    row = time_resolve(1000, height=140, width=500, ticks=10, seed=1)
    # Measured about 1 ms per tick; the bound leaves room for a loaded 2-core machine.
    assert row["p50_ms"] < 20.0, row
    assert row["intervened_per_tick"] > 0  # the fleet does meet traffic
