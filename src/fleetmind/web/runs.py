"""Read recorded run folders and comparison folders for the dashboard.

A run folder is what ``fleetmind run --out DIR`` writes (see :mod:`fleetmind.eval.recorder`):
``config.json``, ``metrics.json``, ``episode.parquet/``, ``events.parquet/``, ``calls.jsonl``. A
comparison folder holds ``comparison.json`` with a ``rows`` list. Everything here turns those
files into JSON-ready dictionaries; readers never execute anything stored in a folder (snapshot
pickles are not opened) and never follow a link out of the dashboard root (every file is checked
with :func:`fleetmind.web.paths.inside` before it is read: 403).

Episode data is loaded once per folder into dense ``(ticks, robots)`` arrays and cached until the
folder's files change, so scrubbing a replay costs one array slice per request.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from fleetmind.errors import FleetmindError
from fleetmind.eval.store import other_folder
from fleetmind.sim.grid import GridMap
from fleetmind.sim.render import ascii as render_ascii
from fleetmind.web.paths import FolderError, inside, relative_name

logger = logging.getLogger(__name__)

EPISODE = "episode.parquet"
EVENTS = "events.parquet"
CALLS = "calls.jsonl"
COMPARISON = "comparison.json"
MAX_FRAMES = 2000  # ticks one frames request may return
SKIP_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", "snapshots"})


# ---------------------------------------------------------------------- listing
def find_folders(root: Path, *, max_depth: int = 4, limit: int = 500) -> list[dict[str, Any]]:
    """Run and comparison folders under ``root`` (symbolic links are not followed).

    Args:
        root: the dashboard root.
        max_depth: how many folder levels below the root to look.
        limit: the most folders to return.

    Returns:
        ``{"name", "kind" ("run" | "compare"), "mtime"}`` entries, newest first.
    """
    base = root.resolve()
    found: list[dict[str, Any]] = []
    if not base.is_dir():
        return found
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        depth = len(here.relative_to(base).parts)
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".parquet")
        )
        if depth >= max_depth:
            dirnames.clear()
        kind = None
        if COMPARISON in filenames:
            kind = "compare"
        elif "config.json" in filenames and (here / EPISODE).is_dir():
            kind = "run"
        if kind is not None:
            found.append(
                {
                    "name": relative_name(base, here),
                    "kind": kind,
                    "mtime": max(p.stat().st_mtime for p in [here, *_marker_files(here)]),
                }
            )
            if len(found) >= limit:
                break
    found.sort(key=lambda f: (-f["mtime"], f["name"]))
    return found


def _marker_files(folder: Path) -> list[Path]:
    return [p for p in (folder / "metrics.json", folder / COMPARISON) if p.exists()]


# ---------------------------------------------------------------------- small readers
def read_json(path: Path, *, root: Path) -> Any:
    """Parse a JSON file under ``root``, naming the file and line of a syntax error.

    Raises:
        FolderError: status 403 when the file is a link out of ``root``, 422 when it cannot be
            read or parsed.
    """
    try:
        text = inside(root, path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FolderError(f"{path.name}: cannot read ({exc.strerror})", status=422) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FolderError(
            f"{path.name}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})", status=422
        ) from None


def _parts(folder: Path) -> list[Path]:
    """Complete Parquet parts of a dataset folder (half-written ``.tmp`` files are skipped)."""
    return sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []


def _read_dataset(folder: Path, root: Path) -> pa.Table | None:
    parts = _parts(inside(root, folder))
    if not parts:
        return None
    tables = []
    for part in parts:
        try:
            tables.append(pq.read_table(inside(root, part)))
        except (OSError, pa.ArrowException) as exc:
            raise FolderError(
                f"{folder.name}/{part.name}: not a readable Parquet file ({exc})", status=422
            ) from None
    return pa.concat_tables(tables, promote_options="default")


def grid_rows(grid: GridMap) -> list[str]:
    """The map as text rows: ``#`` wall, ``.`` floor, ``x`` pickup, ``S`` station, ``C`` charger."""
    return render_ascii(grid, np.zeros((0, 2), dtype=np.int64)).split("\n")


