"""The start kit's output file of a run, and an independent validator that replays one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim.lorr.instance import Instance, _read_text
from fleetmind.sim.lorr.rules import ACTION_CHARS, ORIENT_CHARS, TIMEOUT, WAIT
from fleetmind.sim.lorr.world import RunResult


def _rc(loc: int, width: int) -> list[int]:
    return [loc // width, loc % width]


def _schedule_strings(assignments: list[list[int]], n: int) -> list[str]:
    per_robot: list[list[str]] = [[] for _ in range(n)]
    for step, robot, task in assignments:
        per_robot[robot].append(f"{step}:{task}")
    return [",".join(items) for items in per_robot]


def result_json(result: RunResult) -> dict[str, Any]:
    """The run in the layout of the start kit's output file.

    Keys: ``actionModel``, ``version``, ``teamSize``, ``start`` (``[row, col, "E"]``),
    ``numTaskFinished``, ``sumOfCost`` (non-wait actions), ``makespan`` (steps),
    ``actualPaths`` and ``plannerPaths`` (one ``"F,R,C,W,T"`` string per robot), ``plannerTimes``,
    ``errors``, ``scheduleErrors``, ``events`` (``[step, robot, task, errand_index]``),
    ``assignments`` (``[step, robot, task]``, 2024) and ``actualSchedule`` (the same, one
    ``"step:task,..."`` string per robot), ``tasks`` (``[task, reveal_step, [row, col, ...]]``)
    and fleetmind's own ``instance``, ``timeouts``, ``planTimeLimit``. The layout follows the
    start kit's output file as far as fleetmind knows it; the validator below reads this one.
    """
    inst = result.instance
    rec = result.record
    w = inst.width
    chars = np.array(list(ACTION_CHARS))
    acts = rec.actions[: result.steps]
    planned = rec.planned[: result.steps]
    actual = [",".join(row) for row in chars[acts.T].tolist()]
    plans = [",".join(row) for row in chars[planned.T].tolist()]
    if inst.edition == "2024":
        tasks = []
        for task, step in rec.revealed:
            line = task % len(inst.tasks)
            locs = inst.tasks[line, : inst.task_len[line]].tolist()
            tasks.append([task, step, [v for loc in locs for v in _rc(loc, w)]])
    else:
        ids = sorted({e[2] for e in rec.events} | set(range(inst.team_size)))
        tasks = [[i, 0, _rc(int(inst.tasks[i % len(inst.tasks), 0]), w)] for i in ids]
    return {
        "actionModel": "MAPF_T",
        "version": "2024 LoRR" if inst.edition == "2024" else "2023 LoRR",
        "teamSize": inst.team_size,
        "start": [[*_rc(int(s), w), "E"] for s in inst.starts],
        "numTaskFinished": result.finished,
        "sumOfCost": int(((acts != WAIT) & (acts != TIMEOUT)).sum()),
        "makespan": result.steps,
        "actualPaths": actual,
        "plannerPaths": plans,
        "plannerTimes": [round(t, 6) for t in rec.planner_times],
        "errors": rec.errors,
        "scheduleErrors": rec.schedule_errors,
        "events": rec.events,
        "assignments": rec.assignments,
        "actualSchedule": _schedule_strings(rec.assignments, inst.team_size),
        "tasks": tasks,
        "instance": str(inst.path),
        "timeouts": result.timeouts,
        "planTimeLimit": result.time_limit,
    }


# --------------------------------------------------------------------------- validator


@dataclass(frozen=True)
class Validation:
    """What :func:`validate` found.

    Attributes:
        steps: steps replayed.
        illegal: actions that drive into a wall or off the map, or unknown letters.
        vertex_conflicts: ``(step, cell)`` pairs where two or more robots stand.
        swap_conflicts: pairs of robots trading cells.
        finished: tasks (2024) or errands (2023) the replay finds finished.
        claimed: ``numTaskFinished`` of the file.
        problems: the first few problems in words.
    """

    steps: int
    illegal: int
    vertex_conflicts: int
    swap_conflicts: int
    finished: int
    claimed: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """No conflict, no illegal action, and the task count agrees."""
        return (
            self.illegal == 0
            and self.vertex_conflicts == 0
            and self.swap_conflicts == 0
            and self.finished == self.claimed
            and not self.problems
        )


class _Recount2023:
    """Errands of the round-robin order, found again from the positions alone."""

    def __init__(self, instance: Instance) -> None:
        self.targets = instance.tasks[:, 0]
        self.n = instance.team_size
        self.line = np.arange(self.n, dtype=np.int64)
        self.done = 0

    def feed(self, t: int, here: NDArray[np.int64]) -> None:
        """``here``: locations after step ``t``."""
        hit = here == self.targets[self.line % len(self.targets)]
        self.done += int(hit.sum())
        self.line += self.n * hit


class _Recount2024:
    """The task pool replayed from the file's assignment log and the positions."""

    def __init__(
        self, instance: Instance, assignments: list[list[int]], problems: list[str]
    ) -> None:
        self.tasks = instance.tasks
        self.task_len = instance.task_len
        self.size = instance.pool_size
        self.problems = problems
        n = instance.team_size
        self.robot_task = np.full(n, -1, dtype=np.int64)
        self.robot_k = np.zeros(n, dtype=np.int64)
        self.open: set[int] = set(range(self.size))
        self.revealed = self.size
        self.holder: dict[int, int] = {}
        self.by_step: dict[int, list[tuple[int, int]]] = {}
        for step, robot, task in assignments:
            self.by_step.setdefault(int(step), []).append((int(robot), int(task)))
        self.done = 0

    def _assign(self, t: int) -> None:
        changes = self.by_step.get(t, [])
        for robot, task in changes:
            old = int(self.robot_task[robot])
            if old >= 0 and self.robot_k[robot] > 0:
                self.problems.append(f"step {t}: robot {robot} left started task {old}")
            if task >= 0 and task not in self.open:
                self.problems.append(f"step {t}: robot {robot} given task {task} outside the pool")
            if old >= 0 and self.holder.get(old) == robot:
                del self.holder[old]
            self.robot_task[robot] = task
            self.robot_k[robot] = 0
        for robot, task in changes:
            if task >= 0:
                if self.holder.get(task, robot) != robot:
                    self.problems.append(f"step {t}: task {task} held by two robots")
                self.holder[task] = robot

    def feed(self, t: int, here: NDArray[np.int64]) -> None:
        """Apply step ``t``'s assignments, then the errands reached at ``here`` (after step t)."""
        self._assign(t)
        has = self.robot_task >= 0
        line = self.robot_task % len(self.tasks)
        k = np.minimum(self.robot_k, self.tasks.shape[1] - 1)
        hit = has & (here == self.tasks[line, k])
        self.robot_k += hit
        fin = np.flatnonzero(hit & (self.robot_k >= self.task_len[line]))
        for robot in fin.tolist():
            task = int(self.robot_task[robot])
            self.open.discard(task)
            self.holder.pop(task, None)
            self.robot_task[robot] = -1
            self.robot_k[robot] = 0
            self.done += 1
        while len(self.open) < self.size:
            self.open.add(self.revealed)
            self.revealed += 1


