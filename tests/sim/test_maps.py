"""Map parsers, loading, start cells and presets."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.errors import ConfigError, MapError
from fleetmind.sim.grid import GridMap
from fleetmind.sim.maps import (
    load_map,
    parse_movingai,
    parse_rware_layout,
    parse_text_map,
    require_tasks,
    start_cells,
)
from fleetmind.sim.presets import PRESETS, preset, warehouse_layout

LORR = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lorr" / "maps"

# name: (height, width, blocked '@', pickups 'E', stations 'S'), counted from the files.
LORR_MAPS = {
    "warehouse_small.map": (33, 57, 604, 40, 342),
    "warehouse_large.map": (140, 500, 31414, 352, 25250),
    "sortation_large.map": (140, 500, 15680, 620, 31296),
    "random-64-64-10.map": (64, 64, 409, 0, 0),
}


def components(grid: GridMap) -> int:
    """Number of 4-connected components of the free cells, by breadth-first search."""
    h, w = grid.shape
    seen = np.zeros(grid.shape, dtype=bool)
    count = 0
    for start in grid.free_cells():
        if seen[start]:
            continue
        count += 1
        seen[start] = True
        queue = deque([start])
        while queue:
            r, c = queue.popleft()
            for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= nr < h and 0 <= nc < w and not grid.blocked[nr, nc] and not seen[nr, nc]:
                    seen[nr, nc] = True
                    queue.append((nr, nc))
    return count


def where(error: pytest.ExceptionInfo[MapError]) -> tuple[str, int | None, int | None]:
    return error.value.source, error.value.line, error.value.column


# --- fleetmind text maps ---------------------------------------------------------------------


def test_text_map_legend_starts_comments_and_blank_edges() -> None:
    text = "\n; head\n#@.xSC\r\nR....x\n; between rows\n.R..S.\n\n\n"
    grid = parse_text_map(text, source="m.txt")
    assert grid.shape == (3, 6)
    assert grid.name == "m"
    assert grid.blocked[0].tolist() == [True, True, False, False, False, False]
    assert grid.pickup_cells() == [(0, 3), (1, 5)]
    assert grid.station_cells() == [(0, 4), (2, 4)]
    assert grid.charger_cells() == [(0, 5)]
    assert grid.starts == ((1, 0), (2, 1))
    assert not grid.blocked[1, 0]


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("...\n..\n", 2, 3, "same length"),
        ("...\n....\n", 2, 4, "same length"),
        ("..\n.q\n", 2, 2, "unknown character 'q'"),
        ("; c\n#.#\n# #\n", 3, 2, "unknown character ' '"),
        ("; all walls\n##\n@#\n", 2, 1, "no free cell"),
        ("..\n\n..\n", 2, 1, "blank line inside"),
        ("\n; only a comment\n\n", 1, 1, "no rows"),
        ("", 1, 1, "no rows"),
        ("..\n.\u00e9\n", 2, 2, "unknown character '\u00e9'"),
        ("..\n.\u2028\n", 2, 2, "same length"),  # U+2028 is whitespace: stripped
    ],
)
def test_text_map_errors_name_line_and_column(
    text: str, line: int, column: int, words: str
) -> None:
    with pytest.raises(MapError, match=words) as error:
        parse_text_map(text, source="bad.txt")
    assert where(error) == ("bad.txt", line, column)
    assert str(error.value).startswith(f"bad.txt:{line}:{column}: ")


# --- MovingAI ---------------------------------------------------------------------------------

GOOD_MOVINGAI = "type octile\nheight 3\nwidth 4\nmap\n@.E.\nO.GS\nTW..\n"


def test_movingai_legend() -> None:
    grid = parse_movingai(GOOD_MOVINGAI + "\n\n", source="dir/good.map")
    assert grid.name == "good"
    assert grid.shape == (3, 4)
    assert grid.blocked.tolist() == [
        [True, False, False, False],
        [True, False, False, False],
        [True, True, False, False],
    ]
    assert grid.pickup_cells() == [(0, 2)]
    assert grid.station_cells() == [(1, 3)]
    assert grid.starts == ()


def test_movingai_header_in_any_order_and_crlf() -> None:
    text = "height 1\r\ntype octile\r\nwidth 2\r\nmap\r\n.S\r\n"
    grid = parse_movingai(text, source="x.map")
    assert grid.shape == (1, 2)
    assert grid.station_cells() == [(0, 1)]


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        # header/size mismatch: too few rows, too many rows, a short row, a long row
        ("type octile\nheight 3\nwidth 2\nmap\n..\n..\n", 7, 1, "height 3 but the map has 2"),
        ("type octile\nheight 1\nwidth 2\nmap\n..\n..\n", 6, 1, "more rows"),
        ("type octile\nheight 2\nwidth 3\nmap\n...\n..\n", 6, 3, "expected 3"),
        ("type octile\nheight 2\nwidth 3\nmap\n....\n...\n", 5, 4, "expected 3"),
        ("type octile\nheight 1\nwidth 2\nmap\n", 5, 1, "height 1 but the map has 0"),
        # missing header fields
        ("type octile\nheight 1\nmap\n..\n", 3, 1, "missing header field 'width'"),
        ("height 1\nwidth 2\nmap\n..\n", 3, 1, "missing header field 'type'"),
        ("type octile\nheight 1\nwidth 2\n", 4, 1, "missing 'map' line"),
        ("", 1, 1, "missing header field 'type'"),
        # non-integer and bad values
        ("type octile\nheight abc\nwidth 2\nmap\n..\n", 2, 8, "height must be a whole number"),
        ("type octile\nheight 2.5\nwidth 2\nmap\n..\n", 2, 8, "height must be a whole number"),
        ("type octile\nheight 1\nwidth  -2\nmap\n..\n", 3, 8, "width must be a whole number"),
        ("type octile\nheight 0\nwidth 2\nmap\n", 2, 8, "height must be at least 1, got 0"),
        ("type octile\nheight\nwidth 2\nmap\n..\n", 2, 7, "'height' has no value"),
        ("type octile\nheight 1\nheight 1\nwidth 2\nmap\n..\n", 3, 1, "repeated"),
        ("type octile\ncolour red\n", 2, 1, "unexpected header line"),
        # body
        ("type octile\nheight 2\nwidth 2\nmap\n..\n.x\n", 6, 2, "unknown character 'x'"),
        ("type octile\nheight 1\nwidth 2\nmap\n@T\n", 5, 1, "no free cell"),
    ],
)
def test_movingai_errors_name_line_and_column(
    text: str, line: int, column: int, words: str
) -> None:
    with pytest.raises(MapError, match=words) as error:
        parse_movingai(text, source="bad.map")
    assert where(error) == ("bad.map", line, column)


@pytest.mark.parametrize("name", sorted(LORR_MAPS))
def test_lorr_maps_load_with_sizes_and_counts(name: str) -> None:
    path = LORR / name
    if not path.is_file():
        pytest.skip(f"{path} not found: the shared LoRR maps sit in ../shared beside the checkout")
    height, width, blocked, pickups, stations = LORR_MAPS[name]
    grid = load_map(path)
    assert grid.shape == (height, width)
    assert grid.name == name.removesuffix(".map")
    assert int(grid.blocked.sum()) == blocked
    assert int(grid.pickups.sum()) == pickups
    assert int(grid.stations.sum()) == stations
    assert not bool((grid.blocked & (grid.pickups | grid.stations)).any())
    assert int(grid.free.sum()) == height * width - blocked
    if pickups:
        require_tasks(grid)
    else:
        with pytest.raises(MapError, match="has no pickup cells"):
            require_tasks(grid)


# --- rware layouts ----------------------------------------------------------------------------


def test_rware_layout_strips_like_rware() -> None:
    layout = """
        x.X
        . . .
        .gG
    """
    grid = parse_rware_layout(layout)
    assert grid.shape == (3, 3)
    assert not bool(grid.blocked.any())
    assert grid.pickup_cells() == [(0, 0), (0, 2)]
    assert grid.station_cells() == [(2, 1), (2, 2)]


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("x.x\n..\n", 2, 3, "expected 3"),
        ("x.x\n  x . x .\n", 2, 9, "expected 3"),
        ("\n  x.x\n  x#x\n", 3, 4, "unknown character '#'"),
        ("x.x\nx x #\n", 2, 5, "unknown character '#'"),
        ("x.x\n\nx.x\n", 2, 1, "expected 3"),
        (" \n\t\n", 1, 1, "no rows"),
    ],
)
def test_rware_errors_name_line_and_column(text: str, line: int, column: int, words: str) -> None:
    with pytest.raises(MapError, match=words) as error:
        parse_rware_layout(text, source="lay")
    assert where(error) == ("lay", line, column)


def test_rware_layout_agrees_with_rware() -> None:
    warehouse = pytest.importorskip("rware.warehouse")
    layout = "x.x.g\nx.x..\n.....\nx.x.g\n"
    env = warehouse.Warehouse(
        shelf_columns=1,
        column_height=1,
        shelf_rows=1,
        n_agents=1,
        msg_bits=0,
        sensor_range=1,
        request_queue_size=1,
        max_inactivity_steps=None,
        max_steps=None,
        reward_type=warehouse.RewardType.GLOBAL,
        layout=layout,
    )
    grid = parse_rware_layout(layout)
    assert grid.shape == tuple(env.grid_size)
    # rware keeps goals as (x, y) = (col, row); shelves stand where there is no highway.
    assert sorted((y, x) for x, y in env.goals) == grid.station_cells()
    assert np.array_equal(env.highways == 0, grid.pickups)


# --- any text: a GridMap or a MapError --------------------------------------------------------

MAP_CHARS = "#@.xSCRETGOWg \t\n\r;é\u2028\x00"


def _outcome(parse: Callable[[str], GridMap], text: str) -> None:
    failure: MapError | None = None
    try:
        grid = parse(text)
    except MapError as error:
        failure = error
    if failure is not None:
        assert failure.line is None or failure.line >= 1
        assert failure.column is None or failure.column >= 1
        return
    assert isinstance(grid, GridMap)
    h, w = grid.shape
    assert h >= 1
    assert w >= 1
    assert bool(grid.free.any())
    for mask in (grid.pickups, grid.stations, grid.chargers):
        assert mask.shape == (h, w)
        assert not bool((mask & grid.blocked).any())


@st.composite
def grids(draw: st.DrawFn, alphabet: str) -> list[str]:
    """Rectangular rows over ``alphabet``, sometimes broken by one edit."""
    height, width = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    row = st.text(alphabet=alphabet, min_size=width, max_size=width)
    rows = draw(st.lists(row, min_size=height, max_size=height))
    if draw(st.booleans()):
        k = draw(st.integers(0, height - 1))
        rows[k] = draw(st.one_of(st.text(max_size=6), st.text(alphabet=MAP_CHARS, max_size=6)))
    return rows


texts = st.one_of(
    st.text(),
    st.text(alphabet=MAP_CHARS),
    grids("#@.xSCR").map("\n".join),
)


@settings(max_examples=150, deadline=None)
@given(texts)
def test_text_parser_total(text: str) -> None:
    _outcome(lambda t: parse_text_map(t, source="h"), text)


@settings(max_examples=150, deadline=None)
@given(st.one_of(texts, grids("xX.gG").map("\n".join)))
def test_rware_parser_total(text: str) -> None:
    _outcome(parse_rware_layout, text)


@st.composite
def movingai_texts(draw: st.DrawFn) -> str:
    """A MovingAI file, usually well formed, with a random header value or body edit."""
    rows = draw(grids("@.ESGOTW"))
    height, width = str(len(rows)), str(len(rows[0]))
    if draw(st.integers(0, 3)) == 0:
        height = draw(st.one_of(st.integers(-1, 6).map(str), st.text(max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        width = draw(st.one_of(st.integers(-1, 6).map(str), st.text(max_size=3)))
    header = draw(st.permutations(["type octile", f"height {height}", f"width {width}"]))
    if draw(st.integers(0, 5)) == 0:
        header = draw(st.lists(st.sampled_from(header), max_size=4))
    return "\n".join([*header, "map", *rows])


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=MAP_CHARS + "typehigwdm0123456789"), movingai_texts()))
def test_movingai_parser_total(text: str) -> None:
    _outcome(lambda t: parse_movingai(t, source="h.map"), text)


# --- load_map ---------------------------------------------------------------------------------


def test_load_map_dispatches(tmp_path: Path) -> None:
    assert load_map("warehouse-small").name == "warehouse-small"
    text_file = tmp_path / "floor.txt"
    text_file.write_text("R.S\n.x.\n", encoding="utf-8")
    assert load_map(text_file).starts == ((0, 0),)
    assert load_map(str(text_file)).station_cells() == [(0, 2)]
    movingai = tmp_path / "m.MAP"
    movingai.write_text(GOOD_MOVINGAI, encoding="utf-8")
    assert load_map(movingai).shape == (3, 4)
    assert load_map("x.g\n...").station_cells() == [(0, 2)]


def test_load_map_errors(tmp_path: Path) -> None:
    with pytest.raises(MapError, match="expected a preset name") as error:
        load_map("warehouse-huge")
    for name in PRESETS:
        assert name in str(error.value)
    with pytest.raises(MapError, match="expected a preset name"):
        load_map("#.#\n...")
    with pytest.raises(MapError, match="no such MovingAI map file"):
        load_map(tmp_path / "absent.map")
    with pytest.raises(MapError, match="expected a preset name"):
        load_map(tmp_path)  # a folder
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"..\n\xff.\n")
    with pytest.raises(MapError, match="not UTF-8") as error:
        load_map(bad)
    assert error.value.source == str(bad)
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("...\n..\n", encoding="utf-8")
    with pytest.raises(MapError) as error:
        load_map(ragged)
    assert where(error) == (str(ragged), 2, 3)


# --- start cells ------------------------------------------------------------------------------


def test_start_cells_map_starts_first_then_plain_free_cells() -> None:
    grid = parse_text_map("R.x.\n.##.\nS..R\n....\n")
    cells = start_cells(grid, 6, rng=np.random.default_rng(3))
    assert cells.shape == (6, 2)
    assert cells.dtype == np.int32
    assert [tuple(c) for c in cells[:2]] == [(0, 0), (2, 3)]
    assert len({tuple(c) for c in cells}) == 6
    for r, c in cells[2:]:
        assert grid.is_free((int(r), int(c)))
        assert not grid.pickups[r, c]
        assert not grid.stations[r, c]
    again = start_cells(grid, 6, rng=np.random.default_rng(3))
    assert np.array_equal(cells, again)
    assert start_cells(grid, 1, rng=np.random.default_rng(0)).tolist() == [[0, 0]]
    assert start_cells(grid, 0, rng=np.random.default_rng(0)).shape == (0, 2)


def test_start_cells_fall_back_to_task_cells_then_fail() -> None:
    grid = parse_text_map("x.S\n#R#\n")
    cells = start_cells(grid, 4, rng=np.random.default_rng(0))
    assert [tuple(c) for c in cells[:2]] == [(1, 1), (0, 1)]
    assert {tuple(c) for c in cells[2:]} == {(0, 0), (0, 2)}
    with pytest.raises(MapError, match="'<text>' has room for 4 robots"):
        start_cells(grid, 5, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError):
        start_cells(grid, -1, rng=np.random.default_rng(0))


def test_start_cells_race_and_large() -> None:
    race = preset("race-4x4")
    assert start_cells(race, 2, rng=np.random.default_rng(0)).tolist() == [[0, 0], [0, 0]]
    large = preset("warehouse-large")
    cells = start_cells(large, 1000, rng=np.random.default_rng(0))
    assert len({tuple(c) for c in cells}) == 1000
    assert not bool(large.blocked[cells[:, 0], cells[:, 1]].any())
    assert not bool(large.pickups[cells[:, 0], cells[:, 1]].any())


# --- presets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_connected_and_consistent(name: str) -> None:
    grid = preset(name)
    assert grid.name == name
    assert components(grid) == 1
    for mask in (grid.pickups, grid.stations, grid.chargers):
        assert not bool((mask & grid.blocked).any())
    assert not bool((grid.stations & grid.pickups).any())
    assert not bool((grid.stations & grid.chargers).any())


def test_gridworld_presets() -> None:
    grid = preset("gridworld-4x4")
    assert grid.shape == (4, 4)
    assert grid.starts == ((0, 0),)
    assert grid.station_cells() == [(3, 3)]
    assert not bool(grid.blocked.any())
    with pytest.raises(MapError, match="has no pickup cells"):
        require_tasks(grid)
    assert preset("race-4x4").starts == ((0, 0), (0, 0))


@pytest.mark.parametrize(
    ("name", "shape", "min_free", "min_stations"),
    [
        ("warehouse-tiny", (10, 11), 4, 2),
        ("warehouse-small", (20, 30), 16, 3),
        ("warehouse-medium", (40, 60), 100, 4),
        ("warehouse-large", (80, 120), 1000, 8),
    ],
)
def test_warehouse_presets(
    name: str, shape: tuple[int, int], min_free: int, min_stations: int
) -> None:
    grid = preset(name)
    assert grid.shape == shape
    require_tasks(grid)
    assert int(grid.free.sum()) >= min_free
    assert len(grid.station_cells()) >= min_stations
    assert len(grid.charger_cells()) >= 1
    assert all(c == 0 for _, c in grid.station_cells())  # all on one side
    # Racks are walls and every pickup cell touches a rack.
    padded = np.pad(grid.blocked, 1)
    beside = padded[:-2, 1:-1] | padded[2:, 1:-1] | padded[1:-1, :-2] | padded[1:-1, 2:]
    assert bool(grid.blocked.any())
    assert not bool((grid.pickups & ~beside).any())
    assert preset(name) is not grid  # a fresh map each call


def test_warehouse_layout_builder() -> None:
    grid = warehouse_layout(9, 12, rack_depth=1, block_len=2, stations=3, chargers=2, name="w")
    assert grid.name == "w"
    assert grid.shape == (9, 12)
    assert components(grid) == 1
    assert len(grid.station_cells()) == 3
    assert grid.charger_cells() == [(0, 0), (8, 0)]
    with pytest.raises(ConfigError, match="no room for one"):
        warehouse_layout(3, 5, stations=1, chargers=0)
    with pytest.raises(ConfigError, match="aisle must be at least 1"):
        warehouse_layout(20, 20, aisle=0)
    with pytest.raises(ConfigError, match="do not fit"):
        warehouse_layout(20, 20, stations=15, chargers=6)


def test_unknown_preset_lists_names() -> None:
    with pytest.raises(MapError, match="unknown preset 'nope'") as error:
        preset("nope")
    assert "warehouse-tiny" in str(error.value)
    assert "gridworld-4x4" in str(error.value)