def comparison(root: Path, folder: Path) -> dict[str, Any]:
    """The comparison table of a compare folder, ready to show.

    Reads ``comparison.json`` as ``fleetmind compare`` writes it (``rows``: metric key ->
    label, ``table``: strategy -> key -> ``{mean, ci95, n}``, ``runs``: strategy -> run
    folders), or any file whose ``rows`` is a list of objects (one table row each; nested
    objects are flattened one level as ``key.sub``).

    Returns:
        The parsed file under ``data`` and ``display``: ``columns``, ``rows`` (lists of cells)
        and ``runs`` (strategy -> names of its run folders under ``root``, for replay links).

    Raises:
        FolderError: 422 when the file is missing or has neither layout.
    """
    path = folder / COMPARISON
    if not path.is_file():
        raise FolderError(f"{folder.name}: not a comparison folder (no {COMPARISON})", status=422)
    data = read_json(path, root=root)
    if not isinstance(data, dict):
        raise FolderError(f"{COMPARISON}: expected an object", status=422)
    rows = data.get("rows")
    if isinstance(rows, dict):
        display = _strategy_table(data, rows)
    elif isinstance(rows, list):
        display = _row_table(rows)
    else:
        raise FolderError(
            f"{COMPARISON}: field 'rows': expected a mapping of metric labels or a list of rows",
            status=422,
        )
    display["runs"] = _run_links(root, folder, data.get("runs"))
    return {"data": data, "display": display}


def _strategy_table(data: dict[str, Any], rows: dict[str, Any]) -> dict[str, Any]:
    from fleetmind.eval.compare import ROWS, format_cell

    table = data.get("table")
    if not isinstance(table, dict):
        raise FolderError(
            f"{COMPARISON}: field 'table': expected strategy -> metric -> cell", status=422
        )
    strategies = [str(s) for s in data.get("strategies") or table]
    # The file is written with sorted keys: show the known rows in the CLI table's order.
    known = [key for key, _ in ROWS if key in rows]
    order = known + [key for key in rows if key not in known]
    out_rows: list[list[Any]] = []
    for key in order:
        label = rows[key]
        cells: list[Any] = [str(label)]
        for name in strategies:
            cell = (table.get(name) or {}).get(key)
            cells.append(format_cell(cell) if isinstance(cell, dict) else cell)
        out_rows.append(cells)
    return {"columns": ["metric", *strategies], "rows": out_rows}


def _row_table(rows: list[Any]) -> dict[str, Any]:
    flat_rows: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise FolderError(f"{COMPARISON}: rows[{i}]: expected an object", status=422)
        flat: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, dict) and all(
                not isinstance(v, dict | list) for v in value.values()
            ):
                flat.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                flat[key] = value
        flat_rows.append(flat)
    columns: list[str] = []
    for flat in flat_rows:
        columns += [k for k in flat if k not in columns]
    return {"columns": columns, "rows": [[flat.get(c) for c in columns] for flat in flat_rows]}


def _run_links(root: Path, folder: Path, runs: Any) -> dict[str, list[str]]:
    """Run folders of each strategy that lie under the root (looked up inside ``folder``).

    ``fleetmind compare`` records the paths it wrote (``OUT/<strategy>/seed-<k>``); the folder
    may have moved since, so each is looked up by its last two parts inside the compare folder.
    """
    links: dict[str, list[str]] = {}
    if not isinstance(runs, dict):
        return links
    base = folder.resolve()
    for name, paths in runs.items():
        found = []
        for p in paths if isinstance(paths, list) else []:
            parts = Path(str(p)).parts[-2:]
            candidate = (base / Path(*parts)).resolve() if parts else base
            if (
                candidate.is_relative_to(root.resolve())
                and (candidate / "config.json").is_file()
                and (candidate / EPISODE).is_dir()
            ):
                found.append(relative_name(root, candidate))
        links[str(name)] = found
    return links


