"""A comparison's report: over every seed, a winner only beyond noise, trade-offs, row order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetmind.cli import app
from fleetmind.eval.compare import ROWS, compare, confidence, run_values
from fleetmind.eval.report import build_report, recommend_comparison


def _comparison(tmp_path: Path, per_seed: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    """A comparison.json over run folders holding only metrics.json (per strategy and seed)."""
    runs: dict[str, list[str]] = {}
    table: dict[str, dict[str, object]] = {}
    for name, seeds in per_seed.items():
        runs[name] = []
        values = []
        for k, metrics in enumerate(seeds):
            folder = tmp_path / name / f"seed-{k}"
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(json.dumps(metrics))
            (folder / "config.json").write_text("{}")
            runs[name].append(str(folder))
            values.append(run_values(metrics, None))
        table[name] = {key: confidence([v[key] for v in values]) for key, _ in ROWS}
    n = len(next(iter(per_seed.values())))
    return {
        "map": "warehouse-small",
        "robots": 6,
        "steps": 100,
        "seeds": list(range(n)),
        "strategies": list(per_seed),
        "rows": dict(ROWS),
        "table": table,
        "runs": runs,
    }


def test_no_winner_is_named_inside_the_noise(tmp_path: Path) -> None:
    # Seed 0 alone would say "a"; over three seeds the paired difference straddles zero.
    cmp = _comparison(
        tmp_path,
        {
            "a": [{"throughput": 0.16}, {"throughput": 0.12}, {"throughput": 0.15}],
            "b": [{"throughput": 0.14}, {"throughput": 0.15}, {"throughput": 0.14}],
        },
    )
    lines = recommend_comparison(cmp)
    assert "seeds 0, 1, 2" in lines[0]
    assert lines[1].startswith("No throughput winner")
    assert "has the highest throughput" not in " ".join(lines)


def test_a_winner_beyond_noise_is_named_and_the_trade_off_is_said(tmp_path: Path) -> None:
    cmp = _comparison(
        tmp_path,
        {
            "fast": [
                {"throughput": 0.20 + d, "constraint_violations": {"structured": 4}}
                for d in (0.0, 0.01, 0.02)
            ],
            "careful": [
                {"throughput": 0.15 + d, "constraint_violations": {"structured": 2}}
                for d in (0.0, 0.012, 0.018)
            ],
        },
    )
    lines = recommend_comparison(cmp)
    assert lines[1].startswith("fast has the highest throughput")
    assert any(
        line.startswith("careful against fast")
        and "structured violations 4 -> 2 (0.5x), better" in line
        for line in lines
    )


def test_one_seed_names_no_winner(tmp_path: Path) -> None:
    cmp = _comparison(tmp_path, {"a": [{"throughput": 0.2}], "b": [{"throughput": 0.1}]})
    assert "one seed, no interval" in recommend_comparison(cmp)[1]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cmp")
    compare(["classical", "greedy"], robots=4, steps=60, seeds=2, out=out)
    return out


def test_report_command_prints_the_comparison_over_all_seeds(real: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(real)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "over seeds 0, 1" in res.output
    assert "metrics.json" not in res.output  # not one seed's file
    assert "Throughput over seeds 0, 1" in res.output
    data = json.loads(CliRunner().invoke(app, ["report", str(real), "--json"]).output)
    assert data["summary"] == recommend_comparison(data["comparison"])


def test_html_comparison_rows_follow_the_table_order(real: Path) -> None:
    page = build_report(real).read_text()
    positions = [page.find(label) for _, label in ROWS[:3]]
    assert -1 not in positions
    assert positions == sorted(positions)  # throughput first, not alphabetical
    assert "Highest throughput" not in page  # the seed-0 winner line is gone


def test_single_runs_say_one_seed_and_what_the_others_trade(real: Path, tmp_path: Path) -> None:
    from fleetmind.eval.report import render

    runs = {"classical": real / "classical" / "seed-0", "greedy": real / "greedy" / "seed-0"}
    page = render(runs, tmp_path / "r.html", title="t").read_text()
    assert "one seed each: no interval" in page
    # The run that does not lead says what it trades against the one that does.
    assert "greedy against classical" in page or "classical against greedy" in page


def test_a_near_tie_is_not_printed_as_one() -> None:
    from fleetmind.eval.report import _trade_offs

    values = {"a": {"on_time_rate": 0.9234}, "b": {"on_time_rate": 0.9196}}
    (line,) = _trade_offs(values, "a", ["b"])
    assert "on-time rate 0.9234 -> 0.9196 (0.996x), worse" in line
