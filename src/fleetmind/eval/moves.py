"""Where a run's robot-ticks went: toward the target, away from it, or held, and whose call it was.

Read from a run folder's ``episode.parquet`` (every robot's cell, target, the executor's first
choice and the move the shield sent, every tick), with plain shortest-path distances on the
run's map as built. A busy robot-tick (the robot has a task and is not broken) is one of:

- ``toward``: the robot moved one step closer to its target;
- ``away_chosen``: it moved away, as the executor ranked first (a detour the executor asked
  for: a one-way lane, a cost map's way round);
- ``away_shield``: it moved away on the shield's call (pushed aside by a robot with the right
  of way, or an escape from a deadlock);
- ``wait_chosen``: it stayed, as the executor asked;
- ``held``: it stayed although the executor asked to move (the shield held it, or, with the
  shield off, the simulator refused the move).

``held_taken``, a part of ``held``, counts the holds where another robot moved into the cell
the robot asked for that tick: it lost a contested cell (two flows merging), where the rest of
the holds queue behind a robot that stayed, or ran into a wall or a swap.

On a grid every move changes the distance by exactly one, so ``net`` (``toward`` minus the two
``away`` shares) is the distance a busy robot gains per tick: where an executor's throughput
over another's comes from, beside the task counts. The first and the last recorded tick are not
counted (the episode records each target after the tick, and a move's end is the next tick's
cell), nor are robot-ticks whose target cannot be reached on the map as built. Shares
are of busy robot-ticks; ``idle`` is the share of all counted robot-ticks without a task.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import FleetmindError
from fleetmind.eval.store import load_config, load_episode, run_path
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.grid import DELTAS, WAIT, GridMap
from fleetmind.sim.maps import load_map

log = logging.getLogger(__name__)

KINDS: Final = ("toward", "away_chosen", "away_shield", "wait_chosen", "held")
"""The kinds of busy robot-tick, each a share in :func:`move_shares`."""
COLUMNS: Final = (
    "tick",
    "robot",
    "row",
    "col",
    "target_row",
    "target_col",
    "has_task",
    "broken",
    "proposed",
    "executed",
)
"""The episode columns the breakdown reads."""
_CHUNK: Final = 256  # targets whose maps are held at once


def move_shares(episode: dict[str, NDArray[Any]], grid: GridMap) -> dict[str, float | int] | None:
    """The breakdown of busy robot-ticks (see the module docstring) of one episode.

    Args:
        episode: the episode columns of :data:`COLUMNS` as arrays, one row per robot per tick.
        grid: the run's map as built.

    Returns:
        ``busy`` (robot-ticks counted), a share per kind of :data:`KINDS`, ``net`` and ``idle``;
        None when no robot-tick can be counted.
    """
    tick = episode["tick"].astype(np.int64)
    robot = episode["robot"].astype(np.int64)
    if tick.size == 0:
        return None
    n = int(robot.max()) + 1
    t0 = int(tick.min())
    key = (tick - t0 + 1) * n + robot  # a spare tick on either side: -1 reads "not recorded"
    span = (int(tick.max()) - t0 + 3) * n

    def shifted(values: NDArray[Any], by: int) -> NDArray[np.int64]:
        """Each row's ``values`` of the same robot ``by`` ticks later (-1: not recorded)."""
        out = np.full(span, -1, dtype=np.int64)
        out[key] = values
        got: NDArray[np.int64] = out[key + by * n]
        return got

    # The cell is recorded before the tick's move; target, task and breakdown after it. So a
    # tick's move runs from its own row's cell to the next tick's, toward the target, task
    # and state recorded the tick before.
    after_r, after_c = shifted(episode["row"], 1), shifted(episode["col"], 1)
    target_r, target_c = shifted(episode["target_row"], -1), shifted(episode["target_col"], -1)
    task = shifted(episode["has_task"].astype(np.int64), -1)
    broken = (shifted(episode["broken"].astype(np.int64), -1) != 0) | episode["broken"].astype(bool)
    known = (after_r >= 0) & (task >= 0) & ~broken
    busy = known & (task == 1)
    idle = known & (task == 0)
    w = grid.shape[1]
    here = episode["row"].astype(np.int64) * w + episode["col"]  # every row's cell, flat
    there = np.where(after_r >= 0, after_r * w + after_c, -1)  # where its move took it
    target = (target_r * w + target_c)[busy]
    before, after = here[busy], there[busy]
    d_before, d_after = _distances(grid, target, before, after)
    ok = (d_before < UNREACHABLE) & (d_after < UNREACHABLE)
    proposed = episode["proposed"][busy][ok]
    executed = episode["executed"][busy][ok]
    step = d_after[ok] - d_before[ok]
    total = int(ok.sum())
    if total == 0:
        return None
    stayed = step == 0
    held = stayed & (proposed != WAIT)
    kinds = {
        "toward": step < 0,
        "away_chosen": (step > 0) & (executed == proposed),
        "away_shield": (step > 0) & (executed != proposed),
        "wait_chosen": stayed & (proposed == WAIT),
        "held": held,
    }
    out: dict[str, float | int] = {"busy": total}
    out |= {k: float(v.sum()) / total for k, v in kinds.items()}
    out["net"] = out["toward"] - out["away_chosen"] - out["away_shield"]
    rows = np.flatnonzero(busy)[ok][held]
    asked = episode["proposed"][rows].astype(np.int64)
    out["held_taken"] = _taken(grid, tick, robot, here, there, rows, asked) / total
    counted = int(idle.sum()) + int(busy.sum())
    out["idle"] = float(idle.sum()) / counted if counted else 0.0
    return out