# ---------------------------------------------------------------------- run folders
@dataclass(frozen=True)
class Episode:
    """Dense episode arrays of one run, ``(T, N)`` each (T ticks, N robots)."""

    ticks: int
    robots: int
    present: NDArray[np.bool_]  # (T, N) a row was recorded
    row: NDArray[np.int32]
    col: NDArray[np.int32]
    target_row: NDArray[np.int32]  # -1 where unknown or no task
    target_col: NDArray[np.int32]
    carrying: NDArray[np.bool_]
    broken: NDArray[np.bool_]
    shield: NDArray[np.bool_]
    conflict: NDArray[np.bool_]
    proposed: NDArray[np.int8]
    executed: NDArray[np.int8]
    reward: NDArray[np.float64]
    cum_reward: NDArray[np.float64]  # reward summed over ticks 0..t
    order: NDArray[np.str_]
    has_targets: bool


def _episode(folder: Path, root: Path) -> Episode:
    table = _read_dataset(folder / EPISODE, root)
    if table is None or table.num_rows == 0:
        raise FolderError(f"{folder.name}: {EPISODE} holds no rows yet", status=422)
    missing = [c for c in ("tick", "robot", "row", "col") if c not in table.column_names]
    if missing:
        raise FolderError(f"{EPISODE}: missing column(s) {', '.join(missing)}", status=422)

    def col(name: str, default: Any, dtype: Any) -> NDArray[Any]:
        if name not in table.column_names:
            return np.full(table.num_rows, default, dtype=dtype)
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False)).astype(dtype)

    tick = col("tick", 0, np.int64)
    robot = col("robot", 0, np.int64)
    if tick.min() < 0 or robot.min() < 0:
        raise FolderError(f"{EPISODE}: negative tick or robot index", status=422)
    t_n, r_n = int(tick.max()) + 1, int(robot.max()) + 1

    def dense(values: NDArray[Any], fill: Any) -> NDArray[Any]:
        out = np.full((t_n, r_n), fill, dtype=values.dtype)
        out[tick, robot] = values  # a repeated (tick, robot) keeps its last row
        return out

    has_task = col("has_task", True, bool)
    has_targets = "target_row" in table.column_names
    reward = dense(col("reward", 0.0, np.float64), 0.0)
    present = np.zeros((t_n, r_n), dtype=bool)
    present[tick, robot] = True
    return Episode(
        ticks=t_n,
        robots=r_n,
        present=present,
        row=dense(col("row", -1, np.int32), -1),
        col=dense(col("col", -1, np.int32), -1),
        target_row=dense(np.where(has_task, col("target_row", -1, np.int32), -1), -1),
        target_col=dense(np.where(has_task, col("target_col", -1, np.int32), -1), -1),
        carrying=dense(col("carrying", False, bool), False),
        broken=dense(col("broken", False, bool), False),
        shield=dense(col("shield_override", False, bool), False),
        conflict=dense(col("conflict", False, bool), False),
        proposed=dense(col("proposed", 0, np.int8), 0),
        executed=dense(col("executed", 0, np.int8), 0),
        reward=reward,
        cum_reward=np.cumsum(reward, axis=0),
        order=dense(col("order", "", str), ""),
        has_targets=has_targets,
    )


def _events(folder: Path, root: Path) -> list[dict[str, Any]]:
    table = _read_dataset(folder / EVENTS, root)
    if table is None:
        return []
    out = []
    ticks = table.column("tick").to_pylist()
    kinds = table.column("kind").to_pylist()
    datas = (
        table.column("data").to_pylist() if "data" in table.column_names else [None] * len(ticks)
    )
    for tick, kind, data in zip(ticks, kinds, datas, strict=True):
        try:
            fields = json.loads(data) if data else {}
        except json.JSONDecodeError:
            fields = {"raw": data}
        out.append(
            {
                "tick": int(tick),
                "kind": str(kind),
                **(fields if isinstance(fields, dict) else {"data": fields}),
            }
        )
    out.sort(key=lambda e: e["tick"])  # stable: same-tick events keep their order
    return out


