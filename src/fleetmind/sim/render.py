"""Pictures of a warehouse: ASCII text, RGB arrays and animated GIFs.

Robots are given by their cells, ``positions`` of shape ``(n_robots, 2)`` in ``(row, col)``;
robot ``i`` is drawn with the ``i``-th symbol or colour, so a robot keeps its look across frames.

ASCII legend (a map without robots renders as a valid fleetmind text map)::

    #  wall      .  floor    x  pickup    S  station    C  charger
    +  target of some robot (on an empty cell)
    a b d ...  robot i, ``ROBOT_SYMBOLS[i % 23]``; upper case while carrying a load
    *  two or more robots on one cell

The letters ``c``, ``s`` and ``x`` are left out of :data:`ROBOT_SYMBOLS` so that no robot, in
either case, looks like a pickup, station or charger.

RGB pictures have ``cell_px`` x ``cell_px`` pixels a cell: robots are discs in their own colour
(:func:`robot_colours`), a carried load is a dark square in the disc, a target is a square ring
in its robot's colour, and highlighted cells get a red outline.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, MapError, check_range
from fleetmind.sim.grid import Cell, GridMap

__all__ = ["MAP_COLOURS", "ROBOT_SYMBOLS", "ascii", "rgb", "robot_colours", "save_gif"]

logger = logging.getLogger(__name__)

Cells = NDArray[np.integer[Any]] | Sequence[Cell]
"""Cells as an ``(n, 2)`` integer array or a sequence of ``(row, col)`` pairs."""

ROBOT_SYMBOLS: Final = "abdefghijklmnopqrtuvwyz"

MAP_COLOURS: Final[dict[str, tuple[int, int, int]]] = {
    "floor": (236, 236, 232),
    "grid": (214, 214, 208),
    "wall": (64, 64, 72),
    "pickup": (214, 190, 140),
    "station": (120, 190, 120),
    "charger": (240, 212, 80),
    "load": (30, 30, 30),
    "highlight": (230, 20, 20),
}
"""RGB colour of each map feature in :func:`rgb`."""

_GOLDEN: Final = 0.618033988749895


def robot_colours(n: int) -> NDArray[np.uint8]:
    """Distinct, deterministic colours for ``n`` robots.

    Hues step by the golden ratio; saturation and value cycle over three levels each, so
    neighbours in id order differ strongly and the first thousand colours are all different.

    Args:
        n: number of robots.

    Returns:
        ``(n, 3)`` uint8 RGB.
    """
    i = np.arange(n)
    hue = (i * _GOLDEN) % 1.0
    sat = np.array([0.9, 0.6, 0.75])[i % 3]
    val = np.array([0.95, 0.75, 0.85])[(i // 3) % 3]
    # HSV -> RGB, vectorised (as colorsys.hsv_to_rgb).
    sector = np.floor(hue * 6.0)
    frac = hue * 6.0 - sector
    p = val * (1.0 - sat)
    q = val * (1.0 - sat * frac)
    t = val * (1.0 - sat * (1.0 - frac))
    choices = [
        np.stack([val, t, p], axis=1),
        np.stack([q, val, p], axis=1),
        np.stack([p, val, t], axis=1),
        np.stack([p, q, val], axis=1),
        np.stack([t, p, val], axis=1),
        np.stack([val, p, q], axis=1),
    ]
    index = (sector.astype(np.int64) % 6)[:, None]
    out = np.zeros((n, 3))
    for k, choice in enumerate(choices):
        out = np.where(index == k, choice, out)
    return np.round(out * 255.0).astype(np.uint8)


def _positions(grid: GridMap, positions: Cells) -> NDArray[np.int64]:
    pos = np.asarray(positions, dtype=np.int64)
    if pos.size == 0:
        return pos.reshape(0, 2)
    if pos.ndim != 2 or pos.shape[1] != 2:
        raise ConfigError(f"positions must have shape (n_robots, 2), got {pos.shape}")
    h, w = grid.shape
    off = (pos[:, 0] < 0) | (pos[:, 0] >= h) | (pos[:, 1] < 0) | (pos[:, 1] >= w)
    if bool(off.any()):
        i = int(np.argmax(off))
        raise MapError(
            f"robot {i} at {tuple(int(v) for v in pos[i])} is off the {h}x{w} map",
            source=grid.name,
        )
    return pos


def _carrying(carrying: Sequence[bool] | NDArray[np.bool_] | None, n: int) -> NDArray[np.bool_]:
    if carrying is None:
        return np.zeros(n, dtype=bool)
    out = np.asarray(carrying, dtype=bool).reshape(-1)
    if out.shape != (n,):
        raise ConfigError(f"carrying must have one flag per robot ({n}), got shape {out.shape}")
    return out


def _targets(
    grid: GridMap, targets: Cells | Sequence[Cell | None] | None, n: int
) -> list[tuple[int, int, int]]:
    """``(robot, row, col)`` of each robot that has a target; negative rows/cols mean none."""
    if targets is None:
        return []
    if len(targets) != n:
        raise ConfigError(f"targets must have one entry per robot ({n}), got {len(targets)}")
    out: list[tuple[int, int, int]] = []
    for i, target in enumerate(targets):
        if target is None:
            continue
        r, c = int(target[0]), int(target[1])
        if r < 0 or c < 0:
            continue
        if not grid.in_bounds((r, c)):
            raise MapError(f"target {(r, c)} of robot {i} is off the map", source=grid.name)
        out.append((i, r, c))
    return out


def _robots(
    grid: GridMap,
    positions: Cells,
    carrying: Sequence[bool] | NDArray[np.bool_] | None,
    targets: Cells | Sequence[Cell | None] | None,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], list[tuple[int, int, int]]]:
    """The robots of a drawing, checked: positions, load flags, ``(robot, row, col)`` targets."""
    pos = _positions(grid, positions)
    n = len(pos)
    return pos, _carrying(carrying, n), _targets(grid, targets, n)


def ascii(
    grid: GridMap,
    positions: Cells,
    *,
    carrying: Sequence[bool] | NDArray[np.bool_] | None = None,
    targets: Cells | Sequence[Cell | None] | None = None,
) -> str:
    r"""Draw the map and robots as text, one line per row (legend in the module docstring).

    Args:
        grid: the map.
        positions: ``(n_robots, 2)`` robot cells.
        carrying: ``(n_robots,)`` flags, True for a robot carrying a load.
        targets: each robot's target cell, or ``None`` / a negative cell for none.

    Returns:
        The picture, rows joined by ``\n`` (no trailing newline).

    Raises:
        ConfigError: an argument has the wrong shape.
        MapError: a robot or target is off the map.
    """
    pos, loaded, goals = _robots(grid, positions, carrying, targets)
    n = len(pos)
    chars = np.full(grid.shape, ".", dtype="<U1")
    chars[grid.pickups] = "x"
    chars[grid.stations] = "S"
    chars[grid.chargers] = "C"
    chars[grid.blocked] = "#"
    for _, r, c in goals:
        chars[r, c] = "+"
    seen: set[Cell] = set()
    for i in range(n):
        cell = (int(pos[i, 0]), int(pos[i, 1]))
        symbol = ROBOT_SYMBOLS[i % len(ROBOT_SYMBOLS)]
        chars[cell] = "*" if cell in seen else symbol.upper() if loaded[i] else symbol
        seen.add(cell)
    return "\n".join("".join(row) for row in chars)


def _disc(px: int) -> NDArray[np.bool_]:
    if px < 3:
        return np.ones((px, px), dtype=bool)
    centre = (px - 1) / 2.0
    yy, xx = np.mgrid[0:px, 0:px]
    disc: NDArray[np.bool_] = (yy - centre) ** 2 + (xx - centre) ** 2 <= (0.42 * px) ** 2
    return disc


def _square(px: int, side: int) -> NDArray[np.bool_]:
    mask = np.zeros((px, px), dtype=bool)
    lo = (px - side) // 2
    mask[lo : lo + side, lo : lo + side] = True
    return mask


def _ring(px: int, inset: int, width: int) -> NDArray[np.bool_]:
    outer = _square(px, px - 2 * inset)
    inner = _square(px, max(px - 2 * inset - 2 * width, 0))
    return outer & ~inner


def _highlight_mask(
    grid: GridMap, highlight: Iterable[Cell] | NDArray[np.bool_] | None
) -> NDArray[np.bool_]:
    mask = np.zeros(grid.shape, dtype=bool)
    if highlight is None:
        return mask
    if isinstance(highlight, np.ndarray) and highlight.dtype == np.bool_:
        if highlight.shape != grid.shape:
            raise ConfigError(f"highlight mask has shape {highlight.shape}, the map {grid.shape}")
        return highlight.copy()
    for cell in highlight:
        r, c = int(cell[0]), int(cell[1])
        if not grid.in_bounds((r, c)):
            raise MapError(f"highlighted cell {(r, c)} is off the map", source=grid.name)
        mask[r, c] = True
    return mask


def rgb(
    grid: GridMap,
    positions: Cells,
    *,
    carrying: Sequence[bool] | NDArray[np.bool_] | None = None,
    targets: Cells | Sequence[Cell | None] | None = None,
    highlight: Iterable[Cell] | NDArray[np.bool_] | None = None,
    cell_px: int = 8,
) -> NDArray[np.uint8]:
    """Draw the map and robots as an RGB image.

    Args:
        grid: as for :func:`ascii`.
        positions: as for :func:`ascii`.
        carrying: as for :func:`ascii`.
        targets: as for :func:`ascii`.
        highlight: cells to outline in red, as cells or an ``(H, W)`` bool mask.
        cell_px: pixels per cell side, at least 1.

    Returns:
        ``(H * cell_px, W * cell_px, 3)`` uint8 image.

    Raises:
        ConfigError: ``cell_px`` below 1 or an argument with the wrong shape.
        MapError: a robot, target or highlighted cell is off the map.
    """
    check_range("cell_px", cell_px, low=1)
    pos, loaded, goals = _robots(grid, positions, carrying, targets)
    n = len(pos)
    outline = _highlight_mask(grid, highlight)
    h, w = grid.shape
    px = cell_px

    kind = np.zeros(grid.shape, dtype=np.int64)  # index into palette
    kind[grid.pickups] = 1
    kind[grid.stations] = 2
    kind[grid.chargers] = 3
    kind[grid.blocked] = 4
    palette = np.array(
        [MAP_COLOURS[k] for k in ("floor", "pickup", "station", "charger", "wall")],
        dtype=np.uint8,
    )
    image = np.repeat(np.repeat(palette[kind], px, axis=0), px, axis=1)
    # cells[r, c] is a (px, px, 3) view of cell (r, c) of the image.
    cells = image.reshape(h, px, w, px, 3).transpose(0, 2, 1, 3, 4)
    if px >= 6:  # thin grid lines on free cells
        free = ~grid.blocked
        cells[free, -1, :] = MAP_COLOURS["grid"]
        cells[free, :, -1] = MAP_COLOURS["grid"]
    colours = robot_colours(n)

    if goals and px >= 4:
        ring = _ring(px, px // 5, max(1, px // 10))
        for i, r, c in goals:
            cells[r, c][ring] = colours[i]
    if n:
        disc = _disc(px)
        rows, cols = pos[:, 0], pos[:, 1]
        # Fancy indexing copies; assign the blended blocks back (last robot wins a shared cell).
        blocks = cells[rows, cols]
        blocks[:, disc] = colours[:, None, :]
        if bool(loaded.any()) and px >= 3:
            load = _square(px, max(1, px // 3))
            blocks[loaded[:, None, None] & load[None, :, :]] = MAP_COLOURS["load"]
        cells[rows, cols] = blocks
    if bool(outline.any()):
        ring = _ring(px, 0, max(1, px // 8))
        cells[outline] = np.where(
            ring[None, :, :, None],
            np.array(MAP_COLOURS["highlight"], dtype=np.uint8),
            cells[outline],
        )
    return image


def save_gif(
    frames: Sequence[NDArray[np.uint8]], path: str | os.PathLike[str], *, fps: float = 8
) -> Path:
    """Write ``frames`` as a looping animated GIF with Pillow.

    Pillow drops a frame identical to the one before it and adds its time to that frame, so the
    file may hold fewer frames than given while playing for the same total time.

    Args:
        frames: ``(H, W, 3)`` uint8 images, all of one shape (e.g. from :func:`rgb`).
        path: the file to write; missing parent folders are created.
        fps: frames per second (GIF stores delays in hundredths of a second).

    Returns:
        The path written.

    Raises:
        ConfigError: no frames, a frame of the wrong shape or dtype, or ``fps`` not positive.
    """
    from PIL import Image  # Pillow is only needed here; keep `import fleetmind.sim` light.

    if not frames:
        raise ConfigError("save_gif needs at least one frame")
    check_range("fps", fps, above=0)
    first = np.asarray(frames[0])
    for k, frame in enumerate(frames):
        array = np.asarray(frame)
        if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3:
            raise ConfigError(
                f"frame {k} must be an (H, W, 3) uint8 array, got {array.dtype} {array.shape}"
            )
        if array.shape != first.shape:
            raise ConfigError(f"frame {k} has shape {array.shape}, frame 0 has {first.shape}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.ascontiguousarray(frame), mode="RGB") for frame in frames]
    duration = max(10, round(1000.0 / fps))
    images[0].save(
        out, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0
    )
    logger.debug("wrote %d frames to %s", len(images), out)
    return out
