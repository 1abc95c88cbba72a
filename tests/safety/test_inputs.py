"""Bad input to the shield gives clear errors naming the field; garbage preferences are repaired."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.errors import ConfigError
from fleetmind.safety import FILL_ORDER, Shield, ShieldInputError, sanitise_preferences
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT

from .layouts import parse

GOOD = np.array([[WAIT, UP, DOWN, LEFT, RIGHT]])


def test_sanitise_drops_invalid_and_repeats_and_appends_wait_last() -> None:
    ranked, repaired = sanitise_preferences(
        np.array([[RIGHT, RIGHT, 9, -1, LEFT], [9, 9, 9, 9, 9], [4, 3, 2, 1, 0]])
    )
    assert ranked.tolist() == [
        [RIGHT, LEFT, UP, DOWN, WAIT],
        list(FILL_ORDER),
        [4, 3, 2, 1, 0],
    ]
    assert repaired.tolist() == [True, True, False]


def test_garbage_first_choice_counts_as_invalid_preference() -> None:
    s = parse("A..")
    d = Shield(s.grid).resolve(s.positions, np.array([[42, RIGHT, 42, 42, 42]]))
    assert d.actions.tolist() == [RIGHT]
    assert d.intervened.tolist() == [True]
    assert d.rule_counts["invalid_preference"] == 1
    assert d.rule_counts["sanitised"] == 1


@pytest.mark.parametrize(
    ("positions", "match"),
    [
        (np.array([[0, 0], [0, 0]]), r"share cell \(0, 0\)"),
        (np.array([[0, 5]]), r"positions\[0\].*off the 2x3 grid"),
        (np.array([[1, 1]]), r"positions\[0\].*blocked"),
        (np.array([0, 0]), r"positions: expected shape"),
        (np.array([[0.0, 1.0]]), "integer"),
    ],
)
def test_bad_positions(positions: np.ndarray, match: str) -> None:
    s = parse("...\n.#.")
    prefs = np.repeat(GOOD, max(len(positions), 1), axis=0)
    with pytest.raises(ShieldInputError, match=match):
        Shield(s.grid).resolve(positions, prefs)


def test_bad_preferences_priorities_broken() -> None:
    s = parse("A.")
    shield = Shield(s.grid)
    with pytest.raises(ShieldInputError, match="preferences"):
        shield.resolve(s.positions, np.repeat(GOOD, 2, axis=0))
    with pytest.raises(ShieldInputError, match="preferences"):
        shield.resolve(s.positions, GOOD.astype(float))
    with pytest.raises(ShieldInputError, match=r"priorities\[0\]"):
        shield.resolve(s.positions, GOOD, priorities=[np.nan])
    with pytest.raises(ShieldInputError, match="priorities"):
        shield.resolve(s.positions, GOOD, priorities=[1.0, 2.0])
    with pytest.raises(ShieldInputError, match="broken"):
        shield.resolve(s.positions, GOOD, broken=[True, False])
    with pytest.raises(ShieldInputError, match="dist_to_target"):
        shield.resolve(s.positions, GOOD, dist_to_target=[-3])


def test_bad_configuration() -> None:
    s = parse("A.")
    with pytest.raises(ConfigError, match=r"forbidden\[1\].*\(4, 4\)"):
        Shield(s.grid, forbidden=[(0, 1), (4, 4)])
    with pytest.raises(ConfigError, match="deadlock_window"):
        Shield(s.grid, deadlock_window=0)
    with pytest.raises(ConfigError, match="escape_ticks"):
        Shield(s.grid, escape_ticks=0)


def test_empty_fleet_and_reuse_after_an_error() -> None:
    s = parse("A.\n..")
    shield = Shield(s.grid)
    d = shield.resolve(np.zeros((0, 2), dtype=np.int32), np.zeros((0, 5), dtype=np.int64))
    assert d.actions.shape == (0,)
    with pytest.raises(ShieldInputError):
        shield.resolve(np.array([[0, 0], [0, 0]]), np.repeat(GOOD, 2, axis=0))
    # Occupancy tables are clean after every call: the same shield keeps working.
    d = shield.resolve(np.array([[0, 0], [0, 1]]), np.array([[RIGHT, WAIT, UP, DOWN, LEFT]] * 2))
    assert d.actions.tolist() == [RIGHT, DOWN]  # robot 1 is pushed off its cell, then down


def test_decision_is_frozen_and_deterministic() -> None:
    s = parse("AB.\nC..")
    rng = np.random.default_rng(0)
    prefs = np.argsort(rng.random((3, 5)), axis=1)
    a = Shield(s.grid, seed=1).resolve(s.positions, prefs, dist_to_target=[1, 2, 3])
    b = Shield(s.grid, seed=1).resolve(s.positions, prefs, dist_to_target=[1, 2, 3])
    assert a.actions.tolist() == b.actions.tolist()
    with pytest.raises(ValueError, match="read-only"):
        a.actions[0] = 1
    with pytest.raises(AttributeError):
        a.actions = b.actions  # type: ignore[misc]