def read_calls(path: Path, *, root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The LLM calls of ``calls.jsonl`` and one problem line per unreadable line.

    Returns:
        ``(calls, problems)``; each call gets ``line`` (its 1-based line number).

    Raises:
        FolderError: status 403 when the file is a link out of ``root``.
    """
    calls: list[dict[str, Any]] = []
    problems: list[str] = []
    if not path.is_file():
        return calls, problems
    with inside(root, path).open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{CALLS}:{n}: not valid JSON ({exc.msg})")
                continue
            if not isinstance(record, dict):
                problems.append(f"{CALLS}:{n}: expected an object")
                continue
            record["line"] = n
            calls.append(record)
    return calls, problems


def _call_tick(call: dict[str, Any]) -> int | None:
    ctx = call.get("context")
    tick = ctx.get("tick") if isinstance(ctx, dict) else None
    return int(tick) if isinstance(tick, int | float) else None


class RunFolder:
    """One recorded run, read for the dashboard.

    Args:
        root: the dashboard root (names are relative to it).
        folder: the resolved run folder (see :func:`fleetmind.web.paths.resolve_folder`).

    Raises:
        FolderError: 422 when the folder is not a run folder.
    """

    def __init__(self, root: Path, folder: Path) -> None:
        if not (folder / "config.json").is_file() or not (folder / EPISODE).is_dir():
            name = relative_name(root, folder)
            other = other_folder(folder)
            if other is None:
                message = (
                    f"{name}: not a run folder "
                    f"(needs config.json and {EPISODE}/ as `fleetmind run --out` writes them)"
                )
            else:  # a train or lorr folder is named as such, by its name under the root
                message = (
                    f"{other.replace(str(folder), name)}; the dashboard shows what "
                    "`fleetmind run --out` writes"
                )
            raise FolderError(message, status=422)
        for data in (folder / EPISODE, folder / EVENTS):  # a linked part refuses the whole run
            for path in [data, *_parts(inside(root, data))]:
                inside(root, path)
        self.root = root
        self.folder = folder
        self.name = relative_name(root, folder)
        raw = read_json(folder / "config.json", root=root)
        self.config: dict[str, Any] = raw.get("config", raw) if isinstance(raw, dict) else {}
        metrics_path = folder / "metrics.json"
        self.metrics: dict[str, Any] | None = (
            read_json(metrics_path, root=root) if metrics_path.is_file() else None
        )
        self.events = _events(folder, root)
        self.calls, self.problems = read_calls(folder / CALLS, root=root)

    @functools.cached_property
    def episode(self) -> Episode:
        """The episode arrays (read on first use: decisions need only events and calls).

        Raises:
            FolderError: 422 when ``episode.parquet`` holds no rows or misses columns.
        """
        return _episode(self.folder, self.root)

    def grid(self) -> GridMap | None:
        """The run's map, rebuilt from the recorded ``map`` option (None if it cannot be)."""
        from fleetmind.envs.warehouse import resolve_map

        spec = self.config.get("map")
        if not isinstance(spec, str):
            return None
        try:
            return resolve_map(spec)
        except (FleetmindError, OSError) as exc:
            self.problems.append(f"config.json: map {spec!r} cannot be rebuilt here ({exc})")
            return None

    def meta(self) -> dict[str, Any]:
        """Config, metrics, map rows and sizes of the run."""
        ep = self.episode
        grid = self.grid()
        if grid is not None:
            rows = grid_rows(grid)
        else:  # draw the cells robots visited on a blank floor
            h = int(ep.row.max()) + 1
            w = int(ep.col.max()) + 1
            rows = ["." * w for _ in range(h)]
        return {
            "name": self.name,
            "kind": "run",
            "config": self.config,
            "metrics": self.metrics,
            "map": rows,
            "ticks": ep.ticks,
            "robots": [f"robot_{i}" for i in range(ep.robots)],
            "has_targets": ep.has_targets,
            "decisions": len(self.decisions()),
            "problems": list(self.problems),
        }

    def frames(self, start: int, stop: int) -> dict[str, Any]:
        """Robot states at the start of ticks ``start <= t < stop`` (at most :data:`MAX_FRAMES`).

        A frame is the world as tick ``t`` begins, the same view as a live frame: per-robot
        lists ``pos`` ``[row, col]``, ``target`` (``[row, col]`` or None), ``carrying``,
        ``order``, ``broken``, and the previous tick's move that led here: ``proposed``,
        ``executed``, ``shield`` (the shield changed the proposed move) and ``conflict``.
        """
        ep = self.episode
        n = ep.robots
        start = max(0, start)
        stop = min(ep.ticks, stop, start + MAX_FRAMES)
        frames = []
        for t in range(start, stop):
            p = t - 1  # the row of tick t-1 holds what its move left behind
            before = p >= 0
            frames.append(
                {
                    "tick": t,
                    "pos": np.stack([ep.row[t], ep.col[t]], axis=1).tolist(),
                    "target": [
                        [int(r), int(c)] if r >= 0 and c >= 0 else None
                        for r, c in zip(ep.target_row[p], ep.target_col[p], strict=True)
                    ]
                    if before
                    else [None] * n,
                    "carrying": ep.carrying[p].tolist() if before else [False] * n,
                    "order": ep.order[p].tolist() if before else [""] * n,
                    "broken": ep.broken[p].tolist() if before else [False] * n,
                    "shield": ep.shield[p].tolist() if before else [False] * n,
                    "conflict": ep.conflict[p].tolist() if before else [False] * n,
                    "proposed": ep.proposed[p].tolist() if before else [0] * n,
                    "executed": ep.executed[p].tolist() if before else [0] * n,
                    "reward": np.round(ep.cum_reward[p], 6).tolist() if before else [0.0] * n,
                }
            )
        return {"name": self.name, "start": start, "stop": stop, "frames": frames}

    def series(self, points: int = 400) -> dict[str, Any]:
        """Per-robot cumulative reward and fleet throughput over time, at most ``points`` ticks.

        Returns:
            ``tick`` (sampled ticks), ``reward`` (robot id -> cumulative reward at those ticks),
            ``delivered`` (cumulative deliveries), ``throughput`` (deliveries per tick so far),
            ``rate`` (deliveries per tick over the last ``window`` ticks), ``window`` and
            ``shield`` (cumulative shield interventions).
        """
        ep = self.episode
        t_n = ep.ticks
        cum_reward = ep.cum_reward  # (T, N)
        delivered = np.zeros(t_n, dtype=np.int64)
        for e in self.events:
            # The loop stamps a delivery with the tick count after the move that made it:
            # a delivery stamped k happened during tick k - 1.
            if e["kind"] == "delivered":
                delivered[min(max(e["tick"] - 1, 0), t_n - 1)] += len(e.get("ids", []))
        cum_delivered = np.cumsum(delivered)
        window = max(10, min(100, t_n // 10))
        shifted = np.concatenate([np.zeros(window, dtype=np.int64), cum_delivered])[:t_n]
        rate = (cum_delivered - shifted) / np.minimum(np.arange(1, t_n + 1), window)
        idx = np.unique(np.linspace(0, t_n - 1, num=min(points, t_n)).round().astype(np.int64))
        return {
            "name": self.name,
            "tick": idx.tolist(),
            "reward": {
                f"robot_{i}": np.round(cum_reward[idx, i], 6).tolist() for i in range(ep.robots)
            },
            "delivered": cum_delivered[idx].tolist(),
            "throughput": np.round(cum_delivered[idx] / (idx + 1), 6).tolist(),
            "rate": np.round(rate[idx], 6).tolist(),
            "window": window,
            "shield": np.cumsum(ep.shield.sum(axis=1))[idx].tolist(),
        }

    def decisions(self) -> list[dict[str, Any]]:
        """Planner decisions and LLM call groups, in tick order.

        A planner decision is a ``planner_call`` event joined with the ``plan`` event made from
        its snapshot; LLM calls are attached by their context tick. Calls at ticks without a
        planner decision (an LLM executor, say) form decisions of their own.
        """
        plans: dict[int, dict[str, Any]] = {}
        for e in self.events:
            if e["kind"] == "plan" and isinstance(e.get("snapshot_tick"), int):
                plans.setdefault(e["snapshot_tick"], e)
        by_tick: dict[int, list[dict[str, Any]]] = {}
        for call in self.calls:
            tick = _call_tick(call)
            if tick is not None:
                by_tick.setdefault(tick, []).append(call)
        out: list[dict[str, Any]] = []
        seen: set[int] = set()
        for e in self.events:
            if e["kind"] != "planner_call":
                continue
            t = e["tick"]
            plan = plans.get(t, {})
            calls = by_tick.get(t, [])
            seen.add(t)
            out.append(
                {
                    "tick": t,
                    "kind": "planner",
                    "events": e.get("events", []),
                    "applied_tick": plan.get("tick"),
                    "source": plan.get("source"),
                    "fallback": bool(plan.get("fallback", False)),
                    "failure": plan.get("failure"),
                    "errors": plan.get("errors", []),
                    "assignments": plan.get("assignments", []),
                    "latency_ms": plan.get("latency_ms"),
                    "tokens": plan.get("tokens"),
                    "calls": len(calls),
                    "call_errors": sum(1 for c in calls if c.get("error") or c.get("parse_error")),
                }
            )
        for t, calls in sorted(by_tick.items()):
            if t in seen:
                continue
            ctx = calls[0].get("context") or {}
            out.append(
                {
                    "tick": t,
                    "kind": str(ctx.get("decision_type") or "llm"),
                    "events": [],
                    "applied_tick": None,
                    "source": str(ctx.get("caller") or ""),
                    "fallback": False,
                    "failure": None,
                    "errors": [],
                    "assignments": [],
                    "latency_ms": sum(float(c.get("latency_s") or 0) for c in calls) * 1e3,
                    "tokens": sum(
                        int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0)
                        for c in calls
                    ),
                    "calls": len(calls),
                    "call_errors": sum(1 for c in calls if c.get("error") or c.get("parse_error")),
                }
            )
        out.sort(key=lambda d: d["tick"])
        return out

    def decision(self, tick: int) -> dict[str, Any]:
        """The decision at ``tick`` with its full LLM call log.

        Raises:
            FolderError: 404 when no decision or call happened at ``tick``.
        """
        found = [d for d in self.decisions() if d["tick"] == tick]
        if not found:
            raise FolderError(f"{self.name}: no planner decision or LLM call at tick {tick}")
        calls = [c for c in self.calls if _call_tick(c) == tick]
        return {"name": self.name, **found[0], "call_log": calls}


# ---------------------------------------------------------------------- cache
class RunCache:
    """Loaded :class:`RunFolder` objects, reloaded when a folder's files change.

    Args:
        size: how many runs to keep.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: OrderedDict[Path, tuple[tuple[Any, ...], RunFolder]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(folder: Path) -> tuple[Any, ...]:
        files = [
            folder / "config.json",
            folder / "metrics.json",
            folder / CALLS,
            *_parts(folder / EPISODE),
            *_parts(folder / EVENTS),
        ]
        out = []
        for f in files:
            try:
                st = f.stat()
            except OSError:
                continue
            out.append((f.name, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def get(self, root: Path, folder: Path) -> RunFolder:
        """The run at ``folder``, from the cache when its files did not change."""
        stamp = self._stamp(folder)
        with self._lock:
            hit = self._items.get(folder)
            if hit is not None and hit[0] == stamp:
                self._items.move_to_end(folder)
                return hit[1]
        run = RunFolder(root, folder)
        with self._lock:
            self._items[folder] = (stamp, run)
            self._items.move_to_end(folder)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return run
