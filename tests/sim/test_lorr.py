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

from fleetmind.errors import BudgetExceeded, ConfigError, MapError, TaskFileError
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
        ([3], OPEN, [FW], [0, -1, 1, "unallowed move"]),  # east edge
        ([0], [".@..", "....", "...."], [FW], [0, -1, 1, "unallowed move"]),
        ([0, 2], OPEN, [FW, WAIT], None),  # into a free cell
        ([0, 1], OPEN, [FW, WAIT], [1, 0, 1, "vertex conflict"]),  # the later robot is named
        ([0, 2], OPEN, [FW, CR], None),
    ],
)
def test_refused_moves_make_everyone_wait(
    tmp_path: Path, starts: list[int], rows: list[str], plan: list[int], kind: list[Any] | None
) -> None:
    w = world(tmp_path, starts, rows)
    before = w.loc.copy()
    w.advance(np.array(plan))
    if kind is None:
        assert not w.record.errors
        assert not np.array_equal(w.loc, before) or (np.array(plan) != FW).all()
    else:
        assert np.array_equal(w.loc, before)
        assert w.record.errors == [kind]  # the kit's text, robots, timestep after the move
        assert (w.record.actions[0] == WAIT).all()


def test_swap_is_refused_following_and_cycles_are_not(tmp_path: Path) -> None:
    w = world(tmp_path, [0, 1])
    w.ori[1] = 2  # facing each other
    w.advance(acts(FW, FW))
    assert w.record.errors == [[1, 0, 1, "edge conflict"]]
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
    w.advance(acts(FW, WAIT))  # robot 0 reaches errand 1 of task 0 at timestep 3: started
    assert w.pool_next[w._slot_of[0]] == 1
    assert w.record.events == [[3, 0, 0, 1]]  # errands counted from 1, as the kit does
    # The kit's texts, [task, robot, other robot, timestep + 1]; refused whole, robots in order.
    w.advance(acts(WAIT, WAIT), np.array([2, 1]))  # leaving a started task
    assert w.record.schedule_errors[-1] == [
        2, 0, 0, 5, "task is already opened by the second agent"
    ]  # fmt: skip
    assert w.robot_task().tolist() == [0, 1]
    w.advance(acts(WAIT, WAIT), np.array([0, 0]))  # one task, two robots
    assert w.record.schedule_errors[-1] == [
        0, 1, 0, 6, "task is already assigned by the second agent at the same time"
    ]  # fmt: skip
    w.advance(acts(WAIT, WAIT), np.array([0, 7]))  # not revealed yet
    assert w.record.schedule_errors[-1] == [7, 1, -1, 7, "task already finished"]
    assert w.advance(acts(FW, WAIT)) == 1  # last errand of task 0: counts, leaves the pool
    assert w.record.events[-1] == [7, 0, 0, 2]
    assert w.robot_task().tolist() == [-1, 1]
    assert sorted(w.pool_task.tolist()) == [1, 2, 3]  # task 3 revealed to refill
    assert w.record.revealed[-1] == [3, 7]
    assert w.finished == 1
    # Schedules as the kit logs them: every change of the proposal, every accepted change.
    assert w.record.planner_schedule == [
        [(1, 1), (2, 0), (4, 2), (5, 0)],
        [(1, 0), (2, 1), (5, 0), (6, 7), (7, 1)],
    ]
    assert w.record.actual_schedule == [[(1, 1), (2, 0)], [(1, 0), (2, 1)]]


