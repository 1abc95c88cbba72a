"""Scenario tests of the tick dynamics, from ASCII layouts, and hypothesis invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.safety.verify import conflicts
from fleetmind.sim.dynamics import resolve_moves
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT
from fleetmind.sim.maps import parse_text_map


def _step(layout: str, positions: list[tuple[int, int]], actions: list[int], tick: int = 0):
    grid = parse_text_map(layout)
    pos = np.array([positions], dtype=np.int32)
    res = resolve_moves(pos, np.array([actions]), grid.blocked, tick=tick)
    return [tuple(p) for p in res.pos[0].tolist()], res


CORRIDOR = "......"


def test_head_on_swap_is_blocked() -> None:
    new, res = _step(CORRIDOR, [(0, 2), (0, 3)], [RIGHT, LEFT])
    assert new == [(0, 2), (0, 3)]
    assert res.conflict[0].tolist() == [True, True]


def test_three_robots_follow_round_a_square() -> None:
    new, res = _step("..\n..", [(0, 0), (0, 1), (1, 1)], [RIGHT, DOWN, LEFT])
    assert new == [(0, 1), (1, 1), (1, 0)]
    assert not res.conflict.any()


def test_chain_following_moves_everyone() -> None:
    new, res = _step(CORRIDOR, [(0, 1), (0, 2), (0, 3)], [RIGHT, RIGHT, RIGHT])
    assert new == [(0, 2), (0, 3), (0, 4)]
    assert not res.conflict.any()


def test_chain_behind_a_blocked_leader_waits() -> None:
    # The leader bumps the wall; both followers must wait, and count as conflicts.
    new, res = _step("....#", [(0, 1), (0, 2), (0, 3)], [RIGHT, RIGHT, RIGHT])
    assert new == [(0, 1), (0, 2), (0, 3)]
    assert res.wall_bump[0].tolist() == [False, False, True]
    assert res.conflict[0].tolist() == [True, True, False]


def test_smallest_cycle_rotates() -> None:
    # A 4-connected grid is bipartite, so it has no odd cycles: the smallest cycle of robots
    # that rotate together has 4 robots (a 2x2 square). Three robots in that square just follow.
    layout = "..\n.."
    new, res = _step(layout, [(0, 0), (0, 1), (1, 1), (1, 0)], [RIGHT, DOWN, LEFT, UP])
    assert new == [(0, 1), (1, 1), (1, 0), (0, 0)]
    assert not res.conflict.any()


def test_three_robot_cycle_in_a_ring() -> None:
    layout = "...\n.#.\n..."
    ring = [(0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 1), (2, 0), (1, 0)]
    # A full ring of 8 around a pillar rotates clockwise in one tick.
    acts = [RIGHT, RIGHT, DOWN, DOWN, LEFT, LEFT, UP, UP]
    new, res = _step(layout, ring, acts)
    assert new == ring[1:] + ring[:1]
    assert not res.conflict.any()


def test_wall_bump_and_border() -> None:
    new, res = _step(".#\n..", [(0, 0), (1, 1)], [RIGHT, DOWN])
    assert new == [(0, 0), (1, 1)]
    assert res.wall_bump[0].tolist() == [True, True]
    assert not res.conflict.any()


def test_vertex_conflict_has_one_winner_and_priority_rotates() -> None:
    layout = "...\n..."
    starts = [(0, 0), (0, 2)]
    winners = set()
    for tick in range(2):
        new, res = _step(layout, starts, [RIGHT, LEFT], tick=tick)
        assert sum(p == (0, 1) for p in new) == 1
        assert int(res.conflict.sum()) == 1
        winners.add(new.index((0, 1)))
    assert winners == {0, 1}


def test_stayer_keeps_its_cell() -> None:
    new, res = _step("...", [(0, 0), (0, 1)], [RIGHT, WAIT])
    assert new == [(0, 0), (0, 1)]
    assert res.conflict[0].tolist() == [True, False]


def test_frozen_robots_do_not_move() -> None:
    grid = parse_text_map("...")
    res = resolve_moves(
        np.array([[(0, 0)]], dtype=np.int32),
        np.array([[RIGHT]]),
        grid.blocked,
        frozen=np.array([[True]]),
    )
    assert res.pos[0, 0].tolist() == [0, 0]


@st.composite
def scenes(draw: st.DrawFn):
    h = draw(st.integers(1, 6))
    w = draw(st.integers(1, 6))
    walls = draw(st.lists(st.booleans(), min_size=h * w, max_size=h * w))
    blocked = np.array(walls, dtype=bool).reshape(h, w)
    free = np.argwhere(~blocked)
    if len(free) == 0:
        blocked[0, 0] = False
        free = np.argwhere(~blocked)
    n = draw(st.integers(1, len(free)))
    idx = draw(st.permutations(range(len(free))))[:n]
    pos = free[list(idx)].astype(np.int32)
    actions = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    tick = draw(st.integers(0, 10))
    return blocked, pos, actions, tick


@given(scenes())
@settings(max_examples=300, deadline=None)
def test_any_joint_action_gives_a_collision_free_move(scene) -> None:
    from fleetmind.sim.grid import GridMap

    blocked, pos, actions, tick = scene
    res = resolve_moves(pos[None], actions[None], blocked, tick=tick)
    new = res.pos[0]
    # Robots are conserved and never share a cell, never enter walls.
    assert len({tuple(p) for p in new.tolist()}) == len(pos)
    assert not blocked[new[:, 0], new[:, 1]].any()
    # Each robot moved by at most one cell; executed actions replay without any conflict.
    step = np.abs(new - pos).sum(axis=1)
    assert (step <= 1).all()
    executed = np.zeros(len(pos), dtype=np.int64)
    for a, d in ((UP, (-1, 0)), (DOWN, (1, 0)), (LEFT, (0, -1)), (RIGHT, (0, 1))):
        executed[((new - pos) == d).all(axis=1)] = a
    z = np.zeros_like(blocked)
    grid = GridMap("h", blocked, z, z, z)
    assert conflicts(grid, pos, executed) == []
    # A robot that did not move either chose to wait, bumped, or lost a conflict.
    stuck = (step == 0) & (actions != WAIT)
    assert (res.wall_bump[0] | res.conflict[0])[stuck].all()


@pytest.mark.parametrize("n_envs", [1, 3])
def test_batch_equals_worlds_stepped_alone(n_envs: int) -> None:
    rng = np.random.default_rng(0)
    grid = parse_text_map("\n".join(["." * 8] * 8))
    pos = np.stack(
        [np.argwhere(~grid.blocked)[rng.choice(64, 20, replace=False)] for _ in range(n_envs)]
    ).astype(np.int32)
    acts = rng.integers(0, 5, size=(n_envs, 20))
    batch = resolve_moves(pos, acts, grid.blocked, tick=5)
    for b in range(n_envs):
        alone = resolve_moves(pos[b : b + 1], acts[b : b + 1], grid.blocked, tick=5)
        assert np.array_equal(alone.pos[0], batch.pos[b])
        assert np.array_equal(alone.conflict[0], batch.conflict[b])
