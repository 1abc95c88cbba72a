"""Where a run's robot-ticks went (fleetmind.eval.moves): hand-built episodes and real runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.eval.compare import compare
from fleetmind.eval.moves import COLUMNS, KINDS, move_shares, run_moves
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.eval.store import load_episode
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT
from fleetmind.sim.maps import load_map

# A 3x5 open room, no walls.
ROOM = "type octile\nheight 3\nwidth 5\nmap\n.....\n.....\n.....\n"


def _room(tmp_path: Path) -> Any:
    path = tmp_path / "room.map"
    path.write_text(ROOM)
    return load_map(str(path))


def _episode(rows: list[tuple[int, ...]]) -> dict[str, np.ndarray[Any, Any]]:
    """Columns from rows in :data:`COLUMNS` order, recorded as the recorder does: the cell
    before the tick's move; target, task and breakdown after it."""
    arr = np.asarray(rows, dtype=np.int64)
    return {n: arr[:, k] for k, n in enumerate(COLUMNS)}


def test_each_kind_of_robot_tick_is_told_apart_with_the_target_of_the_tick_before(
    tmp_path: Path,
) -> None:
    grid = _room(tmp_path)
    # Robot 0 heads for (0, 4) from (0, 0): right (toward), down as chosen (away), right
    # although it asked up (toward: counted by the move made), wait as chosen, held (asked
    # right, stayed), pushed left (asked right: away on the shield's call).
    # Its target is recorded after each tick; the last row's target (2, 0) is a new task that
    # the move of tick 6 (never made: the last tick) would have been judged against.
    r0 = [
        (0, 0, 0, 0, 0, 4, 1, 0, WAIT, WAIT),  # first tick: no target recorded before it
        (1, 0, 0, 0, 0, 4, 1, 0, RIGHT, RIGHT),  # (0,0) -> (0,1) toward
        (2, 0, 0, 1, 0, 4, 1, 0, DOWN, DOWN),  # -> (1,1) away, chosen
        (3, 0, 1, 1, 0, 4, 1, 0, UP, RIGHT),  # -> (1,2) toward (the shield chose it)
        (4, 0, 1, 2, 0, 4, 1, 0, WAIT, WAIT),  # stays, chosen
        (5, 0, 1, 2, 0, 4, 1, 0, RIGHT, WAIT),  # stays, held
        (6, 0, 1, 2, 0, 4, 1, 0, RIGHT, LEFT),  # -> (1,1) away, the shield's call
        (7, 0, 1, 1, 2, 0, 1, 0, LEFT, LEFT),  # last tick: no next cell
    ]
    # Robot 1: idle, then broken: idle ticks counted as idle, broken ones not at all.
    r1 = [
        (0, 1, 2, 4, 2, 4, 0, 0, WAIT, WAIT),
        (1, 1, 2, 4, 2, 4, 0, 0, WAIT, WAIT),
        (2, 1, 2, 4, 2, 4, 0, 0, WAIT, WAIT),
        (3, 1, 2, 4, 2, 4, 0, 1, WAIT, WAIT),
        (4, 1, 2, 4, 2, 4, 0, 1, WAIT, WAIT),
        (5, 1, 2, 4, 2, 4, 0, 1, WAIT, WAIT),
        (6, 1, 2, 4, 2, 4, 0, 1, WAIT, WAIT),
        (7, 1, 2, 4, 2, 4, 0, 1, WAIT, WAIT),
    ]
    # Shuffled: the rows need not come sorted.
    rows = r0 + r1
    order = np.random.default_rng(0).permutation(len(rows))
    got = move_shares(_episode([rows[i] for i in order]), grid)
    assert got is not None
    assert got["busy"] == 6
    assert got["toward"] == pytest.approx(2 / 6)
    assert got["away_chosen"] == pytest.approx(1 / 6)
    assert got["away_shield"] == pytest.approx(1 / 6)
    assert got["wait_chosen"] == pytest.approx(1 / 6)
    assert got["held"] == pytest.approx(1 / 6)
    assert got["net"] == pytest.approx(0.0)
    # Robot 1 is idle over ticks 1-2 (tick 3's breakdown is recorded after it: not counted).
    assert got["idle"] == pytest.approx(2 / 8)


