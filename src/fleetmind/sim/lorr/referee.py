"""Replay any start-kit output file under the LoRR rules and list where it disagrees.

Code of its own, sharing nothing with :class:`~fleetmind.sim.lorr.World` or any planner: it
reads the file's ``plannerPaths`` (what the entry answered) and, in 2024, ``plannerSchedule``
(what its scheduler proposed), plays them under the start kit's rules, and compares what the
rules give with every claim the file makes: ``actualPaths``, ``errors``, ``numTaskFinished``,
``events``, ``tasks``, and, by edition, ``actualSchedule``, ``scheduleErrors``,
``numPlannerErrors``, ``numScheduleErrors``, ``numEntryTimeouts`` (2024) or ``AllValid``,
``sumOfCost``, ``makespan`` (2023). ``plannerTimes`` is checked against the time limit: a call
of ``p`` seconds makes the robots wait ``floor(p / L)`` steps (the kit waits in slices of
``L``).

The rules, as the kit plays them (v2.1.x for 2024, ``2023-archive`` for 2023):

- A step's joint action is refused whole (everyone waits) at the first fault, robots in id
  order: ``unallowed move`` (off the map or into a wall), ``vertex conflict`` (with the earlier
  robot), ``edge conflict`` (two robots trading cells); a missing answer is ``incorrect vector
  size``. Errors carry the timestep after the move (action ``t`` lands at ``t + 1``).
- 2024: a step the planner ran over is all ``T`` in both paths; nothing else happens then.
  After an executed step the proposed schedule is checked (``task already finished``, ``task is
  already assigned by the second agent at the same time``, ``task is already opened by the
  second agent``; errors stamped one past the step's timestep), errands are marked (one per robot
  a step, events count them from 1) and the pool refilled to ``int(numTasksReveal x teamSize)``.
- 2023: a late answer is an empty one (``T`` planned, ``W`` executed, ``incorrect vector
  size``); errands are marked after every step, one per robot; the kit numbers tasks in the
  order it hands them out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, read_input
from fleetmind.sim.lorr.instance import Instance, json_object
from fleetmind.sim.lorr.referee2026 import (
    TaskPool,
    check_starts,
    compare_lists,
    output_team,
    replay,
)
from fleetmind.sim.lorr.rules import first_fault

_LETTERS = "FRCWT"
_F, _R, _C, _W, _T = range(5)
_DR = np.array([0, 1, 0, -1], dtype=np.int64)
_DC = np.array([1, 0, -1, 0], dtype=np.int64)
MAX_OUTPUT_BYTES = 2 * 1024**3
"""Largest output file read: 5,000 robots for 5,000 steps make about 130 MB in the kit's layout."""
MAX_LINES_PER_FIELD = 20
"""Disagreements listed per field before the rest are counted in one line."""


@dataclass(frozen=True)
class Validation:
    """What :func:`validate` found.

    Attributes:
        edition: the rules replayed (``"2023"``, ``"2024"`` or ``"2026"``, see
            :mod:`~fleetmind.sim.lorr.referee2026`).
        steps: steps replayed.
        finished: tasks (2024) or errands (2023) the rules finish.
        claimed: ``numTaskFinished`` of the file.
        errors: the refused joint actions the rules find, in the kit's form.
        schedule_errors: the refused schedules the rules find (2024).
        timeouts: steps the robots waited for the planner (2023: steps with no answer).
        executed_conflicts: steps whose ``actualPaths`` moves collide or leave the map (0 when
            the file executes what the rules execute); 2026: overlapping swept squares.
        problems: one line per disagreement between the file and the rules.
        refused: 2026: robot-ticks where the executor asked for a move and the action model
            made the robot wait outside a delay (collisions it prevented).
        delayed: 2026: robot-ticks inside the file's delay intervals.
        notes: 2026: differences not held against the file (pre-v3 schedule stamps).
    """

    edition: str
    steps: int
    finished: int
    claimed: int
    errors: list[list[Any]]
    schedule_errors: list[list[Any]]
    timeouts: int
    executed_conflicts: int
    problems: tuple[str, ...]
    refused: int = 0
    delayed: int = 0
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The file says what the rules say."""
        return not self.problems


def load(output: dict[str, Any] | str | Path) -> dict[str, Any]:
    """An output file's JSON object (a dict passes through)."""
    if isinstance(output, dict):
        return output
    path = Path(output)
    text = read_input(path, what="LoRR output file", limit=MAX_OUTPUT_BYTES, error=ConfigError)
    return json_object(text, path)


