"""Speed of the shield on the full-size warehouse grid (generous bounds: shared CI machines)."""

from __future__ import annotations

from fleetmind.bench.safety import time_resolve


def test_thousand_robots_on_140x500_resolve_fast() -> None:
    row = time_resolve(1000, height=140, width=500, ticks=10, seed=1)
    # Measured about 1 ms per tick; the bound leaves room for a loaded 2-core machine.
    assert row["p50_ms"] < 20.0, row
    assert row["intervened_per_tick"] > 0  # the fleet does meet traffic


def test_command_prints_one_row_per_fleet_size() -> None:
    from typer.testing import CliRunner

    from fleetmind.cli import app

    argv = ["bench", "safety", "--robots", "5,20", "--height", "40", "--width", "60"]
    result = CliRunner().invoke(app, [*argv, "--ticks", "3"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "robots on 40x60" in line]
    assert [line.split()[0] for line in lines] == ["5", "20"]
