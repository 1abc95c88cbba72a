"""Simulator speed: fleetmind's single and vector envs against rware on the same layouts.

``fleetmind bench sim`` calls :func:`run` and prints :func:`format_table` (or the JSON of the
result). Everything runs in one process, one case after another:

- ``fleetmind-single``: :func:`~fleetmind.envs.make_parallel` (local observations, dict
  actions drawn beforehand from a seeded generator), reset at the time limit.
- ``fleetmind-vector`` / ``fleetmind-vector-noobs``: :func:`~fleetmind.envs.make_vector` with
  and without observations, over a sweep of ``num_envs``; the rows keep the best setting, the
  ``sweep`` list keeps every one.
- ``rware``: the raw ``rware.Warehouse`` (no wrapper, the fastest way to step it) with random
  actions drawn the same way, reset when rware says done; only when rware is installed.

Cases: rware's tiny layout with 2 robots, rware's large layout with 19 robots (fleetmind runs
on the same layout through :func:`~fleetmind.sim.maps.parse_rware_layout`; the layouts come
from the rware twin's generator, so fleetmind's rows need no rware), and 128 robots on fleetmind's
``warehouse-large`` preset (rware has no such layout). Each measurement runs a warm-up, then
steps until a fixed wall budget is spent (0.5 s in quick mode, 3 s otherwise) and divides the
steps by the time taken. The single env and rware, whose ratio is a target, are timed
interleaved: ten slices of a tenth of the budget each, one simulator after the other, so a
change of machine load during the command weighs on both alike. An env step moves every robot
once; agent steps are env steps times robots (times worlds for the vector env).

Targets (issue 16): the single env at least 20x rware's agent steps per second on the same
layout and robot count; the vector env at least 2,000,000 agent steps per second with
observations and at least 10,000,000 without (best setting of each).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from gymnasium import spaces
from rich.table import Table

from fleetmind.envs import make_parallel
from fleetmind.envs.rware import make_rware
from fleetmind.envs.rware_twin import rware_spec
from fleetmind.envs.vector import make_vector
from fleetmind.errors import ConfigError, check_range
from fleetmind.sim.grid import N_ACTIONS, GridMap
from fleetmind.sim.maps import parse_rware_layout
from fleetmind.sim.presets import preset

__all__ = [
    "CASES",
    "RWARE_LAYOUTS",
    "SINGLE_RATIO_TARGET",
    "VECTOR_NOOBS_TARGET",
    "VECTOR_TARGET",
    "Case",
    "format_table",
    "parallel_stepper",
    "run",
]

logger = logging.getLogger(__name__)

SINGLE_RATIO_TARGET: Final = 20.0
"""The single env's agent steps per second over rware's, on the same layout and robot count."""
VECTOR_TARGET: Final = 2_000_000.0
"""Agent steps per second of the vector env with observations at its best setting."""
VECTOR_NOOBS_TARGET: Final = 10_000_000.0
"""Agent steps per second of the vector env without observations at its best setting."""
_SLICES: Final = 10  # interleaved slices of the single env and rware

RWARE_LAYOUTS: Final[dict[str, str]] = {
    # rware-{tiny,large}-*-v2 of rware 2.0, from the twin's copy of rware's layout generator (a
    # test checks them against rware itself).
    name: rware_spec(f"{name}-2ag-v2").config.layout.text()
    for name in ("rware-tiny", "rware-large")
}
"""rware's built-in layouts as rware layout strings (``x`` shelf, ``.`` corridor, ``g`` goal)."""


@dataclass(frozen=True)
class Case:
    """One benchmark case.

    Attributes:
        name: the case name in the rows.
        layout: a key of :data:`RWARE_LAYOUTS` or a fleetmind preset name.
        robots: robots per world.
        rware_id: the rware env with the same layout and robot count, if any.
    """

    name: str
    layout: str
    robots: int
    rware_id: str | None

    def grid(self) -> GridMap:
        """The case's map."""
        if self.layout in RWARE_LAYOUTS:
            return parse_rware_layout(RWARE_LAYOUTS[self.layout], source=self.layout)
        return preset(self.layout)


