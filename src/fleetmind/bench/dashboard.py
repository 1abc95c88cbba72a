"""The dashboard's fault corpus: traversal names, links out of the root, Host, WebSocket frames.

Part of ``fleetmind bench faults`` (:mod:`fleetmind.bench.faults`, which runs :func:`dashboard`),
and the case lists ``tests/faults/test_dashboard.py`` runs against the app in process.

:func:`dashboard_tree` builds a root holding a real run, run folders whose files are symbolic
links to a copy outside the root (every outside file carries a marker string), links to folders
outside, and traversal names; :func:`probe_dashboard` sends every case through an
``httpx.Client`` (Starlette's TestClient in the tests, a real ``fleetmind serve`` in the
benchmark) and judges each answer: handled cleanly (a JSON answer, 4xx for a refused case, never
500 or a traceback) and leaked (the marker, or a file from outside the root, in the body);
:func:`probe_websocket` sends :data:`WS_FRAMES` to the live socket.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from fleetmind.bench.command import FLEETMIND
from fleetmind.eval.runner import RunConfig, execute

# ---------------------------------------------------------------------- dashboard
LINKED_RUNS = {
    "metrics-link": "metrics.json",
    "config-link": "config.json",
    "calls-link": "calls.jsonl",
    "episode-link": "episode.parquet",
    "part-link": "episode.parquet/part-00000.parquet",
    "events-link": "events.parquet",
}
"""Run folders under the root whose named file (or folder) is a link to the copy outside."""

RUN_ROUTES = ("meta", "frames", "series", "decisions", "decision?tick=0")

TRAVERSAL_NAMES = (
    "..",
    "../outside/run",
    "./../outside/run",
    "run/../../outside/run",
    "%2e%2e/outside/run",  # sent percent-encoded once more: the server sees %2e%2e
    "/etc",
    "//etc/passwd",
    "C:/Windows",
    "run\\..\\..\\outside",
    "run\x00",
    "linked-run",
    "linked-run/",
    "nested/escape/run",
    "a" * 5000,
    "a/" * 600,
    "x" * 255 + "/" + "y" * 300,
)
"""Folder names that must never reach outside the root (nor give a 500)."""

RAW_PATHS = (
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%2e%2e/app.py",
    "/static/%2e%2e%2fpaths.py",
    "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/" + "a" * 5000,
)
"""Raw URL paths aimed at files beside the page's assets or elsewhere."""

FOREIGN_SOURCE = ("from __future__", "root:x:0:")  # web/*.py source, /etc/passwd


@dataclass(frozen=True)
class HttpCase:
    """One request of the dashboard corpus.

    Attributes:
        name: what the case tries.
        path: the URL path and query, sent as is.
        headers: extra request headers.
        refused: the answer must be a 4xx (a refused name, a link out, a foreign host).
    """

    name: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    refused: bool = True


@dataclass(frozen=True)
class HttpOutcome:
    """The judged answer to one :class:`HttpCase`."""

    case: HttpCase
    status: int
    clean: bool
    leaked: bool
    detail: str


def _run_case(route: str, name: str, label: str, *, refused: bool = True) -> HttpCase:
    base, _, extra = route.partition("?")
    query = httpx.QueryParams({"run": name, **dict(httpx.QueryParams(extra))})
    return HttpCase(f"{base} {label}", f"/api/run/{base}?{query}", refused=refused)


def _cases() -> tuple[HttpCase, ...]:
    cases: list[HttpCase] = []
    for route in RUN_ROUTES:
        if not route.startswith("decision?"):  # the solver's run logs no decision to show
            cases.append(_run_case(route, "run", "of a plain run", refused=False))
            cases.append(_run_case(route, "inner-link", "of a link inside the root", refused=False))
        for name in LINKED_RUNS:
            cases.append(_run_case(route, name, f"of {name}"))
        for name in TRAVERSAL_NAMES:
            label = repr(name) if len(name) < 40 else f"name of {len(name)} characters"
            cases.append(_run_case(route, name, label))
    for name in ("cmp-link", "linked-run", "..", "../outside", "a" * 5000):
        label = repr(name) if len(name) < 40 else f"name of {len(name)} characters"
        cases.append(HttpCase(f"compare {label}", f"/api/compare?{httpx.QueryParams(folder=name)}"))
    cases += [HttpCase(f"raw path {p[:60]}", p) for p in RAW_PATHS]
    for host in ("evil.example", "testserver", "127.0.0.1.evil.example", "localhost:8000@evil"):
        cases.append(HttpCase(f"Host {host}", "/api/folders", headers=(("host", host),)))
    return tuple(cases)


