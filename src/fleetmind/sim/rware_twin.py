r"""RWARE 2.0's rules as a batched numpy world: an exact twin of ``rware.Warehouse``.

:class:`RwareWorlds` holds ``B`` worlds of ``N`` robots (rware's "agents") in one set of
arrays and steps them together. From the same seed and the same actions every world agrees
with ``rware.Warehouse`` (rware 2.0.0) at every step: positions, headings, carried shelves,
the request queue, rewards, the end of the episode and the observations. The rules, as rware
applies them in ``reset`` and ``step``:

- Layout: rware's generated warehouse (``shelf_columns`` x ``shelf_rows`` blocks of 2 x
  ``column_height`` shelves, highways between them, two goals in the middle of the bottom row)
  or an rware layout string (``x`` shelf, ``.`` highway, ``g`` goal). Every non-highway cell
  holds one shelf at reset, numbered row by row.
- Reset draws from the world's generator (Gymnasium's ``np_random``: PCG64 over
  ``SeedSequence(seed)``), in rware's order: the robots' cells (``choice`` of every cell, no
  repeats; robots may start under shelves), their headings (``choice`` of the 4), then the
  request queue (``choice`` of ``request_queue_size`` shelves, no repeats).
- Actions: 0 no-op, 1 forward (one cell along the heading, clamped to the grid), 2 turn left,
  3 turn right, 4 toggle load (pick up the shelf under the robot, or put the carried one down
  on a shelf cell, never on a highway).
- Moves: a loaded robot may not drive into a cell holding a shelf unless a loaded robot stands
  there. The remaining requests form a graph (cell -> wanted cell); in each weakly connected
  piece, a cycle moves as a whole unless it is a swap of two (then nobody in the piece moves),
  and a piece without a cycle moves along its longest chain only (networkx's
  ``dag_longest_path``; its tie-break, which follows networkx's node order, is reproduced
  exactly, see :func:`_networkx_pred_order`). Everything else stays.
- Deliveries: after the moves, each goal in order: a requested shelf there is delivered; it is
  replaced in the queue by a ``choice`` among the shelves not requested (in shelf order).
  Reward per delivery: ``individual`` +1 to the robot at the goal, ``global`` +1 to every
  robot, ``two_stage`` +0.5 at the goal and +0.5 when that robot next puts a shelf down.
- End: ``max_steps`` steps, or ``max_inactivity_steps`` steps without a delivery; rware
  reports both as ``done``, both are time limits (truncations). No terminal state.
- Observations: :meth:`RwareWorlds.observe_flat` is rware's default flattened vector (own
  column, row, loaded, heading one-hot, on-highway; then per cell of the
  ``(2r+1) x (2r+1)`` window, row by row: robot there, its heading one-hot (``1 0 0 0`` when
  none), shelf there, shelf requested); :meth:`RwareWorlds.observe_image` rware's image
  layers (and the features of its image-dict observation).

Rewards are float64 (rware's), observations float32. Cells are ``row * W + col``; rware
itself keeps ``(x, y) = (col, row)``.

Version history: v0, first release (the rules of rware 2.0.0).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.sim import rware_kernels as kernels
from fleetmind.sim.grid import action_error

# The settings live in rware_config; the step reads the turn tables and the tie order as
# names of this module, so a test can break one here and see the twin part from rware.
from fleetmind.sim.rware_config import (
    _CELL_BITS,
    _CELL_CODES,
    _SELF_BITS,
    _TURN_LEFT,
    _TURN_RIGHT,
    FORWARD,
    IMAGE_LAYERS,
    LEFT,
    N_ACTIONS,
    NOOP,
    RIGHT,
    TOGGLE_LOAD,
    ImageLayer,
    RewardType,
    RwareConfig,
    RwareLayout,
    RwareStep,
    flat_obs_size,
    layout_from_params,
    layout_from_string,
)

__all__ = [
    "FORWARD",
    "IMAGE_LAYERS",
    "LEFT",
    "NOOP",
    "N_ACTIONS",
    "RIGHT",
    "TOGGLE_LOAD",
    "ImageLayer",
    "RewardType",
    "RwareConfig",
    "RwareLayout",
    "RwareStep",
    "RwareWorlds",
    "flat_obs_size",
    "layout_from_params",
    "layout_from_string",
]


class _Asks(NamedTuple):
    """What rware's graph resolution reads of worlds ``ws``, arrays ``(len(ws), N)``."""

    ws: NDArray[np.int64]  # the worlds
    target: NDArray[np.int64]  # the cell each robot asks for (its own when it stays)
    occupant: NDArray[np.int64]  # the robot on that cell now, -1: nobody
    moving: NDArray[np.bool_]  # the robot asks for another cell


