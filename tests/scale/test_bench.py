from __future__ import annotations

from typing import Any

import pytest

from fleetmind.bench import ray as bench


@pytest.mark.slow  # starts six sets of Ray actors: about 25 s on 2 busy cores
@pytest.mark.timeout(300)
def test_quick_bench_reports_both_worker_counts(ray_instance: Any) -> None:
    result = bench.run(quick=True)
    assert result["cluster_cpus"] == 2.0
    assert set(result["sweep"]["wall_s"]) == {"1", "2"}
    assert all(v > 0 for v in result["sweep"]["wall_s"].values())
    for section in ("rollout", "collect"):
        for key in ("local-1", "1", "2"):
            assert result[section][key]["world_steps_per_s"] > 0
        ratio = (
            result[section]["2"]["world_steps_per_s"] / result[section]["1"]["world_steps_per_s"]
        )
        assert result[section]["speedup_2_vs_1"] == pytest.approx(ratio)
    table = bench.format_table(result)
    assert table.row_count == 4
