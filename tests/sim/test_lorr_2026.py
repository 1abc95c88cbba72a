"""LoRR 2026: problem files chosen by their fields, and the validator against real outputs.

``tests/data/lorr/`` holds two real 2026 start-kit outputs with their problems (maze, v3.1
build with delays; warehouse_small, a March-2026 build with delays); the rest of the shared
2026 outputs are checked when the workspace's ``shared/data/lorr`` is present.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.errors import ConfigError
from fleetmind.sim import lorr
from fleetmind.sim.lorr.referee2026 import expand_paths, swept_overlap

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "tests" / "data" / "lorr"
SHARED = ROOT.parent / "shared" / "data" / "lorr"
PAIRS = [
    ("outputs/2026/maze-example_40_output.json", "2026/maze.domain/maze-example_40.json"),
    (
        "outputs/2026/warehouse_small_no_error.json",
        "2026/warehouse.domain/warehouse_small_200.json",
    ),
]
DELAY = {
    "seed": 0, "minDelay": 1, "maxDelay": 5, "eventModel": "bernoulli", "pDelay": 0.02,
    "durationModel": "gaussian", "gaussMeanRatio": 0.5, "gaussStdRatio": 0.35,
}  # fmt: skip


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((KIT / name).read_text())
    return data


def encode(letters: list[str], start: tuple[int, int], segment: int = 100) -> str:
    """A robot's path in the 2026 layout (what the start kit writes)."""
    out = []
    for s in range(0, len(letters), segment):
        chunk = letters[s : s + segment]
        runs: list[list[Any]] = []
        for ch in chunk:
            if runs and runs[-1][0] == ch:
                runs[-1][1] += 1
            else:
                runs.append([ch, 1])
        body = ",".join(f"{a} {d}" for a, d in runs)
        out.append(f"[({s},{start[0]},{start[1]},0,0):({body})]")
    return "".join(out)


def decode(text: str) -> list[str]:
    return [
        a
        for body in re.findall(r"\):\(([^)]*)\)\]", text)
        for item in body.split(",")
        for a in [item.split()[0]] * int(item.split()[1])
    ]


def problem(tmp_path: Path, starts: list[int], tasks: list[list[int]], **fields: Any) -> Path:
    path = lorr.write_instance(tmp_path, ["....", "....", "...."], starts, tasks, name="p")
    spec = json.loads(path.read_text())
    spec |= {"version": "2026 LoRR", "agentCounter": 2, "agentSize": 1.0, "delayConfig": DELAY}
    spec |= fields
    path.write_text(json.dumps({k: v for k, v in spec.items() if v is not None}))
    return path


def output(paths: list[list[str]], starts: list[tuple[int, int]], **fields: Any) -> dict[str, Any]:
    n = len(paths)
    data = {
        "version": "2026 LoRR", "teamSize": n, "numTaskFinished": 0, "makespan": len(paths[0]),
        "agentMaxCounter": 2, "outputSegmentSize": 100, "delayIntervals": [[] for _ in paths],
        "start": [[r, c, "E"] for r, c in starts],
        "actualPaths": [encode(p, s) for p, s in zip(paths, starts, strict=True)],
        "plannerPaths": [encode(p, s) for p, s in zip(paths, starts, strict=True)],
        "events": [], "actualSchedule": ["0:-1"] * n, "plannerSchedule": ["0:-1"] * n,
    }  # fmt: skip
    return data | fields


