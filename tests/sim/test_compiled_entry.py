"""Warehouse ticks that call warehouse_tick's machine code directly, past numba's dispatch.

A world keeps the compiled entry it picked for the types of its arrays and calls it while the
arrays are the ones it checked (``Warehouse.advance``). Two worlds from one seed run side by
side: one whose ticks take that path, one whose read-only actions send every tick through
numba's dispatch; everything a tick returns and every array of the world must agree bit for
bit, also after arrays are swapped for others, of another type or the same.
"""

from __future__ import annotations

import ast
import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.sim import kernels
from fleetmind.sim.maps import load_map
from fleetmind.sim.orders import OrderConfig
from fleetmind.sim.warehouse import BatteryConfig, Tick, Warehouse, WarehouseConfig

STATE = ("pos", "goal", "has_task", "carrying", "errand", "battery", "reward_sum", "delivered_by")


class _Dispatches:
    """kernels.warehouse_tick, counting the calls that go through numba's dispatch."""

    def __init__(self) -> None:
        self.kernel = kernels.warehouse_tick
        self.calls = 0

    @property
    def signatures(self) -> Any:
        return self.kernel.signatures

    def compile(self, sig: Any) -> Any:
        return self.kernel.compile(sig)

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.kernel(*args)


def _same_tick(got: Tick, want: Tick) -> None:
    for a, b in zip(got, want, strict=True):
        assert type(a) is type(b)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype
            assert a.tobytes() == b.tobytes()
        else:
            assert a == b


def _same_world(got: Warehouse, want: Warehouse) -> None:
    for name in STATE:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        assert a.tobytes() == b.tobytes(), name
    assert got.metrics() == want.metrics()


def _steered(world: Warehouse, rng: np.random.Generator) -> list[int]:
    """Random actions, most robots heading for their targets (so pickups and deliveries)."""
    acts = []
    draws = rng.random(len(world.pos))
    for (dr, dc), r in zip((world.goal - world.pos).tolist(), draws, strict=True):
        toward = 1 if dr < 0 else 2 if dr > 0 else 3 if dc < 0 else 4 if dc > 0 else 0
        acts.append(toward if r < 0.8 else int(rng.integers(5)))
    return acts


def _pair(**config: Any) -> tuple[Warehouse, Warehouse]:
    grid = load_map("warehouse-tiny")
    cfg = WarehouseConfig(n_robots=4, max_steps=10**6, **config)
    return Warehouse(grid, cfg, seed=5), Warehouse(grid, cfg, seed=5)


