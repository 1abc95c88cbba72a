"""Executors: every tick, rank each robot's 5 actions toward its current target.

An executor never decides alone: the shield turns the rankings into one collision-free joint move.
Rankings are ``(N, 5)`` int arrays, best action first.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.grid import DELTAS, N_ACTIONS, WAIT, GridMap


class Executor(Protocol):
    """Ranks the 5 actions of every robot."""

    name: str

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
    ) -> NDArray[np.int64]:
        """``(N, 5)`` rankings, best first, for robots at ``pos`` heading to ``goal``.

        Args:
            pos: ``(N, 2)`` cells.
            goal: ``(N, 2)`` targets (ignored where ``active`` is False).
            active: ``(N,)`` robots that have a target; idle robots rank WAIT first.
        """
        ...


class ShortestPathExecutor:
    """Ranks actions by the true distance-to-target after the move (cached BFS maps).

    Ties keep a fixed action order, so the ranking is deterministic. Moves into walls rank last.
    Waiting ranks by the current distance, so it comes after every move that gets closer.
    """

    name = "shortest-path"

    def __init__(self, grid: GridMap, oracle: DistanceOracle | None = None) -> None:
        self.grid = grid
        self.oracle = oracle or DistanceOracle(grid)
        h, w = grid.shape
        self._padded_blocked = np.pad(grid.blocked, 1, constant_values=True)
        self._shape = (h, w)

    def distances(self, pos: NDArray[np.int32], goal: NDArray[np.int32]) -> NDArray[np.int64]:
        """``(N, 5)`` distance to target after each action (UNREACHABLE for blocked moves)."""
        n = len(pos)
        h, w = self._shape
        out = np.full((n, N_ACTIONS), UNREACHABLE, dtype=np.int64)
        nxt = pos[:, None, :] + DELTAS[None, :, :]  # (N, 5, 2)
        ok = ~self._padded_blocked[nxt[..., 0] + 1, nxt[..., 1] + 1]
        rr = np.clip(nxt[..., 0], 0, h - 1)
        cc = np.clip(nxt[..., 1], 0, w - 1)
        targets = [(int(g[0]), int(g[1])) for g in goal]
        self.oracle.prefetch(set(targets))
        for i, t in enumerate(targets):
            dmap = self.oracle.to(t)
            out[i] = np.where(ok[i], dmap[rr[i], cc[i]], UNREACHABLE)
        return out

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
    ) -> NDArray[np.int64]:
        """Rank actions by distance after the move; idle robots wait first."""
        n = len(pos)
        ranking = np.tile(np.arange(N_ACTIONS, dtype=np.int64), (n, 1))
        idx = np.flatnonzero(active)
        if len(idx):
            dist = self.distances(pos[idx], goal[idx])
            ranking[idx] = np.argsort(dist, axis=1, kind="stable")
        # Idle robots: WAIT is already first in the identity ranking.
        assert ranking[~active, 0].tolist() == [WAIT] * int((~active).sum())
        return ranking