def _paths(data: dict[str, Any], key: str, n: int, problems: list[str]) -> NDArray[np.int8]:
    """``(steps, n)`` action codes of ``data[key]``; unknown letters read as waits."""
    paths = data[key]
    if not isinstance(paths, list) or len(paths) != n:
        raise ConfigError(f"field {key!r}: expected {n} strings, one per robot")
    lookup = np.full(256, 127, dtype=np.int8)
    for code, ch in enumerate(_LETTERS):
        lookup[ord(ch)] = code
    rows = []
    for i, p in enumerate(paths):
        if not isinstance(p, str):
            raise ConfigError(f"field {key!r}: robot {i}'s path is not a string")
        letters = np.frombuffer(p.replace(",", "").encode("ascii", "replace"), dtype=np.uint8)
        rows.append(lookup[letters])
    steps = len(rows[0]) if rows else 0
    out = np.full((steps, n), _W, dtype=np.int8)
    for i, codes in enumerate(rows):
        if len(codes) != steps:
            problems.append(f"{key}: robot {i} has {len(codes)} actions, robot 0 has {steps}")
        bad = np.flatnonzero(codes == 127)
        for k in bad[:3].tolist():
            problems.append(f"{key}: robot {i}, action {k}: unknown letter")
        codes = np.where(codes == 127, _W, codes)[:steps]
        out[: len(codes), i] = codes
    return out


class _Rules:
    """Positions and the kit's check of one joint action."""

    def __init__(self, instance: Instance, row: NDArray[np.int64], col: NDArray[np.int64]):
        self.h, self.w = instance.grid.shape
        self.blocked = instance.grid.blocked
        self.row, self.col = row.copy(), col.copy()
        self.ori = np.zeros(len(row), dtype=np.int64)

    def after(self, codes: NDArray[np.int8]) -> tuple[NDArray[np.int64], ...]:
        fw = codes == _F
        row = self.row + fw * _DR[self.ori]
        col = self.col + fw * _DC[self.ori]
        turn = (codes == _R).astype(np.int64) - (codes == _C)
        return row, col, (self.ori + turn) % 4

    def fault(self, codes: NDArray[np.int8], timestep: int) -> list[Any] | None:
        """The kit's first fault of ``codes`` from the current positions, or ``None``."""
        row, col, _ = self.after(codes)
        out = (row < 0) | (row >= self.h) | (col < 0) | (col >= self.w)
        bad = out.copy()
        bad[~out] = self.blocked[row[~out], col[~out]]
        here = self.row * self.w + self.col
        there = np.where(out, -1 - np.arange(len(row)), row * self.w + col)
        clash = np.unique(there).size != there.size
        moved = here != there
        swap = False
        if moved.any():
            a, b = here[moved], there[moved]
            key = np.minimum(a, b) * (self.h * self.w + 1) + np.maximum(a, b)
            swap = np.unique(key).size != key.size
        if not (bad.any() or clash or swap):
            return None
        return first_fault(here, there, bad, timestep)

    def move(self, codes: NDArray[np.int8]) -> None:
        self.row, self.col, self.ori = self.after(codes)

    @property
    def loc(self) -> NDArray[np.int64]:
        return self.row * self.w + self.col


