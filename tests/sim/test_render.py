"""ASCII and RGB rendering, and GIF writing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fleetmind.errors import ConfigError, MapError
from fleetmind.sim.maps import parse_text_map, start_cells
from fleetmind.sim.presets import PRESETS, preset
from fleetmind.sim.render import (
    MAP_COLOURS,
    ROBOT_SYMBOLS,
    ascii,
    rgb,
    robot_colours,
    save_gif,
)

SMALL = "#....\n.x.S.\n.C..#\n"


def test_ascii_draws_map_robots_loads_and_targets() -> None:
    grid = parse_text_map(SMALL)
    text = ascii(
        grid,
        np.array([[0, 1], [1, 1], [2, 3], [2, 3]]),
        carrying=[False, True, False, False],
        targets=[(1, 3), (0, 4), None, (-1, -1)],
    )
    assert text.split("\n") == [
        "#a..+",
        ".B.+.",
        ".C.*#",
    ]


def test_ascii_symbols_avoid_map_letters() -> None:
    symbols = set(ROBOT_SYMBOLS) | set(ROBOT_SYMBOLS.upper())
    assert not symbols & set("#.xXsScC+*")
    assert len(set(ROBOT_SYMBOLS)) == len(ROBOT_SYMBOLS)
    grid = preset("warehouse-small")
    cells = start_cells(grid, 30, rng=np.random.default_rng(0))
    text = ascii(grid, cells)
    assert text.count(ROBOT_SYMBOLS[0]) == 2  # robot 0 and robot 23 share a letter
    assert text.count(ROBOT_SYMBOLS[6]) == 2  # robots 6 and 29
    assert text.count(ROBOT_SYMBOLS[7]) == 1


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_ascii_of_a_map_without_robots_parses_back(name: str) -> None:
    grid = preset(name)
    text = ascii(grid, np.zeros((0, 2), dtype=np.int32))
    lines = text.split("\n")
    assert len(lines) == grid.shape[0]
    assert {len(line) for line in lines} == {grid.shape[1]}
    back = parse_text_map(text)
    for field in ("blocked", "pickups", "stations", "chargers"):
        assert np.array_equal(getattr(back, field), getattr(grid, field)), field


def test_bad_positions_and_arguments() -> None:
    grid = parse_text_map(SMALL)
    with pytest.raises(MapError, match=r"robot 1 at \(3, 0\) is off the 3x5 map"):
        ascii(grid, [(0, 0), (3, 0)])
    with pytest.raises(MapError, match="off the map"):
        rgb(grid, [(0, 1)], targets=[(0, 9)])
    with pytest.raises(ConfigError, match=r"shape \(n_robots, 2\)"):
        rgb(grid, np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ConfigError, match="one flag per robot"):
        ascii(grid, [(0, 1)], carrying=[True, False])
    with pytest.raises(ConfigError, match="one entry per robot"):
        ascii(grid, [(0, 1), (0, 2)], targets=[(1, 1)])
    with pytest.raises(ConfigError, match="cell_px"):
        rgb(grid, [(0, 1)], cell_px=0)
    with pytest.raises(MapError, match="highlighted cell"):
        rgb(grid, [], highlight=[(5, 5)])


@pytest.mark.parametrize("px", [1, 2, 3, 8, 13])
def test_rgb_shape_and_map_colours(px: int) -> None:
    grid = preset("warehouse-tiny")
    cells = start_cells(grid, 4, rng=np.random.default_rng(1))
    image = rgb(grid, cells, carrying=[True, False, True, False], cell_px=px)
    assert image.shape == (10 * px, 11 * px, 3)
    assert image.dtype == np.uint8
    wall = tuple(int(v) for v in np.argwhere(grid.blocked)[0])
    assert tuple(image[wall[0] * px, wall[1] * px]) == MAP_COLOURS["wall"]
    station = grid.station_cells()[0]
    assert tuple(image[station[0] * px, station[1] * px]) == MAP_COLOURS["station"]


def test_rgb_robots_loads_targets_highlight() -> None:
    grid = parse_text_map(SMALL)
    px = 10
    image = rgb(
        grid,
        [(0, 1), (2, 3)],
        carrying=[False, True],
        targets=[(1, 2), None],
        highlight=[(0, 0)],
        cell_px=px,
    )
    colours = robot_colours(2)
    centre = px // 2
    assert tuple(image[0 * px + centre, 1 * px + centre]) == tuple(colours[0])
    # robot 1 carries: a dark square in the middle of its disc, its colour around it.
    assert tuple(image[2 * px + centre, 3 * px + centre]) == MAP_COLOURS["load"]
    assert tuple(image[2 * px + 2, 3 * px + centre]) == tuple(colours[1])
    # the target of robot 0 is a ring in its colour, the middle of the cell stays floor.
    ring = image[1 * px : 2 * px, 2 * px : 3 * px]
    assert int((ring == colours[0]).all(axis=2).sum()) > 0
    assert tuple(ring[centre, centre]) == MAP_COLOURS["floor"]
    # the highlighted cell has a red border and keeps its wall colour inside.
    assert tuple(image[0, 0]) == MAP_COLOURS["highlight"]
    assert tuple(image[centre, centre]) == MAP_COLOURS["wall"]
    # a bool mask highlights the same way.
    mask = np.zeros(grid.shape, dtype=bool)
    mask[0, 0] = True
    same = rgb(
        grid, [(0, 1), (2, 3)], carrying=[False, True], targets=[(1, 2), None], highlight=mask
    )
    assert np.array_equal(
        same,
        rgb(
            grid,
            [(0, 1), (2, 3)],
            carrying=[False, True],
            targets=[(1, 2), None],
            highlight=[(0, 0)],
        ),
    )


def test_robot_colours_distinct_and_deterministic() -> None:
    colours = robot_colours(1000)
    assert colours.shape == (1000, 3)
    assert colours.dtype == np.uint8
    assert len({tuple(c) for c in colours}) == 1000
    assert np.array_equal(robot_colours(10), colours[:10])
    map_colours = {tuple(v) for v in MAP_COLOURS.values()}
    assert not {tuple(c) for c in colours} & map_colours
    assert robot_colours(0).shape == (0, 3)


def test_rgb_is_deterministic_and_large_map_is_fast_enough() -> None:
    grid = preset("warehouse-large")
    cells = start_cells(grid, 1000, rng=np.random.default_rng(0))
    carrying = np.arange(1000) % 2 == 0
    first = rgb(grid, cells, carrying=carrying, targets=cells[::-1], cell_px=4)
    assert first.shape == (320, 480, 3)
    assert np.array_equal(
        first, rgb(grid, cells, carrying=carrying, targets=cells[::-1], cell_px=4)
    )


def test_gif_round_trip(tmp_path: Path) -> None:
    grid = preset("warehouse-small")
    frames = [
        rgb(grid, start_cells(grid, 8, rng=np.random.default_rng(seed)), cell_px=4)
        for seed in range(5)
    ]
    path = save_gif(frames, tmp_path / "sub" / "run.gif", fps=10)
    assert path == tmp_path / "sub" / "run.gif"
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        assert getattr(gif, "n_frames", 1) == 5
        assert gif.size == (30 * 4, 20 * 4)
        gif.seek(0)
        assert gif.info["duration"] == 100
        assert gif.info.get("loop") == 0
        gif.seek(3)
        back = np.asarray(gif.convert("RGB"))
    assert np.array_equal(back, frames[3])  # few colours: the palette is exact


def test_gif_merges_identical_frames_keeping_total_time(tmp_path: Path) -> None:
    grid = preset("warehouse-tiny")
    a = rgb(grid, [(0, 1)])
    b = rgb(grid, [(0, 2)])
    path = save_gif([a, b, b, a], tmp_path / "dup.gif", fps=5)
    with Image.open(path) as gif:
        durations = []
        for k in range(getattr(gif, "n_frames", 1)):
            gif.seek(k)
            durations.append(gif.info["duration"])
    assert durations == [200, 400, 200]


def test_gif_rejects_bad_frames(tmp_path: Path) -> None:
    good = np.zeros((4, 4, 3), dtype=np.uint8)
    with pytest.raises(ConfigError, match="at least one frame"):
        save_gif([], tmp_path / "a.gif")
    with pytest.raises(ConfigError, match="frame 1 has shape"):
        save_gif([good, np.zeros((4, 5, 3), dtype=np.uint8)], tmp_path / "a.gif")
    with pytest.raises(ConfigError, match="frame 0 must be"):
        save_gif([good.astype(np.float32)], tmp_path / "a.gif")
    with pytest.raises(ConfigError, match="fps"):
        save_gif([good], tmp_path / "a.gif", fps=0)
