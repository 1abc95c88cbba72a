from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from fleetmind.bench.sim import CASES, RWARE_LAYOUTS, Case, format_table, run
from fleetmind.errors import ConfigError

HAS_RWARE = importlib.util.find_spec("rware") is not None
ROW_KEYS = {
    "case",
    "simulator",
    "layout",
    "robots",
    "num_envs",
    "env_steps_per_s",
    "agent_steps_per_s",
    "ratio_vs_rware",
}


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    # quick mode's sweep (16 and 256 worlds) with a tiny budget: a smoke run, not a measurement.
    return run(quick=True, budget_s=0.03)


def test_rows_cover_every_case_and_simulator(result: dict[str, Any]) -> None:
    rows = result["rows"]
    assert all(set(row) == ROW_KEYS for row in rows)
    for case in CASES:
        sims = [r["simulator"] for r in rows if r["case"] == case.name]
        expected = ["fleetmind-single", "fleetmind-vector", "fleetmind-vector-noobs"]
        if HAS_RWARE and case.rware_id is not None:
            expected.append("rware")
        assert sims == expected
        assert all(r["robots"] == case.robots for r in rows if r["case"] == case.name)


def test_rates_are_positive_and_consistent(result: dict[str, Any]) -> None:
    for row in result["rows"] + result["sweep"]:
        assert row["env_steps_per_s"] > 0
        assert row["agent_steps_per_s"] == pytest.approx(row["env_steps_per_s"] * row["robots"])
    for row in result["rows"]:
        if row["simulator"] == "fleetmind-single" or row["simulator"] == "rware":
            assert row["num_envs"] == 1


def test_vector_rows_are_the_best_of_the_sweep(result: dict[str, Any]) -> None:
    sweep = result["sweep"]
    assert sorted({r["num_envs"] for r in sweep}) == [16, 256]
    assert len(sweep) == len(CASES) * 2 * 2
    for row in result["rows"]:
        if row["simulator"].startswith("fleetmind-vector"):
            same = [
                r for r in sweep if (r["case"], r["simulator"]) == (row["case"], row["simulator"])
            ]
            assert row["agent_steps_per_s"] == max(r["agent_steps_per_s"] for r in same)


@pytest.mark.skipif(not HAS_RWARE, reason="needs the rware extra")
def test_ratios_are_against_the_rware_row(result: dict[str, Any]) -> None:
    for case in CASES:
        rows = [r for r in result["rows"] if r["case"] == case.name]
        if case.rware_id is None:
            assert all(r["ratio_vs_rware"] is None for r in rows)
            continue
        (reference,) = [r for r in rows if r["simulator"] == "rware"]
        assert reference["layout"] == case.rware_id
        assert reference["ratio_vs_rware"] is None
        for row in rows:
            if row is not reference:
                expected = row["agent_steps_per_s"] / reference["agent_steps_per_s"]
                assert row["ratio_vs_rware"] == pytest.approx(expected)


def test_targets(result: dict[str, Any]) -> None:
    single = result["targets"]["single_vs_rware"]
    assert single["target_ratio"] == 20.0
    for key, simulator, target in (
        ("vector_agent_steps", "fleetmind-vector", 2_000_000.0),
        ("vector_noobs_agent_steps", "fleetmind-vector-noobs", 10_000_000.0),
    ):
        vector = result["targets"][key]
        assert vector["target_agent_steps_per_s"] == target
        rows = [r for r in result["sweep"] if r["simulator"] == simulator]
        best = max(rows, key=lambda r: r["agent_steps_per_s"])
        assert vector["best_agent_steps_per_s"] == best["agent_steps_per_s"]
        assert vector["met"] == (best["agent_steps_per_s"] >= target)
        assert (vector["case"], vector["num_envs"]) == (best["case"], best["num_envs"])
    if HAS_RWARE:
        assert set(single["ratios"]) == {c.name for c in CASES if c.rware_id is not None}
        assert single["met"] == all(v >= 20.0 for v in single["ratios"].values())
    else:
        assert single["met"] is None


def test_result_is_json_and_formats_as_a_table(result: dict[str, Any]) -> None:
    again = json.loads(json.dumps(result))
    table = format_table(again)
    assert isinstance(table, Table)
    assert table.row_count == len(result["rows"])
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "warehouse-large-128" in text
    assert ("MET" in text) or ("MISSED" in text)


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="huge"):
        run(cases=["huge"])
    with pytest.raises(ConfigError, match="budget_s"):
        run(budget_s=0)
    with pytest.raises(ConfigError, match="num_envs"):
        run(num_envs=[0])


@pytest.mark.skipif(not HAS_RWARE, reason="needs the rware extra")
@pytest.mark.parametrize("case", [c for c in CASES if c.rware_id is not None], ids=str)
def test_stored_layouts_match_rware(case: Case) -> None:
    from fleetmind.envs.rware import grid_from_rware, layout_from_rware, make_rware

    assert case.rware_id is not None
    rware_env = make_rware(case.rware_id)
    assert RWARE_LAYOUTS[case.layout].strip() == layout_from_rware(rware_env)
    ours, theirs = case.grid(), grid_from_rware(rware_env)
    assert rware_env.rware.n_agents == case.robots
    for field in ("blocked", "pickups", "stations", "chargers"):
        assert (getattr(ours, field) == getattr(theirs, field)).all(), field


def test_progress_is_reported_for_every_case_then_the_end() -> None:
    seen: list[tuple[str, int, int]] = []
    run(
        quick=True,
        budget_s=0.02,
        cases=[CASES[0].name],
        num_envs=[4],
        progress=lambda *a: seen.append(a),
    )
    assert seen == [(CASES[0].name, 0, 1), ("done", 1, 1)]