class _Tasks2024(TaskPool):
    """The 2024 task pool and schedule, from the file's proposals."""

    def __init__(self, instance: Instance, data: dict[str, Any], n: int) -> None:
        super().__init__(instance, data, n)
        self.goal = np.full(n, -1, dtype=np.int64)
        self.next_idx: dict[int, int] = {}
        self.holder: dict[int, int] = {}
        self.last_actual = np.full(n, -2, dtype=np.int64)
        self.reveal(0)

    def reveal(self, t: int) -> None:
        while len(self.next_idx) < self.size:
            self.next_idx[self.announce(t)] = 0

    def _objection(self, proposal: NDArray[np.int64], t: int) -> list[Any] | None:
        seen: dict[int, int] = {}
        for i in range(self.n):
            task = int(proposal[i])
            if task != -1 and task not in self.next_idx:
                return [task, i, -1, t + 1, "task already finished"]
            if task != -1 and task in seen:
                return [
                    task, i, seen[task], t + 1,
                    "task is already assigned by the second agent at the same time",
                ]  # fmt: skip
            cur = int(self.current[i])
            if cur != -1 and self.next_idx[cur] > 0 and task != cur:
                holder = self.holder.get(cur, -1)
                return [task, i, holder, t + 1, "task is already opened by the second agent"]
            if task != -1:
                seen[task] = i
        return None

    def update(self, t: int, loc: NDArray[np.int64]) -> None:
        """An executed step landed at timestep ``t``: schedule, errands, reveal."""
        for robot, task in self.by_tick.get(t, []):
            self.proposal[robot] = task
        error = self._objection(self.proposal, t)
        if error is not None:
            self.errors.append(error)
        else:
            changed = np.flatnonzero(self.proposal != self.current).tolist()
            for i in changed:
                old = int(self.current[i])
                if old >= 0 and self.holder.get(old) == i:
                    del self.holder[old]
            self.current = self.proposal.copy()
            for i in changed:
                task = int(self.current[i])
                if task >= 0:
                    self.holder[task] = i
                    self.goal[i] = self.lines[task % len(self.lines), self.next_idx[task]]
                else:
                    self.goal[i] = -1
            for i in np.flatnonzero(self.current != self.last_actual).tolist():
                self.actual[i].append((t, int(self.current[i])))
            self.last_actual = self.current.copy()
        hit = np.flatnonzero((self.current >= 0) & (loc == self.goal))
        for i in hit.tolist():
            task = int(self.current[i])
            k = self.next_idx[task] + 1
            self.next_idx[task] = k
            if k >= self.lens[task % len(self.lines)]:
                self.current[i] = -1
                self.goal[i] = -1
                del self.next_idx[task]
                self.holder.pop(task, None)
                self.done += 1
            else:
                self.goal[i] = self.lines[task % len(self.lines), k]
            self.events.append([t, i, task, k])
        self.reveal(t)


class _Tasks2023:
    """The 2023 round-robin errands, with the kit's task numbering."""

    def __init__(self, instance: Instance, n: int) -> None:
        self.lines = instance.tasks[:, 0]
        self.n = n
        self.reveal = max(1, int(instance.num_tasks_reveal))
        self.count = np.zeros(n, dtype=np.int64)  # errands handed to each robot
        self.queue: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.events: list[list[list[Any]]] = [[] for _ in range(n)]
        self.tasks: list[tuple[int, int]] = []
        self.next_id = 0
        self.done = 0
        self._hand_out(0)
        self.front = np.array([q[0][1] for q in self.queue], dtype=np.int64)  # (n,) next errand

    def _hand_out(self, t: int, robots: list[int] | None = None) -> None:
        for k in range(self.n) if robots is None else robots:
            while len(self.queue[k]) < self.reveal:
                loc = int(self.lines[(int(self.count[k]) * self.n + k) % len(self.lines)])
                self.count[k] += 1
                self.queue[k].append((self.next_id, loc))
                self.events[k].append([self.next_id, t, "assigned"])
                self.tasks.append((self.next_id, loc))
                self.next_id += 1

    def update(self, t: int, loc: NDArray[np.int64]) -> None:
        """After the move landing at timestep ``t``: one errand a robot, then new ones."""
        reached = np.flatnonzero(loc == self.front).tolist()
        for k in reached:
            task, _ = self.queue[k].pop(0)
            self.events[k].append([task, t, "finished"])
            self.done += 1
        if reached:
            self._hand_out(t, reached)
            for k in reached:
                self.front[k] = self.queue[k][0][1]


def _claim(data: dict[str, Any], key: str, value: Any, problems: list[str]) -> None:
    if key in data and data[key] != value:
        problems.append(f"{key}: the file claims {data[key]}, the rules give {value}")


