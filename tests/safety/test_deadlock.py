"""DeadlockMonitor: who is reported, when, and when the count restarts."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.errors import ConfigError
from fleetmind.safety import DeadlockMonitor, MonitorInputError


def feed(monitor: DeadlockMonitor, rows: list[list[int]], active=None) -> list[list[int]]:
    return [monitor.update(np.array(r), active) for r in rows]


def test_reports_after_exactly_window_ticks_without_progress() -> None:
    m = DeadlockMonitor(window=3)
    out = feed(m, [[5, 5], [4, 5], [3, 5], [2, 5], [1, 5]])
    # Robot 1 never improves: first tick sets its best, reported on the 3rd non-improving tick.
    assert out == [[], [], [], [1], []]


def test_a_stuck_robot_is_reported_again_every_window() -> None:
    m = DeadlockMonitor(window=2)
    out = feed(m, [[7]] * 7)
    assert out == [[], [], [0], [], [0], [], [0]]


def test_livelock_back_and_forth_is_caught() -> None:
    # Progress then retreat then progress to the same best: never better than 4.
    m = DeadlockMonitor(window=4)
    out = feed(m, [[5], [4], [5], [4], [5], [4]])
    assert out == [[], [], [], [], [], [0]]


def test_progress_inactive_target_reached_and_new_target_restart_the_count() -> None:
    m = DeadlockMonitor(window=2)
    assert feed(m, [[3], [3]]) == [[], []]
    assert m.update(np.array([3]), np.array([False])) == []  # inactive: restart from here
    assert feed(m, [[3], [3]]) == [[], [0]]
    assert feed(m, [[0], [0], [0]]) == [[], [], []]  # at target: never stuck
    assert feed(m, [[9], [9]]) == [[], []]  # jump of more than one cell: new target
    assert m.update(np.array([9])) == [0]
    m.reset([0])
    assert feed(m, [[9], [9]]) == [[], []]


def test_told_of_changes_a_rise_of_several_steps_is_no_new_target() -> None:
    # A route cost on a weighted map: 40 -> 35 -> 70 (one move against a dear lane) and back.
    rows = [[40], [35], [70], [35], [70], [35], [70]]
    told = DeadlockMonitor(window=4)
    out = [told.update(np.array(r), changed=np.array([False])) for r in rows]
    assert out == [[], [], [], [], [], [0], []]  # the shuffle never beats 35: reported
    # Read without ``changed``, every rise looks like a new target and the shuffle goes unseen.
    assert feed(DeadlockMonitor(window=4), rows) == [[]] * len(rows)
    # A robot whose target changed starts over, whatever its cost did.
    m = DeadlockMonitor(window=2)
    assert [m.update(np.array([9]), changed=np.array([False])) for _ in range(2)] == [[], []]
    assert m.update(np.array([9]), changed=np.array([True])) == []
    assert m.update(np.array([9]), changed=np.array([False])) == []
    assert m.update(np.array([9]), changed=np.array([False])) == [0]
    with pytest.raises(MonitorInputError, match="changed"):
        m.update(np.array([9]), changed=np.array([True, False]))


def test_fleet_size_change_starts_over() -> None:
    m = DeadlockMonitor(window=1)
    assert feed(m, [[2, 2], [2, 2]]) == [[], [0, 1]]
    assert m.update(np.array([2, 2, 2])) == []


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ConfigError, match="deadlock_window"):
        DeadlockMonitor(window=0)
    m = DeadlockMonitor()
    with pytest.raises(MonitorInputError, match="dist_to_target"):
        m.update(np.array([[1]]))
    with pytest.raises(MonitorInputError, match="dist_to_target"):
        m.update(np.array([-1]))
    with pytest.raises(MonitorInputError, match="dist_to_target"):
        m.update(np.array([1.5]))
    with pytest.raises(MonitorInputError, match="active"):
        m.update(np.array([1, 2]), np.array([True]))
