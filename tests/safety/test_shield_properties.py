"""Property tests: whatever the map, placements, preferences and priorities, the shield's joint
move is safe, broken robots stay, and forbidden cells are never entered."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.safety import Shield, conflicts, sanitise_preferences
from fleetmind.sim.grid import DELTAS, GridMap

SETTINGS = settings(max_examples=250, deadline=None)


@st.composite
def scenes(draw: st.DrawFn) -> dict:
    height = draw(st.integers(1, 7))
    width = draw(st.integers(1, 7))
    cells = height * width
    blocked = np.array(draw(st.lists(st.booleans(), min_size=cells, max_size=cells)))
    blocked = blocked.reshape(height, width)
    free = np.argwhere(~blocked)
    k = len(free)
    order = draw(st.permutations(range(k))) if k else []
    n = draw(st.integers(0, k))
    pos = free[list(order[:n])].astype(np.int32).reshape(-1, 2)
    # Adversarial rows: out-of-range ids and repeats, sometimes proper permutations.
    row = st.one_of(
        st.lists(st.integers(-3, 8), min_size=5, max_size=5),
        st.permutations(range(5)),
    )
    prefs = np.array(draw(st.lists(row, min_size=n, max_size=n)), dtype=np.int64).reshape(n, 5)
    finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    prio = np.array(draw(st.lists(finite, min_size=n, max_size=n)), dtype=np.float64)
    broken = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    banned = [tuple(c) for c in free.tolist() if draw(st.integers(0, 4)) == 0]
    none = np.zeros_like(blocked)
    grid = GridMap("hyp", blocked, none, none.copy(), none.copy())
    return {
        "grid": grid,
        "pos": pos,
        "prefs": prefs,
        "prio": prio,
        "broken": broken,
        "forbidden": banned,
    }


def check_safe(scene: dict, actions: np.ndarray, pos: np.ndarray, broken: np.ndarray) -> None:
    grid, banned = scene["grid"], scene["forbidden"]
    assert conflicts(grid, pos, actions, forbidden=banned) == []
    assert (actions[broken] == 0).all()
    end = pos + DELTAS[actions]
    banned_set = set(banned)
    for i in range(len(pos)):
        if actions[i] != 0:
            assert tuple(end[i].tolist()) not in banned_set


@SETTINGS
@given(scenes())
def test_one_tick_is_always_safe(scene: dict) -> None:
    shield = Shield(scene["grid"], forbidden=scene["forbidden"])
    d = shield.resolve(
        scene["pos"], scene["prefs"], priorities=scene["prio"], broken=scene["broken"]
    )
    check_safe(scene, d.actions, scene["pos"], scene["broken"])
    assert d.intervened.tolist() == (d.actions != scene["prefs"][:, 0]).tolist()
    reasons = sum(v for k, v in d.rule_counts.items() if k not in ("sanitised", "deadlock_escape"))
    assert reasons == int(d.intervened.sum())


@SETTINGS
@given(scenes())
def test_a_safe_first_choice_is_never_overridden(scene: dict) -> None:
    # Feed the shield's own (safe) answer back as everyone's first choice: PIBT must keep it.
    shield = Shield(scene["grid"], forbidden=scene["forbidden"])
    first = shield.resolve(
        scene["pos"], scene["prefs"], priorities=scene["prio"], broken=scene["broken"]
    ).actions
    ranked, _ = sanitise_preferences(scene["prefs"])
    rows = [[a, *(b for b in row if b != a)] for a, row in zip(first, ranked, strict=True)]
    again = np.array(rows, dtype=np.int64).reshape(-1, 5)
    rng = np.random.default_rng(len(first))
    d = shield.resolve(
        scene["pos"], again, priorities=rng.random(len(first)), broken=scene["broken"]
    )
    assert d.actions.tolist() == first.tolist()
    assert not d.intervened.any()


@settings(max_examples=60, deadline=None)
@given(scenes(), st.integers(0, 2**32 - 1))
def test_many_ticks_with_deadlock_escapes_stay_safe(scene: dict, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shield = Shield(scene["grid"], forbidden=scene["forbidden"], deadlock_window=2, seed=seed)
    pos, broken = scene["pos"].copy(), scene["broken"]
    n = len(pos)
    for _ in range(12):
        prefs = rng.integers(-1, 6, size=(n, 5))
        dist = rng.integers(1, 4, size=n)  # rarely improving: escapes start often
        d = shield.resolve(pos, prefs, priorities=rng.random(n), broken=broken, dist_to_target=dist)
        check_safe(scene, d.actions, pos, broken)
        assert not d.escaping[broken].any()
        pos = pos + DELTAS[d.actions]


@SETTINGS
@given(st.lists(st.lists(st.integers(-100, 100), min_size=1, max_size=9), min_size=1, max_size=6))
def test_sanitised_rows_are_permutations_keeping_valid_order(rows: list[list[int]]) -> None:
    width = max(len(r) for r in rows)
    arr = np.array([r + [r[-1]] * (width - len(r)) for r in rows])
    ranked, repaired = sanitise_preferences(arr)
    for raw, out, fixed in zip(arr.tolist(), ranked.tolist(), repaired.tolist(), strict=True):
        assert sorted(out) == [0, 1, 2, 3, 4]
        kept = list(dict.fromkeys(a for a in raw if 0 <= a < 5))
        assert out[: len(kept)] == kept
        assert fixed == (raw != out)


def test_naive_first_choices_collide_and_the_shield_does_not() -> None:
    rng = np.random.default_rng(3)
    height, width = 12, 12
    blocked = rng.random((height, width)) < 0.15
    none = np.zeros_like(blocked)
    grid = GridMap("crowd", blocked, none, none.copy(), none.copy())
    free = np.argwhere(~blocked)
    pos = free[rng.choice(len(free), int(0.6 * len(free)), replace=False)].astype(np.int32)
    shield = Shield(grid)
    naive_total = 0
    for _ in range(20):
        prefs = np.argsort(rng.random((len(pos), 5)), axis=1)
        naive = conflicts(grid, pos, prefs[:, 0])
        naive_total += len(naive)
        kinds = {c.kind for c in naive}
        assert {"vertex", "swap"} & kinds
        d = shield.resolve(pos, prefs, priorities=rng.random(len(pos)))
        assert conflicts(grid, pos, d.actions) == []
        assert d.intervened.sum() < len(pos)  # traffic keeps flowing
        assert (d.actions != 0).sum() > len(pos) // 10
        pos = pos + DELTAS[d.actions]
    assert naive_total > 100
