"""Executors on a guidance graph: move weights, learned weights, and RL over guidance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.executors.base import (
    FleetTick,
)
from fleetmind.dispatch.executors.congestion import CongestionExecutor, TrafficWeights
from fleetmind.dispatch.traffic import order as traffic_order
from fleetmind.errors import ConfigError, check_range
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.grid import (
    N_ACTIONS,
    GridMap,
)
from fleetmind.sim.observe import LocalObserver


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
        check_range("highway", highway, low=1)
        if not float(highway).is_integer():
            raise ConfigError(f"highway must be a whole number, got {highway}")
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