DASHBOARD_CASES: tuple[HttpCase, ...] = _cases()
"""Every request of the dashboard corpus (about 150)."""

WS_FRAMES: tuple[tuple[str, str | bytes], ...] = (
    ("binary frame", b"\x00\xff\x10binary"),
    ("not JSON", "play please"),
    ("JSON but not an object", "[1, 2, 3]"),
    ("unknown field", '{"cmd": "play", "rm": "-rf"}'),
    ("unknown command", '{"cmd": "explode"}'),
    ("speed not a number", '{"cmd": "speed", "value": "fast"}'),
    ("huge frame", '{"cmd": "' + "p" * 100_000 + '"}'),
    ("empty text", ""),
)
"""WebSocket frames that must get ``{"type": "error"}`` back with the socket kept open."""


@dataclass(frozen=True)
class DashboardTree:
    """A dashboard root for the corpus and the marker every outside file holds."""

    root: Path
    outside: Path
    marker: str


def dashboard_tree(base: Path, *, seed: int = 0) -> DashboardTree:
    """Build ``base/root`` (a run, linked run folders, links out) and ``base/outside``.

    Args:
        base: an empty folder.
        seed: the run's seed.

    Returns:
        The tree; every file under ``outside`` holds ``marker`` where the dashboard would show it.
    """
    marker = f"OUTSIDE-{secrets.token_hex(8)}"
    root, outside = base / "root", base / "outside"
    run = root / "run"
    execute(RunConfig(robots=2, steps=20, seed=seed, planner_mode="sync"), run)
    out_run = outside / "run"
    shutil.copytree(run, out_run)
    config = json.loads((out_run / "config.json").read_text())
    config["marker"] = marker
    (out_run / "config.json").write_text(json.dumps(config))
    metrics = json.loads((out_run / "metrics.json").read_text())
    metrics["marker"] = marker
    (out_run / "metrics.json").write_text(json.dumps(metrics))
    (out_run / "calls.jsonl").write_text(json.dumps({"marker": marker, "prompt": marker}) + "\n")
    for part in sorted((out_run / "episode.parquet").glob("part-*.parquet")):
        table = pq.read_table(part)
        if "order" in table.column_names:
            i = table.column_names.index("order")
            table = table.set_column(i, "order", pa.array([marker] * table.num_rows))
        pq.write_table(table, part)
    for name, rel in LINKED_RUNS.items():
        folder = root / name
        shutil.copytree(run, folder)
        target = folder / rel
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        os.symlink(out_run / rel, target)
    os.symlink(out_run, root / "linked-run")
    (root / "nested").mkdir()
    os.symlink(outside, root / "nested" / "escape")
    os.symlink(run, root / "inner-link")
    (root / "cmp-link").mkdir()
    (outside / "comparison.json").write_text(json.dumps({"rows": [{"marker": marker}]}))
    os.symlink(outside / "comparison.json", root / "cmp-link" / "comparison.json")
    return DashboardTree(root=root, outside=outside, marker=marker)