CASES: Final[tuple[Case, ...]] = (
    Case("tiny-2", "rware-tiny", 2, "rware-tiny-2ag-v2"),
    Case("large-19", "rware-large", 19, "rware-large-19ag-v2"),
    Case("warehouse-large-128", "warehouse-large", 128, None),
)
"""The cases :func:`run` measures by default."""

QUICK_NUM_ENVS: Final = (16, 256)
FULL_NUM_ENVS: Final = (16, 32, 64, 128, 256)
_ACTION_POOL: Final = 1024  # action draws per single-env measurement, used in a cycle
_VECTOR_POOL: Final = 8  # (num_envs, robots) action draws per vector measurement


@dataclass(frozen=True)
class _Timing:
    seed: int
    budget_s: float
    warmup_s: float


def _timed(step: Callable[[], object], *, budget_s: float, warmup_s: float) -> tuple[int, float]:
    """Call ``step`` for ``warmup_s`` (at least once), then count calls over ``budget_s``."""
    end = time.perf_counter() + warmup_s
    step()
    while time.perf_counter() < end:
        step()
    steps = 0
    start = time.perf_counter()
    stop = start + budget_s
    now = start
    while now < stop:
        step()
        steps += 1
        now = time.perf_counter()
    return steps, now - start


def _interleaved(
    steps: Sequence[Callable[[], object]], *, budget_s: float, warmup_s: float
) -> list[tuple[int, float]]:
    """:func:`_timed` for several step functions at once, in turns of ``budget_s / 10``."""
    for step in steps:
        _timed(step, budget_s=0.0, warmup_s=warmup_s)
    totals = [(0, 0.0)] * len(steps)
    for _ in range(_SLICES):
        for k, step in enumerate(steps):
            count, seconds = _timed(step, budget_s=budget_s / _SLICES, warmup_s=0.0)
            totals[k] = (totals[k][0] + count, totals[k][1] + seconds)
    return totals


def _row(
    case: Case, simulator: str, layout: str, num_envs: int, steps: int, seconds: float
) -> dict[str, Any]:
    env_rate = steps * num_envs / seconds
    row = {
        "case": case.name,
        "simulator": simulator,
        "layout": layout,
        "robots": case.robots,
        "num_envs": num_envs,
        "env_steps_per_s": env_rate,
        "agent_steps_per_s": env_rate * case.robots,
        "ratio_vs_rware": None,
    }
    logger.info(
        "bench sim %s %s num_envs=%d: %.0f env steps/s, %.0f agent steps/s",
        case.name,
        simulator,
        num_envs,
        env_rate,
        env_rate * case.robots,
    )
    return row


def parallel_stepper(env: Any, *, seed: int, pool: int) -> Callable[[], None]:
    """One step of a reset ParallelEnv per call, cycling ``pool`` seeded random joint actions.

    The draws are made before timing so the timed call is the env's step alone; an episode
    that ends is reset in place.
    """
    draws = np.random.default_rng(seed).integers(N_ACTIONS, size=(pool, len(env.possible_agents)))
    joint = [dict(zip(env.possible_agents, map(int, row), strict=True)) for row in draws]
    tick = [0]

    def step() -> None:
        env.step(joint[tick[0] % pool])
        tick[0] += 1
        if not env.agents:
            env.reset()

    return step


def _single_step(case: Case, grid: GridMap, timing: _Timing) -> Callable[[], None]:
    env = make_parallel(grid, case.robots, seed=timing.seed)
    env.reset(seed=timing.seed)
    return parallel_stepper(env, seed=timing.seed, pool=_ACTION_POOL)


def _vector(
    case: Case,
    grid: GridMap,
    num_envs: int,
    *,
    observe: bool,
    timing: _Timing,
) -> dict[str, Any]:
    env = make_vector(grid, case.robots, num_envs, seed=timing.seed, observe=observe)
    env.reset(seed=timing.seed)
    pool = np.random.default_rng(timing.seed).integers(
        N_ACTIONS, size=(_VECTOR_POOL, num_envs, case.robots)
    )
    tick = [0]

    def step() -> None:
        env.step(pool[tick[0] % _VECTOR_POOL])
        tick[0] += 1

    steps, seconds = _timed(step, budget_s=timing.budget_s, warmup_s=timing.warmup_s)
    name = "fleetmind-vector" if observe else "fleetmind-vector-noobs"
    return _row(case, name, grid.name, num_envs, steps, seconds)