def test_2026_problems_are_chosen_by_their_fields() -> None:
    inst = lorr.read_instance(KIT / PAIRS[0][1])
    assert (inst.edition, inst.team_size, inst.pool_size) == ("2026", 40, 60)
    assert (inst.agent_counter, inst.agent_size) == (3, 1.0)
    assert inst.delay is not None
    assert (inst.delay.event_model, inst.delay.min_delay, inst.delay.max_delay) == (
        "bernoulli", 5, 12,
    )  # fmt: skip
    small = lorr.read_instance(KIT / PAIRS[1][1])
    assert (small.agent_counter, small.pool_size) == (10, 200)  # numTasksReveal 1 x 200 robots
    # A 2024 problem keeps its rules: one tick an action, no delays.
    old = lorr.read_instance(KIT / "2024/random.domain/random_32_32_20_100.json")
    assert (old.edition, old.agent_counter, old.delay) == ("2024", 1, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"agentCounter": 0}, r"p.json: field 'agentCounter' must be at least 1, got 0"),
        ({"agentSize": 0}, r"p.json: field 'agentSize' must be above 0 and at most 1, got 0.0"),
        ({"agentCounter": "3"}, r"p.json: field 'agentCounter' has the wrong type"),
        ({"delayConfig": None}, r"p.json: field 'delayConfig' missing or not an object"),
        ({"delayConfig": DELAY | {"pDelay": 1.5}}, r"pDelay' must be between 0.0 and 1.0"),
        ({"delayConfig": DELAY | {"maxDelay": 0}}, r"'delayConfig.maxDelay' must be at least"),
        ({"delayConfig": DELAY | {"eventModel": "x"}}, r"'delayConfig.eventModel' must be"),
        ({"delayConfig": {k: v for k, v in DELAY.items() if k != "seed"}},
         r"p.json: missing field 'delayConfig.seed'"),
    ],
)  # fmt: skip
def test_bad_2026_fields_are_named_in_one_line(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    path = problem(tmp_path, [0], [[1]], **fields)
    with pytest.raises(ConfigError, match=message) as info:
        lorr.read_instance(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "instance"), PAIRS)
def test_the_validator_agrees_with_real_2026_outputs(name: str, instance: str) -> None:
    data = load(name)
    check = lorr.validate(data, lorr.read_instance(KIT / instance), time_limit=None)
    assert check.ok, check.problems
    assert check.edition == "2026"
    assert check.finished == data["numTaskFinished"]
    assert check.executed_conflicts == 0
    recorded = sum(e - s for spans in data["delayIntervals"] for s, e in spans)
    assert 0 < check.delayed <= recorded


def test_one_altered_executed_action_is_named() -> None:
    name, instance = PAIRS[0]
    data = load(name)
    inst = lorr.read_instance(KIT / instance)
    letters = decode(data["actualPaths"][7])
    t = letters.index("W", 50)
    letters[t] = "F"
    data["actualPaths"][7] = encode(letters, tuple(data["start"][7][:2]))
    check = lorr.validate(data, inst)
    assert not check.ok
    assert check.problems[0] == (
        f"robot 7, tick {t}: actualPaths has F, plannerPaths asks W "
        "(the action model only turns a move into a wait)"
    )


def test_a_move_inside_a_recorded_delay_is_named() -> None:
    name, instance = PAIRS[0]
    data = load(name)
    robot = next(i for i, spans in enumerate(data["delayIntervals"]) if spans)
    start, _ = data["delayIntervals"][robot][0]
    for key in ("actualPaths", "plannerPaths"):
        letters = decode(data[key][robot])
        assert letters[start] == "W"
        letters[start] = "R"
        data[key][robot] = encode(letters, tuple(data["start"][robot][:2]))
    check = lorr.validate(data, lorr.read_instance(KIT / instance))
    assert f"robot {robot}, tick {start}: actualPaths has R during its recorded delay" in (
        check.problems
    )