def _taken(
    grid: GridMap,
    tick: NDArray[np.int64],
    robot: NDArray[np.int64],
    here: NDArray[np.int64],
    there: NDArray[np.int64],
    rows: NDArray[np.intp],
    asked: NDArray[np.int64],
) -> int:
    """How many held robot-ticks ``rows`` asked (action ``asked``) for a cell another robot entered.

    ``here`` and ``there``: every row's flat cell before and after its tick's move (-1: not
    recorded).
    """
    if rows.size == 0:
        return 0
    h, w = grid.shape
    size = h * w
    r, c = np.divmod(here[rows], w)
    r, c = r + DELTAS[asked, 0], c + DELTAS[asked, 1]
    on_grid = (r >= 0) & (r < h) & (c >= 0) & (c < w)
    want = tick[rows] * size + r * w + c

    def holder(cells: NDArray[np.int64]) -> NDArray[np.int64]:
        """The robot whose cell is each of ``want`` at its tick (-1: none)."""
        keys = np.where(cells >= 0, tick * size + cells, -1)
        order = np.argsort(keys, kind="stable")
        at = np.minimum(np.searchsorted(keys[order], want), keys.size - 1)
        found = on_grid & (keys[order][at] == want)
        return np.where(found, robot[order][at], -1)

    before, after = holder(here), holder(there)
    return int(((after >= 0) & (after != before)).sum())


def _distances(
    grid: GridMap, target: NDArray[np.int64], before: NDArray[np.int64], after: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Plain distances of ``before`` and ``after`` cells to their targets, a few maps at a time."""
    oracle = DistanceOracle(grid, max_cached=_CHUNK)
    d_before = np.empty(target.size, dtype=np.int64)
    d_after = np.empty(target.size, dtype=np.int64)
    order = np.argsort(target, kind="stable")
    _, first = np.unique(target[order], return_index=True)
    bounds = [*first[::_CHUNK].tolist(), target.size]
    for lo, hi in itertools.pairwise(bounds):
        rows = order[lo:hi]
        both = np.stack([before[rows], after[rows]], axis=1)
        got = oracle.lookup(target[rows], both)
        d_before[rows], d_after[rows] = got[:, 0], got[:, 1]
    return d_before, d_after


def run_moves(run_dir: str | Path) -> dict[str, float | int] | None:
    """:func:`move_shares` of a run folder; None when it recorded no tick or its map is gone.

    A map named by a path that no longer resolves (a run recorded elsewhere) is logged, not
    raised: the rest of a report still stands without this breakdown.
    """
    if not any((run_path(run_dir) / "episode.parquet").glob("part-*.parquet")):
        return None
    spec = load_config(run_dir).get("map")
    try:
        grid = load_map(str(spec))
    except (FleetmindError, OSError) as exc:
        log.warning(
            "%s: no move breakdown, the run's map %r is not readable (%s)", run_dir, spec, exc
        )
        return None
    table = load_episode(run_dir, list(COLUMNS))
    return move_shares({c: table.column(c).to_numpy() for c in COLUMNS}, grid)
