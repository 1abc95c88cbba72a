"""LoRR instance files: the ``.json``, ``.map``, ``.agents`` and ``.tasks`` readers.

Every reader raises one error whose message names the file and the 1-based line at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import (
    ConfigError,
    FleetmindError,
    MapError,
    TaskFileError,
    check_range,
    read_input,
)
from fleetmind.sim.grid import GridMap
from fleetmind.sim.lorr.rules import MAX_FILE_BYTES, Edition
from fleetmind.sim.maps import parse_movingai


@dataclass(frozen=True)
class DelayConfig:
    """A 2026 problem's ``delayConfig``: random stoppages of robots.

    Attributes:
        seed: seed of the start kit's delay generator.
        min_delay: shortest stoppage in ticks (``minDelay``, at least 1).
        max_delay: longest stoppage (``maxDelay``, at least ``min_delay``).
        event_model: ``bernoulli`` (each robot not delayed is hit with probability ``p_delay``
            a tick) or ``poisson`` (a Poisson number of robots, mean ``teamSize x p_delay``).
        p_delay: ``pDelay`` in [0, 1].
        duration_model: ``uniform`` on [min, max] or ``gaussian``.
        gauss_mean_ratio: gaussian mean as a fraction of the range (``gaussMeanRatio``, [0, 1]).
        gauss_std_ratio: gaussian st. dev. as a fraction of the range (``gaussStdRatio``, >= 0).
    """

    seed: int
    min_delay: int
    max_delay: int
    event_model: Literal["bernoulli", "poisson"]
    p_delay: float
    duration_model: Literal["uniform", "gaussian"]
    gauss_mean_ratio: float
    gauss_std_ratio: float


@dataclass(frozen=True, eq=False)
class Instance:
    """One LoRR problem: a map, a team, a task file and the rules of its edition.

    Attributes:
        path: the instance ``.json``.
        edition: ``"2023"`` (round-robin errands), ``"2024"`` (task pool) or ``"2026"`` (task
            pool, multi-tick actions, delays; chosen by ``version`` containing ``2026`` or by
            any of ``agentCounter``, ``agentSize``, ``delayConfig``).
        grid: the map (``blocked`` is what the rules read; ``pickups`` = ``E``, ``stations`` =
            ``S``).
        starts: ``(team,)`` int64 start locations (``row * W + col``), facing east.
        tasks: ``(M, E)`` int64 errand locations of each task line, ``-1`` past its end.
        task_len: ``(M,)`` int64 number of errands of each task.
        num_tasks_reveal: ``numTasksReveal`` (errands per robot in 2023, pool factor since 2024).
        agent_counter: ticks one Forward or Rotate takes (``agentCounter``; 1 before 2026).
        agent_size: side of a robot's square in cells (``agentSize``; 1.0 before 2026).
        delay: the 2026 ``delayConfig`` (``None`` before 2026).
    """

    path: Path
    edition: Edition
    grid: GridMap
    starts: NDArray[np.int64]
    tasks: NDArray[np.int64]
    task_len: NDArray[np.int64]
    num_tasks_reveal: float
    agent_counter: int = 1
    agent_size: float = 1.0
    delay: DelayConfig | None = None

    @property
    def team_size(self) -> int:
        """The number of robots."""
        return len(self.starts)

    @property
    def width(self) -> int:
        """Map width (a location is ``row * width + col``)."""
        return self.grid.shape[1]

    @property
    def pool_size(self) -> int:
        """2024/2026: open tasks kept revealed; 2023: errands revealed per robot."""
        if self.edition != "2023":
            return int(self.num_tasks_reveal * self.team_size)
        return max(1, int(self.num_tasks_reveal))

    @property
    def name(self) -> str:
        """``2024/warehouse_large_5000``-style name (edition folder and file stem)."""
        return f"{self.edition}/{self.path.stem}"


def _read_text(path: Path, *, what: str, error: type[FleetmindError]) -> str:
    """The text of one LoRR file, at most ``MAX_FILE_BYTES`` (the rules' size limit)."""
    return read_input(path, what=what, limit=MAX_FILE_BYTES, error=error)


def _data_lines(text: str) -> list[tuple[int, str]]:
    """``(1-based line number, stripped text)`` of the lines that are neither blank nor ``#``."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((number, line))
    return out


def _location(
    text: str, *, grid: GridMap, path: Path, line: int, error: type[Exception], what: str
) -> int:
    try:
        loc = int(text)
    except ValueError:
        raise error(f"{path}:{line}: {what} {text!r} is not an integer location") from None
    h, w = grid.shape
    if not 0 <= loc < h * w:
        raise error(f"{path}:{line}: {what} {loc} is off the {h} x {w} map")
    if grid.blocked[loc // w, loc % w]:
        raise error(f"{path}:{line}: {what} {loc} (row {loc // w}, col {loc % w}) is a wall")
    return loc


def _count(
    lines: list[tuple[int, str]], *, path: Path, what: str, error: type[FleetmindError]
) -> int:
    if not lines:
        raise error(f"{path}:1: empty {what}: expected a count line")
    number, text = lines[0]
    try:
        count = int(text)
    except ValueError:
        raise error(f"{path}:{number}: expected the number of {what}, got {text!r}") from None
    check_range(f"the number of {what}", count, low=1, error=error, where=f"{path}:{number}")
    if len(lines) - 1 < count:
        last = lines[-1][0]
        raise error(f"{path}:{last}: {count} {what} announced, {len(lines) - 1} found")
    return count


def read_map(path: str | Path) -> GridMap:
    """A LoRR ``.map`` (MovingAI format); :class:`MapError` names the file, line and column."""
    path = Path(path)
    return parse_movingai(_read_text(path, what="map", error=MapError), source=str(path))


def read_agents(path: str | Path, grid: GridMap) -> NDArray[np.int64]:
    """The start locations of an ``.agents`` file (``#`` comments, a count, one per line).

    Raises:
        ConfigError: naming the file and line of a missing count, a non-integer, a location off
            the map or on a wall, or two robots on one start.
    """
    path = Path(path)
    lines = _data_lines(_read_text(path, what="agents file", error=ConfigError))
    count = _count(lines, path=path, what="agents", error=ConfigError)
    starts = np.empty(count, dtype=np.int64)
    seen: dict[int, int] = {}
    for i, (number, text) in enumerate(lines[1 : count + 1]):
        loc = _location(text, grid=grid, path=path, line=number, error=ConfigError, what="start")
        if loc in seen:
            raise ConfigError(f"{path}:{number}: start {loc} repeats line {seen[loc]}")
        seen[loc] = number
        starts[i] = loc
    return starts


def read_tasks(path: str | Path, grid: GridMap) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The tasks of a ``.tasks`` file: ``(M, E)`` errands (``-1`` pad) and ``(M,)`` lengths.

    A task line is one location (2023) or comma-separated locations (2024); ``#`` lines are
    comments (the 2024 ``# version for LoRR 2024`` header).

    Raises:
        TaskFileError: naming the file and line of a missing count, an empty or non-integer
            errand, or a location off the map or on a wall.
    """
    path = Path(path)
    lines = _data_lines(_read_text(path, what="task file", error=TaskFileError))
    count = _count(lines, path=path, what="tasks", error=TaskFileError)
    rows = lines[1 : count + 1]
    parsed: list[list[int]] = []
    for number, text in rows:
        try:
            parsed.append([int(p) for p in text.split(",")])
        except ValueError:
            raise TaskFileError(
                f"{path}:{number}: errands must be integer locations separated by commas, "
                f"got {text[:40]!r}"
            ) from None
    lengths = np.array([len(p) for p in parsed], dtype=np.int64)
    tasks = np.full((count, int(lengths.max())), -1, dtype=np.int64)
    for i, locs in enumerate(parsed):
        tasks[i, : len(locs)] = locs
    h, w = grid.shape
    valid = np.arange(tasks.shape[1])[None, :] < lengths[:, None]  # not the -1 padding
    inside = valid & (tasks >= 0) & (tasks < h * w)
    bad = valid & ~inside
    bad[inside] = grid.blocked.ravel()[tasks[inside]]
    if bad.any():
        i, j = np.argwhere(bad)[0]
        _location(
            str(tasks[i, j]), grid=grid, path=path, line=rows[i][0], error=TaskFileError,
            what="errand",
        )  # fmt: skip
    return tasks, lengths


def json_object(text: str, path: Path) -> dict[str, Any]:
    """The JSON object ``text`` read from ``path`` holds (a problem or an output file).

    Raises:
        ConfigError: not valid JSON (file and line named), or not an object.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a JSON object")
    return data


def _typed_field(
    spec: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    *,
    path: Path,
    within: str = "",
) -> Any:
    """``spec[key]``, which must be there and of ``kind`` (a bool is never a number)."""
    name = within + key
    if key not in spec:
        raise ConfigError(f"{path}: missing field {name!r}")
    value = spec[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{path}: field {name!r} has the wrong type ({value!r})")
    return value


def read_instance(path: str | Path, *, team_size: int | None = None) -> Instance:
    """A LoRR instance ``.json`` with its map, agents and tasks (paths relative to the json).

    Args:
        path: the instance file.
        team_size: robots to use (default the file's ``teamSize``), at most the agents listed.

    Raises:
        ConfigError: the json is malformed (file and line named), a field is missing or wrong,
            or the 2023 strategy is not ``roundrobin``; errors of the files it names propagate
            (:class:`MapError`, :class:`TaskFileError`, :class:`ConfigError`).
    """
    path = Path(path)
    spec = json_object(_read_text(path, what="instance", error=ConfigError), path)

    def field_(key: str, kind: type | tuple[type, ...]) -> Any:
        return _typed_field(spec, key, kind, path=path)

    edition: Edition
    if _is_2026(spec):
        edition = "2026"
    elif "version" in spec:
        edition = "2024"
    else:
        strategy = field_("taskAssignmentStrategy", str)
        if strategy != "roundrobin":
            raise ConfigError(
                f"{path}: taskAssignmentStrategy {strategy!r} is not supported (only roundrobin)"
            )
        edition = "2023"
    grid = read_map(path.parent / field_("mapFile", str))
    starts = read_agents(path.parent / field_("agentFile", str), grid)
    tasks, task_len = read_tasks(path.parent / field_("taskFile", str), grid)
    team = field_("teamSize", int)
    reveal = float(field_("numTasksReveal", (int, float)))
    if team_size is not None:
        team = team_size
    check_range("teamSize", team, low=1, high=len(starts), where=f"{path}")
    check_range("numTasksReveal", reveal, above=0, where=f"{path}")
    counter, size, delay = 1, 1.0, None
    if edition == "2026":
        counter = field_("agentCounter", int) if "agentCounter" in spec else 10
        check_range("field 'agentCounter'", counter, low=1, where=f"{path}")
        size = float(field_("agentSize", (int, float))) if "agentSize" in spec else 1.0
        # The kit accepts any positive size; a robot wider than a cell could never pass a
        # neighbour on these maps, and the validator's neighbour window assumes <= 1.
        check_range("field 'agentSize'", size, above=0, high=1, where=f"{path}")
        delay = _delay_config(spec.get("delayConfig"), path)
    return Instance(
        path=path,
        edition=edition,
        grid=grid,
        starts=starts[:team].copy(),
        tasks=tasks,
        task_len=task_len,
        num_tasks_reveal=reveal,
        agent_counter=counter,
        agent_size=size,
        delay=delay,
    )


def _is_2026(spec: dict[str, Any]) -> bool:
    """The 2026 rules: ``version`` names 2026, or a field only 2026 problems carry."""
    if "2026" in str(spec.get("version", "")):
        return True
    return any(key in spec for key in ("agentCounter", "agentSize", "delayConfig"))


def _delay_config(value: Any, path: Path) -> DelayConfig:
    """``delayConfig`` with every field the start kit requires, checked as the kit checks it."""
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: field 'delayConfig' missing or not an object (2026 problems)")

    def get(key: str, kind: type | tuple[type, ...]) -> Any:
        return _typed_field(value, key, kind, path=path, within="delayConfig.")

    seed, lo, hi = get("seed", int), get("minDelay", int), get("maxDelay", int)
    event, p = get("eventModel", str), float(get("pDelay", (int, float)))
    duration = get("durationModel", str)
    mean, std = (
        float(get("gaussMeanRatio", (int, float))),
        float(get("gaussStdRatio", (int, float))),
    )
    ranges: list[tuple[str, float, float | None, float | None]] = [
        ("seed", seed, 0, None),
        ("minDelay", lo, 1, None),
        ("maxDelay", hi, lo, None),  # at least minDelay
        ("pDelay", p, 0.0, 1.0),
        ("gaussMeanRatio", mean, 0.0, 1.0),
        ("gaussStdRatio", std, 0.0, None),
    ]
    for key, got, low, high in ranges:
        check_range(f"field 'delayConfig.{key}'", got, low=low, high=high, where=f"{path}")
    for key, word, allowed in (
        ("eventModel", event, ("bernoulli", "poisson")),
        ("durationModel", duration, ("uniform", "gaussian")),
    ):
        if word not in allowed:
            raise ConfigError(
                f"{path}: field 'delayConfig.{key}' must be {' or '.join(allowed)}, got {word!r}"
            )
    return DelayConfig(
        seed=seed,
        min_delay=lo,
        max_delay=hi,
        event_model=event,
        p_delay=p,
        duration_model=duration,
        gauss_mean_ratio=mean,
        gauss_std_ratio=std,
    )


def write_instance(
    folder: str | Path,
    rows: list[str],
    starts: list[int],
    tasks: list[list[int]],
    *,
    edition: Edition = "2024",
    reveal: float = 1.5,
    name: str = "instance",
) -> Path:
    """Write an instance in the start kit's formats (for tests and hand-made problems).

    Args:
        folder: where to write ``NAME.json`` and ``maps/``, ``agents/``, ``tasks/``.
        rows: the map rows (``@`` walls, ``.`` floor).
        starts: start locations, one robot each.
        tasks: each task's errand locations (one errand a task for 2023).
        edition: ``"2024"`` (task pool) or ``"2023"`` (round-robin).
        reveal: ``numTasksReveal``.
        name: file stem of the json and of its map, agents and tasks.

    Returns:
        The json's path.
    """
    folder = Path(folder)
    for sub in ("maps", "agents", "tasks"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    header = f"type octile\nheight {len(rows)}\nwidth {len(rows[0])}\nmap\n"
    (folder / "maps" / f"{name}.map").write_text(header + "\n".join(rows) + "\n")
    tag = "# version for LoRR 2024\n" if edition == "2024" else ""
    agents = tag + f"{len(starts)}\n" + "".join(f"{s}\n" for s in starts)
    (folder / "agents" / f"{name}.agents").write_text(agents)
    lines = "".join(",".join(map(str, t)) + "\n" for t in tasks)
    (folder / "tasks" / f"{name}.tasks").write_text(tag + f"{len(tasks)}\n" + lines)
    spec: dict[str, Any] = {
        "mapFile": f"maps/{name}.map",
        "agentFile": f"agents/{name}.agents",
        "teamSize": len(starts),
        "taskFile": f"tasks/{name}.tasks",
        "numTasksReveal": reveal,
    }
    if edition == "2024":
        spec["version"] = "2024 LoRR"
    else:
        spec["taskAssignmentStrategy"] = "roundrobin"
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec, indent=4) + "\n")
    return path
