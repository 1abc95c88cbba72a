"""Executors: every tick, rank each robot's 5 actions toward its current target.

An executor never decides alone: the shield turns the rankings into one collision-free joint move.
Rankings are ``(N, 5)`` int arrays, best action first.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.traffic import TrafficState
from fleetmind.dispatch.traffic import order as traffic_order
from fleetmind.errors import ConfigError, FleetmindError
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.grid import (
    ACTION_NAMES,
    N_ACTIONS,
    GridMap,
)
from fleetmind.sim.observe import N_HEURISTIC, LocalObserver


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


class PolicyExecutor(RankingExecutor):
    """Base of executors that rank by a policy's logits over local observations.

    Subclasses set ``observer`` (a :class:`~fleetmind.sim.observe.LocalObserver`) and implement
    :meth:`logits`; ranking, idle robots and carrying flags are handled here once.

    The policy's best action always ranks first. ``fallback`` orders the other four, which the
    shield uses only when the first choice is unsafe: ``"policy"`` by the logits; ``"heuristic"``
    (needs the heuristic values in the observation) by the shortest-path heuristic, ties broken
    by the logits. Measured with the shield (``fleetmind bench dispatch``), heuristic fallbacks
    keep far more throughput in dense traffic: the logits of a policy's non-best actions are
    poorly calibrated, because training only ever executes the sampled action.
    """

    name = "policy"
    observer: LocalObserver
    fallback: Literal["heuristic", "policy"] = "heuristic"

    @property
    def oracle(self) -> DistanceOracle | None:
        """The observer's distance maps; the control loop shares them (one map per target).

        Without it the loop kept maps of its own and the observer computed every new target's
        map again inside the tick: 72 ms of the RL executor's 73 ms p50 at 1,000 robots.
        """
        return self.observer.oracle

    @abstractmethod
    def logits(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """``(M, 5)`` action logits for ``(M, D)`` observations."""

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells: the policy sees them as walls.

        Its heuristic channels (and the shortest-path order of its fallbacks) read distances
        on the map with them.
        """
        self.grid = self._with_walls(closed)
        oracle = self.observer.oracle
        self.observer = LocalObserver.for_map(
            self.grid,
            self.observer.radius,
            heuristic=oracle is not None,
            oracle=oracle.rerouted(self.grid) if oracle is not None else None,
        )

    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """Rank by the policy's logits, best first (ties: lower action id)."""
        if len(idx):
            f = fleet
            obs = self.observer(f.pos[None], f.goal[None], f.carrying[None], f.active[None])[0][idx]
            logits = self.logits(obs)
            if self.fallback == "heuristic" and self.observer.oracle is not None:
                # Heuristic values: -1 closer, 0 same, +1 farther, 2 blocked (wall).
                key = obs[:, -N_HEURISTIC:] * 100.0 - logits
                key[np.arange(len(idx)), np.argmax(logits, axis=1)] = -np.inf
            else:
                key = -logits
            ranking[idx] = np.argsort(key, axis=1, kind="stable")