def _warmed(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> tuple[_Dispatches, Warehouse, Warehouse, np.random.Generator]:
    """A spied world pair after five ticks (the fast path's types checked), and its draws."""
    spy = _Dispatches()
    monkeypatch.setattr(kernels, "warehouse_tick", spy)
    fast, ref = _pair()
    rng = np.random.default_rng(seed)
    for _ in range(5):
        _tick(fast, ref, _steered(fast, rng), spy)
    return spy, fast, ref, rng


def _tick(fast: Warehouse, ref: Warehouse, acts: list[int], spy: _Dispatches) -> int:
    """One tick of both; the dispatched calls of ``fast``."""
    before = spy.calls
    got = fast.advance(acts)
    dispatched = spy.calls - before
    read_only = np.array(acts, dtype=np.int64)
    read_only.flags.writeable = False  # not a behaved array: numba's dispatch
    want = ref.advance(read_only)
    assert spy.calls == before + dispatched + 1
    _same_tick(got, want)
    _same_world(fast, ref)
    return dispatched


@pytest.mark.parametrize(
    "config",
    [{}, {"battery": BatteryConfig(capacity=30)}, {"orders": OrderConfig(rate=0.2)}],
    ids=["lifelong", "battery", "stream"],
)
def test_ticks_past_the_dispatch_match_dispatched_ticks(
    config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Dispatches()
    monkeypatch.setattr(kernels, "warehouse_tick", spy)
    fast, ref = _pair(**config)
    rng = np.random.default_rng(0)
    _tick(fast, ref, _steered(fast, rng), spy)
    battery = fast.battery
    dispatched = sum(_tick(fast, ref, _steered(fast, rng), spy) for _ in range(300))
    assert fast.metrics()["tasks_completed"] > 0
    assert dispatched == 0  # the first tick checked the types; the others skip the dispatch
    # A battery model rewrites the batteries in place: still the array that was checked.
    assert fast.battery is battery


def test_swapped_arrays_are_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    spy, fast, ref, rng = _warmed(monkeypatch, 1)
    swaps: list[tuple[str, Any]] = [
        ("broken_until", lambda a: a.astype(np.int32)),  # another dtype: another overload
        ("carrying", lambda a: np.repeat(a, 2)[::2]),  # not contiguous: another layout
        ("goal", np.copy),  # the same type, another array
        ("pos", np.copy),
    ]
    for name, swap in swaps:
        for world in (fast, ref):
            setattr(world, name, swap(getattr(world, name)))
        assert _tick(fast, ref, _steered(fast, rng), spy) == 1, name
        assert sum(_tick(fast, ref, _steered(fast, rng), spy) for _ in range(20)) == 0, name
    fast.reset(7)
    ref.reset(7)
    assert _tick(fast, ref, _steered(fast, rng), spy) == 1  # reset made new arrays


def test_compiled_entry_only_for_plain_aligned_arrays() -> None:
    world = Warehouse(load_map("warehouse-tiny"), WarehouseConfig(n_robots=2), seed=0)
    world.step([0, 0])
    entry = kernels.compiled_entry(kernels.resolve_moves, ())
    assert entry is None  # no overload for no arguments

    def args(pos: np.ndarray) -> tuple[Any, ...]:
        n = len(world.pos)
        return (
            pos[None],
            np.zeros((1, n), np.int64),
            world.grid.blocked,
            np.zeros(1, np.int64),
            np.zeros((0, 0), bool),
            np.empty((1, n, 2), np.int32),
            *(np.empty((1, n), bool) for _ in range(3)),
        )

    kernels.resolve_moves(*args(world.pos))
    assert kernels.compiled_entry(kernels.resolve_moves, args(world.pos)) is not None
    raw = np.zeros(world.pos.nbytes + 1, np.uint8)[1:]
    unaligned = raw.view(np.int32).reshape(world.pos.shape)
    assert not unaligned.flags.aligned
    assert kernels.compiled_entry(kernels.resolve_moves, args(unaligned)) is None

    class Sub(np.ndarray):
        pass

    assert kernels.compiled_entry(kernels.resolve_moves, args(world.pos.view(Sub))) is None
    assert kernels.compiled_entry(kernels.resolve_moves, (*args(world.pos)[:-1], object())) is None
    held = list(kernels.resolve_moves.signatures)
    # Types the kernel was never called with: no entry, and nothing compiled for them.
    assert kernels.compiled_entry(kernels.resolve_moves, args(world.pos.astype(np.uint8))) is None
    assert kernels.resolve_moves.signatures == held


def test_no_private_numba_api_in_src() -> None:
    """Only numba's public API: no ``numba._x`` module, no private attribute of a dispatcher."""
    src = Path(__file__).resolve().parents[2] / "src" / "fleetmind"
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Attribute) and node.attr in ("entry_point", "overloads"):
                names = [node.attr]
            bad = [n for n in names if n.startswith("numba") and "._" in n]
            bad += [n for n in names if n in ("entry_point", "overloads")]
            found += [f"{path.relative_to(src)}:{node.lineno}: {n}" for n in bad]
    assert found == []


def test_a_world_with_a_compiled_entry_pickles_and_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    spy, fast, ref, rng = _warmed(monkeypatch, 2)
    for again in (pickle.loads(pickle.dumps(fast)), copy.deepcopy(fast)):
        _same_world(again, fast)
        twin = copy.deepcopy(ref)
        assert _tick(again, twin, _steered(again, rng), spy) == 1  # checked again, then fast
        assert _tick(again, twin, _steered(again, rng), spy) == 0
