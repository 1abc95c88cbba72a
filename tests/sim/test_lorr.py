"""LoRR rules: readers, moves and conflicts, errands (2023) and the task pool (2024), the time
limit, and the validator that replays an output file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.errors import ConfigError, MapError, TaskFileError
from fleetmind.sim import lorr
from fleetmind.sim.lorr import CCR, CR, FW, TIMEOUT, WAIT, Plan, View, World, write_instance

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lorr"


OPEN = ["....", "....", "...."]  # 3 x 4, locations row * 4 + col


def acts(*codes: int) -> np.ndarray:
    return np.array(codes, dtype=np.int64)


# --------------------------------------------------------------------------- readers


def test_reads_the_shipped_2024_and_2023_instances() -> None:
    big = lorr.read_instance(DATA / "2024/warehouse.domain/sortation_large_2000.json")
    assert (big.edition, big.team_size, big.pool_size) == ("2024", 2000, 3000)
    assert big.tasks.shape == (100000, 2)
    assert big.grid.shape == (140, 500)
    assert big.starts[0] == 27199  # first line after the header and the count
    small = lorr.read_instance(DATA / "2023/warehouse.domain/warehouse_small_10.json")
    assert (small.edition, small.team_size, small.pool_size) == ("2023", 10, 1)
    assert small.tasks[:3, 0].tolist() == [1298, 1443, 445]


@pytest.mark.parametrize(
    ("file", "text", "error", "where"),
    [
        (
            "maps/instance.map",
            "type octile\nheight 3\nwidth 4\nmap\n....\n..?.\n....\n",
            MapError,
            ":6",
        ),
        ("agents/instance.agents", "2\n0\nx\n", ConfigError, "instance.agents:3:"),
        ("agents/instance.agents", "2\n0\n99\n", ConfigError, "instance.agents:3:"),
        ("agents/instance.agents", "2\n0\n0\n", ConfigError, "instance.agents:3:"),
        ("agents/instance.agents", "3\n0\n1\n", ConfigError, "instance.agents:3:"),
        ("tasks/instance.tasks", "2\n1,2\n3,x\n", TaskFileError, "instance.tasks:3:"),
        ("tasks/instance.tasks", "# c\n2\n1,2\n3,5\n", TaskFileError, "instance.tasks:4:"),
        ("tasks/instance.tasks", "two\n1\n", TaskFileError, "instance.tasks:1:"),
        (
            "instance.json",
            '{\n"mapFile": "maps/instance.map",\n,}',
            ConfigError,
            "instance.json:3:",
        ),
    ],
)
def test_reader_errors_name_the_file_and_line(
    tmp_path: Path, file: str, text: str, error: type[Exception], where: str
) -> None:
    path = write_instance(tmp_path, ["....", ".@..", "...."], [0, 1], [[2, 3]])
    (tmp_path / file).write_text(text)
    with pytest.raises(error) as info:
        lorr.read_instance(path)
    message = str(info.value)
    assert "\n" not in message
    assert where in message, message


def test_unsupported_strategy_and_missing_field_are_config_errors(tmp_path: Path) -> None:
    path = write_instance(tmp_path, OPEN, [0], [[1]], edition="2023")
    spec = json.loads(path.read_text())
    path.write_text(json.dumps({**spec, "taskAssignmentStrategy": "greedy"}))
    with pytest.raises(ConfigError, match="greedy"):
        lorr.read_instance(path)
    del spec["teamSize"]
    path.write_text(json.dumps(spec))
    with pytest.raises(ConfigError, match="teamSize"):
        lorr.read_instance(path)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="0123456789,#x -\n", max_size=60))
def test_task_reader_raises_only_task_file_errors(tmp_path_factory: Any, text: str) -> None:
    folder = tmp_path_factory.mktemp("t")
    grid = lorr.read_map(write_instance(folder, OPEN, [0], [[1]]).parent / "maps" / "instance.map")
    path = folder / "x.tasks"
    path.write_text(text)
    try:
        tasks, lengths = lorr.read_tasks(path, grid)
    except TaskFileError as exc:
        message = str(exc)
    else:
        assert ((tasks >= 0).sum(axis=1) == lengths).all()
        assert (tasks < 12).all()
        return
    assert message.startswith(str(path))
    assert "\n" not in message


# --------------------------------------------------------------------------- moves


def world(tmp_path: Path, starts: list[int], rows: list[str] | None = None) -> World:
    inst = lorr.read_instance(write_instance(tmp_path, rows or OPEN, starts, [[11]] * 8))
    return World(inst, steps=20)


def test_forward_and_rotations_follow_the_start_kit(tmp_path: Path) -> None:
    w = world(tmp_path, [5])  # row 1, col 1, facing east
    w.advance(acts(FW))
    assert (w.loc[0], w.ori[0]) == (6, 0)
    w.advance(acts(CR))  # clockwise: east -> south
    assert (w.loc[0], w.ori[0]) == (6, 1)
    w.advance(acts(FW))
    assert w.loc[0] == 10
    w.advance(acts(CCR))
    w.advance(acts(CCR))  # south -> east -> north
    assert w.ori[0] == 3
    w.advance(acts(FW))
    assert w.loc[0] == 6


@pytest.mark.parametrize(
    ("starts", "rows", "plan", "kind"),
    [
        ([3], OPEN, [FW], "wall"),  # east edge
        ([0], [".@..", "....", "...."], [FW], "wall"),
        ([0, 2], OPEN, [FW, WAIT], None),  # into a free cell
        ([0, 1], OPEN, [FW, WAIT], "vertex"),  # into a robot that stays
        ([0, 2], OPEN, [FW, CR], None),
    ],
)
def test_refused_moves_make_everyone_wait(
    tmp_path: Path, starts: list[int], rows: list[str], plan: list[int], kind: str | None
) -> None:
    w = world(tmp_path, starts, rows)
    before = w.loc.copy()
    w.advance(np.array(plan))
    if kind is None:
        assert not w.record.errors
        assert not np.array_equal(w.loc, before) or (np.array(plan) != FW).all()
    else:
        assert np.array_equal(w.loc, before)
        assert kind in w.record.errors[0][3]
        assert (w.record.actions[0] == WAIT).all()


def test_swap_is_refused_following_and_cycles_are_not(tmp_path: Path) -> None:
    w = world(tmp_path, [0, 1])
    w.ori[1] = 2  # facing each other
    w.advance(acts(FW, FW))
    assert "swap" in w.record.errors[0][3]
    assert w.loc.tolist() == [0, 1]
    w = world(tmp_path, [0, 1])  # both east: the first follows the second
    w.advance(acts(FW, FW))
    assert not w.record.errors
    assert w.loc.tolist() == [1, 2]
    w = world(tmp_path, [0, 1, 5, 4])  # a 2 x 2 cycle, clockwise
    w.ori[:] = [0, 1, 2, 3]
    w.advance(acts(FW, FW, FW, FW))
    assert not w.record.errors
    assert w.loc.tolist() == [1, 5, 4, 0]


# --------------------------------------------------------------------------- errands


def test_2023_round_robin_gives_robot_i_lines_i_plus_k_team(tmp_path: Path) -> None:
    path = write_instance(tmp_path, OPEN, [0, 4], [[1], [5], [2], [6], [3]], edition="2023")
    w = World(lorr.read_instance(path), steps=20)
    assert w.view().goal.tolist() == [1, 5]
    assert w.advance(acts(FW, FW)) == 2  # both on their first errand
    assert w.view().goal.tolist() == [2, 6]
    w.advance(acts(FW, FW))
    assert w.view().goal.tolist() == [3, 1]  # lines 0 + 2 * 2 = 4 and (1 + 2 * 2) mod 5 = 0
    assert w.finished == 4


def test_2023_one_errand_per_step_even_if_the_next_is_here(tmp_path: Path) -> None:
    path = write_instance(tmp_path, OPEN, [0], [[1], [1], [2]], edition="2023")
    w = World(lorr.read_instance(path), steps=20)
    assert w.advance(acts(FW)) == 1
    assert w.view().goal.tolist() == [1]
    assert w.advance(acts(WAIT)) == 1  # the second errand, one step later
    assert w.finished == 2


def test_2024_pool_reveal_reassign_and_count(tmp_path: Path) -> None:
    tasks = [[1, 2], [8, 9], [10, 11], [4, 5]]
    path = write_instance(tmp_path, OPEN, [0, 7], tasks, reveal=1.5)
    w = World(lorr.read_instance(path), steps=20)
    view = w.view()
    assert view.pool_task.tolist() == [0, 1, 2]  # int(1.5 * 2) revealed in file order
    w.advance(acts(WAIT, WAIT), np.array([1, 0]))
    assert w.robot_task().tolist() == [1, 0]
    w.advance(acts(WAIT, WAIT), np.array([0, 1]))  # unstarted: may be traded
    assert w.robot_task().tolist() == [0, 1]
    assert not w.record.schedule_errors
    w.advance(acts(FW, WAIT))  # robot 0 reaches errand 1 of task 0: started
    assert w.pool_next[w._slot_of[0]] == 1
    w.advance(acts(WAIT, WAIT), np.array([2, 1]))  # leaving a started task: refused whole
    assert w.record.schedule_errors[-1][3] == "robot's task already started"
    assert w.robot_task().tolist() == [0, 1]
    w.advance(acts(WAIT, WAIT), np.array([0, 0]))  # one task, two robots: refused
    assert w.record.schedule_errors[-1][3] == "task given to two robots"
    w.advance(acts(WAIT, WAIT), np.array([0, 7]))  # not revealed yet
    assert w.record.schedule_errors[-1][3] == "task not in the pool"
    assert w.advance(acts(FW, WAIT)) == 1  # last errand of task 0: counts, leaves the pool
    assert w.robot_task().tolist() == [-1, 1]
    assert sorted(w.pool_task.tolist()) == [1, 2, 3]  # task 3 revealed to refill
    assert w.finished == 1


# --------------------------------------------------------------------------- time limit


class Scripted:
    """Answers ``plans`` in turn, spending ``costs`` seconds of a fake clock on each."""

    def __init__(self, plans: list[list[int]], costs: list[float], clock: list[float]) -> None:
        self.plans, self.costs, self.clock = plans, costs, clock
        self.calls = 0

    def initialize(self, instance: lorr.Instance) -> None:
        self.clock[0] += 100.0  # preprocessing is not a step

    def plan(self, view: View) -> Plan:
        k = min(self.calls, len(self.plans) - 1)
        self.clock[0] += self.costs[min(self.calls, len(self.costs) - 1)]
        self.calls += 1
        return Plan(actions=np.array(self.plans[k], dtype=np.int64))


def test_over_running_the_limit_makes_everyone_wait_while_planning_goes_on(
    tmp_path: Path,
) -> None:
    inst = lorr.read_instance(write_instance(tmp_path, OPEN, [0], [[11]]))
    clock = [0.0]
    planner = Scripted([[FW]], [0.5, 2.5, 0.2], clock)
    result = lorr.simulate(inst, planner, steps=6, time_limit=1.0, clock=lambda: clock[0])
    codes = result.record.actions[:, 0].tolist()
    # Plan 1 on time; plan 2 took 2.5 limits: two waiting steps, then it runs; then on time
    # (the last forward would leave the map: refused, a wait).
    assert codes == [FW, TIMEOUT, TIMEOUT, FW, FW, WAIT]
    assert result.timeouts == 2
    assert planner.calls == 4  # four answers fill the six steps
    assert result.preprocess_s == pytest.approx(100.0)
    slow = [0.0]
    again = lorr.simulate(
        inst, Scripted([[FW]], [5.0], slow), steps=3, time_limit=1.0, clock=lambda: slow[0]
    )
    assert again.steps == 3


# --------------------------------------------------------------------------- validator


def run_file(tmp_path: Path) -> tuple[lorr.Instance, dict[str, Any]]:
    tasks = [[1, 2], [8, 9], [10, 11], [4, 5]]
    inst = lorr.read_instance(write_instance(tmp_path, OPEN, [0, 7], tasks))
    w = World(inst, steps=4)
    w.advance(acts(FW, WAIT), np.array([0, 1]))
    w.advance(acts(FW, CR))
    w.advance(acts(WAIT, FW))
    w.advance(acts(WAIT, WAIT))
    result = lorr.RunResult(
        instance=inst,
        steps=4,
        finished=w.finished,
        timeouts=0,
        time_limit=None,
        preprocess_s=0.0,
        record=w.record,
        final_loc=w.loc,
        final_ori=w.ori,
    )
    return inst, lorr.result_json(result)


def test_validator_agrees_with_a_clean_run_and_its_format(tmp_path: Path) -> None:
    inst, out = run_file(tmp_path)
    assert out["actualPaths"] == ["F,F,W,W", "W,R,F,W"]
    assert out["start"] == [[0, 0, "E"], [1, 3, "E"]]
    assert out["numTaskFinished"] == 1
    assert out["actualSchedule"] == ["0:0", "0:1"]
    assert out["events"] == [[1, 0, 0, 0], [2, 0, 0, 1]]  # errands 0 and 1 of task 0
    check = lorr.validate(out, inst)
    assert check.ok, check
    assert check.finished == 1


@pytest.mark.parametrize(
    ("paths", "field"),
    [
        (["F,F,W,W", "W,W,W,F"], "illegal"),  # robot 1 (east edge, facing east) drives off
        (["F,F,W,W", "C,F,C,F"], "vertex_conflicts"),  # 7 -> 3 -> 2: meets robot 0 at 2
        (["F,F,W,W", "W,C,W,W"], "finished"),  # robot 1 never reaches 11: 1 claimed, 0 found
        (["F,F,W,W", "W,R,X,W"], "illegal"),
    ],
)
def test_validator_catches_tampered_files(tmp_path: Path, paths: list[str], field: str) -> None:
    inst, out = run_file(tmp_path)
    out["actualPaths"] = paths
    if field == "finished":
        out["numTaskFinished"] = 2
    check = lorr.validate(out, inst)
    assert not check.ok
    if field == "finished":
        assert check.finished != check.claimed
    else:
        assert getattr(check, field) > 0


def test_validator_finds_a_swap(tmp_path: Path) -> None:
    inst = lorr.read_instance(write_instance(tmp_path, OPEN, [0, 1], [[11]]))
    out = {"start": [[0, 0, "E"], [0, 1, "W"]], "actualPaths": ["F", "F"], "numTaskFinished": 0}
    check = lorr.validate(out, inst)
    assert check.swap_conflicts == 1
    assert any("facing east" in p for p in check.problems)