class RLExecutor(PolicyExecutor):
    """The goal-conditioned navigation policy of :mod:`fleetmind.rl.nav` ranks all 5 actions.

    Args:
        grid: the map.
        policy_path: a policy file written by ``NavPolicy.save``; default: the policy shipped
            with fleetmind (trained by fleetmind itself, see ``docs/neural.md``).
    """

    name = "rl"

    def __init__(
        self,
        grid: GridMap,
        policy_path: str | Path | None = None,
        *,
        fallback: Literal["heuristic", "policy"] = "heuristic",
    ) -> None:
        import torch

        from fleetmind.rl.nav import NavPolicy, default_policy_path

        # One thread: the control loop shares 2 cores with the planner (and an embedded LLM).
        torch.set_num_threads(1)
        self.policy = NavPolicy.load(policy_path or default_policy_path())
        self.fallback = fallback
        self.grid = grid
        self.observer = LocalObserver.for_map(grid, self.policy.radius)

    def logits(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """The navigation policy's logits."""
        return self.policy.logits(obs)


class LLMDirectExecutor(RankingExecutor):
    """The LLM picks every robot's move every tick (FIELD-NOTES §5.5 advises against it).

    This executor exists to measure why: latency and throughput.

    One call per tick for the whole fleet; the model's move goes first in each robot's ranking,
    the shortest-path order fills the rest (so the shield can still pick a safe move). A failed
    call or an unusable answer leaves the shortest-path ranking and is counted. Small maps only.

    Args:
        client: the chat backend.
        grid: the map.
        max_robots: refuse larger fleets (one prompt per tick grows with the fleet).
    """

    name = "llm-direct"

    def __init__(self, client: ChatClient, grid: GridMap, *, max_robots: int = 12) -> None:
        self.client = client
        self.grid = grid
        self.fallback = ShortestPathExecutor(grid)
        self.max_robots = max_robots
        self.calls = 0
        self.failures = 0
        self.tokens_prompt = 0
        self.tokens_completion = 0
        self.latency_ms: list[float] = []

    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """Ask the model for every active robot's move this tick."""
        pos, goal = fleet.pos, fleet.goal
        n = len(pos)
        if n > self.max_robots:
            raise ConfigError(
                f"executor llm-direct: at most {self.max_robots} robots (one LLM call per tick "
                f"steers the whole fleet); got {n}"
            )
        self.fallback.rank_active(fleet, ranking, idx)
        if len(idx) == 0:
            return
        lines = [
            f"robot_{i} at ({pos[i, 0]},{pos[i, 1]}) target ({goal[i, 0]},{goal[i, 1]})"
            for i in idx
        ]
        ids = [f"robot_{i}" for i in idx]
        messages = [
            Message.system(
                "You steer warehouse robots on a grid; row grows downward, col grows rightward. "
                "For each robot pick one move toward its target: up, down, left, right or wait. "
                'Answer JSON only: {"moves": [{"robot": "robot_0", "move": "up"}]}'
            ),
            Message.user("\n".join(lines)),
        ]
        schema = _moves_schema(ids)
        self.calls += 1
        try:
            result = self.client.chat(
                messages,
                temperature=0.0,
                max_tokens=16 + 14 * len(ids),
                json_schema=schema,
                context=CallContext(
                    caller="dispatch.executor", decision_type="move", tick=fleet.tick
                ),
            )
        except FleetmindError:
            self.failures += 1
            return
        self.latency_ms.append(result.latency_s * 1e3)
        self.tokens_prompt += result.usage.prompt_tokens
        self.tokens_completion += result.usage.completion_tokens
        try:
            moves = json.loads(result.text)["moves"]
            chosen = {m["robot"]: ACTION_NAMES.index(m["move"]) for m in moves}
        except (ValueError, KeyError, TypeError):
            self.failures += 1
            return
        for i in idx:
            a = chosen.get(f"robot_{i}")
            if a is not None:
                row = [a, *[x for x in ranking[i] if x != a]]
                ranking[i] = row

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells: the shortest-path order behind the model's moves does."""
        self.fallback.reroute(closed)
        self.grid = self.fallback.grid

    @property
    def oracle(self) -> DistanceOracle:
        """The fallback's distance maps; the control loop shares them."""
        return self.fallback.oracle

    def stats(self) -> dict[str, Any]:
        """LLM calls, failures, tokens and latency of the executor."""
        lat = np.asarray(self.latency_ms or [0.0])
        return {
            "llm_calls": self.calls,
            "llm_failures": self.failures,
            "llm_tokens_prompt": self.tokens_prompt,
            "llm_tokens_completion": self.tokens_completion,
            "llm_latency_ms": {f"p{q}": float(np.percentile(lat, q)) for q in (50, 95, 99)},
        }


def _moves_schema(robot_ids: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "moves": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "robot": {"type": "string", "enum": robot_ids},
                        "move": {"type": "string", "enum": list(ACTION_NAMES)},
                    },
                    "required": ["robot", "move"],
                },
            }
        },
        "required": ["moves"],
    }


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
        if not 0.0 <= self.decay < 1.0:
            raise ConfigError(f"decay: expected a value in [0, 1), got {self.decay}")


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