def _rware_step(case: Case, timing: _Timing) -> Callable[[], None]:
    assert case.rware_id is not None
    adapter = make_rware(case.rware_id, seed=timing.seed)
    warehouse = adapter.rware  # the raw rware.Warehouse: no wrapper overhead
    warehouse.reset(seed=timing.seed)
    space = adapter.action_space(adapter.possible_agents[0])
    assert isinstance(space, spaces.Discrete)  # rware without message bits
    n_actions = int(space.n)
    draws = np.random.default_rng(timing.seed).integers(n_actions, size=(_ACTION_POOL, case.robots))
    pool = [[int(a) for a in row] for row in draws]
    tick = [0]

    def step() -> None:
        done = warehouse.step(pool[tick[0] % _ACTION_POOL])[2]
        tick[0] += 1
        if done:
            warehouse.reset()

    return step


def _best(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return max(rows, key=lambda r: float(r["agent_steps_per_s"]))


def _targets(rows: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = {
        r["case"]: r["ratio_vs_rware"]
        for r in rows
        if r["simulator"] == "fleetmind-single" and r["ratio_vs_rware"] is not None
    }
    single: dict[str, Any] = {
        "target_ratio": SINGLE_RATIO_TARGET,
        "ratios": ratios,
        "worst_ratio": min(ratios.values()) if ratios else None,
        "met": all(v >= SINGLE_RATIO_TARGET for v in ratios.values()) if ratios else None,
    }
    if not ratios:
        single["note"] = "not measured: rware is not installed (pip install fleetmind[rware])"
    vector = _vector_target(sweep, "fleetmind-vector", VECTOR_TARGET)
    noobs = _vector_target(sweep, "fleetmind-vector-noobs", VECTOR_NOOBS_TARGET)
    return {
        "single_vs_rware": single,
        "vector_agent_steps": vector,
        "vector_noobs_agent_steps": noobs,
    }


def _vector_target(sweep: list[dict[str, Any]], simulator: str, target: float) -> dict[str, Any]:
    """The best ``simulator`` row of the sweep against ``target`` agent steps per second."""
    out: dict[str, Any] = {"target_agent_steps_per_s": target, "met": None}
    rows = [r for r in sweep if r["simulator"] == simulator]
    if rows:
        best = _best(rows)
        out.update(
            met=bool(best["agent_steps_per_s"] >= target),
            best_agent_steps_per_s=best["agent_steps_per_s"],
            case=best["case"],
            simulator=simulator,
            num_envs=best["num_envs"],
        )
    return out


def run(
    *,
    quick: bool = False,
    budget_s: float | None = None,
    cases: Sequence[str] | None = None,
    num_envs: Sequence[int] | None = None,
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Measure simulator speed (see the module docstring).

    Args:
        quick: 0.5 s per measurement and ``num_envs`` 16 and 256, instead of 3 s and 16..256.
        budget_s: wall seconds per measurement, overriding ``quick``'s.
        cases: names of the :data:`CASES` to run (default all).
        num_envs: the vector env's sweep, overriding ``quick``'s.
        seed: seed of every env and action draw.
        progress: called as ``(case, done, total)`` before each case and once at the end.

    Returns:
        A JSON-ready dict: ``rows`` (``case, simulator, layout, robots, num_envs,
        env_steps_per_s, agent_steps_per_s, ratio_vs_rware``; the vector rows at their best
        ``num_envs``), ``sweep`` (every vector measurement), ``targets`` (met or missed, with
        the numbers) and ``settings`` (budget, machine, versions).

    Raises:
        ConfigError: an unknown case name, a budget that is not positive or a sweep size
            below 1.
    """
    known = {c.name: c for c in CASES}
    if cases is None:
        chosen = list(CASES)
    else:
        unknown = [name for name in cases if name not in known]
        if unknown:
            raise ConfigError(f"cases: unknown {unknown}; known cases: {', '.join(known)}")
        chosen = [known[name] for name in cases]
    budget = budget_s if budget_s is not None else (0.5 if quick else 3.0)
    check_range("budget_s", budget, above=0)
    sizes = (
        tuple(num_envs) if num_envs is not None else (QUICK_NUM_ENVS if quick else FULL_NUM_ENVS)
    )
    if not sizes:
        raise ConfigError("num_envs: expected at least one size")
    for size in sizes:
        check_range("num_envs", size, low=1)
    warmup = min(0.2, budget / 5)
    has_rware = importlib.util.find_spec("rware") is not None
    if not has_rware:
        logger.warning("bench sim: rware is not installed; skipping the rware rows")

    timing = _Timing(seed=seed, budget_s=budget, warmup_s=warmup)
    rows: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    for done, case in enumerate(chosen):
        if progress is not None:
            progress(case.name, done, len(chosen))
        grid = case.grid()
        steps = [_single_step(case, grid, timing)]
        with_rware = has_rware and case.rware_id is not None
        if with_rware:
            steps.append(_rware_step(case, timing))
        timed = _interleaved(steps, budget_s=budget, warmup_s=warmup)
        case_rows = [_row(case, "fleetmind-single", grid.name, 1, *timed[0])]
        for observe in (True, False):
            measured = [_vector(case, grid, n, observe=observe, timing=timing) for n in sizes]
            sweep += measured
            case_rows.append(_best(measured))
        if with_rware:
            assert case.rware_id is not None
            reference = _row(case, "rware", case.rware_id, 1, *timed[1])
            for row in case_rows:
                row["ratio_vs_rware"] = row["agent_steps_per_s"] / reference["agent_steps_per_s"]
            case_rows.append(reference)
        rows += case_rows
    if progress is not None:
        progress("done", len(chosen), len(chosen))
    return {
        "rows": rows,
        "sweep": sweep,
        "targets": _targets(rows, sweep),
        "settings": {
            "quick": quick,
            "budget_s": budget,
            "warmup_s": warmup,
            "num_envs": list(sizes),
            "seed": seed,
            "cpus": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "rware": importlib.metadata.version("rware") if has_rware else None,
        },
    }


def _cpus() -> int | None:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def format_table(result: dict[str, Any]) -> Table:
    """The result of :func:`run` as a rich table, the targets in its caption.

    Args:
        result: what :func:`run` returned (or its JSON read back).

    Returns:
        One line per row: case, simulator, layout, robots, worlds, env and agent steps per
        second, and the ratio to rware's agent steps per second.
    """
    settings = result.get("settings", {})
    table = Table(
        title=f"fleetmind bench sim ({settings.get('budget_s', '?')} s per measurement, "
        f"{settings.get('cpus', '?')} CPUs)"
    )
    for name in ("case", "simulator", "layout", "robots", "num_envs"):
        table.add_column(name, justify="right" if name in ("robots", "num_envs") else "left")
    for name in ("env steps/s", "agent steps/s", "x rware"):
        table.add_column(name, justify="right")
    for row in result["rows"]:
        ratio = row["ratio_vs_rware"]
        table.add_row(
            row["case"],
            row["simulator"],
            row["layout"],
            str(row["robots"]),
            str(row["num_envs"]),
            _rate(row["env_steps_per_s"]),
            _rate(row["agent_steps_per_s"]),
            "" if ratio is None else f"{ratio:.1f}",
        )
    table.caption = "\n".join(_target_lines(result["targets"]))
    return table


def _verdict(met: bool | None) -> str:
    return {True: "MET", False: "MISSED", None: "not measured"}[met]


def _target_lines(targets: dict[str, Any]) -> list[str]:
    single = targets["single_vs_rware"]
    ratios = ", ".join(f"{case} {value:.1f}x" for case, value in single["ratios"].items())
    line = f"single env >= {single['target_ratio']:.0f}x rware: {_verdict(single['met'])}"
    lines = [line + (f" ({ratios})" if ratios else f" ({single.get('note', '')})")]
    for key, what in (
        ("vector_agent_steps", "with observations"),
        ("vector_noobs_agent_steps", "without observations"),
    ):
        vector = targets[key]
        line = (
            f"vector env {what} >= {_rate(vector['target_agent_steps_per_s'])} agent steps/s: "
            f"{_verdict(vector['met'])}"
        )
        if vector["met"] is not None:
            line += (
                f" (best {_rate(vector['best_agent_steps_per_s'])}: {vector['case']}, "
                f"num_envs {vector['num_envs']})"
            )
        lines.append(line)
    return lines
