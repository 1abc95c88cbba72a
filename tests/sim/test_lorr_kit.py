"""fleetmind's LoRR writer and validator against real start-kit output files.

``tests/data/lorr/`` holds three files the start kit wrote (PlanViz examples, MIT) with their
inputs. Each is played again through :func:`fleetmind.sim.lorr.simulate` by a planner that
answers what the file's planner answered, with a fake clock that spends what the file's
``plannerTimes`` say; fleetmind's output must then equal the file, field by field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.sim import lorr

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "tests" / "data" / "lorr"
SHARED = ROOT.parent / "shared" / "data" / "lorr"

# (output, input, the run's --planTimeLimit in seconds)
PAIRS = [
    (
        "outputs/2023/warehouse_small_2023.json",
        ROOT / "benchmarks/data/lorr/2023/warehouse.domain/warehouse_small_60.json",
        2.0,
    ),
    (
        "outputs/2024/warehouse_small_2024.json",
        KIT / "2024/warehouse.domain/warehouse_small_r2_100.json",
        1.0,
    ),
    (
        "outputs/2024/random_300ts_default.json",
        KIT / "2024/random.domain/random_32_32_20_100.json",
        1.0,
    ),
]
CODES = {c: i for i, c in enumerate(lorr.ACTION_CHARS)}


class Replay:
    """Answers what a start-kit output file's entry answered, taking the time it took."""

    def __init__(self, data: dict[str, Any], limit: float, clock: list[float]) -> None:
        self.planned = np.array(
            [[CODES[c] for c in p.split(",")] for p in data["plannerPaths"]], dtype=np.int64
        ).T  # (steps, n)
        self.limit, self.clock = limit, clock
        late = (self.planned == lorr.TIMEOUT).all(axis=1)
        self.calls: list[tuple[int, int]] = []  # (executed step or -1, steps waited first)
        waited = 0
        for t, is_late in enumerate(late.tolist()):
            if is_late:
                waited += 1
            else:
                self.calls.append((t, waited))
                waited = 0
        if waited:
            self.calls.append((-1, waited))
        self.schedule = [
            [tuple(map(int, e.split(":"))) for e in s.split(",")] if s else []
            for s in data.get("plannerSchedule", [])
        ]
        times = data["plannerTimes"]
        if "plannerSchedule" in data:  # 2024: one entry per call, waits included
            self.spent = list(times)
        else:
            # 2023: a late step adds the limit to the entry before it, and the late answer's
            # entry is the last wait; the kit's waits overshoot by a few ms, so each answer is
            # kept inside its last slice.
            after = [w for _, w in self.calls[1:]] + [0]
            self.spent = [
                min(times[j] - limit * after[j], 0.999 * limit) + limit * self.calls[j][1]
                for j in range(len(times))
            ]
        self.i = 0

    def initialize(self, instance: lorr.Instance) -> None:
        """Nothing to prepare."""

    def plan(self, view: lorr.View) -> lorr.Plan:
        t, waited = self.calls[self.i]
        spent = self.spent[self.i] if self.i < len(self.spent) else (waited + 0.5) * self.limit
        self.clock[0] += spent
        self.i += 1
        schedule = None
        if self.schedule:
            schedule = np.full(len(self.schedule), -1, dtype=np.int64)
            for robot, entries in enumerate(self.schedule):
                for stamp, task in entries:
                    if stamp <= t + 1:
                        schedule[robot] = task
        return lorr.Plan(actions=self.planned[max(t, 0)], schedule=schedule)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((KIT / name).read_text())
    return data


@pytest.mark.parametrize("name", [PAIRS[0][0], PAIRS[2][0]])
def test_dumps_writes_the_kit_layout_byte_for_byte(name: str) -> None:
    text = (KIT / name).read_text()
    assert lorr.dumps(json.loads(text)) == text


@pytest.mark.parametrize(("name", "instance", "limit"), PAIRS)
def test_the_writer_reproduces_real_start_kit_outputs(
    name: str, instance: Path, limit: float
) -> None:
    data = load(name)
    inst = lorr.read_instance(instance, team_size=data["teamSize"])
    clock = [0.0]
    replay = Replay(data, limit, clock)
    result = lorr.simulate(
        inst, replay, steps=len(replay.planned), time_limit=limit, clock=lambda: clock[0]
    )
    mine = lorr.result_json(result)
    if name.endswith("warehouse_small_2024.json"):
        # A pre-2.0 build of the 2024 kit: same fields, older summary keys.
        assert set(data) - set(mine) == {"AllValid", "sumOfCost"}
        assert set(mine) - set(data) == {
            "numPlannerErrors",
            "numScheduleErrors",
            "numEntryTimeouts",
        }
    else:
        assert list(mine) == list(data)  # the same keys in the same order
    for key in set(mine) & set(data):
        if key == "plannerTimes":
            assert mine[key] == pytest.approx(data[key], abs=0.02), key
        else:
            assert mine[key] == data[key], key
    if name.startswith("outputs/2023"):
        assert result.timeouts == 13  # the 2023 file's late steps, played again


@pytest.mark.parametrize(("name", "instance", "limit"), PAIRS)
def test_the_validator_agrees_with_real_start_kit_outputs(
    name: str, instance: Path, limit: float
) -> None:
    data = load(name)
    inst = lorr.read_instance(instance, team_size=data["teamSize"])
    check = lorr.validate(data, inst, time_limit=limit)
    assert check.ok, check.problems
    assert check.finished == data["numTaskFinished"]
    assert check.errors == data["errors"]


def test_one_altered_action_in_a_real_file_is_named() -> None:
    name, instance, _ = PAIRS[2]
    data = load(name)
    inst = lorr.read_instance(instance)
    path = data["actualPaths"][7].split(",")
    path[40] = "W" if path[40] != "W" else "F"
    data["actualPaths"][7] = ",".join(path)
    check = lorr.validate(data, inst)
    assert len(check.problems) == 1
    assert check.problems[0].startswith("robot 7, timestep 41 (action 40): actualPaths has")


def shared_pairs() -> list[tuple[str, str, int]]:
    pairs = SHARED / "outputs" / "pairs.json"
    if not pairs.is_file():
        return []
    return [
        (p["output"], p["input"], p["teamSize"])
        for p in json.loads(pairs.read_text())
        if p["edition"] in ("2023", "2024")
    ]


@pytest.mark.skipif(not shared_pairs(), reason="the workspace's shared/data/lorr is not here")
@pytest.mark.parametrize(("output", "instance", "team"), shared_pairs())
def test_the_validator_agrees_with_every_shared_output(
    output: str, instance: str, team: int
) -> None:
    data = json.loads((SHARED / output).read_text())
    inst = lorr.read_instance(SHARED / instance, team_size=team)
    check = lorr.validate(data, inst, time_limit=None)
    assert check.ok, check.problems
    assert (check.finished, check.errors) == (data["numTaskFinished"], data["errors"])
