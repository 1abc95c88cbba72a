"""One wording for a value outside its range (issue 50): ``errors.check_range``."""

from __future__ import annotations

import pytest

from fleetmind.errors import ConfigError, TaskFileError, check_range, range_message


def test_the_three_wordings() -> None:
    assert range_message("steps", 0, low=1) == "steps must be at least 1, got 0"
    assert range_message("epsilon", 1.5, high=1.0) == "epsilon must be at most 1.0, got 1.5"
    assert range_message("gamma", 2, low=0, high=1) == "gamma must be between 0 and 1, got 2"


def test_check_range_raises_only_outside_and_names_where() -> None:
    check_range("steps", 1, low=1)
    check_range("gamma", 0.0, low=0.0, high=1.0)
    with pytest.raises(ConfigError, match=r"^race: max_steps must be at least 1, got 0$"):
        check_range("max_steps", 0, low=1, where="race")
    with pytest.raises(TaskFileError, match=r"^gamma must be between 0 and 1, got -1$"):
        check_range("gamma", -1, low=0, high=1, error=TaskFileError)


def test_a_range_needs_a_bound() -> None:
    with pytest.raises(ValueError, match="low or high"):
        range_message("x", 1)


def test_open_bounds_read_above_and_below() -> None:
    assert range_message("lr", 0.0, above=0) == "lr must be above 0, got 0.0"
    assert range_message("tau", 0, above=0, high=1) == "tau must be above 0 and at most 1, got 0"
    assert (
        range_message("guard", 1, low=0, below=1) == "guard must be at least 0 and below 1, got 1"
    )
    check_range("tau", 1.0, above=0.0, high=1.0)
    check_range("guard", 0.0, low=0.0, below=1.0)
    with pytest.raises(ConfigError, match=r"^learn: guard must be at least 0 and below 1, got 1$"):
        check_range("guard", 1, low=0, below=1, where="learn")
    with pytest.raises(ConfigError, match=r"above 0"):
        check_range("lr", 0.0, above=0.0)
    with pytest.raises(ConfigError, match=r"got nan"):
        check_range("lr", float("nan"), above=0.0)
    with pytest.raises(ValueError, match="one lower"):
        range_message("x", 1, low=0, above=0)


def test_no_range_check_in_src_words_its_bound_another_way() -> None:
    """Every range error goes through ``range_message``: no hand-written ``must be >= 1`` left."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "fleetmind"
    other = re.compile(r"must be (>=|>|<=|<|positive|non-negative|in \[|in \()")
    found = [
        f"{path.relative_to(src)}:{number}"
        for path in sorted(src.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if other.search(line)
    ]
    assert found == []
