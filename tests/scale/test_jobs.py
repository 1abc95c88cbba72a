from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetmind.errors import ConfigError
from fleetmind.scale.jobs import dispatch_job, rewrite_paths, run_jobs, train_job

RUN = {"map": "warehouse-tiny", "robots": 3, "steps": 60, "planner_mode": "sync"}
# Wall-clock fields, and which distance maps a background worker made ahead (timing too).
TIMING = ("latency", "wall", "samples_per_s", "run_dir", "distance_maps")


def stable(m: Any) -> Any:
    """Metrics without wall-clock fields (those differ between any two runs)."""
    if isinstance(m, dict):
        return {k: stable(v) for k, v in m.items() if not any(t in k for t in TIMING)}
    return m


def files_of(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_dispatch_jobs_locally_write_their_folders(tmp_path: Path) -> None:
    jobs = [dispatch_job({**RUN, "seed": s}, tmp_path / f"s{s}") for s in (0, 1)]
    out = run_jobs(jobs)
    assert [m["seed"] for m in out] == [0, 1]
    for s, m in zip((0, 1), out, strict=True):
        saved = json.loads((tmp_path / f"s{s}" / "metrics.json").read_text())
        assert saved["tasks_completed"] == m["tasks_completed"]
        assert m["run_dir"] == str((tmp_path / f"s{s}").resolve())


def test_two_jobs_cannot_share_a_folder(tmp_path: Path) -> None:
    jobs = [dispatch_job(RUN, tmp_path / "same"), dispatch_job(RUN, tmp_path / "same")]
    with pytest.raises(ConfigError, match="same run folder"):
        run_jobs(jobs)


def test_train_job_refuses_a_nested_backend(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass backend to run_jobs"):
        train_job(tmp_path, map="warehouse-tiny", robots=2, algo="ippo", backend="ray")


def test_rewrite_paths_reaches_nested_values() -> None:
    got = rewrite_paths(
        {"a": ["/tmp/x/run", Path("/tmp/x/run/f")], "b": ("/tmp/x",)}, "/tmp/x", "/o"
    )
    assert got == {"a": ["/o/run", Path("/o/run/f")], "b": ("/o",)}


def test_ray_dispatch_runs_match_local_metrics_and_folders(
    ray_instance: Any, tmp_path: Path
) -> None:
    local = run_jobs(
        [dispatch_job({**RUN, "seed": s}, tmp_path / "local" / f"s{s}") for s in (0, 1)]
    )
    remote = run_jobs(
        [dispatch_job({**RUN, "seed": s}, tmp_path / "ray" / f"s{s}") for s in (0, 1)],
        backend="ray",
    )
    assert [stable(m) for m in remote] == [stable(m) for m in local]
    assert local[0]["tasks_completed"] > 0
    for s in (0, 1):
        assert files_of(tmp_path / "ray" / f"s{s}") == files_of(tmp_path / "local" / f"s{s}")


def test_shipped_folder_lands_under_the_requested_path(ray_instance: Any, tmp_path: Path) -> None:
    dest = tmp_path / "shipped"
    (dest / "stale.txt").parent.mkdir(parents=True)
    (dest / "stale.txt").write_text("from an earlier run")
    [m] = run_jobs([dispatch_job({**RUN, "seed": 3}, dest, ship=True)], backend="ray")
    [ref] = run_jobs([dispatch_job({**RUN, "seed": 3}, tmp_path / "ref")])
    assert m["run_dir"] == str(dest.resolve())
    saved = json.loads((dest / "metrics.json").read_text())
    assert saved["run_dir"] == str(dest.resolve())
    assert "fleetmind-ship-" not in (dest / "metrics.json").read_text()
    assert files_of(dest) == files_of(tmp_path / "ref")
    assert stable(m) == stable(ref)


@pytest.mark.timeout(300)
def test_ray_training_seeds_match_local(ray_instance: Any, tmp_path: Path) -> None:
    kw = {"map": "warehouse-tiny", "robots": 2, "algo": "ippo", "steps": 512, "num_envs": 4}
    kw |= {"eval_ticks": 20, "checkpoint_every": 0, "max_steps": 64}
    local = run_jobs([train_job(tmp_path / "l" / f"s{s}", seed=s, **kw) for s in (0, 1)])
    remote = run_jobs(
        [train_job(tmp_path / "r" / f"s{s}", seed=s, **kw) for s in (0, 1)], backend="ray"
    )
    for a, b in zip(local, remote, strict=True):
        assert stable(a.metrics) == stable(b.metrics)
        assert a.returns == b.returns
        assert b.out_dir == (tmp_path / "r" / f"s{b.config['seed']}").resolve()
    assert local[0].metrics["final_losses"] != local[1].metrics["final_losses"]
    assert all(len(r) >= 4 for r in local[0].returns.values())