def _check_times(
    data: dict[str, Any],
    waits: list[int],
    executed: int,
    edition: str,
    time_limit: float | None,
    problems: list[str],
) -> None:
    """``plannerTimes`` against the timed-out steps (2024: one entry per planner call)."""
    times = data.get("plannerTimes")
    if times is None or time_limit is None:
        return
    slack = 0.01 * time_limit + 0.01  # thread wake-up jitter of the kit's waits
    if edition == "2023":
        if len(times) != executed:
            problems.append(
                f"plannerTimes: {len(times)} entries, the 2023 kit writes one per executed "
                f"step ({executed})"
            )
        return
    if len(times) != len(waits):
        problems.append(f"plannerTimes: {len(times)} entries for {len(waits)} planner calls")
        return
    lines = []
    for i, (p, k) in enumerate(zip(times, waits, strict=True)):
        last = i == len(waits) - 1
        if p < k * time_limit - slack or (not last and p >= (k + 1) * time_limit + slack):
            expect = math.floor(p / time_limit)
            lines.append(
                f"plannerTimes[{i}]: {p:.3f} s means {expect} timed-out steps at a "
                f"{time_limit:g} s limit, the paths show {k}"
            )
    problems += lines[:MAX_LINES_PER_FIELD]
    if len(lines) > MAX_LINES_PER_FIELD:
        problems.append(f"plannerTimes: {len(lines) - MAX_LINES_PER_FIELD} more differences")


