"""``fleetmind bench rware``: verification and timings on a small case; bad input."""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from fleetmind.bench import rware as bench
from fleetmind.cli import app
from fleetmind.errors import ConfigError

requires_rware = pytest.mark.skipif(
    importlib.util.find_spec("rware") is None, reason="needs the rware extra"
)


@requires_rware
def test_run_verifies_and_times_each_case() -> None:
    result = bench.run(sizes=["tiny"], agents=[1, 2], steps=60, num_envs=8, budget_s=0.05)
    rows = result["rows"]
    assert [r["env_id"] for r in rows] == ["rware-tiny-1ag-v2", "rware-tiny-2ag-v2"]
    for r in rows:
        assert r["steps_verified"] == 60
        assert r["mismatches"] == 0, r["first_mismatch"]
        assert r["rware_agent_steps_per_s"] > 0
        assert r["vector_ratio"] == pytest.approx(
            r["twin_vector_agent_steps_per_s"] / r["rware_agent_steps_per_s"]
        )
        assert r["twin_shaped_agent_steps_per_s"] > 0
        assert r["shaping_cost"] == pytest.approx(
            r["twin_batch_agent_steps_per_s"] / r["twin_shaped_agent_steps_per_s"]
        )
    assert result["targets"]["mismatches"]["total"] == 0
    assert result["targets"]["vector_vs_rware"]["worst_ratio"] == min(
        r["vector_ratio"] for r in rows
    )
    bench.format_table(result)  # renders


@requires_rware
def test_cli_json_and_bad_input() -> None:
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["bench", "rware", "--sizes", "tiny", "--agents", "1", "--steps", "20", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"][0]["mismatches"] == 0
    with pytest.raises(ConfigError, match=r"^--agents must be between 1 and 19, got 20$"):
        bench.run(agents=[20], steps=1)
    with pytest.raises(ConfigError, match="unknown"):
        bench.run(sizes=["huge"], steps=1)