def judge(case: HttpCase, status: int, body: str, marker: str) -> HttpOutcome:
    """Whether one answer was handled cleanly and whether it leaked a file from outside."""
    leaked = marker in body or any(s in body for s in FOREIGN_SOURCE)
    problems = []
    if status >= 500:
        problems.append(f"HTTP {status}")
    if "Traceback" in body:
        problems.append("a traceback in the body")
    if case.refused and not 400 <= status < 500:
        problems.append(f"HTTP {status} where a 4xx was due")
    if not case.refused and status != 200:
        problems.append(f"HTTP {status} where 200 was due")
    if status >= 400:
        try:
            error = json.loads(body)
        except json.JSONDecodeError:
            error = None
        if not (isinstance(error, dict) and "error" in error) and status != 400:
            # Starlette's Host check answers a plain-text 400 'Invalid host header'.
            problems.append("an error that is not JSON {error}")
    if leaked:
        problems.append("served a file from outside the root")
    detail = "; ".join(problems) or f"HTTP {status}"
    return HttpOutcome(case, status, clean=not problems, leaked=leaked, detail=detail)


def probe_dashboard(client: httpx.Client, tree: DashboardTree) -> list[HttpOutcome]:
    """Send every case of :data:`DASHBOARD_CASES` and judge each answer."""
    outcomes = []
    for case in DASHBOARD_CASES:
        try:
            resp = client.get(case.path, headers=dict(case.headers))
        except httpx.HTTPError as exc:
            outcomes.append(HttpOutcome(case, 0, clean=False, leaked=False, detail=str(exc)))
            continue
        outcomes.append(judge(case, resp.status_code, resp.text, tree.marker))
    return outcomes


def summarize(outcomes: list[HttpOutcome]) -> dict[str, Any]:
    """Counts of a probe: cases tried, handled cleanly, paths served from outside the root."""
    return {
        "cases": len(outcomes),
        "clean": sum(o.clean for o in outcomes),
        "leaked": sum(o.leaked for o in outcomes),
        "failures": [f"{o.case.name}: {o.detail}" for o in outcomes if not o.clean][:20],
    }


# ---------------------------------------------------------------------- a real dashboard
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(root: Path, *, timeout_s: float = 60.0) -> Iterator[str]:
    """A real ``fleetmind serve`` of ``root`` on 127.0.0.1 (a live view, not recorded)."""
    port = _free_port()
    cmd = [*FLEETMIND, "serve", "--root", str(root), "--port", str(port), "--no-record"]
    cmd += ["--robots", "2", "--steps", "50"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                httpx.get(f"{url}/api/folders", timeout=1.0)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    raise RuntimeError(f"fleetmind serve did not start: {err[-500:]}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def probe_websocket(url: str, *, timeout_s: float = 10.0) -> list[tuple[str, bool, str]]:
    """Send every frame of :data:`WS_FRAMES` to the live socket: (frame, handled, detail).

    Handled: an ``{"type": "error"}`` answer without a traceback, and the socket still open
    (the next frame, or a ``step`` command at the end, still gets an answer).
    """
    from websockets.sync.client import connect

    ws_url = url.replace("http://", "ws://") + "/api/live/ws"
    results: list[tuple[str, bool, str]] = []
    with connect(ws_url, open_timeout=timeout_s, max_size=None) as ws:
        for label, frame in WS_FRAMES:
            try:
                ws.send(frame)
                while (msg := json.loads(ws.recv(timeout=timeout_s)))["type"] != "error":
                    pass
                ok = "Traceback" not in str(msg.get("error"))
                results.append((label, ok, str(msg.get("error"))[:120]))
            except Exception as exc:  # a dropped socket or no answer: not handled
                results.append((label, False, f"{type(exc).__name__}: {exc}"))
                return results
        ws.send(json.dumps({"cmd": "step"}))
        ws.recv(timeout=timeout_s)
    return results


def dashboard(base: Path) -> dict[str, Any]:
    """The dashboard corpus against a real ``fleetmind serve``."""
    tree = dashboard_tree(base)
    with served(tree.root) as url, httpx.Client(base_url=url, timeout=30.0) as client:
        outcomes = probe_dashboard(client, tree)
        frames = probe_websocket(url)
    summary = summarize(outcomes)
    ws_failures = [f"websocket {label}: {detail}" for label, ok, detail in frames if not ok]
    return {
        "cases": summary["cases"] + len(WS_FRAMES),
        "clean": summary["clean"] + sum(ok for _, ok, _ in frames),
        "leaked": summary["leaked"],
        "failures": [*summary["failures"], *ws_failures],
    }
