"""Observations: local egocentric windows, a global state, and compact discrete codes.

All functions work on batches: positions ``(B, N, 2)``; the single-world simulator passes
``B = 1``.

Local window of radius ``r`` (``k = 2r + 1``), flattened channel-major, then 6 scalars::

    channel 0  walls (cells off the grid count as walls)
    channel 1  other robots
    channel 2  pickup cells (shelves)
    channel 3  own target cell, when inside the window
    scalars    carrying, has_task, dr / H, dc / W, sign(dr), sign(dc)   (dr = target row - row)
    heuristic  (optional, 5 values) for each action wait/up/down/left/right: the change of the
               true shortest-path distance to the target (-1 closer, 0, +1 farther), 2 when the
               move hits a wall or the border

Every feature lies in the per-feature bounds of :func:`local_bounds`: ``[0, 1]`` for the window
and the two flags, ``[-1, 1]`` for the direction scalars, ``[-1, 2]`` for the heuristic values.

The heuristic channels follow DHC (Ma et al., 2021): the learner gets the single-agent shortest
path for free and spends its capacity on what the map alone cannot tell, other robots.

Global state for centralised training: channels walls, robots, carrying robots, targets,
pickups, stations over the whole grid, flattened (``6 * H * W`` floats).

Compact discrete code for tabular learners (:meth:`LocalObserver.tabular`), ``8192`` states:
the true distance to the target (0-15, longer ones share 15) x the moves that bring the robot
closer (4 bits, the heuristic above) x robots on the 4 sides (16) x carrying (2). It generalises
across cells as the heuristic channels do for the neural learners. The distance is what lets a
table tell a step forward from a wait: with direction signs alone (the first code, 4608 states)
both actions led back to the same state, and 100,000 steps of Q-learning delivered 38 orders
where shortest-path robots deliver 197 (docs/rl.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim import kernels
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import DELTAS, GridMap

N_LOCAL_CHANNELS = 4
N_SCALARS = 6
N_GLOBAL_CHANNELS = 6
N_DISTANCE_BUCKETS = 16
N_TABULAR_STATES = N_DISTANCE_BUCKETS * 16 * 16 * 2


N_HEURISTIC = 5


class Fleet(NamedTuple):
    """The robots of a batch of ``B`` worlds, as the states and the numpy observer read them.

    Attributes:
        pos: ``(B, N, 2)`` positions.
        goal: ``(B, N, 2)`` targets.
        carrying: ``(B, N)`` loaded robots.
        has_task: ``(B, N)`` robots with a target.
    """

    pos: NDArray[np.int32]
    goal: NDArray[np.int32]
    carrying: NDArray[np.bool_]
    has_task: NDArray[np.bool_]


def local_size(radius: int, *, heuristic: bool = False) -> int:
    """Length of a flattened local observation of ``radius``."""
    k = 2 * radius + 1
    return N_LOCAL_CHANNELS * k * k + N_SCALARS + (N_HEURISTIC if heuristic else 0)


def local_bounds(
    radius: int, *, heuristic: bool = False
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Per-feature ``(low, high)`` of a local observation, each of length :func:`local_size`.

    The env faces declare these as their observation space; every observation lies inside.
    The heuristic's ``2`` (blocked) stays a distinct value rather than being rescaled: the shipped
    navigation policy was trained on it and the executors rank by it.
    """
    k = 2 * radius + 1
    window = N_LOCAL_CHANNELS * k * k
    # carrying, has_task in {0, 1}; dr / H and dc / W in (-1, 1); the signs in {-1, 0, 1}.
    scalars_low = np.array([0.0, 0.0, -1.0, -1.0, -1.0, -1.0], dtype=np.float32)
    low = [np.zeros(window, dtype=np.float32), scalars_low]
    high = [np.ones(window + N_SCALARS, dtype=np.float32)]
    if heuristic:
        low.append(np.full(N_HEURISTIC, -1.0, dtype=np.float32))
        high.append(np.full(N_HEURISTIC, 2.0, dtype=np.float32))
    return np.concatenate(low), np.concatenate(high)


