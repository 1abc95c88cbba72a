"""The compiled PIBT step against the plain-Python reference: the same moves, reasons and counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from fleetmind.envs.warehouse import resolve_map
from fleetmind.safety import Shield
from fleetmind.safety.shield import PushInput
from fleetmind.sim.grid import GridMap


class _Reference(Shield):
    """The shield with its push loop run by the plain-Python reference."""

    def _pibt(self, push: PushInput) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        act, reasons = self._pibt_reference(push)
        return np.asarray(act, dtype=np.int64), np.asarray(reasons, dtype=np.int64)


def _same_decisions(grid: GridMap, rng: np.random.Generator, n: int, ticks: int) -> int:
    free = np.argwhere(~grid.blocked)
    banned = [tuple(c) for c in free[rng.random(len(free)) < 0.05].tolist()]
    fast = Shield(grid, forbidden=banned, deadlock_window=3, seed=7)
    slow = _Reference(grid, forbidden=banned, deadlock_window=3, seed=7)
    pos = free[rng.choice(len(free), n, replace=False)].astype(np.int64)
    pushes = 0
    for _ in range(ticks):
        prefs = np.argsort(rng.random((n, 5)), axis=1)
        prio = rng.integers(0, 3, n).astype(np.float64)  # ties: the index decides
        broken = rng.random(n) < 0.05
        dist = rng.integers(0, 3, n)  # few distinct values: robots get stuck and escape
        kw = {"priorities": prio, "broken": broken, "dist_to_target": dist}
        a = fast.resolve(pos, prefs, **kw)
        b = slow.resolve(pos, prefs, **kw)
        assert np.array_equal(a.actions, b.actions)
        assert np.array_equal(a.intervened, b.intervened)
        assert a.rule_counts == b.rule_counts
        assert a.stuck == b.stuck
        assert np.array_equal(a.escaping, b.escaping)
        pushes += a.rule_counts["yield"] + int(a.escaping.sum())
        pos = pos + np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])[a.actions]
    return pushes


def test_the_kernel_equals_the_reference_in_a_crowded_warehouse() -> None:
    grid = resolve_map("warehouse-small")
    rng = np.random.default_rng(0)
    n = int((~grid.blocked).sum() * 0.6)  # crowded: long push chains
    assert _same_decisions(grid, rng, n, 40) > 50  # pushes and escapes did happen


@settings(max_examples=120, deadline=None)
@given(st.integers(2, 8), st.integers(2, 8), st.integers(0, 2**31 - 1), st.floats(0.2, 0.9))
def test_the_kernel_equals_the_reference_on_random_grids(
    h: int, w: int, seed: int, crowd: float
) -> None:
    rng = np.random.default_rng(seed)
    blocked = rng.random((h, w)) < 0.25
    none = np.zeros_like(blocked)
    grid = GridMap("hyp", blocked, none, none.copy(), none.copy())
    free = int((~blocked).sum())
    n = min(free, max(1, int(free * crowd)))
    if free:
        _same_decisions(grid, rng, n, 6)


def test_the_kernel_leaves_its_tables_clean_between_calls() -> None:
    grid = resolve_map("warehouse-small")
    shield = Shield(grid)
    free = np.argwhere(~grid.blocked)
    rng = np.random.default_rng(1)
    for _ in range(5):
        pos = free[rng.choice(len(free), 200, replace=False)]
        shield.resolve(pos, np.argsort(rng.random((200, 5)), axis=1))
        assert (shield._occ_now == -1).all()
        assert (shield._occ_next == -1).all()
