"""Nothing lost: a failed or repeated run never destroys the run already in its folder.

The cases are those of ``fleetmind bench faults`` (:mod:`fleetmind.bench.faults`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from fleetmind.bench.faults import FOLDER_RUN, fingerprint, folder_inputs
from fleetmind.testing import fake_server as fake

from .conftest import fleetmind, metrics, one_line_error

RUN = FOLDER_RUN


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run in ``X``."""
    root = tmp_path_factory.mktemp("earlier")
    proc = fleetmind(*RUN, "--out", root / "X")
    assert proc.returncode == 0, proc.stderr
    return root / "X"


def test_bad_input_never_touches_an_earlier_run(earlier: Path, tmp_path: Path) -> None:
    before = fingerprint(earlier)
    for case, args in folder_inputs(tmp_path).items():
        proc = fleetmind(*RUN, "--out", earlier, "--overwrite", *args)
        one_line_error(proc)
        assert fingerprint(earlier) == before, case


def test_a_folder_holding_a_run_is_refused_unless_overwrite(earlier: Path, tmp_path: Path) -> None:
    before = fingerprint(earlier)
    line = one_line_error(fleetmind(*RUN, "--seed", "3", "--out", earlier))
    assert "--out" in line
    assert "--overwrite" in line
    assert "earlier run" in line
    assert fingerprint(earlier) == before
    copy = tmp_path / "copy"
    proc = fleetmind(*RUN, "--out", copy)
    assert proc.returncode == 0
    proc = fleetmind(*RUN, "--seed", "3", "--out", copy, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert metrics(copy)["seed"] == 3
    assert ds.dataset(copy / "episode.parquet").count_rows() == 4 * 30  # one run, not two


def test_an_unknown_fault_robot_is_refused_before_tick_0(tmp_path: Path) -> None:
    line = one_line_error(fleetmind(*RUN, "--out", tmp_path / "f", "--fault", "breakdown:9@10+5"))
    assert "--fault" in line
    assert "robot_9" in line
    assert not (tmp_path / "f").exists()


def test_default_run_folders_never_replace_each_other(tmp_path: Path) -> None:
    dirs = []
    for _ in range(2):
        proc = fleetmind("run", "--robots", "2", "--steps", "5", "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        dirs.append(json.loads(proc.stdout)["run_dir"])
    assert dirs == ["runs/run-0", "runs/run-0-2"]
    assert all((tmp_path / d / "metrics.json").exists() for d in dirs)


def test_compare_refuses_an_earlier_comparison(tmp_path: Path) -> None:
    args = ("compare", "--strategies", "classical", "--robots", "2", "--steps", "10")
    args += ("--seeds", "1", "--no-report", "--json", "--out", str(tmp_path / "c"))
    assert fleetmind(*args).returncode == 0
    first = (tmp_path / "c" / "comparison.json").read_text()
    line = one_line_error(fleetmind(*args))
    assert "earlier comparison" in line
    assert "--overwrite" in line
    assert (tmp_path / "c" / "comparison.json").read_text() == first
    assert fleetmind(*args, "--overwrite").returncode == 0


def test_the_demo_reruns_into_its_own_folders(tmp_path: Path) -> None:
    args = ("demo", "--robots", "3", "--steps", "15", "--tick-period", "0", "--json")
    with fake.FakeChatServer(["no JSON here"]) as srv:
        for _ in range(2):
            proc = fleetmind(*args, "--llm-base-url", srv.base_url, "--out", tmp_path / "d")
            assert proc.returncode == 0, proc.stderr
    assert metrics(tmp_path / "d" / "hybrid")["steps"] == 15
