"""Deadlock and livelock detection: robots that stop getting closer to their targets.

A robot counts as stuck when its distance to its target has not dropped below the best distance
it reached within the last ``window`` ticks. Measuring against the best distance (not the previous
tick's) also catches livelock: a robot shuffling back and forth never beats its best.

The monitor only watches; the shield (or any caller) decides what to do about the robots it
reports.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fleetmind.errors import FleetmindError, check_range


class MonitorInputError(FleetmindError, ValueError):
    """The arrays handed to :meth:`DeadlockMonitor.update` are malformed."""


def per_robot(
    value: ArrayLike | None,
    n: int,
    name: str,
    *,
    fill: bool | float,
    dtype: type[np.generic],
    error: type[ValueError],
) -> NDArray[Any]:
    """An optional per-robot input as an ``(n,)`` array of ``dtype``, ``fill`` everywhere if None.

    Raises:
        error: naming ``name``, when the array's shape is not ``(n,)``.
    """
    if value is None:
        return np.full(n, fill, dtype=dtype)
    out = np.asarray(value, dtype=dtype)
    if out.shape != (n,):
        raise error(f"{name}: expected shape ({n},), got {out.shape}")
    return out


class DeadlockMonitor:
    """Reports robots that have not reduced their distance to target for ``window`` ticks.

    Per robot it keeps the best (smallest) distance seen and the number of ticks since that
    best improved. The counter restarts when the robot is inactive (no target), at its target
    (distance 0), or when its distance jumps by more than one cell in a tick (a new target: a robot
    moves at most one cell a tick). A caller that knows when targets change says so instead
    (``changed``): then no rise is read as a new target, so the distance may be any route cost
    that falls along the route (a weighted cost map's, where one move against a lane can raise it
    by several steps). A robot that is reported starts counting afresh, so a robot stuck for good
    is reported again every ``window`` ticks.

    Args:
        window: ticks without progress before a robot is reported; at least 1.

    Raises:
        ConfigError: when ``window`` is below 1.
    """

    def __init__(self, window: int = 8) -> None:
        check_range("deadlock_window", int(window), low=1)
        self.window = int(window)
        self._best: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # (N,)
        self._last: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # (N,)
        self._since: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # (N,)

    @property
    def ticks_without_progress(self) -> NDArray[np.int64]:
        """``(N,)`` ticks since each robot last improved its best distance (a copy)."""
        return self._since.copy()

    def reset(self, robots: ArrayLike | None = None) -> None:
        """Forget the history of some robots (all when ``robots`` is None).

        Args:
            robots: robot indices to forget, e.g. after the planner gave them a new task.
        """
        if robots is None:
            self._best = np.zeros(0, dtype=np.int64)
            self._last = np.zeros(0, dtype=np.int64)
            self._since = np.zeros(0, dtype=np.int64)
            return
        idx = np.asarray(robots, dtype=np.int64)
        if self._since.size:
            self._since[idx] = 0
            self._best[idx] = np.iinfo(np.int64).max
            self._last[idx] = np.iinfo(np.int64).max

    def update(
        self,
        dist_to_target: ArrayLike,
        active: ArrayLike | None = None,
        changed: ArrayLike | None = None,
    ) -> list[int]:
        """Record one tick and report the robots stuck for ``window`` ticks.

        Args:
            dist_to_target: ``(N,)`` int, each robot's distance to its current target (a path
                length or Manhattan distance; the monitor only compares it with itself). With
                ``changed``, any route cost to the target.
            active: ``(N,)`` bool, robots that have a target this tick; all when None.
            changed: ``(N,)`` bool, robots whose target or map changed since the last call;
                when None, a rise of more than one step is read as a new target.

        Returns:
            The indices of the robots reported this tick, ascending.

        Raises:
            MonitorInputError: when the shapes do not match or a distance is negative.
        """
        dist = np.asarray(dist_to_target)
        if dist.ndim != 1:
            raise MonitorInputError(f"dist_to_target: expected shape (N,), got {dist.shape}")
        if not np.issubdtype(dist.dtype, np.integer):
            raise MonitorInputError(f"dist_to_target: expected integers, got dtype {dist.dtype}")
        dist = dist.astype(np.int64)
        n = dist.shape[0]
        if n:
            check_range("dist_to_target", int(dist.min()), low=0, error=MonitorInputError)
        act = per_robot(active, n, "active", fill=True, dtype=np.bool_, error=MonitorInputError)
        if self._since.shape != (n,):
            # First call, or the fleet changed size: start over.
            big = np.iinfo(np.int64).max
            self._best = np.full(n, big, dtype=np.int64)
            self._last = np.full(n, big, dtype=np.int64)
            self._since = np.zeros(n, dtype=np.int64)

        if changed is None:  # a new target shows as a rise of more than one step
            new = (self._last != np.iinfo(np.int64).max) & (dist > self._last + 1)
        else:
            new = per_robot(
                changed, n, "changed", fill=False, dtype=np.bool_, error=MonitorInputError
            )
        restart = ~act | (dist == 0) | new
        improved = dist < self._best
        self._best = np.where(restart, dist, np.minimum(self._best, dist))
        self._since = np.where(restart | improved, 0, self._since + 1)
        self._last = dist.copy()

        stuck = np.flatnonzero(self._since >= self.window)
        # Reported robots count afresh from their current distance.
        self._since[stuck] = 0
        self._best[stuck] = dist[stuck]
        return [int(i) for i in stuck]