class GuidanceExecutor(CongestionExecutor):
    """Congestion-aware shortest path on a crisscross highway map (LoRR's ``highway`` lever).

    Routes follow a guidance graph: even rows run east, odd rows west, even columns south, odd
    columns north, and a move against its row's or column's way costs ``highway`` steps instead
    of 1, so that opposite flows in an aisle use neighbouring lanes instead of meeting head-on.
    An action's route cost is the step's weight plus the weighted cost to target after it;
    waiting costs one step plus the cost from where the robot stands. The traffic terms of
    :class:`CongestionExecutor` come on top.

    The weighted maps live in a :class:`~fleetmind.sim.distances.DistanceOracle` of their own
    (compiled bucket-queue Dijkstra, cached per target): the pickups' maps are made when the
    executor is built, and :meth:`request` has the maps of targets to come (an order's station
    when a robot is given it) made by a background thread, so that the tick only reads them.

    Args:
        grid: the map.
        oracle: a distance oracle of the same map (plain distances, shared with the loop).
        seed: a seed or a generator of the tie-breaking order (default 0).
        highway: the cost of a move against the way, a whole number >= 1 (1: no guidance).
        max_bytes: memory for the cached guidance maps.
        weights: traffic weights of :class:`CongestionExecutor` (its defaults otherwise).

    Raises:
        ConfigError: when ``highway`` is not a whole number >= 1.
    """

    name = "guidance"

    def __init__(
        self,
        grid: GridMap,
        oracle: DistanceOracle | None = None,
        *,
        seed: int | np.random.Generator = 0,
        highway: float = 2.0,
        max_bytes: int = 768 << 20,
        weights: TrafficWeights | None = None,
    ) -> None:
        super().__init__(grid, oracle, seed=seed, weights=weights)
        if highway < 1 or highway != int(highway):
            raise ConfigError(f"highway: expected a whole number >= 1, got {highway}")
        self.highway = float(highway)
        self._max_bytes = max_bytes
        self._fleet = 0  # robots the maps have room for (:meth:`reserve`)
        self._step: NDArray[np.int64]  # (H * W, 5) cost of each action's step from each cell
        self.guide: DistanceOracle
        self._build(grid)

    def step_weights(self, grid: GridMap) -> NDArray[np.int64]:
        """``(H * W, 5)`` cost of each action from each cell: the crisscross highways."""
        h, w = grid.shape
        rows, cols = np.divmod(np.arange(h * w), w)
        with_way = np.stack(
            [
                np.ones(h * w, dtype=bool),
                cols % 2 == 1,  # UP: odd columns run north
                cols % 2 == 0,  # DOWN: even columns run south
                rows % 2 == 1,  # LEFT: odd rows run west
                rows % 2 == 0,  # RIGHT: even rows run east
            ],
            axis=1,
        )
        return np.where(with_way, 1, int(self.highway)).astype(np.int64)

    def _build(self, grid: GridMap) -> None:
        """Step weights and a guidance oracle on ``grid``'s walls, pickups' maps made.

        The weights are the map's as built (:attr:`base_grid`): a closed cell is a wall to
        route around, not a change of the map's lanes.
        """
        self._step = self.step_weights(self.base_grid)
        # Room for the pickups' maps and as many more; :meth:`reserve` makes room for a fleet.
        # A small cache whose rows are reused stays in warm memory, where storing a map into
        # a row never written costs a page fault per page inside the tick.
        pickups = int(grid.pickups.sum())
        per_map = grid.blocked.size * 4
        most = max(16, self._max_bytes // per_map)
        self.guide = DistanceOracle(
            grid, weights=self._step, max_cached=min(most, 2 * pickups + 64)
        )
        if self._fleet:
            self.reserve(self._fleet)
        self._prefetch_pickups()

    def _prefetch_pickups(self) -> None:
        """Make the pickups' guidance maps now (those not held), when they fit the cache."""
        pickups = self.grid.pickups
        if pickups.sum() <= self.guide.max_cached // 2:
            self.guide.prefetch((int(r), int(c)) for r, c in np.argwhere(pickups))

    def request(self, targets: list[tuple[int, int]], due: list[int] | None = None) -> None:
        """Have the guidance maps of ``targets`` made in the background (needed soon).

        ``due``: per target, the tick it is needed by at the soonest (``DistanceOracle.request``).
        """
        self.guide.request(targets, due)

    def reserve(self, robots: int) -> None:
        """Room for the guidance maps of a fleet of ``robots``, written now.

        A robot needs the map of its target and of the one asked for ahead, beside the
        pickups' maps. Fresh memory costs a page fault per page when first written: paid here,
        before the first tick, not in the tick that first stores a map.
        """
        self._fleet = robots
        self.guide.reserve(2 * robots + int(self.grid.pickups.sum()) + 64, touch=True)

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells: plain and guidance maps of the map with them as walls.

        The move weights stay the map's as built (a closed cell is a wall to route around, not
        a change of the lanes), so a guidance map stays exact unless a route it holds ran
        through a closed cell or can now run through a reopened one: those are kept
        (``DistanceOracle.rerouted``), the pickups' missing ones made again now, the rest when
        read.
        """
        super().reroute(closed)
        self.guide = self.guide.rerouted(self.grid, weights=self._step)
        self._prefetch_pickups()

    @property
    def routes(self) -> DistanceOracle:
        """The maps route costs come from: the guidance graph's (step weight plus the rest)."""
        return self.guide