def validate(
    output: dict[str, Any] | str | Path,
    instance: Instance,
    *,
    time_limit: float | None = 1.0,
    source: str | None = None,
) -> Validation:
    """Replay a start-kit output file against ``instance`` and compare it with the rules.

    Args:
        output: the file (a path) or its JSON object.
        instance: the problem, read with the file's ``teamSize`` (the kit reads the first
            ``teamSize`` agents).
        time_limit: the run's per-step limit in seconds (``--planTimeLimit``), to check
            ``plannerTimes``; ``None`` skips that check.
        source: the file's name for error messages (default: the path given).

    Raises:
        ConfigError: a field the replay needs is missing or malformed (named).
    """
    data = load(output)
    source = source or ("LoRR output" if isinstance(output, dict) else str(output))
    try:
        return _validate(data, instance, time_limit=time_limit)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _validate(data: dict[str, Any], instance: Instance, *, time_limit: float | None) -> Validation:
    problems: list[str] = []
    if "agentMaxCounter" in data or "outputSegmentSize" in data:
        if instance.edition != "2026":
            raise ConfigError(
                f"a LoRR 2026 output (agentMaxCounter, path segments) for the "
                f"{instance.edition} problem {instance.path}: give its 2026 problem"
            )
        found = replay(data, instance)
        return Validation(
            edition="2026",
            steps=found.steps,
            finished=found.finished,
            claimed=int(data.get("numTaskFinished", -1)),
            errors=[],
            schedule_errors=found.schedule_errors,
            timeouts=found.timeouts,
            executed_conflicts=found.collisions,
            problems=found.problems,
            refused=found.refused,
            delayed=found.delayed,
            notes=found.notes,
        )
    if instance.edition == "2026":
        raise ConfigError(
            f"a 2023/2024 output (no agentMaxCounter) for the 2026 problem {instance.path}"
        )
    n = output_team(data, instance)
    edition = instance.edition
    w = instance.width
    row, col = check_starts(data["start"], instance, problems)
    actual = _paths(data, "actualPaths", n, problems)
    planned = _paths(data, "plannerPaths", n, problems) if "plannerPaths" in data else None
    steps = len(actual)
    if planned is not None and len(planned) != steps:
        problems.append(f"plannerPaths: {len(planned)} steps, actualPaths {steps}")
        planned = None
    if planned is None:
        planned = actual.copy()
    rules = _Rules(instance, row, col)
    tasks: _Tasks2024 | _Tasks2023
    tasks = _Tasks2024(instance, data, n) if edition == "2024" else _Tasks2023(instance, n)
    errors: list[list[Any]] = []
    waits: list[int] = []
    run = 0
    timeouts = executed_conflicts = 0
    moved_lines: list[str] = []
    for t in range(steps):
        p, a = planned[t], actual[t]
        timed_out = edition == "2024" and bool((p == _T).all() and (a == _T).all())
        error: list[Any] | None = None
        if timed_out:
            expect = np.full(n, _T, dtype=np.int8)
            timeouts += 1
            run += 1
        else:
            waits.append(run)
            run = 0
            if edition == "2023" and bool((p == _T).all()):
                timeouts += 1  # the 2023 kit's late answer: an empty one
            error = (
                [-1, -1, t + 1, "incorrect vector size"]
                if (p == _T).any()
                else rules.fault(p, t + 1)
            )
            if error is not None:
                errors.append(error)
            expect = p if error is None else np.full(n, _W, dtype=np.int8)
        differ = np.flatnonzero(a != expect)
        if differ.size and not timed_out and error is not None:
            who = f"robot {error[0]}" + (f" and robot {error[1]}" if error[1] >= 0 else "")
            moved_lines.append(
                f"timestep {t + 1} (action {t}): the rules refuse the joint action "
                f"({error[3]}, {who}), actualPaths executes it"
            )
            differ = differ[:0]
        for r in differ.tolist():
            moved_lines.append(
                f"robot {r}, timestep {t + 1} (action {t}): actualPaths has "
                f"{_LETTERS[a[r]]}, the rules execute {_LETTERS[expect[r]]}"
            )
        if differ.size and rules.fault(np.where(a == _T, _W, a), t + 1) is not None:
            executed_conflicts += 1
        if not timed_out:
            rules.move(expect)
        if edition == "2023" or not timed_out:
            tasks.update(t + 1, rules.loc)
    if run:
        waits.append(run)
    problems += moved_lines[:MAX_LINES_PER_FIELD]
    if len(moved_lines) > MAX_LINES_PER_FIELD:
        problems.append(f"actualPaths: {len(moved_lines) - MAX_LINES_PER_FIELD} more differences")
    claimed = int(data.get("numTaskFinished", -1))
    if claimed != tasks.done:
        problems.append(f"numTaskFinished: the file claims {claimed}, the rules give {tasks.done}")
    compare_lists("errors", list(data.get("errors", [])), errors, problems)
    schedule_errors: list[list[Any]] = []
    if isinstance(tasks, _Tasks2024):
        schedule_errors = tasks.errors
        _claim(data, "numPlannerErrors", len(errors), problems)
        _claim(data, "numScheduleErrors", len(schedule_errors), problems)
        _claim(data, "numEntryTimeouts", timeouts, problems)
        compare_lists(
            "scheduleErrors", list(data.get("scheduleErrors", [])), schedule_errors, problems
        )
        if "actualSchedule" in data:
            mine = [",".join(f"{t}:{k}" for t, k in e) for e in tasks.actual]
            compare_lists("actualSchedule", list(data["actualSchedule"]), mine, problems)
        if "events" in data:
            compare_lists("events", list(data["events"]), tasks.events, problems)
        if "tasks" in data:
            compare_lists("tasks", list(data["tasks"]), tasks.tasks, problems)
    else:
        _claim(data, "AllValid", "No" if errors else "Yes", problems)
        _claim(data, "sumOfCost", n * steps, problems)
        _claim(data, "makespan", steps, problems)
        if "events" in data:
            compare_lists("events", list(data["events"]), tasks.events, problems)
        if "tasks" in data:
            mine_2023 = [[i, loc // w, loc % w] for i, loc in tasks.tasks]
            compare_lists("tasks", list(data["tasks"]), mine_2023, problems)
    executed = steps - timeouts if edition == "2024" else steps - int((planned == _T).all(1).sum())
    _check_times(data, waits, executed, edition, time_limit, problems)
    return Validation(
        edition=edition,
        steps=steps,
        finished=tasks.done,
        claimed=claimed,
        errors=errors,
        schedule_errors=schedule_errors,
        timeouts=timeouts,
        executed_conflicts=executed_conflicts,
        problems=tuple(problems),
    )