def test_counters_and_swept_squares(tmp_path: Path) -> None:
    # Row 0 of a 3 x 4 map; robot 0 at (0,0) behind robot 1 at (0,1), both facing east;
    # agentCounter 2. Task 0 is the cell (0,3).
    inst = lorr.read_instance(problem(tmp_path, [0, 1], [[3], [9]], numTasksReveal=1))
    # Both go forward together: squares touch, never overlap. A wait half-way pauses both
    # (the counter is kept): two cells take five ticks, and robot 1 reaches (0,3) at tick 5.
    follow = output([list("FWFFFW"), list("FWFFFW")], [(0, 0), (0, 1)])
    follow["plannerSchedule"] = ["0:-1", "0:0"]
    follow["actualSchedule"] = ["0:-1", "0:0"]
    follow["tasks"] = [[0, 0, [0, 3]], [1, 0, [2, 1]], [2, 5, [0, 3]]]
    follow["events"] = [[5, 1, 0, 1]]
    follow["numTaskFinished"] = 1
    check = lorr.validate(follow, inst)
    assert check.ok, check.problems
    assert check.finished == 1
    # Robot 1 pausing while robot 0 goes on: their squares overlap.
    late = output([list("FWFFFW"), list("FWWFFF")], [(0, 0), (0, 1)])
    assert (
        "robot 0 and robot 1, tick 2: their squares overlap" in lorr.validate(late, inst).problems
    )
    # Robot 0 goes forward while robot 1 waits: half-way its square overlaps robot 1's.
    bump = output([list("FFWW"), list("WWWW")], [(0, 0), (0, 1)])
    check = lorr.validate(bump, inst)
    assert "robot 0 and robot 1, tick 0: their squares overlap" in check.problems
    assert check.executed_conflicts >= 1
    # A rotation started must finish: an F in the middle of an R is named.
    turn = output([list("RFRW"), list("WWWW")], [(0, 0), (0, 1)])
    check = lorr.validate(turn, inst)
    assert check.problems[0].startswith("robot 0, tick 1: actualPaths has F while a R is")
    # Off the map: robot 1 facing east at (0,3) would leave it.
    edge = lorr.read_instance(problem(tmp_path / "e", [2, 3], [[5]]))
    check = lorr.validate(output([list("WW"), list("FF")], [(0, 2), (0, 3)]), edge)
    assert check.problems[0].startswith("robot 1, tick 0: its move leaves the map")


def test_swept_overlap_geometry() -> None:
    z = np.zeros((1, 2))
    # Head-on through each other's cells within one tick: caught though the ends do not overlap.
    assert swept_overlap(z, np.array([[2.0, 0.0]]), np.array([[2.0, 0.0]]), z, 1.0)[0]
    # Side by side, moving in parallel: touching only.
    assert not swept_overlap(z, np.array([[0.5, 0.0]]), np.array([[0.0, 1.0]]),
                             np.array([[0.5, 1.0]]), 1.0)[0]  # fmt: skip
    # Smaller robots pass where unit squares would touch.
    a0, b0 = np.array([[0.0, 0.0]]), np.array([[0.0, 0.7]])
    assert swept_overlap(a0, a0, b0, b0, 1.0)[0]
    assert not swept_overlap(a0, a0, b0, b0, 0.6)[0]


def test_malformed_2026_files_are_named(tmp_path: Path) -> None:
    inst = lorr.read_instance(problem(tmp_path, [0, 1], [[3]]))
    data = output([list("WW"), list("WW")], [(0, 0), (0, 1)])
    data["actualPaths"][1] = "[(0,0,1,0,0):(W 2,X 1)]"
    with pytest.raises(ConfigError, match=r"'actualPaths': robot 1, segment 0: bad item"):
        lorr.validate(data, inst)
    with pytest.raises(ConfigError, match=r"'plannerPaths': robot 1 has 2 ticks, robot 0 has 3"):
        expand_paths(["[(0,0,0,0,0):(W 3)]", "[(0,0,1,0,0):(W 2)]"], 2, "plannerPaths", 100)
    old = lorr.read_instance(KIT / "2024/random.domain/random_32_32_20_100.json")
    with pytest.raises(ConfigError, match=r"a LoRR 2026 output .* for the 2024 problem"):
        lorr.validate(load(PAIRS[0][0]), old)


def shared_2026() -> list[tuple[str, str, int]]:
    pairs = SHARED / "outputs" / "pairs.json"
    if not pairs.is_file():
        return []
    return [
        (p["output"], p["input"], p["teamSize"])
        for p in json.loads(pairs.read_text())
        if p["edition"] == "2026"
    ]


@pytest.mark.slow
@pytest.mark.skipif(not shared_2026(), reason="the workspace's shared/data/lorr is not here")
@pytest.mark.parametrize(("name", "instance", "team"), shared_2026())
def test_the_validator_agrees_with_every_shared_2026_output(
    name: str, instance: str, team: int
) -> None:
    data = json.loads((SHARED / name).read_text())
    check = lorr.validate(data, lorr.read_instance(SHARED / instance, team_size=team))
    assert check.ok, check.problems
    assert check.finished == data["numTaskFinished"]
    assert check.executed_conflicts == 0
