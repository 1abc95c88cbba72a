"""Tick dynamics: turning a joint action into a joint move with explicit conflict semantics.

Rules (the same for one world or a batch of worlds):

- A robot moves one cell up, down, left or right, or waits.
- A move off the grid or into a blocked cell fails: the robot waits (a *wall bump*).
- Two robots never share a cell. When several robots move into one cell, a robot that stays there
  keeps it; otherwise the robot with the highest priority this tick gets it. Priority rotates with
  the tick (``(index - tick) mod n``) so that no robot is favoured forever. The others wait.
- Two robots never swap cells (an edge conflict): both wait.
- A robot may follow another that leaves its cell in the same tick, and robots in a cycle of three
  or more that all move one step rotate.
- A robot that waits because of another robot (vertex loser, swap, or blocked by a robot that
  could not leave) counts as one *collision attempt*. Failures cascade until a fixed point.

:func:`resolve_moves` runs the compiled kernel of :mod:`fleetmind.sim.kernels`;
:func:`resolve_moves_reference` is the same rules in numpy over ``(n_envs, n_robots)`` arrays,
with the kernel's arguments, kept as the reference the kernel is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim import kernels
from fleetmind.sim.grid import DELTAS, WAIT, action_error

_NOBODY_FROZEN = np.zeros((0, 0), dtype=bool)


@dataclass(frozen=True)
class MoveResult:
    """The outcome of resolving one joint action in a batch of worlds.

    Attributes:
        pos: ``(B, N, 2)`` int32 positions after the tick.
        moved: ``(B, N)`` bool, the robot changed cell.
        wall_bump: ``(B, N)`` bool, the robot tried to leave the grid or enter a blocked cell.
        conflict: ``(B, N)`` bool, the robot's move failed because of another robot.
    """

    pos: NDArray[np.int32]
    moved: NDArray[np.bool_]
    wall_bump: NDArray[np.bool_]
    conflict: NDArray[np.bool_]


def resolve_moves(
    pos: NDArray[np.int32],
    actions: NDArray[np.integer],
    blocked: NDArray[np.bool_],
    *,
    tick: int | NDArray[np.integer] = 0,
    frozen: NDArray[np.bool_] | None = None,
) -> MoveResult:
    """Resolve a joint action into a collision-free joint move (compiled).

    Args:
        pos: ``(B, N, 2)`` int positions (row, col); all distinct within a world.
        actions: ``(B, N)`` action ids 0..4.
        blocked: ``(H, W)`` bool, cells no robot may enter (shared by all worlds).
        tick: the current tick (scalar or ``(B,)``), used to rotate priorities.
        frozen: ``(B, N)`` bool, robots that cannot move this tick (broken, no battery).

    Returns:
        The joint move and the per-robot failure flags.

    Raises:
        ConfigError: an action id outside 0..4, or a robot outside the grid.
    """
    acts = np.asarray(actions)
    n_envs, n_robots = acts.shape
    ticks = np.broadcast_to(np.asarray(tick, dtype=np.int64), (n_envs,))
    new_pos = np.empty((n_envs, n_robots, 2), dtype=np.int32)
    flags = np.empty((3, n_envs, n_robots), dtype=bool)  # moved, wall bump, conflict
    code = kernels.resolve_moves(
        pos,
        acts,
        blocked,
        ticks,
        _NOBODY_FROZEN if frozen is None else frozen,
        new_pos,
        flags[0],
        flags[1],
        flags[2],
    )
    _raise_if_invalid(code, pos, acts, blocked.shape)
    return MoveResult(pos=new_pos, moved=flags[0], wall_bump=flags[1], conflict=flags[2])


def _raise_if_invalid(
    code: int, pos: NDArray[np.integer], acts: NDArray[np.integer], shape: tuple[int, ...]
) -> None:
    """The :class:`ConfigError` of a kernel's refusal (see :func:`kernels.resolve_moves`)."""
    if code == kernels.BAD_ACTION:
        raise action_error(acts, "actions")
    if code == kernels.OFF_GRID:
        raise ConfigError(f"positions: a robot stands outside the {shape[0]}x{shape[1]} grid")


def resolve_moves_reference(
    pos: NDArray[np.int32],
    actions: NDArray[np.integer],
    blocked: NDArray[np.bool_],
    ticks: NDArray[np.int64],
    frozen: NDArray[np.bool_] | None = None,
) -> MoveResult:
    """The numpy reference of the compiled kernel behind :func:`resolve_moves`.

    The arguments and the result are :func:`resolve_moves`'s, with the ticks as the kernel
    takes them: ``(B,)``, one per world.
    """
    n_envs, n_robots = actions.shape
    height, width = blocked.shape
    acts = np.asarray(actions, dtype=np.intp)
    if frozen is not None:
        acts = np.where(frozen, WAIT, acts)
    tgt = pos + DELTAS[acts]  # (B, N, 2)
    off_grid = (
        (tgt[..., 0] < 0) | (tgt[..., 0] >= height) | (tgt[..., 1] < 0) | (tgt[..., 1] >= width)
    )
    tgt = np.where(off_grid[..., None], pos, tgt)
    wall_bump = off_grid | blocked[tgt[..., 0], tgt[..., 1]]
    tgt = np.where(wall_bump[..., None], pos, tgt)

    env_base = (np.arange(n_envs, dtype=np.int64) * (height * width))[:, None]
    cur = (env_base + pos[..., 0].astype(np.int64) * width + pos[..., 1]).ravel()
    nxt = (env_base + tgt[..., 0].astype(np.int64) * width + tgt[..., 1]).ravel()
    # Lower rank = higher priority; rotates with the tick.
    rank = ((np.arange(n_robots, dtype=np.int64)[None, :] - ticks[:, None]) % n_robots).ravel()
    conflict = np.zeros(n_envs * n_robots, dtype=bool)

    # Who stands where now, for swap detection; -1 = nobody.
    occupant = np.full(n_envs * height * width, -1, dtype=np.int64)
    occupant[cur] = np.arange(n_envs * n_robots, dtype=np.int64)
    robot = np.arange(n_envs * n_robots, dtype=np.int64)

    while True:
        moving = nxt != cur
        if not moving.any():
            break
        # Vertex conflicts: sort by (target cell, stayer first, rank); the first per cell wins.
        key = nxt * (n_robots + 1) + np.where(moving, rank + 1, 0)
        order = np.argsort(key, kind="stable")
        sorted_cells = nxt[order]
        loses = np.zeros(order.shape[0], dtype=bool)
        loses[1:] = sorted_cells[1:] == sorted_cells[:-1]
        fail = np.zeros_like(moving)
        fail[order[loses]] = True
        # Swap conflicts: I move into your cell while you move into mine.
        other = occupant[nxt]
        has_other = moving & (other >= 0) & (other != robot)
        swap = np.zeros_like(moving)
        idx = np.flatnonzero(has_other)
        swap[idx] = nxt[other[idx]] == cur[idx]
        fail |= swap
        if not fail.any():
            break
        conflict |= fail
        nxt = np.where(fail, cur, nxt)

    new_flat = nxt.reshape(n_envs, n_robots) - env_base
    new_pos = np.stack([new_flat // width, new_flat % width], axis=-1).astype(np.int32)
    moved = (nxt != cur).reshape(n_envs, n_robots)
    return MoveResult(
        pos=new_pos,
        moved=moved,
        wall_bump=wall_bump & (acts != WAIT),
        conflict=conflict.reshape(n_envs, n_robots),
    )
