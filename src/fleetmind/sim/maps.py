r"""Map formats: the fleetmind text map, MovingAI ``.map`` files and rware layout strings.

Every parser returns a :class:`~fleetmind.sim.grid.GridMap` or raises
:class:`~fleetmind.errors.MapError` naming the source, the 1-based line and the 1-based column at
fault. Nothing else escapes a parser, whatever the text.

The fleetmind text map, one character a cell, ``(row, col)`` = (line, column) of the map rows::

    #  or  @   wall / rack (blocked)
    .          floor
    x          shelf / pickup cell (free)
    S          station / drop-off cell (free)
    C          charger (free)
    R          robot start (free floor); starts are kept in reading order

Lines whose first non-blank character is ``;`` are comments and may appear anywhere. Blank lines
before the first and after the last row are ignored; a blank line between rows is an error.
Trailing whitespace (including ``\r``) is stripped from every line. All rows must have the same
length and at least one cell must be free. Example::

    ; a 3x5 corner of a warehouse
    #####
    S.Rx#
    C...#

MovingAI ``.map`` (https://movingai.com/benchmarks/formats.html), as used by the League of Robot
Runners: header lines ``type X``, ``height H``, ``width W`` (any order, each once), then ``map``,
then ``H`` rows of ``W`` characters. ``@ O T W`` are blocked, ``. G`` free, ``E`` a pickup point
(free) and ``S`` a station (free). Blank lines after the last row are ignored.
On the LoRR warehouse maps this legend makes the few ``E`` cells at the edges the pickups and
the many ``S`` cells beside the racks the stations (on sortation maps: ``E`` induct points,
``S`` chute sides).

rware layout strings (``rware.Warehouse(layout=...)``): ``x`` shelf -> pickup cell, ``.``
corridor, ``g`` goal -> station; upper case is accepted and every cell is free (robots drive under
shelves in rware). Whitespace is ignored: rware strips the string and deletes every space
(tabs are accepted here too). Unlike rware, a layout without a goal parses (see below).

A map without pickup or station cells parses fine (the 4x4 grid world has no pickups);
:func:`require_tasks` rejects such maps for uses that run orders.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import MapError, check_range, range_message
from fleetmind.sim.grid import Cell, GridMap
from fleetmind.sim.presets import PRESETS, preset

__all__ = [
    "MOVINGAI_LEGEND",
    "TEXT_LEGEND",
    "load_map",
    "parse_movingai",
    "parse_rware_layout",
    "parse_text_map",
    "require_tasks",
    "start_cells",
    "task_area",
]

logger = logging.getLogger(__name__)

# Cell kinds, the values of the lookup tables below.
_FLOOR: Final = 0
_WALL: Final = 1
_PICKUP: Final = 2
_STATION: Final = 3
_CHARGER: Final = 4
_START: Final = 5

TEXT_LEGEND: Final[dict[str, str]] = {
    "#": "wall",
    "@": "wall",
    ".": "floor",
    "x": "pickup",
    "S": "station",
    "C": "charger",
    "R": "robot start",
}
MOVINGAI_LEGEND: Final[dict[str, str]] = {
    "@": "wall",
    "O": "wall",
    "T": "wall",
    "W": "wall",
    ".": "floor",
    "G": "floor",
    "E": "pickup",
    "S": "station",
}
_RWARE_LEGEND: Final[dict[str, str]] = {
    "x": "pickup",
    "X": "pickup",
    ".": "floor",
    "g": "station",
    "G": "station",
}
_KIND_OF_NAME: Final[dict[str, int]] = {
    "wall": _WALL,
    "floor": _FLOOR,
    "pickup": _PICKUP,
    "station": _STATION,
    "charger": _CHARGER,
    "robot start": _START,
}
_MOVINGAI_TYPES: Final = frozenset({"octile", "octil", "4-connected", "8-connected", "tile"})


def _table(legend: dict[str, str]) -> NDArray[np.int8]:
    """A 128-entry lookup table from ASCII code to cell kind (-1: not in the legend)."""
    table = np.full(128, -1, dtype=np.int8)
    for char, name in legend.items():
        table[ord(char)] = _KIND_OF_NAME[name]
    return table


def _bad_char_pattern(legend: dict[str, str]) -> re.Pattern[str]:
    return re.compile("[^" + re.escape("".join(legend)) + "]")


@dataclass(frozen=True)
class _Format:
    """One map format's legend, its lookup table and the pattern of characters outside it."""

    legend: dict[str, str]
    table: NDArray[np.int8]
    bad: re.Pattern[str]

    @classmethod
    def of(cls, legend: dict[str, str]) -> _Format:
        return cls(legend, _table(legend), _bad_char_pattern(legend))


