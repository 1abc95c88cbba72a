"""The executor contract and the shortest-path executors every other one builds on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import (
    N_ACTIONS,
    GridMap,
)


class Executor(Protocol):
    """Ranks the 5 actions of every robot."""

    name: str

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
        carrying: NDArray[np.bool_],
        tick: int,
    ) -> NDArray[np.int64]:
        """``(N, 5)`` rankings, best first, for robots at ``pos`` heading to ``goal``.

        Args:
            pos: ``(N, 2)`` cells.
            goal: ``(N, 2)`` targets (ignored where ``active`` is False).
            active: ``(N,)`` robots that have a target; idle robots rank WAIT first.
            carrying: ``(N,)`` loaded robots.
            tick: the current tick.
        """
        ...


_IDENTITY = np.tile(np.arange(N_ACTIONS, dtype=np.int64), (1024, 1))


def idle_ranking(active: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """Identity rankings (WAIT first, as idle robots want) and the indices still to rank."""
    global _IDENTITY
    n = len(active)
    if len(_IDENTITY) < n:
        _IDENTITY = np.tile(np.arange(N_ACTIONS, dtype=np.int64), (n, 1))
    # Action ids start with WAIT (0), so the identity ranking puts waiting first. A copy of a
    # table kept: a tenth of what building the rows again every tick costs.
    return _IDENTITY[:n].copy(), np.flatnonzero(active)


@dataclass(frozen=True, slots=True)
class FleetTick:
    """What an executor ranks for: the fleet at one tick (the arguments of ``Executor.rank``).

    Attributes:
        pos: ``(N, 2)`` cells.
        goal: ``(N, 2)`` targets (ignored where ``active`` is False).
        active: ``(N,)`` robots that have a target.
        carrying: ``(N,)`` loaded robots (all False where the caller gave none).
        tick: the current tick.
    """

    pos: NDArray[np.int32]
    goal: NDArray[np.int32]
    active: NDArray[np.bool_]
    carrying: NDArray[np.bool_]
    tick: int


class RankingExecutor(ABC):
    """Base of the executors here: :meth:`rank` once, each executor fills in the active rows.

    :meth:`rank` starts from the identity ranking (WAIT first, as idle robots want) and hands
    :meth:`rank_active` the fleet and the indices of the robots that have a target. Each
    subclass sets the ``name`` of the :class:`Executor` contract and its map, ``grid``.
    """

    grid: GridMap

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
        carrying: NDArray[np.bool_] | None = None,
        tick: int = 0,
    ) -> NDArray[np.int64]:
        """``(N, 5)`` rankings, best first (the :class:`Executor` contract); idle robots wait."""
        ranking, idx = idle_ranking(active)
        carry = np.zeros(len(pos), dtype=bool) if carrying is None else carrying
        self.rank_active(FleetTick(pos, goal, active, carry, tick), ranking, idx)
        return ranking

    @abstractmethod
    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """Write the rankings of the active robots ``idx`` into the rows of ``ranking``."""

    @property
    def base_grid(self) -> GridMap:
        """The map the executor was built on, before any closed cells (``reroute``)."""
        base: GridMap = self.__dict__.get("_base_grid", self.grid)
        return base

    def _with_walls(self, closed: list[tuple[int, int]]) -> GridMap:
        """The map the executor was built on, with ``closed`` as walls."""
        self._base_grid = self.base_grid
        return self._base_grid.with_walls(closed)


class ShortestPathExecutor(RankingExecutor):
    """Ranks actions by the true distance-to-target after the move (cached BFS maps).

    Ties keep a fixed action order, so the ranking is deterministic. Moves into walls rank last.
    Waiting ranks by the current distance, so it comes after every move that gets closer.
    """

    name = "shortest-path"

    def __init__(self, grid: GridMap, oracle: DistanceOracle | None = None) -> None:
        self.grid = grid
        self.oracle = oracle or DistanceOracle(grid)
        h, w = grid.shape
        self._shape = (h, w)

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells (a blocked aisle): distances on the map with them as walls.

        A robot standing on a closed cell still ranks the moves off it by their distance.
        """
        self.grid = self._with_walls(closed)
        # The maps a change of walls leaves exact are kept, the rest made again when read.
        self.oracle = self.oracle.rerouted(self.grid)

    def _flat(self, cells: NDArray[np.integer]) -> NDArray[np.int64]:
        """``(M,)`` flat indices ``row * W + col`` of ``(M, 2)`` cells."""
        return cells[:, 0].astype(np.int64) * self._shape[1] + cells[:, 1]

    def distances(self, pos: NDArray[np.int32], goal: NDArray[np.int32]) -> NDArray[np.int64]:
        """``(N, 5)`` distance to target after each action (UNREACHABLE for blocked moves)."""
        # One compiled gather over the oracle's maps for the whole fleet.
        return self.oracle.after_moves(self._flat(np.asarray(goal)), self._flat(pos))

    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """Rank actions by distance after the move."""
        if len(idx):
            ranking[idx] = self.order(self.distances(fleet.pos[idx], fleet.goal[idx]))

    def order(self, dist: NDArray[np.int64]) -> NDArray[np.int64]:
        """``(M, 5)`` distances -> ``(M, 5)`` actions, nearest first; ties in action order."""
        return np.argsort(dist, axis=1, kind="stable")


class ShortestPathRandomExecutor(ShortestPathExecutor):
    """Shortest path with ties broken at random: the honest baseline for learned executors.

    With a fixed tie order every robot whose target lies off both axes moves vertically first,
    so part of a learned executor's gain over :class:`ShortestPathExecutor` may be a gain over
    that bias alone. Here actions still rank by the true distance after the move, but actions at
    equal distance come in an order drawn from a seeded generator; moves into walls still rank
    last. The same seed (and the same sequence of calls) gives the same rankings.

    Args:
        grid: the map.
        oracle: a distance oracle of the same map (default: a new one).
        seed: a seed or a generator of the tie-breaking order (default 0).
    """

    name = "shortest-path-random"

    def __init__(
        self,
        grid: GridMap,
        oracle: DistanceOracle | None = None,
        *,
        seed: int | np.random.Generator = 0,
    ) -> None:
        super().__init__(grid, oracle)
        self.rng = np.random.default_rng(seed)

    def order(self, dist: NDArray[np.int64]) -> NDArray[np.int64]:
        """``(M, 5)`` distances -> ``(M, 5)`` actions, nearest first; ties in random order."""
        ties = self.rng.random(dist.shape)  # (M, 5) one draw per active robot and action
        # lexsort sorts by the last key first: distance, then the random tie-breaker.
        return np.lexsort((ties, dist), axis=1)
