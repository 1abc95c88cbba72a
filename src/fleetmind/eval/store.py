"""Read a run folder: DuckDB queries, typed loaders, and a multi-agent trajectory export.

Everything here reads only what :class:`~fleetmind.eval.recorder.RunRecorder` wrote, and reads a
folder left by a killed run up to its last flush (a torn last line of ``calls.jsonl`` is skipped).

``query(run_dir, sql)`` opens an in-memory DuckDB connection with three views::

    episode   one row per robot per tick (columns: see fleetmind.eval.recorder)
    events    tick, kind, data (JSON text: use data->>'field' or json_extract)
    calls     one row per LLM call (context_caller, context_decision_type, context_tick,
              context_seed, prompt_tokens, completion_tokens, latency_s, error_type, parse_error)

    >>> query("runs/run-0", "SELECT robot, sum(reward) FROM episode GROUP BY robot")

Multi-agent export (:func:`export_trajectories`): Minari has no multi-agent format, so each robot
becomes one NPZ file of equal-length arrays ``tick, cell (T, 2), target (T, 2), carrying, action,
reward, done, truncated`` (observation-free: rebuild observations from cells and targets, or from
the world snapshots) plus ``manifest.json`` naming the files, the action ids and the run config.
Load with ``numpy.load`` and hand the arrays to any offline RL library as one episode per robot
(d3rlpy ``MDPDataset(observations, actions, rewards, terminals, timeouts)``, or a
Minari ``EpisodeData`` per robot); see docs/eval.md.
"""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fleetmind.errors import ConfigError, read_input
from fleetmind.eval.recorder import CAPTURE_FORMAT, SnapshotChain

log = logging.getLogger(__name__)

CALL_COLUMNS: dict[str, pa.DataType] = {
    "call_id": pa.int64(),
    "context_caller": pa.string(),
    "context_decision_type": pa.string(),
    "context_tick": pa.int64(),
    "context_seed": pa.int64(),
    "prompt_version": pa.string(),
    "model": pa.string(),
    "prompt_tokens": pa.int64(),
    "completion_tokens": pa.int64(),
    "latency_s": pa.float64(),
    "error_type": pa.string(),
    "parse_error": pa.string(),
    "cached": pa.bool_(),
}
ACTION_NAMES = ("wait", "up", "down", "left", "right")
CALLS_LIMIT = 1 << 30  # the largest calls.jsonl read (replies are bounded: see llm.client)


def other_folder(path: str | Path) -> str | None:
    """What a folder that is not a recorded run is, and the command that reads it; or ``None``.

    One answer for every reader of run folders (``report``, the dashboard): a ``fleetmind train``
    folder (``curves.csv``) goes to ``doctor``, a ``fleetmind lorr run`` folder to ``lorr
    validate``.
    """
    p = Path(path)
    if (p / "curves.csv").exists():
        return (
            f"{p}: a training run (fleetmind train: curves.csv): read it with "
            f"`fleetmind doctor {p}` and its curves.png"
        )
    if (p / "lorr_output.json").exists():
        return (
            f"{p}: a LoRR run (fleetmind lorr run): check it with "
            f"`fleetmind lorr validate {p / 'lorr_output.json'}`; its figures are in metrics.json"
        )
    return None


def run_path(run_dir: str | Path) -> Path:
    """``run_dir`` as a Path, checked to be a run folder.

    Raises:
        ConfigError: the folder does not exist or holds no recorded run.
    """
    p = Path(run_dir)
    if not p.is_dir():
        raise ConfigError(f"{p}: no such run folder")
    if not (p / "config.json").exists() and not (p / "episode.parquet").is_dir():
        raise ConfigError(f"{p}: not a run folder (no config.json or episode.parquet/)")
    return p


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def load_config(run_dir: str | Path) -> dict[str, Any]:
    """The run configuration as recorded (``config.json``'s ``config``)."""
    data = _read_json(run_path(run_dir) / "config.json")
    cfg = data.get("config")
    if not isinstance(cfg, dict):
        raise ConfigError(f"{Path(run_dir) / 'config.json'}: missing field 'config'")
    return cfg


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    """``metrics.json`` of a run (empty dict when the run died before writing it)."""
    path = run_path(run_dir) / "metrics.json"
    return _read_json(path) if path.exists() else {}


