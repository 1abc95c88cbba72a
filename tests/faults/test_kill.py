"""kill -9 at random ticks: every file stays readable (pyarrow, DuckDB, ``fleetmind report``)
and metrics.json holds the metrics of the last flush.

The trials are those of ``fleetmind bench faults`` (:mod:`fleetmind.bench.faults`).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

from fleetmind.bench.faults import DATASETS, kill_trial, read_run

from .conftest import fleetmind


def _readable(out: Path) -> int:
    """Check every file of a run folder; returns the ticks recorded."""
    read = read_run(out)
    assert read["problems"] == {}
    return int(read["ticks"])


@pytest.mark.parametrize("trial", range(4))
def test_kill_9_at_a_random_tick_leaves_a_readable_run(tmp_path: Path, trial: int) -> None:
    o = kill_trial(tmp_path, trial)
    # pyarrow, DuckDB and fleetmind report read everything; metrics.json is partial and holds the
    # metrics of the last flush (or of the one before, if the kill fell inside a flush: the
    # parts are renamed first, then metrics.json).
    assert o["problems"] == []
    assert o["killed"]
    assert o["pyarrow"]
    assert o["duckdb"]
    assert o["report"]
    assert o["ticks"] - o["flush"] <= o["ticks_recorded"] <= o["ticks"]


def test_a_part_torn_by_a_kill_is_invisible_to_readers(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert fleetmind("run", "--robots", "2", "--steps", "30", "--out", out).returncode == 0
    # What a kill during a part's write leaves: a hidden, half-written temporary file.
    for name in DATASETS:
        (out / name / ".part-00099.parquet.tmp").write_bytes(b"PAR1\x00\x00 torn")
    _readable(out)
    assert fleetmind("report", out).returncode == 0
    proc = fleetmind("run", "--robots", "2", "--steps", "30", "--out", out, "--overwrite")
    assert proc.returncode == 0
    assert not list(out.rglob(".part-*"))  # an overwrite clears them too


def test_a_flush_cut_short_leaves_only_a_hidden_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from fleetmind.eval import recorder

    rec = recorder.RunRecorder(tmp_path / "r", flush_every=1000)
    rec.on_event({"tick": 0, "kind": "start"})
    rec.flush()

    def killed(src: object, dst: object) -> None:
        raise KeyboardInterrupt  # the process dies between writing the part and renaming it

    monkeypatch.setattr(recorder.os, "replace", killed)
    rec.on_event({"tick": 1, "kind": "late"})
    with pytest.raises(KeyboardInterrupt):
        rec.flush()
    left = sorted(p.name for p in (tmp_path / "r" / "events.parquet").iterdir())
    assert left == [".part-00001.parquet.tmp", "part-00000.parquet"]
    table = ds.dataset(tmp_path / "r" / "events.parquet", format="parquet").to_table()
    assert np.array_equal(table.column("tick").to_numpy(), [0])
