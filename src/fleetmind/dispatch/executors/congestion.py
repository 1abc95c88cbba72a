"""Shortest path with traffic costs: congestion, and PIBT's order of robots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.executors.base import (
    FleetTick,
    ShortestPathRandomExecutor,
)
from fleetmind.dispatch.traffic import TrafficState
from fleetmind.errors import check_range
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import (
    N_ACTIONS,
    GridMap,
)


@dataclass(frozen=True)
class TrafficWeights:
    """The cost weights of :class:`CongestionExecutor` (what each term means: see there).

    Raises:
        ConfigError: when ``decay`` is not in [0, 1).
    """

    occupied: float = 0.3
    stayer: float = 0.0
    head_on: float = 0.2
    incoming: float = 0.0
    traffic: float = 0.4
    against: float = 0.0
    decay: float = 0.9

    def __post_init__(self) -> None:
        """Refuse a decay that would let the traffic count grow without bound."""
        check_range("decay", self.decay, low=0, below=1)


class CongestionExecutor(ShortestPathRandomExecutor):
    """Shortest path plus a cost for traffic: robots route around crowded cells.

    Each action's cost is the true distance to target after the move, plus, for a move into
    cell ``c`` (all terms computed for the whole fleet at once with numpy):

    - ``occupied``: ``c`` holds a robot now (any robot);
    - ``stayer``: ``c`` holds a robot that will not move on (idle, or whose own shortest-path
      choice is to wait or to step into the mover's cell);
    - ``head_on``: the robot in ``c`` wants the mover's cell (a swap the shield must break);
    - ``incoming``: other robots whose shortest-path choice is ``c`` (each counts);
    - ``traffic``: recent occupancy of ``c``, an exponentially decayed per-cell count of robots
      (``decay`` per tick), scaled to [0, 1] (1: held by a robot every recent tick);
    - ``against``: recent flow the other way, the decayed count of robots that entered ``c``
      moving opposite to this move, scaled the same way.

    Waiting costs the current distance. Weights below 1 only break ties between moves equally
    close to target (a move that gets closer still beats waiting); larger weights let a robot
    take a detour or wait rather than queue into a crowd. Remaining ties are broken by a seeded
    random draw, moves into walls rank last. The traffic count advances once per :meth:`rank`
    call, so the same seed and the same calls give the same rankings.

    Args:
        grid: the map.
        oracle: a distance oracle of the same map (default: a new one).
        seed: a seed or a generator of the tie-breaking order (default 0).
        weights: the cost weights and the per-tick decay of the traffic count (see above);
            default: the class's ``default_weights``.
    """

    name = "congestion"
    default_weights: ClassVar[TrafficWeights] = TrafficWeights()

    def __init__(
        self,
        grid: GridMap,
        oracle: DistanceOracle | None = None,
        *,
        seed: int | np.random.Generator = 0,
        weights: TrafficWeights | None = None,
    ) -> None:
        super().__init__(grid, oracle, seed=seed)
        self.weights = weights or self.default_weights
        self.traffic = TrafficState(grid.blocked, self.weights.decay, self._terms(self.weights))

    @property
    def decay(self) -> float:
        """Per-tick decay of the traffic counts (the weights')."""
        return float(self.weights.decay)

    @staticmethod
    def _terms(wt: TrafficWeights) -> NDArray[np.float64]:
        """The traffic weights in the order of :class:`~fleetmind.dispatch.traffic.TrafficState`."""
        terms = [wt.occupied, wt.stayer, wt.head_on, wt.incoming, wt.traffic, wt.against]
        return np.array(terms, dtype=np.float64)

    @property
    def routes(self) -> DistanceOracle:
        """The maps route costs come from: here the plain distances (the loop's own)."""
        return self.oracle

    def step_costs(self, pos: NDArray[np.int32], goal: NDArray[np.int32]) -> NDArray[np.int64]:
        """``(M, 5)`` route cost of each action before traffic, read in :attr:`routes`."""
        return self.routes.after_moves(self._flat(goal), self._flat(pos))

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells; the traffic pass takes them as walls too."""
        super().reroute(closed)
        self.traffic.blocked = np.ascontiguousarray(self.grid.blocked.ravel(), dtype=np.bool_)

    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """Rank actions by route cost plus congestion cost: :meth:`costs`, then the order.

        One compiled call per tick (``TrafficState.rank``): the same rankings as ordering the
        costs of :meth:`costs`, with no trip through Python per step.
        """
        rows = np.asarray(idx, dtype=np.int64)
        routes = self.routes.fleet_reader(fleet.goal, rows)  # the (M,) targets' maps
        ties = self.tie_breakers(len(rows))
        self.traffic.rank(fleet.pos, rows, routes, ties, ranking)  # every call: it advances

    def tie_breakers(self, robots: int) -> NDArray[np.float64]:
        """``(robots, 5)`` tie-breakers of one tick's rankings: a seeded random draw."""
        if not robots:
            return np.zeros((0, N_ACTIONS))
        return self.rng.random((robots, N_ACTIONS))

    def costs(
        self, pos: NDArray[np.int32], goal: NDArray[np.int32], idx: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(M, 5)`` cost of each action of the robots ``idx`` and its random tie-breaker.

        Advances the traffic counts by one tick (every robot's cell counts, idle or not), so
        call it once per tick. Moves into walls cost ``inf``; waiting costs the current route
        cost; the ranking is ``lexsort((ties, cost))``. The pass itself is compiled
        (:class:`~fleetmind.dispatch.traffic.TrafficState`).
        """
        here = self._flat(pos)  # (N,) flat cells
        self.traffic.advance(here)
        if len(idx) == 0:
            return np.zeros((0, N_ACTIONS)), np.zeros((0, N_ACTIONS))
        dist = self.step_costs(pos[idx], goal[idx])  # (M, 5)
        ties = self.tie_breakers(len(idx))  # (M, 5)
        return self.traffic.keys(here, idx, dist, ties), ties


class PibtOrderExecutor(CongestionExecutor):
    """The ordering PIBT uses on its own: distance first, free cells before occupied, then random.

    PIBT as published (Okumura et al.; the authors' pibt2 code) sorts a robot's candidate cells
    by distance to its goal and breaks ties by preferring a cell no robot holds now, then at
    random. The shield runs PIBT on whatever ranking it is handed; this executor hands it that
    ordering. The occupancy cost is below one step, so it only ever breaks ties.
    """

    name = "pibt"
    default_weights: ClassVar[TrafficWeights] = TrafficWeights(
        occupied=0.5, stayer=0.0, head_on=0.0, incoming=0.0, traffic=0.0
    )