class RwareWorlds:
    """``B`` rware worlds stepped together (see the module docstring).

    State (read-only outside; ``B`` worlds, ``N`` robots, ``S`` shelves, ``Q`` requests):
    ``pos (B, N)`` cell of each robot, ``heading (B, N)`` rware's Direction value,
    ``carrying (B, N)`` shelf index or -1, ``shelf_pos (B, S)`` cell of each shelf,
    ``queue (B, Q)`` requested shelves in rware's queue order, ``steps (B,)``.

    Args:
        config: the rware setting.
        num_worlds: ``B``.
    """

    def __init__(self, config: RwareConfig, num_worlds: int) -> None:
        check_range("num_worlds", num_worlds, low=1)
        self.config = config
        self.num_worlds = num_worlds
        lay = config.layout
        h, w = lay.shape
        self.shape = (h, w)
        n, b = config.n_robots, num_worlds
        self._shelf_home = lay.shelf_cells
        s = len(self._shelf_home)
        self.n_shelves = s
        r = config.sensor_range
        # Grids carry a border of max(r, 1) empty cells: observation windows and the four
        # neighbours of a cell are plain gathers, never out of range.
        self._pad = pad = max(r, 1)
        self._pw = pw = w + 2 * pad
        cell = np.arange(h * w)
        crow, ccol = cell // w, cell % w
        self._cell_pad = (crow + pad) * pw + (ccol + pad)  # (HW,)
        self._highway = lay.highways.reshape(-1).copy()  # (HW,)
        self._crow, self._ccol = crow, ccol
        # Forward target per heading (UP, DOWN, LEFT, RIGHT), clamped like rware's.
        self._move_to = np.stack(
            [
                np.maximum(crow - 1, 0) * w + ccol,
                np.minimum(crow + 1, h - 1) * w + ccol,
                crow * w + np.maximum(ccol - 1, 0),
                crow * w + np.minimum(ccol + 1, w - 1),
            ]
        )  # (4, HW)
        # The four padded neighbours of each cell (off-grid ones land on the empty border).
        cp = self._cell_pad
        self._nbr_pad = np.stack([cp - pw, cp + pw, cp - 1, cp + 1], axis=1)  # (HW, 4)
        win = np.arange(-r, r + 1)
        self._window = (win[:, None] * pw + win[None, :]).reshape(-1)  # (K,) row by row
        self._goal_pad = np.array([cp[row * w + col] for row, col in lay.goals], dtype=np.int64)
        self._n_pad = (h + 2 * pad) * pw
        self._bi = np.arange(b)[:, None]
        # The kernels' read-only tables (see fleetmind.sim.rware_kernels).
        self._step_tables = (
            self._move_to.astype(np.int64),
            cp.astype(np.int64),
            self._nbr_pad.astype(np.int64),
            self._highway,
            self._goal_pad,
        )
        self._step_limits = (
            int(config.max_steps or 0),
            int(config.max_inactivity_steps or 0),
            config.reward_type == "two_stage",
        )
        self._obs_tables = (
            cp.astype(np.int64),
            np.stack([crow, ccol]).astype(np.int64),
            self._highway,
            self._window.astype(np.int64),
        )
        # Per-step scratch of the step kernel (never handed out).
        self._mode_buf = np.zeros(b, dtype=np.int8)
        self._moves_buf = np.zeros((b, n), dtype=bool)
        self._deliver_buf = np.zeros(b, dtype=bool)
        self._obs_scale = (
            (float(w - 1), float(h - 1)) if config.normalised_coordinates else (1.0, 1.0)
        )
        self.pos = np.zeros((b, n), dtype=np.int64)
        self.heading = np.zeros((b, n), dtype=np.int8)
        self.carrying = np.full((b, n), -1, dtype=np.int64)
        self.delivered_flag = np.zeros((b, n), dtype=bool)  # rware's has_delivered (two_stage)
        self.shelf_pos = np.broadcast_to(self._shelf_home, (b, s)).copy()
        self.queue = np.zeros((b, config.request_queue_size), dtype=np.int64)
        self.requested = np.zeros((b, s + 1), dtype=bool)  # index s: "no shelf", never requested
        self.steps = np.zeros(b, dtype=np.int64)
        self.inactive = np.zeros(b, dtype=np.int64)
        self.robot_grid = np.zeros((b, self._n_pad), dtype=np.int64)  # robot index + 1
        self.shelf_grid = np.zeros((b, self._n_pad), dtype=np.int64)  # shelf index + 1
        self._rngs: list[np.random.Generator | None] = [None] * b

    # ---------------------------------------------------------------- reset

    def reset(
        self,
        seeds: Sequence[int | None] | None = None,
        worlds: Sequence[int] | NDArray[np.integer] | None = None,
    ) -> None:
        """Reset worlds (all by default) as ``rware.Warehouse.reset(seed=...)`` does.

        Args:
            seeds: one seed per reset world; None (or a None entry) continues that world's
                generator (a fresh, unseeded one the first time), like rware's ``reset()``.
            worlds: which worlds, in the order of ``seeds``.

        Raises:
            ConfigError: a seed is not a non-negative int, or the counts differ.
        """
        ids = list(range(self.num_worlds)) if worlds is None else [int(i) for i in worlds]
        seed_list: Sequence[int | None] = [None] * len(ids) if seeds is None else seeds
        if len(seed_list) != len(ids):
            raise ConfigError(f"seeds: expected {len(ids)} (one per world), got {len(seed_list)}")
        h, w = self.shape
        cfg = self.config
        for k, seed in zip(ids, seed_list, strict=True):
            if seed is not None:
                if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
                    raise ConfigError(f"seed: expected an int, got {seed!r}")
                check_range("seed", int(seed), low=0)
                self._rngs[k] = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
            rng = self._rngs[k]
            if rng is None:
                rng = self._rngs[k] = np.random.Generator(np.random.PCG64())
            # rware: choice(arange(H*W), n, replace=False), choice(list(Direction), n),
            # choice(shelfs, Q, replace=False); the same draws as these integer choices.
            self.pos[k] = rng.choice(h * w, size=cfg.n_robots, replace=False)
            self.heading[k] = rng.choice(4, size=cfg.n_robots)
            queue = rng.choice(self.n_shelves, size=cfg.request_queue_size, replace=False)
            self.queue[k] = queue
            self.requested[k] = False
            self.requested[k, queue] = True
        sel = np.asarray(ids, dtype=np.int64)
        self.carrying[sel] = -1
        self.delivered_flag[sel] = False
        self.shelf_pos[sel] = self._shelf_home
        self.steps[sel] = 0
        self.inactive[sel] = 0
        self._recalc_grids(sel)

    def _recalc_grids(self, sel: NDArray[np.int64] | None = None) -> None:
        """Rebuild the robot and shelf grids (rware's ``_recalc_grid``) of worlds ``sel``."""
        bi = self._bi if sel is None else sel[:, None]
        n, s = self.config.n_robots, self.n_shelves
        robot_grid = self.robot_grid if sel is None else self.robot_grid[sel]
        shelf_grid = self.shelf_grid if sel is None else self.shelf_grid[sel]
        robot_grid[:] = 0
        shelf_grid[:] = 0
        rows = np.arange(len(bi))[:, None]
        robot_grid[rows, self._cell_pad[self.pos[bi[:, 0]]]] = np.arange(1, n + 1)
        shelf_grid[rows, self._cell_pad[self.shelf_pos[bi[:, 0]]]] = np.arange(1, s + 1)
        if sel is not None:
            self.robot_grid[sel] = robot_grid
            self.shelf_grid[sel] = shelf_grid

    # ----------------------------------------------------------------- step

    def state(self) -> kernels.State:
        """The worlds' arrays as the compiled kernels take them (the arrays, not copies)."""
        return (
            *(self.pos, self.heading, self.carrying, self.delivered_flag, self.shelf_pos),
            *(self.requested, self.robot_grid, self.shelf_grid, self.steps, self.inactive),
        )

    def step(self, actions: NDArray[np.integer]) -> RwareStep:
        """One rware step of every world with ``(B, N)`` actions in ``0..4``.

        Runs the compiled kernel of :mod:`fleetmind.sim.rware_kernels`; :meth:`step_reference`
        is the same step in numpy.

        Raises:
            ConfigError: the actions have the wrong shape or an id outside ``0..4``.
        """
        b, n = self.pos.shape
        act = np.asarray(actions)
        if act.shape != (b, n):
            raise ConfigError(f"actions: expected shape {(b, n)}, got {act.shape}")
        act = act.astype(np.int64, copy=False)  # the kernel checks the range
        rewards = np.zeros((b, n), dtype=np.float64)
        done = np.empty(b, dtype=bool)
        deliver = self._deliver_buf
        mode = self._mode_buf
        mode[:] = kernels.RESOLVE
        moves = self._moves_buf
        args = (
            act,
            moves,
            self.state(),
            self._step_tables,
            (_TURN_LEFT, _TURN_RIGHT),  # read here, so a test can break the twin's turns
            self._step_limits,
            rewards,
            done,
            deliver,
        )
        events = kernels.step(mode, *args)
        if events & kernels.BAD_ACTION:
            raise action_error(act, "actions")
        if events & kernels.TIES:
            # Equal chains into one cell: networkx's order, on the numpy path, for those worlds.
            ws = np.flatnonzero(mode < 0)
            moves[ws] = self._resolve_worlds(act, ws)
            mode[:] = kernels.SKIP
            mode[ws] = kernels.USE_GIVEN
            events |= kernels.step(mode, *args)
        if events & kernels.DELIVER:
            for k in np.flatnonzero(deliver):
                for goal in self._goal_pad:
                    shelf = int(self.shelf_grid[k, goal]) - 1
                    if shelf >= 0 and self.requested[k, shelf]:
                        self._deliver(int(k), shelf, int(self.robot_grid[k, goal]) - 1, rewards)
        return RwareStep(rewards, done)

    def _checked(self, actions: NDArray[np.integer]) -> NDArray[np.int64]:
        b, n = self.pos.shape
        act = np.asarray(actions)
        if act.shape != (b, n):
            raise ConfigError(f"actions: expected shape {(b, n)}, got {act.shape}")
        if act.size and (act.min() < 0 or act.max() >= N_ACTIONS):
            raise action_error(act, "actions")
        return act.astype(np.int64, copy=False)

    def step_reference(self, actions: NDArray[np.integer]) -> RwareStep:
        """The numpy reference of :meth:`step` (the same rules on arrays, no compiled kernel).

        Raises:
            ConfigError: the actions have the wrong shape or an id outside ``0..4``.
        """
        cfg = self.config
        act = self._checked(actions)
        b, n = act.shape
        moves = self._resolve(act)
        bi = self._bi
        pos = self.pos
        rewards = np.zeros((b, n), dtype=np.float64)

        # Committed forward moves carry their shelf along. The grids follow the movers only:
        # picking up or putting down leaves a shelf where it is, and no two shelves ever
        # share a cell, so this is rware's _recalc_grid.
        if moves.any():
            mb, mr = np.nonzero(moves)
            old = pos[mb, mr]
            new = self._move_to[self.heading[mb, mr], old]
            pos[mb, mr] = new
            cp = self._cell_pad
            self.robot_grid[mb, cp[old]] = 0  # all cleared before any is set: chains, cycles
            self.robot_grid[mb, cp[new]] = mr + 1
            shelf = self.carrying[mb, mr]
            lo = shelf >= 0
            if lo.any():
                self.shelf_pos[mb[lo], shelf[lo]] = new[lo]
                self.shelf_grid[mb[lo], cp[old[lo]]] = 0
                self.shelf_grid[mb[lo], cp[new[lo]]] = shelf[lo] + 1
        turn_l, turn_r = act == LEFT, act == RIGHT
        self.heading[turn_l] = _TURN_LEFT[self.heading[turn_l]]
        self.heading[turn_r] = _TURN_RIGHT[self.heading[turn_r]]
        toggle = act == TOGGLE_LOAD
        if toggle.any():
            # Toggling robots stand still, so the grids of the step's start are current here.
            under = self.shelf_grid[bi, self._cell_pad[pos]] - 1  # (B, N)
            pick = toggle & (self.carrying < 0) & (under >= 0)
            drop = toggle & (self.carrying >= 0) & ~self._highway[pos]
            self.carrying[pick] = under[pick]
            if cfg.reward_type == "two_stage":
                rewards[drop & self.delivered_flag] += 0.5
            self.carrying[drop] = -1
            self.delivered_flag[drop] = False

        delivered_any = np.zeros(b, dtype=bool)
        for goal in self._goal_pad:
            shelf = self.shelf_grid[:, goal] - 1  # (B,)
            hit = np.flatnonzero((shelf >= 0) & self.requested[np.arange(b), shelf])
            for k in hit:
                self._deliver(int(k), int(shelf[k]), int(self.robot_grid[k, goal]) - 1, rewards)
            delivered_any[hit] = True
        self.inactive = np.where(delivered_any, 0, self.inactive + 1)
        self.steps += 1
        done = np.zeros(b, dtype=bool)
        if cfg.max_inactivity_steps:
            done |= self.inactive >= cfg.max_inactivity_steps
        if cfg.max_steps:
            done |= self.steps >= cfg.max_steps
        return RwareStep(rewards, done)

    def _deliver(self, k: int, shelf: int, robot: int, rewards: NDArray[np.float64]) -> None:
        """Shelf ``shelf`` reached a goal in world ``k``: refill the queue, reward (rware's)."""
        candidates = np.flatnonzero(~self.requested[k, : self.n_shelves])
        rng = self._rngs[k]
        assert rng is not None  # set by reset
        new = int(candidates[rng.choice(len(candidates))])  # rware: choice(candidates)
        slot = int(np.flatnonzero(self.queue[k] == shelf)[0])
        self.queue[k, slot] = new
        self.requested[k, shelf] = False
        self.requested[k, new] = True
        kind = self.config.reward_type
        if kind == "global":
            rewards[k] += 1.0
        elif kind == "individual":
            rewards[k, robot] += 1.0
        else:
            self.delivered_flag[k, robot] = True
            rewards[k, robot] += 0.5

    def _resolve_worlds(self, act: NDArray[np.int64], ws: NDArray[np.int64]) -> NDArray[np.bool_]:
        """:meth:`_resolve` of the worlds ``ws`` only, ``(len(ws), N)``."""
        sub = copy.copy(self)  # the same object cut to worlds ws (nothing is written to it)
        sub.pos, sub.heading, sub.carrying = self.pos[ws], self.heading[ws], self.carrying[ws]
        sub.robot_grid, sub.shelf_grid = self.robot_grid[ws], self.shelf_grid[ws]
        sub._bi = np.arange(len(ws))[:, None]
        return sub._resolve(act[ws])

    def _resolve(self, act: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which robots move forward this step: rware's graph resolution, on arrays.

        Each robot asks for one cell (its own when it does not move), so every weakly
        connected piece of rware's graph holds at most one cycle. A world where no mover
        asks for an occupied cell and no two movers ask for the same one moves every mover;
        only the others go through the graph. Returns ``(B, N)``.
        """
        n = act.shape[1]
        bi, pos = self._bi, self.pos
        target = np.where(act == FORWARD, self._move_to[self.heading, pos], pos)
        tpad = self._cell_pad[target]
        occupant = self.robot_grid[bi, tpad] - 1  # (B, N), -1: nobody there
        loaded = self.carrying >= 0
        occ_loaded = (occupant >= 0) & loaded[bi, np.maximum(occupant, 0)]
        cancel = loaded & (target != pos) & (self.shelf_grid[bi, tpad] > 0) & ~occ_loaded
        target = np.where(cancel, pos, target)
        moving: NDArray[np.bool_] = target != pos
        if not moving.any():
            return moving
        # Movers' targets sorted per world (a distinct negative stand-in for the others).
        asked = np.sort(np.where(moving, target, -1 - np.arange(n)), axis=1)
        shared = (asked[:, 1:] == asked[:, :-1]).any(axis=1)
        waits = (moving & (occupant >= 0)).any(axis=1)
        hard = np.flatnonzero(shared | waits)
        if len(hard):
            commit = moving.copy()
            commit[hard] = self._resolve_graph(
                _Asks(hard, target[hard], occupant[hard], moving[hard])
            )
            return commit
        return moving

    def _resolve_graph(self, asks: _Asks) -> NDArray[np.bool_]:
        """The graph resolution of the worlds of ``asks``, ``(len(ws), N)``."""
        _, target, occupant, moving = asks
        b, n = target.shape
        idx = np.arange(n)
        rows = np.arange(b)[:, None]
        # f: the robot each robot waits for; n stands for an empty cell (the end of a chain).
        f = np.full((b, n + 1), n, dtype=np.int64)
        f[:, :n] = np.where(moving, np.where(occupant >= 0, occupant, n), idx)
        f2 = f[rows, f]
        g = f
        for _ in range(_doublings(n)):  # g = f^(2^k), 2^k > n: every robot on a cycle or at n
            g = g[rows, g]
        in_cycle_piece = g[:, :n] != n
        on_cycle = np.zeros((b, n + 1), dtype=bool)
        on_cycle[rows, g[:, :n]] = True
        swap = (f2[:, :n] == idx) & (f[:, :n] != idx)
        commit: NDArray[np.bool_] = in_cycle_piece & on_cycle[:, :n] & ~swap
        chain = moving & ~in_cycle_piece
        if chain.any():
            commit |= self._longest_chains(asks, chain, f)
        moved: NDArray[np.bool_] = commit & moving
        return moved

    def _longest_chains(
        self, asks: _Asks, chain: NDArray[np.bool_], f: NDArray[np.int64]
    ) -> NDArray[np.bool_]:
        """Robots on the longest chain of each cycle-free piece (networkx's longest path).

        ``chain``: the movers on no cycle; ``f``: the robot each robot waits for (``N``: none).
        """
        ws, target, _, moving = asks
        b, n = chain.shape
        rows = np.arange(b)[:, None]
        rows3 = rows[:, :, None]
        pos = self.pos[ws]
        grid = self.robot_grid[ws]

        def askers(cells: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
            # Robots on the 4 neighbours of each cell that ask for that cell: (B, N, 4).
            who = grid[rows3, self._nbr_pad[cells]] - 1
            safe = np.maximum(who, 0)
            ok = (who >= 0) & (target[rows3, safe] == cells[:, :, None]) & moving[rows3, safe]
            return np.where(ok, who, n), ok

        preds, has_pred = askers(pos)
        # depth: the longest chain of robots behind each robot (networkx's dist).
        depth = np.zeros((b, n + 1), dtype=np.int64)
        for _ in range(n):
            new = np.where(has_pred, depth[rows3, preds] + 1, 0).max(axis=2)
            if np.array_equal(new, depth[:, :n]):
                break
            depth[:, :n] = new
        sibs, has_sib = askers(target)
        sib_depth = np.where(has_sib, depth[rows3, sibs], -1)
        best = sib_depth.max(axis=2)
        chosen = chain & (depth[:, :n] == best)
        tie = chosen & ((sib_depth == best[:, :, None]).sum(axis=2) > 1)
        if tie.any():
            for k in np.flatnonzero(tie.any(axis=1)):
                self._break_ties(int(ws[k]), target[k], chosen[k], tie[k])
        # A robot moves when it and every robot ahead of it won their cell.
        ok = np.ones((b, n + 1), dtype=bool)
        ok[:, :n] = chosen
        g = f
        for _ in range(_doublings(n)):
            ok = ok & ok[rows, g]
            g = g[rows, g]
        moved: NDArray[np.bool_] = chain & ok[:, :n]
        return moved

    def _break_ties(
        self,
        k: int,
        target: NDArray[np.int64],
        chosen: NDArray[np.bool_],
        tie: NDArray[np.bool_],
    ) -> None:
        """Settle equal chains into one cell of world ``k`` as networkx orders them."""
        w = self.shape[1]
        starts = [int(c) for c in self.pos[k]]
        ends = [int(c) for c in target]
        robot_at = {c: i for i, c in enumerate(starts)}
        for cell in sorted({ends[i] for i in np.flatnonzero(tie)}):
            tied = [i for i in np.flatnonzero(tie) if ends[i] == cell]
            order = _networkx_pred_order(starts, ends, w, cell)
            winner = next(robot_at[u] for u in order if robot_at[u] in tied)
            for i in tied:
                chosen[i] = i == winner

    # ---------------------------------------------------------- observations

    def observe_flat(self) -> NDArray[np.float32]:
        """The flattened observations of rware, ``(B, N, 8 + 7 (2r+1)^2)`` float32.

        Runs the compiled kernel; :meth:`observe_flat_reference` is the same in numpy.
        """
        b, n = self.pos.shape
        out = np.empty((b, n, _SELF_BITS + _CELL_BITS * len(self._window)), dtype=np.float32)
        kernels.observe_flat(
            self.state(),
            self._obs_tables,
            self._obs_scale,
            _CELL_CODES,
            out,
        )
        return out

    def observe_flat_reference(self) -> NDArray[np.float32]:
        """The numpy reference of :meth:`observe_flat`."""
        cfg = self.config
        b, n = self.pos.shape
        h, w = self.shape
        pos = self.pos
        k = len(self._window)
        own = np.zeros((b, n, _SELF_BITS), dtype=np.float32)
        col, row = self._ccol[pos], self._crow[pos]
        if cfg.normalised_coordinates:
            own[:, :, 0] = col / (w - 1)
            own[:, :, 1] = row / (h - 1)
        else:
            own[:, :, 0] = col
            own[:, :, 1] = row
        own[:, :, 2] = self.carrying >= 0
        ni = np.arange(n)[None, :]
        own[self._bi, ni, 3 + self.heading] = 1.0
        own[:, :, 7] = self._highway[pos]
        # Each window cell reads as one of 15 codes: robot there (none or heading 0..3) x shelf
        # there (none, not requested, requested); _CELL_CODES holds the 7 floats of each.
        bo = np.arange(b)
        cells = (self._cell_pad[pos] + (bo * self._n_pad)[:, None])[:, :, None] + self._window
        robot = self.robot_grid.reshape(-1)[cells]  # (B, N, K) robot index + 1, 0: none
        shelf = self.shelf_grid.reshape(-1)[cells]  # (B, N, K) shelf index + 1, 0: none
        heads = np.zeros((b, n + 1), dtype=np.int64)
        heads[:, 1:] = self.heading + 1
        code = heads.reshape(-1)[robot + (bo * (n + 1))[:, None, None]] * 3
        code += np.where(shelf > 0, 1, 0)
        code += self.requested.reshape(-1)[
            np.where(shelf > 0, shelf - 1, self.n_shelves)
            + (bo * (self.n_shelves + 1))[:, None, None]
        ]
        out = np.empty((b, n, _SELF_BITS + _CELL_BITS * k), dtype=np.float32)
        out[:, :, :_SELF_BITS] = own
        out[:, :, _SELF_BITS:] = np.take(_CELL_CODES, code, axis=0).reshape(b, n, -1)
        return out

    def image_layers(self, layers: Sequence[ImageLayer]) -> NDArray[np.float32]:
        """The global image layers of rware, padded by ``r``: ``(B, L, H + 2r, W + 2r)``.

        As rware draws them, the ``agent_direction`` and ``agent_load`` layers index the grid
        by ``(col, row)`` (rware's ``layer[ag.x, ag.y]``); they need ``col < H`` and ``row < W``.
        """
        b, n = self.pos.shape
        h, w = self.shape
        r, pad, pw = self.config.sensor_range, self._pad, self._pw
        full = np.zeros((b, len(layers), h + 2 * pad, pw), dtype=np.float32)
        inner = full[:, :, pad : pad + h, pad : pad + w]
        bi = self._bi
        row, col = self._crow[self.pos], self._ccol[self.pos]
        for li, name in enumerate(layers):
            plane = inner[:, li]
            if name == "shelves":
                plane[...] = self._unpad(self.shelf_grid) > 0
            elif name == "requests":
                cells = np.take_along_axis(self.shelf_pos, self.queue, 1)
                plane[bi, cells // w, cells % w] = 1.0
            elif name == "agents":
                plane[...] = self._unpad(self.robot_grid) > 0
            elif name in ("agent_direction", "agent_load"):
                if col.max(initial=0) >= h or row.max(initial=0) >= w:
                    raise ConfigError(
                        f"image layer {name!r}: rware indexes it by (col, row), which leaves "
                        f"this {h}x{w} grid (rware raises IndexError here)"
                    )
                value = (
                    self.heading + 1.0 if name == "agent_direction" else (self.carrying >= 0)
                ).astype(np.float32)
                keep = value > 0
                plane[bi.repeat(n, 1)[keep], col[keep], row[keep]] = value[keep]
            elif name == "goals":
                for grow, gcol in self.config.layout.goals:
                    plane[:, grow, gcol] = 1.0
            elif name == "accessible":
                plane[...] = 1.0
                plane[bi, row, col] = 0.0
            else:
                raise ConfigError(f"image layer: unknown {name!r}; expected one of {ImageLayer}")
        # Trim the border to r (it is max(r, 1) inside the world).
        off = pad - r
        return full[:, :, off : off + h + 2 * r, off : off + w + 2 * r]

    def _unpad(self, grid: NDArray[np.int64]) -> NDArray[np.int64]:
        h, w = self.shape
        pad = self._pad
        return grid.reshape(-1, h + 2 * pad, self._pw)[:, pad : pad + h, pad : pad + w]

    def observe_image(
        self, layers: Sequence[ImageLayer] = IMAGE_LAYERS, *, directional: bool = True
    ) -> NDArray[np.float32]:
        """The image observations of rware, ``(B, N, L, 2r+1, 2r+1)`` float32.

        Each robot's window of :meth:`image_layers`, turned to face its heading when
        ``directional`` (rware's ``np.rot90``: DOWN k=2, LEFT k=3, RIGHT k=1).
        """
        glob = self.image_layers(layers)  # (B, L, H+2r, W+2r)
        b = self.num_worlds
        r = self.config.sensor_range
        side = 2 * r + 1
        row, col = self._crow[self.pos], self._ccol[self.pos]
        dy = np.arange(side)
        rows = row[:, :, None, None] + dy[:, None]  # (B, N, side, 1)
        cols = col[:, :, None, None] + dy[None, :]  # (B, N, 1, side)
        bidx = np.arange(b)[:, None, None, None]
        win = glob[bidx, :, rows, cols]  # (B, N, side, side, L)
        win = np.moveaxis(win, -1, 2)  # (B, N, L, side, side)
        if directional:
            for heading, turns in ((1, 2), (2, 3), (3, 1)):
                sel = self.heading == heading
                if sel.any():
                    win[sel] = np.rot90(win[sel], k=turns, axes=(2, 3))
        return np.ascontiguousarray(win)

    def image_features(self) -> NDArray[np.float32]:
        """The ``features`` of rware's image-dict observation, ``(B, N, 6)`` float32.

        Heading one-hot, on highway, loaded.
        """
        b, n = self.pos.shape
        out = np.zeros((b, n, 6), dtype=np.float32)
        out[self._bi, np.arange(n)[None, :], self.heading] = 1.0
        out[:, :, 4] = self._highway[self.pos]
        out[:, :, 5] = self.carrying >= 0
        return out


def _doublings(n: int) -> int:
    """Pointer doublings ``k`` with ``2**k > n`` (a chain of ``n`` robots ends within them)."""
    return max(1, int(n).bit_length())


def _networkx_pred_order(starts: list[int], ends: list[int], width: int, cell: int) -> list[int]:
    """The robots' cells asking for ``cell``, in the order networkx's longest path tries them.

    rware builds ``G`` by ``add_edge((x, y) start, (x, y) target)`` robot by robot, splits it
    with ``weakly_connected_components`` and runs ``dag_longest_path`` on
    ``G.subgraph(c).copy()``: among equal chains the first predecessor in the copy wins. The
    copy lists nodes as the subgraph view iterates them: the component's node set (a Python
    set, filled in breadth-first order from the component's first node) when it holds fewer
    than half of ``G``'s nodes, else ``G``'s insertion order. Rebuilding the same Python sets
    from the same tuples gives the same order (networkx 3.x; tuples of ints hash the same
    in every run).
    """
    nodes: dict[tuple[int, int], None] = {}
    succ: dict[tuple[int, int], dict[tuple[int, int], None]] = {}
    pred: dict[tuple[int, int], dict[tuple[int, int], None]] = {}

    def xy(c: int) -> tuple[int, int]:
        return (c % width, c // width)

    for s, t in zip(starts, ends, strict=True):
        u, v = xy(s), xy(t)
        for node in (u, v):
            if node not in nodes:
                nodes[node] = None
                succ[node] = {}
                pred[node] = {}
        succ[u][v] = None
        pred[v][u] = None

    def bfs(source: tuple[int, int]) -> set[tuple[int, int]]:
        # networkx's _plain_bfs: successors, then predecessors, level by level.
        seen = {source}
        level = [source]
        while level:
            this, level = level, []
            for v in this:
                for nbrs in (succ[v], pred[v]):
                    for x in nbrs:
                        if x not in seen:
                            seen.add(x)
                            level.append(x)
        return seen

    members = bfs(xy(cell))
    source = next(v for v in nodes if v in members)
    component = bfs(source)
    shown = set(iter(component))  # networkx's show_nodes(G.nbunch_iter(c))
    order = list(shown) if 2 * len(shown) < len(nodes) else [v for v in nodes if v in shown]
    goal = xy(cell)
    return [u[1] * width + u[0] for u in order if goal in succ[u]]
