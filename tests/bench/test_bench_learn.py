"""The learning benchmark's result shape (a trimmed run; the real one is ``fleetmind bench``)."""

from __future__ import annotations

import pytest

from fleetmind.bench import learn as bench
from fleetmind.rl.neural import ALGOS


@pytest.mark.slow
def test_quick_bench_measures_every_learner() -> None:
    result = bench.run(quick=True)
    assert set(result["learners"]) == set(ALGOS)
    for speeds in result["learners"].values():
        assert speeds["world_steps_per_s"] > 0
    nav = result["nav"]
    assert nav["shipped_policy"]["deliveries_per_robot_tick"] > 0
    assert nav["from_scratch"]["history"]
    assert "world steps/s" in bench.format_table(result)