class LocalObserver:
    """Builds local observations for one map (static layers are padded once).

    Args:
        blocked: ``(H, W)`` walls.
        pickups: ``(H, W)`` pickup cells.
        radius: window radius.
        oracle: a distance oracle of the same map; when given, the heuristic values are added.
        task_cells: ``(H, W)`` cells that are usual targets (pickups and stations); their
            distance maps are precomputed in one dense table when it fits in 256 MB.
    """

    def __init__(
        self,
        blocked: NDArray[np.bool_],
        pickups: NDArray[np.bool_],
        radius: int = 2,
        *,
        oracle: DistanceOracle | None = None,
        task_cells: NDArray[np.bool_] | None = None,
    ):
        self.radius = radius
        self.oracle = oracle
        # Targets are almost always pickups or stations: keep their maps dense when they fit.
        self._table = None
        if oracle is not None and task_cells is not None:
            self._table = oracle.table(task_cells)
        self._blocked1 = np.pad(blocked, 1, constant_values=True)
        self.shape = blocked.shape
        self._walls = np.pad(blocked, radius, constant_values=True).astype(np.float32)
        self._pickups = np.pad(pickups, radius, constant_values=False).astype(np.float32)
        k = 2 * radius + 1
        self._dr = np.arange(k)[:, None]  # (k, 1)
        self._dc = np.arange(k)[None, :]  # (1, k)
        self._statics = (self._walls, self._pickups, self._blocked1)
        empty = (np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int32))
        self._dense = empty if self._table is None else self._table
        self._size = local_size(radius, heuristic=oracle is not None)
        # What a compiled tick needs to observe in the same call (kernels.warehouse_tick); None
        # when the heuristic has no dense table, whose values the numpy heuristic fills in.
        self.kernel_inputs: kernels.ObserverInputs | None = None
        if oracle is None or self._table is not None:
            self.kernel_inputs = (*self._statics, *self._dense)

    @classmethod
    def for_map(
        cls,
        grid: GridMap,
        radius: int = 2,
        *,
        heuristic: bool = True,
        oracle: DistanceOracle | None = None,
    ) -> LocalObserver:
        """The observer of ``grid``: its walls and pickups, the heuristic channels if asked.

        Args:
            grid: the map.
            radius: window radius.
            heuristic: add the distance-to-target values (a :class:`DistanceOracle` of the map).
            oracle: the distance maps the heuristic reads (default: a new oracle of ``grid``).
        """
        if heuristic and oracle is None:
            oracle = DistanceOracle(grid)
        return cls(
            grid.blocked,
            grid.pickups,
            radius,
            oracle=oracle if heuristic else None,
            task_cells=grid.pickups | grid.stations,
        )

    @property
    def size(self) -> int:
        """Length of one robot's observation."""
        return self._size

    def bounds(self) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Per-feature ``(low, high)`` of this observer's output (see :func:`local_bounds`)."""
        return local_bounds(self.radius, heuristic=self.oracle is not None)

    def __call__(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        carrying: NDArray[np.bool_],
        has_task: NDArray[np.bool_],
    ) -> NDArray[np.float32]:
        """``(B, N, size)`` observations for every robot in every world (compiled).

        :meth:`reference` is the same in numpy. Targets outside the dense distance table
        (or no table) take the numpy heuristic.
        """
        n_envs, n_robots, _ = pos.shape
        out = np.empty((n_envs, n_robots, self._size), dtype=np.float32)
        dense = self._table is not None
        row_of, dist = self._dense
        code = kernels.local_observations(
            pos,
            goal,
            carrying,
            has_task,
            self._statics,
            row_of,
            dist,
            self.radius,
            self.oracle is not None and dense,
            out,
        )
        if code == kernels.OFF_GRID:
            raise ConfigError("observations: a robot or its target lies outside the grid")
        if self.oracle is not None and not (dense and code == kernels.OK):
            out[..., -N_HEURISTIC:] = self.heuristic(pos, goal, has_task)
        return out

    def reference(self, fleet: Fleet) -> NDArray[np.float32]:
        """The numpy reference of :meth:`__call__` (its four arrays as one :class:`Fleet`)."""
        pos, goal, carrying, has_task = fleet
        n_envs, n_robots, _ = pos.shape
        r = self.radius
        k = 2 * r + 1
        h, w = self.shape
        rows = pos[..., 0][:, :, None, None] + self._dr  # (B, N, k, 1) padded coords
        cols = pos[..., 1][:, :, None, None] + self._dc  # (B, N, 1, k)
        walls = self._walls[rows, cols]
        shelves = self._pickups[rows, cols]
        occ = np.zeros((n_envs, h + 2 * r, w + 2 * r), dtype=np.float32)
        env_idx = np.repeat(np.arange(n_envs), n_robots)
        occ[env_idx, pos[..., 0].ravel() + r, pos[..., 1].ravel() + r] = 1.0
        robots = occ[np.arange(n_envs)[:, None, None, None], rows, cols]
        robots[:, :, r, r] = 0.0  # not oneself
        rel = (goal - pos).astype(np.int64)  # (B, N, 2)
        target = np.zeros((n_envs, n_robots, k, k), dtype=np.float32)
        inside = (np.abs(rel) <= r).all(axis=-1) & has_task
        b_i, n_i = np.nonzero(inside)
        target[b_i, n_i, rel[b_i, n_i, 0] + r, rel[b_i, n_i, 1] + r] = 1.0
        scalars = np.stack(
            [
                carrying.astype(np.float32),
                has_task.astype(np.float32),
                rel[..., 0] / h * has_task,
                rel[..., 1] / w * has_task,
                np.sign(rel[..., 0]) * has_task,
                np.sign(rel[..., 1]) * has_task,
            ],
            axis=-1,
        ).astype(np.float32)
        window = np.stack([walls, robots, shelves, target], axis=2)  # (B, N, 4, k, k)
        parts = [window.reshape(n_envs, n_robots, -1), scalars]
        if self.oracle is not None:
            parts.append(self.heuristic(pos, goal, has_task))
        return np.concatenate(parts, axis=-1, dtype=np.float32)

    def heuristic(
        self, pos: NDArray[np.int32], goal: NDArray[np.int32], has_task: NDArray[np.bool_]
    ) -> NDArray[np.float32]:
        """``(B, N, 5)`` change of true distance-to-target per action (2 = blocked)."""
        after, blocked = self._distances(pos, goal, has_task)
        out = np.where(blocked, 2.0, np.sign(after - after[:, :1])).astype(np.float32)
        return out.reshape(*pos.shape[:2], N_HEURISTIC)

    def _distances(
        self, pos: NDArray[np.int32], goal: NDArray[np.int32], has_task: NDArray[np.bool_]
    ) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        """Distance to the target after each action, and whether each move hits a wall.

        Both ``(M, 5)`` with ``M = B * N``; distances are 0 for a robot without a task.
        """
        assert self.oracle is not None
        h, w = self.shape
        flat_pos = pos.reshape(-1, 2)
        nxt = flat_pos[:, None, :] + DELTAS[None]  # (M, 5, 2)
        blocked = self._blocked1[nxt[..., 0] + 1, nxt[..., 1] + 1]
        rr = np.clip(nxt[..., 0], 0, h - 1)
        cc = np.clip(nxt[..., 1], 0, w - 1)
        after = np.zeros(nxt.shape[:2], dtype=np.float32)
        flat_goal = goal.reshape(-1, 2)
        keys = flat_goal[:, 0].astype(np.int64) * w + flat_goal[:, 1]
        idx = np.flatnonzero(has_task.reshape(-1))
        if self._table is not None and (self._table[0][keys[idx]] >= 0).all():
            # Every target is a task cell: one gather from the dense table, no Python loop.
            row_of, dist = self._table
            rows = row_of[keys[idx]]
            after[idx] = dist[rows[:, None], (rr[idx] * w + cc[idx])]
        else:
            # One gather from the oracle's map slab: a map copied out per target cost ~70 ms a
            # tick at 1,000 robots on warehouse_large (70,000 cells a map).
            after[idx] = self.oracle.lookup(keys[idx], rr[idx] * w + cc[idx])
        return after, blocked

    def tabular(self, fleet: Fleet) -> NDArray[np.int64]:
        """``(B, N)`` compact discrete states in ``[0, N_TABULAR_STATES)`` (module docstring).

        Needs the heuristic (an observer built with ``heuristic=True``).
        """
        if self.oracle is None:
            raise ConfigError("tabular states need the heuristic: build the observer with one")
        pos, goal, carrying, has_task = fleet
        after, blocked = self._distances(pos, goal, has_task)
        closer = ((after[:, 1:] < after[:, :1]) & ~blocked[:, 1:]).astype(np.int64) << np.arange(4)
        distance = np.minimum(after[:, 0], N_DISTANCE_BUCKETS - 1).astype(np.int64)
        robots = _neighbour_robots(self.shape, pos).reshape(-1)
        codes = ((distance * 16 + closer.sum(axis=1)) * 16 + robots) * 2
        out: NDArray[np.int64] = (codes + carrying.reshape(-1)).reshape(pos.shape[:2])
        return out


