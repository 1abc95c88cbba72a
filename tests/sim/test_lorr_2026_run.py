"""Playing LoRR 2026 problems: the loop, the action model, delays, the rule executor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fleetmind.dispatch.lorr import PibtPlanner
from fleetmind.dispatch.lorr2026 import RuleExecutor, StagedPlanner, acyclic
from fleetmind.errors import ConfigError
from fleetmind.sim import lorr
from fleetmind.sim.lorr import FW, WAIT
from fleetmind.sim.lorr.world2026 import (
    NONE,
    ActionModel,
    Delays,
    State,
    output2026,
    simulate2026,
)

KIT = Path(__file__).resolve().parents[2] / "tests" / "data" / "lorr"
MAZE = KIT / "2026/maze.domain/maze-example_40.json"


def play(ticks: int, **kw: object) -> tuple[lorr.Instance, dict[str, object]]:
    inst = lorr.read_instance(MAZE)
    run = simulate2026(
        inst,
        StagedPlanner(PibtPlanner(seed=0)),
        RuleExecutor(),
        ticks=ticks,
        **kw,  # type: ignore[arg-type]
    )
    return inst, output2026(run)


def test_a_2026_run_writes_a_file_the_validator_accepts() -> None:
    inst, out = play(300, delay_seed=3)
    check = lorr.validate(out, inst, time_limit=None)
    assert check.ok, check.problems
    assert check.executed_conflicts == 0
    assert out["numTaskFinished"] == check.finished > 0
    assert check.delayed > 0  # robots were stopped, and executed waits there
    assert list(out)[:10] == [
        "actionModel", "version", "teamSize", "numTaskFinished", "makespan", "numPlannerErrors",
        "numScheduleErrors", "numEntryTimeouts", "agentMaxCounter", "outputSegmentSize",
    ]  # fmt: skip
    json.dumps(out)  # plain JSON types only


def test_runs_repeat_and_delays_follow_their_seed() -> None:
    _, a = play(200, delay_seed=1)
    _, b = play(200, delay_seed=1)
    _, c = play(200, delay_seed=2)
    _, off = play(200, delays=False)
    assert a["actualPaths"] == b["actualPaths"]
    assert a["delayIntervals"] != c["delayIntervals"]
    assert off["delayIntervals"] == [[] for _ in range(40)]


def test_delay_draws_stay_in_their_range(tmp_path: Path) -> None:
    path = lorr.write_instance(tmp_path, ["...."], [0, 2], [[1]], name="d")
    spec = json.loads(path.read_text())
    spec["delayConfig"] = {
        "seed": 0, "minDelay": 2, "maxDelay": 4, "eventModel": "bernoulli", "pDelay": 1.0,
        "durationModel": "gaussian", "gaussMeanRatio": 0.5, "gaussStdRatio": 2.0,
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    draw = Delays(lorr.read_instance(path), seed=None, enabled=True)
    stopped = [draw.tick(t) for t in range(30)]
    assert all(s.all() for s in stopped)  # p = 1: every free robot is hit at once
    lengths = [e - s for spans in draw.intervals for s, e in spans]
    assert set(lengths) <= {2, 3, 4}
    assert len(set(lengths)) > 1


def test_the_action_model_turns_an_unsafe_move_into_a_wait(tmp_path: Path) -> None:
    path = lorr.write_instance(tmp_path, ["....", "@..."], [0, 1, 6], [[3]], name="m")
    spec = json.loads(path.read_text()) | {"version": "2026 LoRR", "agentCounter": 2}
    spec["delayConfig"] = {
        "seed": 0, "minDelay": 1, "maxDelay": 1, "eventModel": "bernoulli", "pDelay": 0.0,
        "durationModel": "uniform", "gaussMeanRatio": 0.5, "gaussStdRatio": 0.2,
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    inst = lorr.read_instance(path)
    model = ActionModel(inst)
    n = 3
    state = State(
        loc=inst.starts.copy(), ori=np.zeros(n, dtype=np.int64),
        cur=np.full(n, NONE, dtype=np.int64), count=np.zeros(n, dtype=np.int64),
        delayed=np.zeros(n, dtype=bool),
    )  # fmt: skip
    # Robot 0 drives into robot 1, which waits: refused. Robot 2 (row 1, col 2) goes east: free.
    exe, nxt = model.step(state, np.array([FW, WAIT, FW]))
    assert exe.tolist() == [WAIT, WAIT, FW]
    assert (nxt.count.tolist(), nxt.cur.tolist()) == ([0, 0, 1], [NONE, NONE, FW])
    # Both robots of row 0 drive east together: touching squares, both go.
    exe, _ = model.step(state, np.array([FW, FW, WAIT]))
    assert exe.tolist() == [FW, FW, WAIT]


def test_acyclic_keeps_chains_into_free_cells_only() -> None:
    w = 4
    # A 2 x 2 cycle: (0,0) E, (0,1) S, (1,1) W, (1,0) N.
    loc = np.array([0, 1, 5, 4])
    ori = np.array([0, 1, 2, 3])
    act = np.full(4, FW)
    assert acyclic(act, loc, ori, w).tolist() == [WAIT] * 4
    # A chain east along row 0 into a free cell moves; the same chain behind a stayer waits.
    loc, ori = np.array([0, 1, 2]), np.zeros(3, dtype=np.int64)
    assert acyclic(np.array([FW, FW, FW]), loc, ori, w).tolist() == [FW, FW, FW]
    assert acyclic(np.array([FW, FW, WAIT]), loc, ori, w).tolist() == [WAIT, WAIT, WAIT]


class Dropper(RuleExecutor):
    """Breaks the prefix rule: throws away the staged actions and stages the plan reversed."""

    def process_new_plan(self, actions, staged, state):  # type: ignore[no-untyped-def]
        staged, loc, ori = super().process_new_plan(actions, staged, state)
        return [s[::-1] for s in staged], loc, ori


def test_an_executor_that_breaks_the_prefix_rule_is_named() -> None:
    inst = lorr.read_instance(MAZE)
    with pytest.raises(ConfigError, match=r"executor: robot \d+'s staged actions are not a prefix"):
        simulate2026(inst, StagedPlanner(PibtPlanner(seed=0), steps=3), Dropper(), ticks=50)


def _finished_by(tick_marks: list[tuple[int, int]], tick: int) -> int:
    return max(f for t, f in tick_marks if t <= tick)


def test_the_staged_planner_keeps_finishing_on_a_generated_problem() -> None:
    from fleetmind.bench.lorr import DEFAULT_LEVERS_2026, LEVER_SETS
    from fleetmind.dispatch.lorr import Levers
    from fleetmind.rl.lorr_executor import training_problems

    # A generated problem (133 robots, counter 3, shelf rows; none of the scored maps) on
    # which the planner of the previous release locks up for good: PIBT's fixed order keeps
    # stuck robots stuck, and one robot's backlog skips every robot's plan.
    inst = training_problems(1000, 2)[1]

    def marks(planner: StagedPlanner, ex: RuleExecutor) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        simulate2026(
            inst, planner, ex, ticks=1500, delays=False,
            progress=lambda t, f: out.append((t, f)),
        )  # fmt: skip
        return out

    old = marks(StagedPlanner(PibtPlanner(Levers(highway=2))), RuleExecutor())
    assert _finished_by(old, 1490) - _finished_by(old, 1000) < 30  # locked
    ex = RuleExecutor(hold=True)
    new = marks(StagedPlanner(PibtPlanner(LEVER_SETS[DEFAULT_LEVERS_2026]), executor=ex), ex)
    assert _finished_by(new, 1490) - _finished_by(new, 1000) > 150
    assert ex.skipped == 0


def test_hold_stages_every_plan_and_plans_waits_for_a_backlog() -> None:
    inst = lorr.read_instance(MAZE)
    # Without hold, one robot over the limit skips the whole fleet's plan.
    skipping = RuleExecutor(max_staged=3)
    simulate2026(inst, StagedPlanner(PibtPlanner(seed=0)), skipping, ticks=400, delay_seed=5)
    assert skipping.skipped > 0
    ex = RuleExecutor(max_staged=3, hold=True)
    held_waits = []

    class Watched(StagedPlanner):
        def plan(self, view):  # type: ignore[no-untyped-def]
            answer = super().plan(view)
            held = ex.held()
            if held is not None and held.any():
                held_waits.append(bool((answer.actions[held] == WAIT).all()))
            return answer

    planner = Watched(PibtPlanner(seed=0), executor=ex)
    run = simulate2026(inst, planner, ex, ticks=400, delay_seed=5)
    check = lorr.validate(output2026(run), inst, time_limit=None)
    assert check.ok, check.problems
    assert check.executed_conflicts == 0
    assert ex.skipped == 0
    assert held_waits  # robots were held
    assert all(held_waits)  # and held robots only wait
    assert planner.steps is not None
    assert ex.backlog.max() <= ex.limit + planner.steps  # no pile-up past one plan
