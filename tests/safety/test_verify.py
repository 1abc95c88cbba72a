"""The independent checker: each rule is found, and legal moves are not flagged."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.safety import VerifyInputError, conflicts
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT

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
