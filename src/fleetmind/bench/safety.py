"""Timing of :meth:`Shield.resolve` on a warehouse-like grid.

``fleetmind bench safety`` prints the default table (10, 100 and 1,000 robots on a 140x500 grid,
:func:`run`); :func:`time_resolve` times one fleet size.

Each tick, every robot ranks its actions greedily toward its own random goal (Manhattan distance,
WAIT after the moves that get closer); the shield resolves and the robots move, so the fleet drifts
and meets head-on traffic in the aisles. Only ``resolve`` is timed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final, TypedDict, Unpack

import numpy as np
from numpy.typing import NDArray

from fleetmind.safety.shield import Shield
from fleetmind.sim.grid import DELTAS, GridMap


class Rollout(TypedDict, total=False):
    """The timed rollout's grid, length and seed; a call's keywords override :data:`ROLLOUT`.

    Attributes:
        height: grid rows.
        width: grid columns.
        ticks: ticks timed per fleet size (after 3 warm-up ticks).
        seed: seed of placements, goals and tie-breaks.
    """

    height: int
    width: int
    ticks: int
    seed: int


ROLLOUT: Final = Rollout(height=140, width=500, ticks=50, seed=0)
"""The default table's rollout: 50 ticks on a 140x500 grid, seed 0."""


def warehouse_grid(height: int = ROLLOUT["height"], width: int = ROLLOUT["width"]) -> GridMap:
    """A grid of rack blocks (2 rows x 10 columns) separated by one-cell aisles.

    Args:
        height: rows.
        width: columns.

    Returns:
        The map; about 55% of its cells are free.
    """
    rows = np.arange(height)[:, None]
    cols = np.arange(width)[None, :]
    rack = (rows % 3 != 0) & (cols % 11 != 0)
    # Keep a free border of 3 cells for the cross aisles.
    rack &= (rows >= 3) & (rows < height - 3) & (cols >= 3) & (cols < width - 3)
    none = np.zeros((height, width), dtype=bool)
    return GridMap("bench-warehouse", rack, none, none.copy(), none.copy())


def greedy_preferences(
    grid: GridMap,
    pos: NDArray[np.int64],
    goals: NDArray[np.int64],
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """Rank the 5 actions of each robot by Manhattan distance to its goal, ties at random.

    Moves into racks or off the grid are ranked last, as a map-aware executor would.

    Args:
        grid: the map.
        pos: ``(N, 2)`` current cells.
        goals: ``(N, 2)`` goal cells.
        rng: the tie-breaking generator.

    Returns:
        ``(N, 5)`` rankings, best first.
    """
    height, width = grid.shape
    nxt = pos[:, None, :] + DELTAS[None, :, :]  # (N, 5, 2)
    dist = np.abs(nxt - goals[:, None, :]).sum(axis=2).astype(np.float64)
    dist += rng.random(dist.shape) * 0.5
    rows = np.clip(nxt[..., 0], 0, height - 1)
    cols = np.clip(nxt[..., 1], 0, width - 1)
    off = (nxt[..., 0] != rows) | (nxt[..., 1] != cols) | grid.blocked[rows, cols]
    dist[off] += 1e6
    return np.argsort(dist, axis=1).astype(np.int64)


def time_resolve(n_robots: int, **rollout: Unpack[Rollout]) -> dict[str, float]:
    """Time ``Shield.resolve`` over a short rollout.

    Args:
        n_robots: fleet size.
        **rollout: :class:`Rollout` keywords overriding :data:`ROLLOUT`.

    Returns:
        ``robots``, ``ticks``, ``mean_ms``, ``p50_ms``, ``p95_ms``, ``max_ms`` per tick and
        ``intervened_per_tick`` (mean number of robots the shield overrode).
    """
    r: Rollout = {**ROLLOUT, **rollout}
    ticks, seed = r["ticks"], r["seed"]
    rng = np.random.default_rng(seed)
    grid = warehouse_grid(r["height"], r["width"])
    free = np.argwhere(grid.free).astype(np.int64)
    pos = free[rng.choice(len(free), n_robots, replace=False)]
    goals = free[rng.choice(len(free), n_robots, replace=True)]
    prio = rng.random(n_robots)
    shield = Shield(grid, seed=seed)
    times: list[float] = []
    intervened = 0
    for t in range(ticks + 3):
        prefs = greedy_preferences(grid, pos, goals, rng)
        start = time.perf_counter()
        decision = shield.resolve(pos, prefs, priorities=prio)
        elapsed = time.perf_counter() - start
        if t >= 3:
            times.append(elapsed * 1e3)
            intervened += int(decision.intervened.sum())
        pos = pos + DELTAS[decision.actions]
        arrived = (pos == goals).all(axis=1)
        goals[arrived] = free[rng.choice(len(free), int(arrived.sum()), replace=True)]
    ms = np.asarray(times)
    return {
        "robots": float(n_robots),
        "ticks": float(ticks),
        "mean_ms": float(ms.mean()),
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "max_ms": float(ms.max()),
        "intervened_per_tick": intervened / ticks,
    }


def run(robots: Sequence[int] = (10, 100, 1000), **rollout: Unpack[Rollout]) -> dict[str, Any]:
    """Time the shield for each fleet size (``fleetmind bench safety``).

    Args:
        robots: fleet sizes, one row each.
        **rollout: :class:`Rollout` keywords overriding :data:`ROLLOUT`, for every row.

    Returns:
        ``grid`` (``[height, width]``) and ``rows``, one :func:`time_resolve` result per size.
    """
    r: Rollout = {**ROLLOUT, **rollout}
    return {"grid": [r["height"], r["width"]], "rows": [time_resolve(n, **r) for n in robots]}


def format_table(result: dict[str, Any]) -> str:
    """The timing table as plain text lines."""
    height, width = result["grid"]
    return "\n".join(
        f"{int(row['robots']):>6} robots on {height}x{width}: mean {row['mean_ms']:.2f} ms, "
        f"p50 {row['p50_ms']:.2f}, p95 {row['p95_ms']:.2f}, max {row['max_ms']:.2f} ms/tick"
        f", {row['intervened_per_tick']:.1f} robots overridden/tick"
        for row in result["rows"]
    )
