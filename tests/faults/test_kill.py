"""kill -9 at random ticks: every file stays readable (pyarrow, DuckDB, ``fleetmind report``)
and metrics.json holds the metrics of the last flush."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest

from fleetmind.eval.store import load_calls, load_episode, load_events

from .conftest import FLEETMIND, fleetmind

DATASETS = ("episode.parquet", "events.parquet", "latency.parquet")


def _start(out: Path, cfg: Path) -> subprocess.Popen[bytes]:
    cmd = [*FLEETMIND, "run", "--robots", "4", "--steps", "1000000", "--tick-period", "0.002"]
    cmd += ["--out", str(out), "--config", str(cfg), "--json"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _readable(out: Path) -> int:
    """Check every file of a run folder; returns the ticks recorded."""
    for name in DATASETS:
        ds.dataset(out / name, format="parquet").to_table()  # pyarrow sees whole parts only
    con = duckdb.connect()
    rows = con.sql(f"SELECT count(*) FROM '{out}/episode.parquet/*.parquet'").fetchall()
    con.close()
    episode = load_episode(out)
    assert rows[0][0] == episode.num_rows
    load_events(out)
    load_calls(out)
    return int(episode.column("tick").to_numpy().max()) + 1


@pytest.mark.parametrize("trial", range(4))
def test_kill_9_at_a_random_tick_leaves_a_readable_run(tmp_path: Path, trial: int) -> None:
    rng = random.Random(trial)
    out = tmp_path / "run"
    cfg = tmp_path / "cfg.yaml"
    flush = rng.choice([5, 10, 25])
    cfg.write_text(f"flush_every: {flush}\nsnapshot_every: 40\n")
    proc = _start(out, cfg)
    try:
        deadline = time.monotonic() + 60
        while not list((out / "episode.parquet").glob("part-*.parquet")):
            assert time.monotonic() < deadline, "the run never flushed"
            assert proc.poll() is None, "the run ended on its own"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.5))  # somewhere in the run, maybe mid-write
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    ticks = _readable(out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["partial"] is True
    # The metrics of the last flush (or of the one before, if the kill fell inside a flush:
    # the parts are renamed first, then metrics.json).
    assert ticks - flush <= metrics["ticks_recorded"] <= ticks
    report = fleetmind("report", out, "--out", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr
    assert "unfinished run" in (tmp_path / "r.html").read_text()


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