def test_a_robot_reaching_its_target_is_judged_against_that_target_not_the_next(
    tmp_path: Path,
) -> None:
    grid = _room(tmp_path)
    # Steps onto (0, 2) at tick 1; its next target (0, 0) is recorded after that tick.
    rows = [
        (0, 0, 0, 0, 0, 2, 1, 0, RIGHT, RIGHT),
        (1, 0, 0, 1, 0, 0, 1, 0, RIGHT, RIGHT),
        (2, 0, 0, 2, 0, 0, 1, 0, LEFT, LEFT),
        (3, 0, 0, 1, 0, 0, 1, 0, LEFT, LEFT),
    ]
    got = move_shares(_episode(rows), grid)
    assert got is not None
    assert (got["busy"], got["toward"]) == (2, 1.0)


def test_a_hold_is_told_apart_by_whether_another_robot_took_the_cell(tmp_path: Path) -> None:
    grid = _room(tmp_path)
    # Tick 1: robots 0 and 1 both ask for (0, 2); robot 1 gets it, robot 0 is held (taken).
    # Tick 2: robot 0 asks for (0, 2) again, where robot 1 now stays: held behind a stayer.
    # Tick 3: robot 0 asks to go up off the grid: held by the edge, not taken.
    r0 = [
        (0, 0, 0, 1, 0, 4, 1, 0, WAIT, WAIT),
        (1, 0, 0, 1, 0, 4, 1, 0, RIGHT, WAIT),
        (2, 0, 0, 1, 0, 4, 1, 0, RIGHT, WAIT),
        (3, 0, 0, 1, 0, 4, 1, 0, UP, WAIT),
        (4, 0, 0, 1, 0, 4, 1, 0, WAIT, WAIT),
    ]
    r1 = [
        (0, 1, 1, 2, 0, 2, 1, 0, WAIT, WAIT),
        (1, 1, 1, 2, 2, 2, 0, 0, UP, UP),  # arrived: no task recorded after the tick
        (2, 1, 0, 2, 2, 2, 0, 0, WAIT, WAIT),
        (3, 1, 0, 2, 2, 2, 0, 0, WAIT, WAIT),
        (4, 1, 0, 2, 2, 2, 0, 0, WAIT, WAIT),
    ]
    got = move_shares(_episode(r0 + r1), grid)
    assert got is not None
    # Robot 0's ticks 1-3 are holds; robot 1's tick 1 is a move toward its target.
    assert got["busy"] == 4
    assert got["held"] == pytest.approx(3 / 4)
    assert got["held_taken"] == pytest.approx(1 / 4)


def test_a_recorded_run_breaks_down_into_shares_that_add_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    execute(RunConfig(map="warehouse-small", robots=12, steps=120, seed=3), run)
    got = run_moves(run)
    assert got is not None
    assert sum(got[k] for k in KINDS) == pytest.approx(1.0)
    assert 0.0 < got["toward"] <= 1.0
    assert 0.0 <= got["held_taken"] <= got["held"]
    ep = load_episode(run).to_pandas()
    # Whatever the shield changed is bounded by the rows where it overrode the executor.
    overrides = int(ep["shield_override"].sum())
    assert (got["away_shield"] + got["held"]) * got["busy"] <= overrides + 1e-9
    # A run folder whose map no longer resolves gives no breakdown (logged), not an error.
    cfg = run / "config.json"
    cfg.write_text(cfg.read_text().replace('"warehouse-small"', '"no-such-map.map"'))
    assert run_moves(run) is None


def test_compare_shows_where_the_robot_ticks_went_for_each_strategy(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    result = compare(
        ["guidance", "learned"], map_name="warehouse-small", robots=10, steps=80, seeds=2, out=out
    )
    for name in ("guidance", "learned"):
        cell = result["table"][name]["moves_net"]
        assert cell["n"] == 2
        assert 0.0 < cell["mean"] <= 1.0
        assert result["table"][name]["moves_held"]["mean"] >= 0.0
    assert "net progress (cells per busy robot-tick)" in result["rows"].values()
