"""Incremental world captures read back as the deep-copy snapshots they replace."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.errors import ConfigError
from fleetmind.eval import runner
from fleetmind.eval.recorder import RunRecorder
from fleetmind.eval.replay import strict_replay
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.eval.store import load_snapshots
from fleetmind.sim.warehouse import Warehouse


def same(a: Any, b: Any, where: str = "state") -> None:
    """Assert two snapshot values are equal all the way down (arrays, records, generators)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype, where
        assert a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif isinstance(a, np.random.Generator):
        assert a.bit_generator.state == b.bit_generator.state, where
    elif isinstance(a, dict):
        assert list(a) == list(b) or set(a) == set(b), f"{where}: keys differ"
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif hasattr(a, "__dict__") and not isinstance(a, type):
        same(vars(a), vars(b), where)
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


class _Both(RunRecorder):
    """The recorder, keeping a deep copy beside every capture it writes."""

    copies: dict[int, dict[str, Any]]

    def capture(self, tick: int, world: Warehouse, *, reason: str) -> Path:
        type(self).copies[tick] = {"reason": reason, "state": world.snapshot()}
        return super().capture(tick, world, reason=reason)


@pytest.mark.parametrize(
    ("faults", "desk"),
    [
        ([], "off"),
        (
            [
                "breakdown:busy@6+20",
                "surge@9:15",
                "block:3,2-4,6@12+10",
                "battery:robot_2@15",
                "breakdown:robot_4@25+5",
            ],
            "rules",
        ),
    ],
)
def test_captures_read_back_as_the_deep_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: list[str], desk: str
) -> None:
    _Both.copies = {}
    monkeypatch.setattr(runner, "RunRecorder", _Both)
    cfg = RunConfig(robots=10, steps=80, seed=4, faults=faults, desk=desk, snapshot_every=7)
    execute(cfg, tmp_path / "run")
    snaps = load_snapshots(tmp_path / "run")
    assert len(snaps) == len(_Both.copies) > 20  # decisions and periodic ones, one per tick
    reasons = set()
    for snap in snaps:
        want = _Both.copies[snap["tick"]]
        assert snap["reason"] == want["reason"]
        reasons.add(snap["reason"])
        same(snap["state"], want["state"], f"tick {snap['tick']}")
    assert reasons == {"decision", "periodic"}
    with pytest.raises(AssertionError):  # the comparison does tell states apart
        same(snaps[0]["state"], _Both.copies[snaps[-1]["tick"]]["state"])
    # Orders were reassigned, dropped or delivered between captures (the columns changed).
    last = snaps[-1]["state"]
    assert any(r.delivered_tick >= 0 for r in last["records"])
    assert any(r.robot >= 0 and r.delivered_tick < 0 for r in last["records"])


def test_a_restored_capture_continues_as_the_original(tmp_path: Path) -> None:
    cfg = RunConfig(robots=6, steps=60, seed=1)
    execute(cfg, tmp_path / "run")
    snap = load_snapshots(tmp_path / "run", reason="decision")[-1]
    ready = runner.prepare(cfg)
    world = ready.world
    world.restore(snap["state"])
    other = runner.prepare(cfg).world
    other.restore(snap["state"])
    rng = np.random.default_rng(0)
    for _ in range(30):
        acts = rng.integers(0, 5, len(world.robot_ids))
        a, b = world.step(acts), other.step(acts)
        assert a.arrived == b.arrived
        assert a.delivered == b.delivered
    same(world.snapshot(), other.snapshot())


def test_strict_replay_of_a_captured_run_is_identical(tmp_path: Path) -> None:
    execute(RunConfig(robots=8, steps=50, seed=2, snapshot_every=10), tmp_path / "run")
    result = strict_replay(tmp_path / "run", tmp_path / "again")
    assert result.identical, result.mismatches


def test_a_capture_without_its_base_is_one_clear_error(tmp_path: Path) -> None:
    execute(RunConfig(robots=4, steps=20, seed=0), tmp_path / "run")
    (tmp_path / "run" / "snapshots" / "base.pkl").unlink()
    with pytest.raises(ConfigError, match=r"base\.pkl"):
        load_snapshots(tmp_path / "run")


def test_a_capture_out_of_its_chain_is_one_clear_error(tmp_path: Path) -> None:
    execute(RunConfig(robots=4, steps=30, seed=0), tmp_path / "run")
    files = sorted((tmp_path / "run" / "snapshots").glob("tick_*.pkl"))
    assert len(files) >= 2
    files[0].unlink()  # the first capture logged the orders the later ones refer to
    with pytest.raises(ConfigError, match=r"tick_.*a snapshot file is missing"):
        load_snapshots(tmp_path / "run")
    assert pickle.loads(files[1].read_bytes())["format"] == 2


def test_the_fault_column_equals_the_per_robot_reference(tmp_path: Path) -> None:
    from fleetmind.dispatch.faults import parse_fault

    cfg = RunConfig(robots=12, steps=5, seed=0)
    world = runner.prepare(cfg).world
    specs = ["breakdown:robot_3@2+5", "breakdown:7@4+2", "surge@3:4", "breakdown:robot_3@3+1"]
    faults = [parse_fault(f) for f in specs]
    rec = RunRecorder(tmp_path / "run")
    rec.attach(world, faults=faults)
    seen = set()
    for tick in range(8):
        got = rec._extra_columns(tick, len(world.robot_ids))["fault"].tolist()
        want = [
            ";".join(
                f.spec
                for f in faults
                if f.active(tick) and (f.kind != "breakdown" or f.robot in (rid, str(i)))
            )
            for i, rid in enumerate(world.robot_ids)
        ]
        assert got == want
        seen |= set(want)
    assert {"", "breakdown:robot_3@2+5", "breakdown:7@4+2"} <= seen
    assert "breakdown:robot_3@2+5;surge@3:4;breakdown:robot_3@3+1" in seen