_TEXT: Final = _Format.of(TEXT_LEGEND)
_MOVINGAI: Final = _Format.of(MOVINGAI_LEGEND)
_RWARE: Final = _Format.of(_RWARE_LEGEND)


def _legend_text(legend: dict[str, str]) -> str:
    return ", ".join(f"{char!r} {name}" for char, name in legend.items())


def _lines(text: str) -> list[str]:
    r"""Split on ``\n`` only (so line numbers match an editor's) and strip a trailing ``\r``."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _build(rows: list[tuple[int, str]], *, source: str, fmt: _Format) -> GridMap:
    """Validate ``rows`` (pairs of 1-based line number and row text) and build the grid.

    Args:
        rows: the map rows with their line numbers, all of the same length already checked
            by the caller, at least one row.
        source: the file path or short name used in errors; the grid's name derives from it.
        fmt: the format's legend (for error messages), lookup table and bad-character pattern.

    Returns:
        The grid.

    Raises:
        MapError: a character is not in the legend, or no cell is free.
    """
    for lineno, row in rows:
        match = fmt.bad.search(row)
        if match is not None:
            raise MapError(
                f"unknown character {match.group()!r}; expected one of: {_legend_text(fmt.legend)}",
                source=source,
                line=lineno,
                column=match.start() + 1,
            )
    height, width = len(rows), len(rows[0][1])
    # Every character is ASCII now, so one byte a cell.
    codes = np.frombuffer("".join(row for _, row in rows).encode("ascii"), dtype=np.uint8)
    kinds = fmt.table[codes].reshape(height, width)
    blocked = kinds == _WALL
    if bool(blocked.all()):
        raise MapError("the map has no free cell", source=source, line=rows[0][0], column=1)
    starts: tuple[Cell, ...] = tuple((int(r), int(c)) for r, c in np.argwhere(kinds == _START))
    return GridMap(
        name=_name_of(source),
        blocked=blocked,
        pickups=kinds == _PICKUP,
        stations=kinds == _STATION,
        chargers=kinds == _CHARGER,
        starts=starts,
    )


def _check_rectangular(rows: list[tuple[int, str]], *, source: str, width: int) -> None:
    for lineno, row in rows:
        if len(row) != width:
            column = min(len(row), width) + 1
            raise MapError(
                f"row has {len(row)} cells, expected {width} (rows must all have the same length)",
                source=source,
                line=lineno,
                column=column,
            )


def _name_of(source: str) -> str:
    if source.startswith("<"):
        return source
    return Path(source).stem or source


def parse_text_map(text: str, *, source: str = "<text>") -> GridMap:
    """Parse a fleetmind text map (legend in the module docstring).

    Args:
        text: the map text.
        source: the file path or a short name, used in errors and (as a file stem) as the name.

    Returns:
        The grid, with the ``R`` cells as ``starts`` in reading order.

    Raises:
        MapError: empty map, blank line between rows, ragged rows, unknown character or no free
            cell; the message names ``source``, the line and the column.
    """
    rows: list[tuple[int, str]] = []
    blank_after_rows: int | None = None
    for lineno, raw in enumerate(_lines(text), start=1):
        line = raw.rstrip()
        if line.lstrip().startswith(";"):
            continue
        if not line:
            if rows and blank_after_rows is None:
                blank_after_rows = lineno
            continue
        if blank_after_rows is not None:
            raise MapError(
                "blank line inside the map (only comment lines may sit between rows)",
                source=source,
                line=blank_after_rows,
                column=1,
            )
        rows.append((lineno, line))
    if not rows:
        raise MapError("the map has no rows", source=source, line=1, column=1)
    _check_rectangular(rows, source=source, width=len(rows[0][1]))
    return _build(rows, source=source, fmt=_TEXT)


def _header_int(value: str, *, field: str, source: str, lineno: int, column: int) -> int:
    # Digits only (int() would also take "+3", " 3" or "3_0").
    if not re.fullmatch(r"[0-9]+", value):
        message = f"{field} must be a whole number, got {value!r}"
    elif int(value) < 1:
        message = range_message(field, int(value), low=1)
    else:
        return int(value)
    raise MapError(message, source=source, line=lineno, column=column)


def parse_movingai(text: str, *, source: str) -> GridMap:
    """Parse a MovingAI ``.map`` file (legend in the module docstring).

    Args:
        text: the file's text.
        source: the file path or a short name, used in errors and (as a file stem) as the name.

    Returns:
        The grid (MovingAI maps carry no robot starts).

    Raises:
        MapError: a missing, repeated or malformed header field, a row count or row length that
            differs from the header, an unknown character or no free cell; the message names
            ``source``, the line and the column.
    """
    lines = _lines(text)
    header: dict[str, tuple[int, str]] = {}
    index = 0
    map_line: int | None = None
    while index < len(lines):
        lineno, line = index + 1, lines[index]
        index += 1
        stripped = line.strip()
        if not stripped:
            continue
        column = len(line) - len(line.lstrip()) + 1
        parts = re.match(r"(\S+)\s*(.*)", stripped)
        assert parts is not None  # stripped is not empty
        key, value = parts.group(1), parts.group(2)
        value_column = column + parts.start(2)
        if key == "map" and not value:
            map_line = lineno
            break
        if key not in ("type", "height", "width"):
            expected = [f for f in ("type", "height", "width") if f not in header] + ["map"]
            raise MapError(
                f"unexpected header line {stripped[:40]!r}; expected "
                + " / ".join(repr(f) for f in expected),
                source=source,
                line=lineno,
                column=column,
            )
        if key in header:
            raise MapError(
                f"header field {key!r} repeated (first on line {header[key][0]})",
                source=source,
                line=lineno,
                column=column,
            )
        if not value:
            raise MapError(
                f"header field {key!r} has no value",
                source=source,
                line=lineno,
                column=column + len(key),
            )
        header[key] = (lineno, value)
        if key in ("height", "width"):
            _header_int(value, field=key, source=source, lineno=lineno, column=value_column)
        elif value not in _MOVINGAI_TYPES:
            logger.warning("%s:%d: unusual MovingAI map type %r", source, lineno, value)
    for field in ("type", "height", "width"):
        if field not in header:
            raise MapError(
                f"missing header field {field!r} (a MovingAI map starts with 'type', 'height', "
                "'width' and 'map' lines)",
                source=source,
                line=map_line if map_line is not None else len(lines),
                column=1,
            )
    if map_line is None:
        raise MapError(
            "missing 'map' line after the header", source=source, line=len(lines), column=1
        )
    height = int(header["height"][1])
    width = int(header["width"][1])
    body = lines[index:]
    while body and not body[-1].strip():
        body.pop()
    rows = [(index + 1 + i, row) for i, row in enumerate(body)]
    if len(rows) != height:
        if len(rows) < height:
            at = rows[-1][0] + 1 if rows else map_line + 1
            message = f"the header says height {height} but the map has {len(rows)} rows"
        else:
            at = rows[height][0]
            message = f"the header says height {height} but the map has more rows"
        raise MapError(message, source=source, line=at, column=1)
    _check_rectangular(rows, source=source, width=width)
    return _build(rows, source=source, fmt=_MOVINGAI)


def parse_rware_layout(text: str, *, source: str = "<rware>") -> GridMap:
    r"""Parse an rware layout string (legend in the module docstring).

    Args:
        text: the layout, e.g. ``"x.x\n...\n.g."``.
        source: a short name, used in errors and as the map name.

    Returns:
        The grid: ``x`` cells are pickups, ``g`` cells stations, every cell free.

    Raises:
        MapError: empty layout, ragged rows or an unknown character; the message names
            ``source``, the line and the column (counted in the original text).
    """
    lines = _lines(text)
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    if not nonblank:
        raise MapError("the layout has no rows", source=source, line=1, column=1)
    rows: list[tuple[int, str]] = []
    width: int | None = None
    for i in range(nonblank[0], nonblank[-1] + 1):
        # rware strips the layout and deletes every space; keep each kept cell's column.
        columns = [col for col, char in enumerate(lines[i], start=1) if not char.isspace()]
        row = "".join(lines[i][col - 1] for col in columns)
        match = _RWARE.bad.search(row)
        if match is not None:
            raise MapError(
                f"unknown character {match.group()!r}; expected one of: "
                + _legend_text(_RWARE_LEGEND),
                source=source,
                line=i + 1,
                column=columns[match.start()],
            )
        if width is None:
            width = len(row)
        if len(row) != width:
            short = len(row) < width
            raise MapError(
                f"row has {len(row)} cells, expected {width} (rows must all have the same length)",
                source=source,
                line=i + 1,
                column=(columns[-1] + 1 if columns else 1) if short else columns[width],
            )
        rows.append((i + 1, row))
    return _build(rows, source=source, fmt=_RWARE)


_RWARE_ONLY: Final = re.compile(r"[xXgG.\s]+")


def _expected(spec: str) -> str:
    return (
        f"cannot load map {spec[:80]!r}: expected a preset name ("
        + ", ".join(sorted(PRESETS))
        + "), a MovingAI '.map' file, a fleetmind text map file, "
        "or an inline rware layout (several lines of 'x', '.', 'g')"
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise MapError(
            f"not UTF-8 text (byte {error.start}): {error.reason}", source=str(path)
        ) from error
    except OSError as error:
        raise MapError(
            f"cannot read the file: {error.strerror or error}", source=str(path)
        ) from error


def load_map(spec: str | os.PathLike[str]) -> GridMap:
    """Load a map from a preset name, a file or an inline rware layout.

    Tried in this order: a preset name (see :data:`fleetmind.sim.presets.PRESETS`); a string
    with a newline holding only ``x . g`` and whitespace (an rware layout); a path ending in
    ``.map`` (MovingAI); any other existing file (fleetmind text map).

    Args:
        spec: the preset name, path or layout string.

    Returns:
        The grid.

    Raises:
        MapError: the spec is none of the above (the message lists the presets), or the file
            does not parse.
    """
    if isinstance(spec, str):
        if spec in PRESETS:
            return preset(spec)
        if "\n" in spec:
            if _RWARE_ONLY.fullmatch(spec):
                return parse_rware_layout(spec)
            raise MapError(_expected(spec), source="<inline>")
    path = Path(spec)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):  # e.g. a NUL byte or a name too long for the OS
        is_file = False
    if path.suffix.lower() == ".map":
        if not is_file:
            raise MapError("no such MovingAI map file", source=str(path))
        return parse_movingai(_read(path), source=str(path))
    if is_file:
        return parse_text_map(_read(path), source=str(path))
    raise MapError(_expected(str(spec)), source=str(spec)[:80])


def require_tasks(grid: GridMap) -> None:
    """Check that ``grid`` can run orders: it has at least one pickup and one station cell.

    Args:
        grid: the map.

    Raises:
        MapError: the map has no pickup cells, no station cells, or no station that a pickup
            reaches.
    """
    if not bool(grid.pickups.any()):
        raise MapError(
            f"map {grid.name!r} has no pickup cells (orders need somewhere to pick up)",
            source=grid.name,
        )
    if not bool(grid.stations.any()):
        raise MapError(
            f"map {grid.name!r} has no station cells (orders need somewhere to drop off)",
            source=grid.name,
        )
    if not bool(task_area(grid).any()):
        raise MapError(
            f"map {grid.name!r}: no station can be reached from any pickup (walls part them; "
            f"{int(grid.pickups.sum())} pickup and {int(grid.stations.sum())} station cells)",
            source=grid.name,
        )


def task_area(grid: GridMap) -> NDArray[np.bool_]:
    """``(H, W)`` bool: free cells from which both a pickup and a station can be reached.

    Robots move between 4-neighbouring free cells; a robot outside this area can serve no order.
    """
    from scipy import ndimage

    labels, _ = ndimage.label(grid.free)  # 4-connectivity by default
    both = np.intersect1d(labels[grid.pickups], labels[grid.stations])
    both = both[both > 0]
    return np.isin(labels, both)


def start_cells(grid: GridMap, n_robots: int, *, rng: np.random.Generator) -> NDArray[np.int32]:
    """Choose the start cell of each robot.

    The map's own ``starts`` come first, in order (repeats allowed: the race map starts both
    robots on one cell). The remaining robots get distinct random free cells that are neither
    a start, a station nor a pickup; when those run out, random station and pickup cells follow.

    Args:
        grid: the map.
        n_robots: how many robots, at least 0.
        rng: the random source (only the extra cells are random).

    Returns:
        ``(n_robots, 2)`` int32 array of ``(row, col)``.

    Raises:
        ConfigError: ``n_robots`` is negative.
        MapError: a map start is not a free cell, or there are more robots than cells for them.
    """
    check_range("n_robots", n_robots, low=0)
    given = list(grid.starts[:n_robots])
    for cell in given:
        if not grid.is_free(cell):
            raise MapError(f"start cell {cell} is not a free cell", source=grid.name)
    n_extra = n_robots - len(given)
    out = np.zeros((n_robots, 2), dtype=np.int32)
    if given:
        out[: len(given)] = np.asarray(given, dtype=np.int32)
    if n_extra == 0:
        return out
    available = grid.free.copy()
    for cell in grid.starts:
        if grid.in_bounds(cell):
            available[cell] = False
    plain = np.argwhere(available & ~grid.stations & ~grid.pickups)
    tasked = np.argwhere(available & (grid.stations | grid.pickups))
    if n_extra > len(plain) + len(tasked):
        raise MapError(
            f"map {grid.name!r} has room for {len(given) + len(plain) + len(tasked)} robots "
            f"({len(plain) + len(tasked)} free cells besides its {len(grid.starts)} starts), "
            f"asked for {n_robots}",
            source=grid.name,
        )
    chosen = plain[rng.permutation(len(plain))[:n_extra]]
    if len(chosen) < n_extra:
        more = tasked[rng.permutation(len(tasked))[: n_extra - len(chosen)]]
        chosen = np.concatenate([chosen, more])
    out[len(given) :] = chosen
    return out
