"""The independent checker: each rule is found, and legal moves are not flagged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.safety import VerifyInputError, conflicts
from fleetmind.safety.verify import count_conflicts
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT, GridMap

from .layouts import parse


def kinds(found: list) -> list[str]:
    return [c.kind for c in found]


def test_vertex_conflict_is_found() -> None:
    s = parse("A.B")
    found = conflicts(s.grid, s.positions, [RIGHT, LEFT])
    assert kinds(found) == ["vertex"]
    assert found[0].robots == (0, 1)
    assert found[0].cell == (0, 1)


def test_moving_onto_a_waiting_robot_is_a_vertex_conflict() -> None:
    s = parse("AB.")
    assert kinds(conflicts(s.grid, s.positions, [RIGHT, WAIT])) == ["vertex"]


def test_swap_is_found() -> None:
    s = parse("AB")
    found = conflicts(s.grid, s.positions, [RIGHT, LEFT])
    assert kinds(found) == ["swap"]
    assert found[0].robots == (0, 1)


def test_wall_out_of_bounds_and_invalid_action() -> None:
    s = parse("A#\nB.")
    found = conflicts(s.grid, s.positions, [RIGHT, DOWN])
    assert kinds(found) == ["wall", "out_of_bounds"]
    found = conflicts(s.grid, s.positions, [7, WAIT])
    assert kinds(found) == ["invalid_action"]


def test_illegal_mover_counts_as_staying() -> None:
    # A bumps the wall and stays; B moving onto A's cell is then a vertex conflict.
    s = parse("#A\n.B")
    found = conflicts(s.grid, s.positions, [LEFT, UP])
    assert kinds(found) == ["wall", "vertex"]


def test_following_and_rotation_are_legal() -> None:
    chain = parse("ABC.")
    assert conflicts(chain.grid, chain.positions, [RIGHT, RIGHT, RIGHT]) == []
    ring = parse("AB\nCD")  # A(0,0) B(0,1) C(1,0) D(1,1): rotate clockwise
    assert conflicts(ring.grid, ring.positions, [RIGHT, DOWN, UP, LEFT]) == []


def test_forbidden_entry_only_when_moving_in() -> None:
    s = parse("AX.")
    assert kinds(conflicts(s.grid, s.positions, [RIGHT], forbidden=s.forbidden)) == ["forbidden"]
    inside = parse(".B.")
    # A robot already on a forbidden cell may wait or leave.
    assert conflicts(inside.grid, inside.positions, [WAIT], forbidden=[(0, 1)]) == []
    assert conflicts(inside.grid, inside.positions, [RIGHT], forbidden=[(0, 1)]) == []


def test_shapes_are_checked() -> None:
    s = parse("A.")
    with pytest.raises(VerifyInputError, match="actions"):
        conflicts(s.grid, s.positions, np.array([1, 2]))
    with pytest.raises(VerifyInputError, match="positions"):
        conflicts(s.grid, np.array([0, 0]), np.array([1]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_fast_count_equals_the_reference_on_random_joint_moves(data: st.DataObject) -> None:
    h = data.draw(st.integers(1, 6))
    w = data.draw(st.integers(1, 6))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    grid = GridMap(
        name="random",
        blocked=rng.random((h, w)) < 0.25,
        pickups=np.zeros((h, w), dtype=bool),
        stations=np.zeros((h, w), dtype=bool),
        chargers=np.zeros((h, w), dtype=bool),
    )
    n = data.draw(st.integers(0, 12))
    # Any cells, walls, repeats and cells off the map included; any action ids, bad ones too.
    cells = st.tuples(st.integers(-1, h), st.integers(-1, w))
    pos = np.array(data.draw(st.lists(cells, min_size=n, max_size=n)), dtype=np.int64)
    pos = pos.reshape(n, 2)
    act = np.array(data.draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n)), dtype=np.int64)
    banned = data.draw(st.lists(cells, max_size=4))
    want = len(conflicts(grid, pos, act, forbidden=banned))
    assert count_conflicts(grid, pos, act, forbidden=banned) == want


def test_the_fast_count_sees_each_rule() -> None:
    s = parse("AB.#\nC...")
    # A and B swap, C walks off the map.
    assert count_conflicts(s.grid, s.positions, [RIGHT, LEFT, LEFT]) == 2
    assert count_conflicts(s.grid, s.positions, [WAIT, WAIT, WAIT]) == 0
    assert count_conflicts(s.grid, s.positions, [WAIT, DOWN, RIGHT]) == 1  # both on (1, 1)