class LearnedGuidanceExecutor(GuidanceExecutor):
    """:class:`GuidanceExecutor` on a learned guidance graph (:mod:`fleetmind.rl.guide`).

    The cost of every move on the map, the traffic weights, the cost of waiting and the order of
    moves that cost the same come from a :class:`~fleetmind.rl.guide.GuideModel`: a linear
    model over features any grid map has (direction against the crisscross way, one-wide
    aisles, walls beside the lane, stations and pickups nearby, the fleet's density), and the
    tie order (random, or vertical or horizontal moves first), its parameters found by
    black-box search on fleet throughput through this control loop (``fleetmind nav guide``).
    The learned part is a cost
    map, not a per-robot policy: it steers every robot through the same ranking code as
    ``guidance``, and the neutral model ranks exactly as ``guidance`` does.

    Costs count in ``1 / SCALE`` steps (the distance maps hold whole numbers); the traffic
    weights are scaled the same way, and stay below the cost of waiting.

    Args:
        grid: the map.
        oracle: a distance oracle of the same map.
        seed: a seed or a generator of the tie-breaking order.
        model: the guide model; default: the file ``model_path`` or the shipped one.
        model_path: a guide model file (``GuideModel.save``).
        robots: the fleet size the weights are set for (the density features); default: one
            robot per 10 free cells (density 1).
        max_bytes: memory for the cached guidance maps.

    Raises:
        ConfigError: given both ``model`` and ``model_path``, or an unreadable file.
    """

    name = "learned-guidance"

    def __init__(
        self,
        grid: GridMap,
        oracle: DistanceOracle | None = None,
        *,
        seed: int | np.random.Generator = 0,
        model: Any | None = None,
        model_path: str | Path | None = None,
        robots: int | None = None,
        max_bytes: int = 768 << 20,
    ) -> None:
        from fleetmind.rl import guide

        if model is not None and model_path is not None:
            raise ConfigError("learned-guidance: give a model or a model file, not both")
        if model is None:
            model = guide.GuideModel.load(model_path or guide.default_guide_path())
        self.model: guide.GuideModel = model
        self._tie_table = self._fixed_ties(model)
        free = int((~grid.blocked).sum())
        self.robots = robots if robots is not None else max(1, round(guide.DENSITY_UNIT * free))
        weights = self._traffic_weights(model)
        super().__init__(grid, oracle, seed=seed, max_bytes=max_bytes, weights=weights)

    @staticmethod
    def _traffic_weights(model: Any) -> TrafficWeights:
        """The model's traffic terms in ``1 / SCALE`` steps, and its decay."""
        from fleetmind.rl import guide

        traffic = {k: v * guide.SCALE for k, v in model.traffic_costs().items()}
        return TrafficWeights(**traffic, decay=model.decay)

    def step_weights(self, grid: GridMap) -> NDArray[np.int64]:
        """The learned graph's step weights, in ``1 / SCALE`` steps."""
        return self.model.move_weights(grid, self.robots)

    @staticmethod
    def _fixed_ties(model: Any) -> NDArray[np.float64] | None:
        """One row of tie-breakers per robot for the model's fixed tie order (None: random)."""
        from fleetmind.rl import guide

        row = guide.TIE_ROWS.get(model.ties)
        return None if row is None else np.asarray([row], dtype=np.float64)

    def tie_breakers(self, robots: int) -> NDArray[np.float64]:
        """The model's order of moves that cost the same: random, or one fixed order for all."""
        table = self._tie_table
        if table is None:
            return super().tie_breakers(robots)
        if len(table) < robots:  # kept and sliced: the kernels only read it
            table = self._tie_table = np.tile(table[:1], (robots, 1))
        out: NDArray[np.float64] = table[:robots]
        return out

    def set_model(self, model: Any) -> None:
        """Run on ``model`` from the next tick (a live learner's update or rollback).

        The guidance maps are rebuilt on the new weights (the pickups' now, the rest as
        targets come); the traffic counts so far are kept under the new weights and decay.
        """
        self.model = model
        self._tie_table = self._fixed_ties(model)
        self.weights = self._traffic_weights(model)
        self.traffic.retune(self.weights.decay, self._terms(self.weights))
        self._build(self.grid)