def test_2024_errands_wait_for_an_executed_plan(tmp_path: Path) -> None:
    # Task 0's two errands are both cell 1: the second is reached on the next executed step,
    # never during a step the robots waited for a late planner.
    path = write_instance(tmp_path, OPEN, [0, 7], [[1, 1], [8, 9], [10, 11]], reveal=1.5)
    w = World(lorr.read_instance(path), steps=20)
    w.advance(acts(FW, WAIT), np.array([0, -1]))
    assert w.record.events == [[1, 0, 0, 1]]
    w.advance(None, np.array([0, -1]), timed_out=True)
    w.advance(None, np.array([0, -1]), timed_out=True)
    assert w.record.events == [[1, 0, 0, 1]]
    assert w.finished == 0
    assert (w.record.actions[1:3] == TIMEOUT).all()
    w.advance(acts(WAIT, WAIT), np.array([0, -1]))
    assert w.record.events == [[1, 0, 0, 1], [4, 0, 0, 2]]
    assert w.finished == 1
    assert w.record.schedule_errors == []


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


class Peeking(Scripted):
    """Records what preprocessing was shown."""

    def initialize(self, instance: lorr.Instance) -> None:
        self.seen = (len(instance.tasks), len(instance.task_len), instance.team_size)
        super().initialize(instance)


def test_preprocessing_sees_no_task_and_has_a_limit(tmp_path: Path) -> None:
    inst = lorr.read_instance(write_instance(tmp_path, OPEN, [0], [[11], [2]]))
    clock = [0.0]
    planner = Peeking([[WAIT]], [0.1], clock)
    lorr.simulate(inst, planner, steps=2, time_limit=1.0, clock=lambda: clock[0])
    assert planner.seen == (0, 0, 1)  # the kit preprocesses before revealing any task
    assert len(inst.tasks) == 2  # the run itself still has them
    # Scripted preprocessing takes 100 s of the fake clock: over a 99 s limit, the run ends.
    with pytest.raises(
        BudgetExceeded, match=r"preprocessing took 100\.0 s, over the limit of 99 s"
    ):
        lorr.simulate(
            inst, Scripted([[WAIT]], [0.1], clock), steps=2, clock=lambda: clock[0],
            preprocess_limit=99.0,
        )  # fmt: skip
    assert lorr.PREPROCESS_LIMIT_S == 1800.0


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
    assert list(out) == [
        "actionModel", "version", "teamSize", "numTaskFinished", "makespan",
        "numPlannerErrors", "numScheduleErrors", "numEntryTimeouts", "start", "actualPaths",
        "plannerPaths", "plannerTimes", "errors", "actualSchedule", "plannerSchedule",
        "scheduleErrors", "events", "tasks",
    ]  # fmt: skip
    assert out["actualPaths"] == ["F,F,W,W", "W,R,F,W"]
    assert out["start"] == [[0, 0, "E"], [1, 3, "E"]]
    assert out["numTaskFinished"] == 1
    # Robot 0 finished task 0 at timestep 2; the next schedule leaves it free: the kit logs -1.
    assert out["actualSchedule"] == ["1:0,3:-1", "1:1"]
    assert out["events"] == [[1, 0, 0, 1], [2, 0, 0, 2]]  # errands 1 and 2 of task 0
    assert out["tasks"][:3] == [[0, 0, [0, 1, 0, 2]], [1, 0, [2, 0, 2, 1]], [2, 0, [2, 2, 2, 3]]]
    check = lorr.validate(out, inst, time_limit=None)
    assert check.ok, check.problems
    assert check.finished == 1


@pytest.mark.parametrize(
    ("field", "robot", "value", "expected"),
    [
        # An altered action: one line naming the robot and the step.
        ("actualPaths", 1, "W,R,W,W", "robot 1, timestep 3 (action 2): actualPaths has W, the"),
        # Planned and executed: robot 1 would leave the map, the rules refuse it.
        (
            "plannerPaths",
            1,
            "W,R,F,F",
            "timestep 4 (action 3): the rules refuse the joint action "
            "(unallowed move, robot 1), actualPaths executes it",
        ),
        ("numTaskFinished", None, 2, "numTaskFinished: the file claims 2, the rules give 1"),
        ("events", None, [[1, 0, 0, 1]], "events[1]: the file has None"),
        ("errors", None, [[0, -1, 2, "unallowed move"]], "errors[0]: the file has"),
        ("actualSchedule", None, ["1:0", "1:1"], "actualSchedule[0]"),
    ],
)
def test_validator_names_each_disagreement(
    tmp_path: Path, field: str, robot: int | None, value: Any, expected: str
) -> None:
    inst, out = run_file(tmp_path)
    if robot is None:
        out[field] = value
    else:
        out["actualPaths"][robot] = value
        if field == "plannerPaths":
            out["plannerPaths"][robot] = value
    check = lorr.validate(out, inst, time_limit=None)
    assert not check.ok
    assert any(p.startswith(expected) for p in check.problems), check.problems


