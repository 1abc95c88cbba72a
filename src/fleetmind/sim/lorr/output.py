"""The start kit's output file of a run: the 2024 layout (v2.1.x) or the 2023 one, by edition.

Field by field as the kit's ``saveResults`` writes them (``Input_Output_Format.md`` of the
matching start-kit version describes the fields), in the kit's key order and layout (JSON
indented by four spaces, no final newline), so that PlanViz and the kit's own scripts read the
file and :func:`fleetmind.sim.lorr.validate` can replay it like any start-kit output.

2024 keys: ``actionModel``, ``version``, ``teamSize``, ``numTaskFinished``, ``makespan``,
``numPlannerErrors``, ``numScheduleErrors``, ``numEntryTimeouts``, ``start``, ``actualPaths``,
``plannerPaths``, ``plannerTimes``, ``errors``, ``actualSchedule``, ``plannerSchedule``,
``scheduleErrors``, ``events``, ``tasks``.

2023 keys: ``actionModel``, ``AllValid``, ``teamSize``, ``start``, ``numTaskFinished``,
``sumOfCost``, ``makespan``, ``actualPaths``, ``plannerPaths``, ``plannerTimes``, ``errors``,
``events`` (one list per robot of ``[task, timestep, "assigned" | "finished"]``), ``tasks``
(``[task, row, col]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.sim.lorr.rules import ACTION_CHARS
from fleetmind.sim.lorr.world import RunResult


def _rc(loc: int, width: int) -> list[int]:
    return [loc // width, loc % width]


def _schedule_strings(log: list[list[tuple[int, int]]]) -> list[str]:
    return [",".join(f"{t}:{task}" for t, task in entries) for entries in log]


def _times_2023(result: RunResult) -> list[float]:
    """The 2023 kit's ``plannerTimes``: one entry per executed step.

    A step the planner ran over adds the limit to the entry before it (the 2023 kit's
    ``planner_times.back() += plan_time_limit``), and the late answer's entry is the wait that
    returned it.
    """
    rec = result.record
    limit = result.time_limit or 0.0
    times: list[float] = []
    executed = result.steps - sum(rec.call_timeouts)
    for spent, waited in zip(rec.planner_times, rec.call_timeouts, strict=True):
        for _ in range(waited):
            if times:
                times[-1] += limit
        if len(times) < executed:
            times.append(spent - waited * limit)
    return times


def result_json(result: RunResult) -> dict[str, Any]:
    """The run as the start kit writes its output file (the layout of the run's edition)."""
    inst = result.instance
    rec = result.record
    w = inst.width
    chars = np.array(list(ACTION_CHARS))
    acts = rec.actions[: result.steps]
    planned = rec.planned[: result.steps]
    actual = [",".join(row) for row in chars[acts.T].tolist()]
    plans = [",".join(row) for row in chars[planned.T].tolist()]
    start = [[*_rc(int(s), w), "E"] for s in inst.starts]
    makespan = int(rec.goal_steps.max()) if len(rec.goal_steps) else 0
    if inst.edition == "2023":
        return {
            "actionModel": "MAPF_T",
            "AllValid": "Yes" if rec.all_valid else "No",
            "teamSize": inst.team_size,
            "start": start,
            "numTaskFinished": result.finished,
            "sumOfCost": int(rec.goal_steps.sum()),
            "makespan": makespan,
            "actualPaths": actual,
            "plannerPaths": plans,
            "plannerTimes": _times_2023(result),
            "errors": rec.errors,
            "events": rec.events,
            "tasks": [[kid, *_rc(loc, w)] for kid, loc in rec.revealed],
        }
    tasks = []
    for task, step in rec.revealed:
        line = task % len(inst.tasks)
        locs = inst.tasks[line, : inst.task_len[line]].tolist()
        tasks.append([task, step, [v for loc in locs for v in _rc(loc, w)]])
    return {
        "actionModel": "MAPF_T",
        "version": "2024 LoRR",
        "teamSize": inst.team_size,
        "numTaskFinished": result.finished,
        "makespan": makespan,
        "numPlannerErrors": len(rec.errors),
        "numScheduleErrors": len(rec.schedule_errors),
        "numEntryTimeouts": result.timeouts,
        "start": start,
        "actualPaths": actual,
        "plannerPaths": plans,
        "plannerTimes": list(rec.planner_times),
        "errors": rec.errors,
        "actualSchedule": _schedule_strings(rec.actual_schedule),
        "plannerSchedule": _schedule_strings(rec.planner_schedule),
        "scheduleErrors": rec.schedule_errors,
        "events": rec.events,
        "tasks": tasks,
    }


def dumps(output: dict[str, Any]) -> str:
    """JSON text in the kit's layout (nlohmann ``setw(4)``: four-space indent, no final newline)."""
    return json.dumps(output, indent=4)


def write_output(result: RunResult, path: str | Path) -> dict[str, Any]:
    """Write :func:`result_json` to ``path`` in the kit's layout; returns the dict."""
    data = result_json(result)
    Path(path).write_text(dumps(data))
    return data