class GuidedRLExecutor(GuidanceExecutor):
    """A learned residual over :class:`GuidanceExecutor`, optionally learning as the fleet runs.

    The policy (:class:`fleetmind.rl.nav_guided.GuidedPolicy`) adds its logits to the guidance
    costs' prior; its best action ranks first and the other four follow in guidance order (what
    the shield falls back on). With ``learn`` set, actions are sampled from the policy instead and
    :class:`~fleetmind.rl.nav_guided.OnlineLearner` updates it every window from the run's own
    moves, rolling back an update that lowers deliveries; :meth:`stats` carries the curve.

    Args:
        grid: the map.
        policy_path: a guided policy file; default: the one shipped with fleetmind, or a fresh
            policy (the guidance order itself) when ``fresh`` is set.
        seed: seed of the guidance tie-breaks (and of the learner's samples unless ``learn``
            sets its own).
        learn: the online learner's settings; None: no learning, greedy ranking.
        fresh: start from an untrained residual (zero output) instead of the shipped policy.
    """

    name = "rl-guided"

    def __init__(
        self,
        grid: GridMap,
        policy_path: str | Path | None = None,
        *,
        seed: int | np.random.Generator = 0,
        learn: Any | None = None,
        fresh: bool = False,
    ) -> None:
        import torch

        from fleetmind.rl import nav_guided

        super().__init__(grid, seed=seed)
        torch.set_num_threads(1)  # the control loop shares 2 cores with the planner
        if fresh and policy_path is not None:
            raise ConfigError("rl-guided: give a policy file or fresh, not both")
        self.policy = (
            nav_guided.GuidedPolicy()
            if fresh
            else nav_guided.GuidedPolicy.load(policy_path or nav_guided.default_guided_path())
        )
        self.observer = self._observer()
        self.learner = nav_guided.OnlineLearner(self.policy, learn) if learn is not None else None
        self._prev: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]] | None = None
        self._nav = nav_guided

    def _observer(self) -> LocalObserver:
        """The policy's window on the executor's map, its heuristic read in the plain maps."""
        return LocalObserver.for_map(self.grid, 2, oracle=self.oracle)

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells: guidance's maps, and the policy's window, with them."""
        super().reroute(closed)
        self.observer = self._observer()

    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """The policy's action first, the rest in guidance order."""
        pos, active, carry, tick = fleet.pos, fleet.active, fleet.carrying, fleet.tick
        if self.learner is not None:
            self._close_step(pos, tick)
        everyone = np.arange(len(pos)) if self.learner is not None else idx
        # Idle robots' goals are not theirs to follow: cost them toward where they stand.
        goal = np.where(active[:, None], fleet.goal, pos).astype(np.int32)
        key, ties = self.costs(pos, goal, everyone)
        if len(everyone) == 0:
            return
        obs = self.observer(pos[None], goal[None], carry[None], active[None])[0][everyone]
        obs = self._nav.features(obs, key)
        prior = self._nav.prior_of(key, self.policy.scale)
        if self.learner is not None:
            best = self.learner.act(obs, prior, active.copy())[idx]
            key, ties = key[idx], ties[idx]
            self._prev = (self._flat(pos), self._flat(goal), active & carry)
        else:
            best = np.argmax(self.policy.greedy(obs, prior), axis=1)
        order = traffic_order(key, ties)
        rest = order[order != best[:, None]].reshape(len(idx), N_ACTIONS - 1)
        ranking[idx] = np.concatenate([best[:, None], rest], axis=1)

    def _close_step(self, pos: NDArray[np.int32], tick: int) -> None:
        """Give the learner the outcome of the last tick: progress and deliveries."""
        if self._prev is None or self.learner is None:
            return
        here0, target, loaded = self._prev
        here = self._flat(pos)
        before = self.oracle.lookup(target, here0)
        after = self.oracle.lookup(target, here)
        reach = (before < UNREACHABLE) & (after < UNREACHABLE)
        progress = np.where(reach, before - after, 0).astype(np.float32)
        delivered = int((loaded & (here == target) & (here0 != target)).sum())
        self.learner.outcome(progress, delivered, tick)

    def stats(self) -> dict[str, Any]:
        """The online learner's record (empty without learning)."""
        return self.learner.stats() if self.learner is not None else {}
