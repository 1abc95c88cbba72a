from __future__ import annotations

import json

import pytest

from fleetmind.bench import llm as bench
from fleetmind.testing.fake_server import FakeChatServer


def test_overhead_in_memory_is_small() -> None:
    r = bench.measure_overhead("http://mock/v1", "mock", pairs=200, mock=True)
    assert r["raw_ms"] > 0
    assert r["client_ms"] > 0
    assert r["overhead_ms"] < 1.0


def test_valid_json_rates_count_strict_lenient_repaired() -> None:
    good = json.dumps({"robot": "robot_1", "order_id": 4, "priority": 2})
    newline = '{"robot": "robot\n1", "order_id": 4, "priority": 2}'
    broken = "{'robot': 'robot_1', 'order_id': 4, 'priority': 2"
    script = [good, good, newline, broken]
    with FakeChatServer(script) as srv:
        r = bench.measure_valid_json(srv.client(), ("p1", "p2"))
    assert r["with_schema"] == {"strict": 1.0, "lenient": 1.0, "repaired": 1.0}
    assert r["without_schema"] == {"strict": 0.0, "lenient": 0.5, "repaired": 1.0}
    assert "response_format" in srv.requests[0].body
    assert "response_format" not in srv.requests[2].body


@pytest.mark.llm
@pytest.mark.slow
def test_quick_bench_runs_end_to_end() -> None:
    r = bench.run(quick=True)
    rates = r["llm/valid_json_rate"]
    assert isinstance(rates, dict)
    assert rates["with_schema"]["repaired"] >= 0.8
    tps = r["llm/tokens_per_s"]
    assert isinstance(tps, dict)
    assert tps["threads_1_idle"] > 1.0


def test_llm_memory_refuses_a_missing_gguf_in_one_line(tmp_path) -> None:
    from typer.testing import CliRunner

    from fleetmind.cli import app

    res = CliRunner().invoke(app, ["bench", "llm-memory", "--gguf", str(tmp_path / "no.gguf")])
    assert res.exit_code == 2
    said = " ".join(res.output.split())  # the console wraps long lines
    assert said.endswith("no.gguf: no such file")
    assert "Traceback" not in said


@pytest.mark.llm
def test_llm_memory_bounded_grows_less_than_unbounded() -> None:
    result = bench.run_memory(prompts=4)
    bounded = result["bounded"]
    unbounded = result["unbounded (llama-cpp-python as it is)"]
    grown = bounded["rss_mb"][-1] - bounded["rss_mb"][0]
    grown_before = unbounded["rss_mb"][-1] - unbounded["rss_mb"][0]
    assert grown < grown_before / 2
    assert "distinct prompts" in bench.format_memory(result)