def _dataset(run_dir: str | Path, name: str, columns: list[str] | None = None) -> pa.Table | None:
    folder = run_path(run_dir) / name
    parts = sorted(folder.glob("part-*.parquet"))
    if not parts:
        return None
    tables = []
    for part in parts:
        try:
            tables.append(pq.read_table(part, columns=columns))
        except (pa.ArrowException, OSError) as exc:
            raise ConfigError(f"{part}: not a readable Parquet file ({_first_line(exc)})") from None
    try:
        return pa.concat_tables(tables, promote_options="default")
    except pa.ArrowException as exc:
        raise ConfigError(f"{folder}: parts do not fit together ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def load_episode(run_dir: str | Path, columns: list[str] | None = None) -> pa.Table:
    """The episode rows, sorted by tick then robot (only ``columns`` when given).

    Raises:
        ConfigError: the run recorded no tick.
    """
    table = _dataset(run_dir, "episode.parquet", columns)
    if table is None:
        raise ConfigError(f"{Path(run_dir)}: episode.parquet holds no rows")
    return table.sort_by([("tick", "ascending"), ("robot", "ascending")])


def load_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """Events as dicts (``tick``, ``kind`` and the decoded ``data`` fields), in order."""
    table = _dataset(run_dir, "events.parquet")
    if table is None:
        return []
    out = []
    for k, row in enumerate(table.to_pylist()):
        try:
            data = json.loads(row["data"]) if row.get("data") else {}
            out.append({"tick": int(row["tick"]), "kind": str(row["kind"]), **data})
        except (ValueError, TypeError, KeyError):
            raise ConfigError(
                f"{Path(run_dir) / 'events.parquet'}: row {k} is not a recorded event"
            ) from None
    return out


def load_latency(run_dir: str | Path) -> pa.Table | None:
    """Per-tick tier latencies (``latency.parquet``), or None for runs recorded without them."""
    return _dataset(run_dir, "latency.parquet")


def load_calls(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every LLM call of ``calls.jsonl``; a torn last line (a killed run) is skipped.

    Raises:
        ConfigError: a line other than the last is not valid JSON (names file and line).
    """
    path = run_path(run_dir) / "calls.jsonl"
    if not path.exists():
        return []
    lines = read_input(path, what="call log", limit=CALLS_LIMIT).splitlines()
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if lineno == len(lines):
                log.warning("%s:%d: torn last line skipped", path, lineno)
                continue
            raise ConfigError(f"{path}:{lineno}: not valid JSON") from None
        out.append(rec)
    return out


def calls_table(calls: list[dict[str, Any]]) -> pa.Table:
    """Flatten call records into the ``calls`` view's columns (see module docstring)."""
    rows = []
    for rec in calls:
        ctx = rec.get("context") or {}
        err = rec.get("error") or {}
        rows.append(
            {
                "call_id": rec.get("call_id"),
                "context_caller": ctx.get("caller"),
                "context_decision_type": ctx.get("decision_type"),
                "context_tick": ctx.get("tick"),
                "context_seed": ctx.get("seed"),
                "prompt_version": rec.get("prompt_version"),
                "model": rec.get("model"),
                "prompt_tokens": int(rec.get("prompt_tokens") or 0),
                "completion_tokens": int(rec.get("completion_tokens") or 0),
                "latency_s": float(rec.get("latency_s") or 0.0),
                "error_type": err.get("type") if isinstance(err, dict) else None,
                "parse_error": rec.get("parse_error"),
                "cached": bool(rec.get("cached", False)),
            }
        )
    schema = pa.schema(list(CALL_COLUMNS.items()))
    return pa.Table.from_pylist(rows, schema=schema)


def query(run_dir: str | Path, sql: str) -> pa.Table:
    """Run ``sql`` with DuckDB over the views ``episode``, ``events`` and ``calls``.

    Args:
        run_dir: a run folder.
        sql: any DuckDB SQL statement over the three views.

    Returns:
        The result as a pyarrow Table (``.to_pylist()`` for rows).

    Raises:
        ConfigError: not a run folder, or DuckDB rejected the SQL (its message is kept).
    """
    import duckdb

    p = run_path(run_dir)
    con = duckdb.connect()
    try:
        episode = _dataset(p, "episode.parquet")
        events = _dataset(p, "events.parquet")
        con.register(
            "episode",
            episode if episode is not None else pa.table({"tick": pa.array([], pa.int32())}),
        )
        con.register(
            "events",
            events
            if events is not None
            else pa.table(
                {
                    "tick": pa.array([], pa.int32()),
                    "kind": pa.array([], pa.string()),
                    "data": pa.array([], pa.string()),
                }
            ),
        )
        con.register("calls", calls_table(load_calls(p)))
        try:
            return con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            raise ConfigError(f"query on {p}: {exc}") from None
    finally:
        con.close()


def load_snapshots(run_dir: str | Path, *, reason: str | None = None) -> list[dict[str, Any]]:
    """Recorded world snapshots (``{"tick", "reason", "state"}``), by tick.

    Args:
        run_dir: a run folder.
        reason: keep only ``"decision"`` or ``"periodic"`` snapshots.
    """
    out = []
    folder = run_path(run_dir) / "snapshots"
    chain = SnapshotChain(folder)
    for path in sorted(folder.glob("tick_*.pkl")):
        try:
            with path.open("rb") as fh:
                snap = pickle.load(fh)  # our own recording, never a download
            if snap.get("format") == CAPTURE_FORMAT:
                # An incremental capture: expanded after every earlier one (tick order).
                snap = chain.expand(snap)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError) as exc:
            raise ConfigError(f"{path}: not a readable snapshot ({_first_line(exc)})") from None
        except (KeyError, IndexError, TypeError) as exc:
            raise ConfigError(f"{path}: not a readable capture ({_first_line(exc)})") from None
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        if reason is None or snap.get("reason") == reason:
            out.append(snap)
    return out


def export_trajectories(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write one NPZ per robot plus ``manifest.json``: a multi-agent offline RL dataset.

    Each ``robot_i.npz`` holds equal-length arrays over the recorded ticks: ``tick (T,)``,
    ``cell (T, 2)`` (row, col before the move), ``target (T, 2)``, ``carrying (T,)``,
    ``action (T,)`` (executed id 0..4), ``proposed (T,)``, ``reward (T,)``, ``done (T,)`` (the
    run's last tick) and ``truncated (T,)`` (last recorded tick of a run killed early).

    Args:
        run_dir: a run folder.
        out_dir: where to write (default ``RUN/trajectories``).

    Returns:
        The path of ``manifest.json``.
    """
    p = run_path(run_dir)
    table = load_episode(p)
    out = Path(out_dir) if out_dir is not None else p / "trajectories"
    out.mkdir(parents=True, exist_ok=True)
    cols = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    last_tick = int(cols["tick"].max())
    files = {}
    for robot in np.unique(cols["robot"]):
        m = cols["robot"] == robot
        n = int(m.sum())
        done = cols["done"][m].astype(bool) if "done" in cols else np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        if not done.any():
            truncated[cols["tick"][m] == last_tick] = True
        target = (
            np.stack([cols["target_row"][m], cols["target_col"][m]], axis=1)
            if "target_row" in cols
            else np.full((n, 2), -1, dtype=np.int32)
        )
        name = f"robot_{int(robot)}.npz"
        np.savez_compressed(
            out / name,
            tick=cols["tick"][m].astype(np.int32),
            cell=np.stack([cols["row"][m], cols["col"][m]], axis=1).astype(np.int32),
            target=target.astype(np.int32),
            carrying=cols["carrying"][m].astype(bool),
            action=cols["executed"][m].astype(np.int8),
            proposed=cols["proposed"][m].astype(np.int8),
            reward=cols["reward"][m].astype(np.float32),
            done=done,
            truncated=truncated,
        )
        files[f"robot_{int(robot)}"] = name
    config = load_config(p) if (p / "config.json").exists() else {}
    manifest = {
        "format": "fleetmind-multiagent-trajectories-v0",
        "run_dir": str(p),
        "agents": files,
        "ticks": int(last_tick + 1),
        "action_ids": dict(enumerate(ACTION_NAMES)),
        "fields": {
            "tick": "int32 (T,)",
            "cell": "int32 (T, 2) row, col before the move",
            "target": "int32 (T, 2) target cell after the tick",
            "carrying": "bool (T,)",
            "action": "int8 (T,) executed action id",
            "proposed": "int8 (T,) the executor's first choice",
            "reward": "float32 (T,)",
            "done": "bool (T,) the run's last tick",
            "truncated": "bool (T,) last recorded tick of a run killed early",
        },
        "config": config,
    }
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return path
