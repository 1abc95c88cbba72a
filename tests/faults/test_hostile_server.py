"""A hostile OpenAI-compatible server on 127.0.0.1: every run finishes, serves orders, counts.

Modes: prose, unknown ids, HTTP 500, HTTP 429, a hang, a dropped connection, a 5 MB body and a
prompt injection; sync and async; the LLM queue planner (``llm``) and the note-reading planner
with a model reader (``llm-notes``). Each run must finish within twice the solver-alone wall
time plus the planner's deadline, deliver at least 90% of what the solver alone delivers, have
no collision, count its fallbacks, and keep the calls log small and the API key off the disk.

The cases and their judge are those of ``fleetmind bench faults`` (:mod:`fleetmind.bench.faults`),
which holds the wall time to the strict limit; here 3 s a seed of slack absorb a loaded machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetmind.bench.faults import (
    DEADLINE_S,
    HOSTILE_MODES,
    HOSTILE_SEEDS,
    MODES,
    PLANNERS,
    hostile_case,
    solver_alone,
)


@pytest.fixture(scope="module")
def solver(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """Deliveries and wall time of the solver alone, per (planner, mode) setting."""
    base = tmp_path_factory.mktemp("solver")
    return {(p, m): solver_alone(p, m, base) for p in PLANNERS for m in MODES}


def _marks(planner: str, mode: str, name: str) -> list[Any]:
    return [pytest.mark.slow] if (name == "hang" and mode == "sync") else []


CASES = [
    pytest.param(
        planner, mode, name, marks=_marks(planner, mode, name), id=f"{planner}-{mode}-{name}"
    )
    for planner in PLANNERS
    for mode in MODES
    for name in HOSTILE_MODES
]


@pytest.mark.parametrize(("planner", "mode", "name"), CASES)
def test_the_fleet_survives_a_hostile_server(
    tmp_path: Path, solver: dict[tuple[str, str], Any], planner: str, mode: str, name: str
) -> None:
    delivered, solver_wall = solver[(planner, mode)]
    seeds = HOSTILE_SEEDS[planner]
    o = hostile_case(planner, mode, name, tmp_path / "run")
    assert o.finished == o.runs == len(seeds)
    assert o.collisions == 0
    assert o.fallbacks_counted
    # Bounded: back-off, not one question per tick (60 per 100 ticks).
    assert o.requests <= o.request_bound, o.requests
    assert o.wall_s <= 2 * solver_wall + len(seeds) * (DEADLINE_S[planner] + 3.0), o.wall_s
    assert o.delivered >= 0.9 * delivered, (o.delivered, delivered)
    assert o.calls_bytes < 1_000_000
    assert o.secret_on_disk == 0
    assert o.key_sent