def test_validator_checks_timeouts_against_planner_times(tmp_path: Path) -> None:
    inst, out = run_file(tmp_path)
    out["plannerTimes"] = [0.2, 0.3, 0.1, 0.4]
    assert lorr.validate(out, inst, time_limit=1.0).ok
    out["plannerTimes"] = [0.2, 2.5, 0.1, 0.4]  # 2.5 s at a 1 s limit: two waits, none shown
    check = lorr.validate(out, inst, time_limit=1.0)
    assert check.problems == (
        "plannerTimes[1]: 2.500 s means 2 timed-out steps at a 1 s limit, the paths show 0",
    )
    assert lorr.validate(out, inst, time_limit=5.0).ok


def test_2023_layout_and_validator(tmp_path: Path) -> None:
    path = write_instance(tmp_path, OPEN, [0, 4], [[1], [5], [2], [6], [3]], edition="2023")
    inst = lorr.read_instance(path)
    clock = [0.0]
    planner = Scripted([[FW, FW], [FW, FW], [FW, FW]], [0.1, 1.5, 0.1], clock)
    result = lorr.simulate(inst, planner, steps=4, time_limit=1.0, clock=lambda: clock[0])
    out = lorr.result_json(result)
    assert list(out) == [
        "actionModel", "AllValid", "teamSize", "start", "numTaskFinished", "sumOfCost",
        "makespan", "actualPaths", "plannerPaths", "plannerTimes", "errors", "events", "tasks",
    ]  # fmt: skip
    # The late answer: T planned, W executed, "incorrect vector size", as the 2023 kit writes.
    assert out["plannerPaths"] == ["F,T,F,F", "F,T,F,F"]
    assert out["actualPaths"] == ["F,W,F,F", "F,W,F,F"]
    assert out["errors"] == [[-1, -1, 2, "incorrect vector size"]]
    assert out["AllValid"] == "No"
    assert (out["sumOfCost"], out["makespan"]) == (8, 4)
    # One plannerTimes entry per executed step; the late step's limit goes to the one before.
    assert out["plannerTimes"] == pytest.approx([1.1, 0.5, 0.1])
    # Kit task ids in hand-out order: robots 0 and 1 get 0 and 1, then 2 and 3 at timestep 1.
    assert out["events"][0] == [
        [0, 0, "assigned"], [0, 1, "finished"], [2, 1, "assigned"], [2, 3, "finished"],
        [4, 3, "assigned"], [4, 4, "finished"], [6, 4, "assigned"],
    ]  # fmt: skip
    assert out["tasks"][:4] == [[0, 0, 1], [1, 1, 1], [2, 0, 2], [3, 1, 2]]
    check = lorr.validate(out, inst, time_limit=1.0)
    assert check.ok, check.problems
    assert (check.finished, check.timeouts) == (5, 1)


def test_validator_refuses_other_files_in_one_line(tmp_path: Path) -> None:
    inst, out = run_file(tmp_path)
    with pytest.raises(ConfigError, match="LoRR 2026 output"):
        lorr.validate({**out, "agentMaxCounter": 10}, inst)
    with pytest.raises(ConfigError, match="robot 1's path is not a string"):
        lorr.validate({**out, "actualPaths": ["F,F,W,W", 3]}, inst)
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  nope")
    with pytest.raises(ConfigError, match=r"bad.json:2: not valid JSON"):
        lorr.validate(bad, inst)