def global_state(grid: GridMap, fleet: Fleet) -> NDArray[np.float32]:
    """``(B, 6 * H * W)`` global state of ``fleet`` on ``grid`` (see the module docstring)."""
    pos, goal, carrying, has_task = fleet
    n_envs, n_robots, _ = pos.shape
    h, w = grid.shape
    state = np.zeros((n_envs, N_GLOBAL_CHANNELS, h, w), dtype=np.float32)
    state[:, 0] = grid.blocked
    state[:, 4] = grid.pickups
    state[:, 5] = grid.stations
    env_idx = np.repeat(np.arange(n_envs), n_robots)
    pr, pc = pos[..., 0].ravel(), pos[..., 1].ravel()
    state[env_idx, 1, pr, pc] = 1.0
    state[env_idx, 2, pr, pc] = carrying.ravel()
    tasked = has_task.ravel()
    gr = goal[..., 0].ravel()[tasked]
    gc = goal[..., 1].ravel()[tasked]
    np.add.at(state, (env_idx[tasked], np.full(len(gr), 3), gr, gc), 1.0)
    return state.reshape(n_envs, -1)


def _neighbour_robots(shape: tuple[int, int], pos: NDArray[np.int32]) -> NDArray[np.int64]:
    """``(B, N)`` bits: which of the 4 neighbour cells (up, down, left, right) hold a robot."""
    n_envs, n_robots, _ = pos.shape
    h, w = shape
    occ = np.zeros((n_envs, h + 2, w + 2), dtype=bool)
    env_idx = np.repeat(np.arange(n_envs), n_robots)
    occ[env_idx, pos[..., 0].ravel() + 1, pos[..., 1].ravel() + 1] = True
    bits = np.zeros((n_envs, n_robots), dtype=np.int64)
    for bit, delta in enumerate(DELTAS[1:]):
        rr = pos[..., 0] + 1 + delta[0]
        cc = pos[..., 1] + 1 + delta[1]
        bits |= occ[np.arange(n_envs)[:, None], rr, cc].astype(np.int64) << bit
    return bits
