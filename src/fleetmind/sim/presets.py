"""Built-in maps, by name, and the warehouse builder that makes most of them.

Presets (each call builds a fresh :class:`~fleetmind.sim.grid.GridMap`):

* ``gridworld-4x4``: the 4x4 open grid of FIELD-NOTES §3.1, start ``(0, 0)``, station
  (the goal) ``(3, 3)``, no pickups.
* ``race-4x4``: the same grid with two starts, both ``(0, 0)`` (§3.2).
* ``warehouse-tiny`` (10x11, 2–4 robots), ``warehouse-small`` (20x30, 4–16 robots),
  ``warehouse-medium`` (40x60, tens of robots), ``warehouse-large`` (80x120, up to 1,000
  robots): :func:`warehouse_layout` with the settings in :data:`WAREHOUSE_SETTINGS`.

The warehouse layout follows RWARE and the League of Robot Runners warehouses: horizontal racks
(blocked cells) in a grid of blocks, aisles between rack rows, cross-aisles between blocks, a
corridor ring around the rack area and a dock on the left. The pickup cells are the free cells
beside a rack (as the ``S`` cells of LoRR maps); stations and chargers sit on the dock's outer
column, chargers at its two ends. Every free cell is reachable from every other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import numpy as np

from fleetmind.errors import ConfigError, MapError, check_range
from fleetmind.sim.grid import GridMap

__all__ = ["PRESETS", "WAREHOUSE_SETTINGS", "gridworld", "preset", "warehouse_layout"]


def gridworld(size: int = 4, *, robots: int = 1, name: str | None = None) -> GridMap:
    """An open ``size`` x ``size`` grid: every robot starts at ``(0, 0)``, the goal is the station.

    Args:
        size: side length, at least 2.
        robots: how many starts, all ``(0, 0)``.
        name: the map name (default ``gridworld-{size}x{size}``).

    Returns:
        The grid: no walls, no pickups, one station at ``(size - 1, size - 1)``.

    Raises:
        ConfigError: ``size`` below 2 or ``robots`` below 1.
    """
    check_range("size", size, low=2, where="gridworld")
    check_range("robots", robots, low=1, where="gridworld")
    empty = np.zeros((size, size), dtype=bool)
    stations = empty.copy()
    stations[size - 1, size - 1] = True
    return GridMap(
        name=name if name is not None else f"gridworld-{size}x{size}",
        blocked=empty.copy(),
        pickups=empty.copy(),
        stations=stations,
        chargers=empty.copy(),
        starts=((0, 0),) * robots,
    )


def _pack(length: int, item: int, gap: int) -> list[int]:
    """Offsets of as many ``item``-long pieces with ``gap`` between them as fit in ``length``.

    The pieces are centred in ``length`` (extra space goes to the ends).
    """
    count = (length + gap) // (item + gap)
    if count <= 0:
        return []
    used = count * item + (count - 1) * gap
    first = (length - used) // 2
    return [first + i * (item + gap) for i in range(count)]


def warehouse_layout(
    height: int,
    width: int,
    *,
    rack_depth: int = 2,
    block_len: int = 6,
    aisle: int = 1,
    cross_aisle: int = 1,
    dock: int = 3,
    stations: int = 4,
    chargers: int = 2,
    name: str = "warehouse",
) -> GridMap:
    """Build a warehouse: blocks of horizontal racks, aisles, a dock with stations and chargers.

    Columns ``0 .. dock - 1`` are the dock (free floor). Stations and chargers lie on column 0,
    spread evenly over the rows, chargers at the two ends. The rest of the grid holds racks:
    ``rack_depth`` x ``block_len`` blocked rectangles, ``aisle`` free rows apart vertically and
    ``cross_aisle`` free columns apart horizontally, inside a corridor ring (``aisle`` rows
    at top and bottom, ``cross_aisle`` columns at left and right). As many racks as fit are
    placed and centred. Free cells next to a rack (4-neighbourhood) are pickup cells.

    Example: ``warehouse_layout(10, 11, block_len=3, dock=2, stations=2, chargers=1)``, the
    ``warehouse-tiny`` preset (``#`` rack, ``x`` pickup, ``S`` station, ``C`` charger)::

        C..xxx.xxx.
        ..x###x###x
        ..x###x###x
        ...xxx.xxx.
        S.x###x###x
        ..x###x###x
        ...xxx.xxx.
        ..x###x###x
        ..x###x###x
        S..xxx.xxx.

    Args:
        height: rows of the grid.
        width: columns of the grid.
        rack_depth: rows of each rack.
        block_len: columns of each rack.
        aisle: free rows between rack rows (and above the first and below the last).
        cross_aisle: free columns between racks in a row (and left and right of the rack area).
        dock: free columns on the left, at least 1 (column 0 holds stations and chargers).
        stations: number of stations, at least 1.
        chargers: number of chargers, at least 0.
        name: the map name.

    Returns:
        The grid, with no ``starts`` (use :func:`fleetmind.sim.maps.start_cells`).

    Raises:
        ConfigError: a size is not positive, or the grid has no room for one rack or for the
            stations and chargers.
    """
    for field, value, low in (
        ("height", height, 1),
        ("width", width, 1),
        ("rack_depth", rack_depth, 1),
        ("block_len", block_len, 1),
        ("aisle", aisle, 1),
        ("cross_aisle", cross_aisle, 1),
        ("dock", dock, 1),
        ("stations", stations, 1),
        ("chargers", chargers, 0),
    ):
        check_range(field, value, low=low, where="warehouse_layout")
    if stations + chargers > height:
        raise ConfigError(
            f"warehouse_layout: {stations} stations and {chargers} chargers do not fit on "
            f"{height} rows (one per row of column 0)"
        )
    area_top, area_left = aisle, dock + cross_aisle
    area_h, area_w = height - 2 * aisle, width - area_left - cross_aisle
    rack_rows = _pack(area_h, rack_depth, aisle)
    rack_cols = _pack(area_w, block_len, cross_aisle)
    if not rack_rows or not rack_cols:
        raise ConfigError(
            f"warehouse_layout: a {height}x{width} grid has no room for one {rack_depth}x"
            f"{block_len} rack with aisle {aisle}, cross_aisle {cross_aisle} and dock {dock}"
        )
    blocked = np.zeros((height, width), dtype=bool)
    for top in rack_rows:
        for left in rack_cols:
            r, c = area_top + top, area_left + left
            blocked[r : r + rack_depth, c : c + block_len] = True
    # Free cells with a rack above, below, left or right.
    beside = np.zeros_like(blocked)
    beside[1:] |= blocked[:-1]
    beside[:-1] |= blocked[1:]
    beside[:, 1:] |= blocked[:, :-1]
    beside[:, :-1] |= blocked[:, 1:]
    pickups = beside & ~blocked
    # Stations and chargers: evenly spaced rows of column 0, chargers alternately at the ends.
    slots = np.round(np.linspace(0, height - 1, stations + chargers)).astype(int)
    order = sorted(range(len(slots)), key=lambda i: min(i, len(slots) - 1 - i))
    charger_slots = {int(slots[i]) for i in order[:chargers]}
    station_mask = np.zeros_like(blocked)
    charger_mask = np.zeros_like(blocked)
    for row in slots:
        target = charger_mask if int(row) in charger_slots else station_mask
        target[int(row), 0] = True
    pickups &= ~station_mask & ~charger_mask
    return GridMap(
        name=name,
        blocked=blocked,
        pickups=pickups,
        stations=station_mask,
        chargers=charger_mask,
    )


WAREHOUSE_SETTINGS: Final[dict[str, dict[str, Any]]] = {
    "warehouse-tiny": {
        "height": 10,
        "width": 11,
        "block_len": 3,
        "dock": 2,
        "stations": 2,
        "chargers": 1,
    },
    "warehouse-small": {
        "height": 20,
        "width": 30,
        "block_len": 5,
        "dock": 3,
        "stations": 4,
        "chargers": 2,
    },
    "warehouse-medium": {
        "height": 40,
        "width": 60,
        "block_len": 8,
        "dock": 4,
        "stations": 6,
        "chargers": 3,
    },
    # Two-wide aisles so that a thousand robots can pass each other.
    "warehouse-large": {
        "height": 80,
        "width": 120,
        "block_len": 10,
        "aisle": 2,
        "cross_aisle": 2,
        "dock": 5,
        "stations": 12,
        "chargers": 6,
    },
}
"""The :func:`warehouse_layout` arguments of each warehouse preset."""

PRESETS: Final[dict[str, Callable[[], GridMap]]] = {
    "gridworld-4x4": functools.partial(gridworld, 4, robots=1, name="gridworld-4x4"),
    "race-4x4": functools.partial(gridworld, 4, robots=2, name="race-4x4"),
    **{
        name: functools.partial(warehouse_layout, name=name, **settings)
        for name, settings in WAREHOUSE_SETTINGS.items()
    },
}
"""Preset name -> function building the map."""


def preset(name: str) -> GridMap:
    """Build the preset map called ``name``.

    Args:
        name: one of :data:`PRESETS`.

    Returns:
        A fresh grid.

    Raises:
        MapError: no preset has that name (the message lists them).
    """
    try:
        make = PRESETS[name]
    except KeyError:
        raise MapError(
            f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}",
            source=name,
        ) from None
    return make()