def validate(
    output: dict[str, Any] | str | Path, instance: Instance, *, chunk: int = 256
) -> Validation:
    """Replay an output file against ``instance``: conflicts, legal actions, the task count.

    Independent of :class:`World`: positions come from prefix sums of the actions (in chunks of
    ``chunk`` steps), conflicts from sorting every step's cells and undirected edges, errands from
    a second reading of the rules (2023: the round-robin order from positions alone; 2024: the
    pool, replayed from the file's ``assignments``), never from the file's ``events``.
    """
    if not isinstance(output, dict):
        text = _read_text(Path(output), what="LoRR output file", error=ConfigError)
        try:
            output = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{output}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(output, dict):
        raise ConfigError("LoRR output: expected a JSON object")
    problems: list[str] = []
    h, w = instance.grid.shape
    blocked = instance.grid.blocked
    start = output["start"]
    n = len(start)
    if n != instance.team_size:
        raise ConfigError(f"teamSize {n} differs from the instance's {instance.team_size}")
    row = np.array([s[0] for s in start], dtype=np.int64)
    col = np.array([s[1] for s in start], dtype=np.int64)
    ori = np.array([ORIENT_CHARS.index(s[2]) for s in start], dtype=np.int64)
    if not np.array_equal(row * w + col, instance.starts):
        problems.append("start locations differ from the instance's agents file")
    if (ori != 0).any():
        problems.append(f"robot {int(np.argmax(ori != 0))} does not start facing east")
    lookup = np.full(256, 127, dtype=np.int8)
    for code, ch in enumerate("FRCW"):
        lookup[ord(ch)] = code
    lookup[ord("T")] = 3  # a step the planner ran over is a wait
    paths = output["actualPaths"]
    steps = len(paths[0].split(",")) if paths and paths[0] else 0
    codes = np.empty((steps, n), dtype=np.int8)
    for i, p in enumerate(paths):
        letters = np.frombuffer(p.replace(",", "").encode("ascii"), dtype=np.uint8)
        if letters.size != steps:
            problems.append(f"robot {i}: {letters.size} actions, robot 0 has {steps}")
            letters = np.resize(letters, steps)
        codes[:, i] = lookup[letters]
    illegal = int((codes == 127).sum())
    codes[codes == 127] = 3
    recount: _Recount2023 | _Recount2024
    if instance.edition == "2023":
        recount = _Recount2023(instance)
    else:
        recount = _Recount2024(instance, output.get("assignments", []), problems)
    dr = np.array([0, 1, 0, -1], dtype=np.int64)
    dc = np.array([1, 0, -1, 0], dtype=np.int64)
    vertex = swaps = 0
    prev = row * w + col
    inside = np.ones(n, dtype=bool)
    for t0 in range(0, steps, chunk):
        c = codes[t0 : t0 + chunk].astype(np.int64)
        turn = (c == 1).astype(np.int64) - (c == 2)
        ori_before = (ori[None, :] + np.cumsum(turn, axis=0) - turn) % 4
        fw = c == 0
        rows = row[None, :] + np.cumsum(dr[ori_before] * fw, axis=0)  # (chunk, n) after each
        cols = col[None, :] + np.cumsum(dc[ori_before] * fw, axis=0)
        ori = (ori_before[-1] + turn[-1]) % 4
        row, col = rows[-1], cols[-1]
        off = (rows < 0) | (rows >= h) | (cols < 0) | (cols >= w)
        rc, cc = np.clip(rows, 0, h - 1), np.clip(cols, 0, w - 1)
        bad = off | blocked[rc, cc]
        before = np.vstack([~inside[None, :], bad[:-1]])
        illegal += int((bad & ~before).sum())  # count each entry into a wall once
        inside = ~bad[-1]
        loc = rc * w + cc
        srt = np.sort(loc, axis=1)
        dup = srt[:, 1:] == srt[:, :-1]
        first = dup & ~np.hstack([np.zeros((len(dup), 1), dtype=bool), dup[:, :-1]])
        vertex += int(first.sum())
        frm = np.vstack([prev[None, :], loc[:-1]])
        t_idx, r_idx = np.nonzero(frm != loc)
        a, b = frm[t_idx, r_idx], loc[t_idx, r_idx]
        hw = h * w
        edge = t_idx.astype(np.int64) * hw * hw + np.minimum(a, b) * hw + np.maximum(a, b)
        e_sorted = np.sort(edge)
        swaps += int((e_sorted[1:] == e_sorted[:-1]).sum())
        prev = loc[-1]
        for k in range(len(loc)):
            recount.feed(t0 + k, loc[k])
    finished = recount.done
    claimed = int(output.get("numTaskFinished", -1))
    if finished != claimed:
        problems.append(f"replay finds {finished} finished, the file claims {claimed}")
    return Validation(
        steps=steps,
        illegal=illegal,
        vertex_conflicts=vertex,
        swap_conflicts=swaps,
        finished=finished,
        claimed=claimed,
        problems=tuple(problems[:10]),
    )


def write_output(result: RunResult, path: str | Path) -> dict[str, Any]:
    """Write :func:`result_json` to ``path``; returns the dict."""
    data = result_json(result)
    Path(path).write_text(json.dumps(data, separators=(",", ":")))
    return data
