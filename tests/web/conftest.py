"""Run folders and a running dashboard for the web tests."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetmind.eval.runner import RunConfig, execute
from fleetmind.testing.fake_server import FakeChatServer, Reply
from fleetmind.web.app import LOCAL_HOSTS, create_app

CHROMIUM = Path("/usr/bin/chromium")
TEST_HOSTS = (*LOCAL_HOSTS, "testserver")  # Starlette's TestClient sends Host: testserver


def dashboard(root: Path, **options: Any) -> Any:
    """The dashboard app as the TestClient reaches it (the app itself never allows testserver)."""
    return create_app(root, allowed_hosts=TEST_HOSTS, **options)


def _llm_script() -> Any:
    """Garbage for the first three calls (a fallback), then one order to one idle robot."""
    count = {"n": 0}

    def reply(received: Any) -> Reply:
        count["n"] += 1
        if count["n"] <= 3:
            return Reply("{not json at all")
        text = received.last_user
        idle = re.search(r"^Idle robots: (.*)$", text, re.MULTILINE)
        free = idle.group(1) if idle else ""
        robots = re.findall(r"(robot_\d+) at \(\d+, \d+\)(?!\s*caps)", free)
        orders = re.findall(r"^(o\d+x?): ", text, re.MULTILINE)
        pairs = [{"robot": robots[0], "order": orders[0]}] if robots and orders else []
        return Reply(json.dumps({"assignments": pairs}))

    return reply


@pytest.fixture(scope="session")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dashboard root with a classical run, an LLM-planner run and a comparison folder."""
    root = tmp_path_factory.mktemp("runs")
    execute(RunConfig(robots=4, steps=60, seed=3, planner_mode="sync"), root / "classical")
    # A run with incidents the rule handler answered (the dashboard's incidents card).
    execute(
        RunConfig(robots=4, steps=60, seed=3, desk="rules", faults=["breakdown:busy@5+30"]),
        root / "desk",
    )
    with FakeChatServer(_llm_script()) as srv:
        cfg = RunConfig(
            robots=3,
            steps=40,
            planner="llm",
            planner_mode="sync",
            llm_base_url=srv.base_url,
            llm_model=srv.model,
        )
        execute(cfg, root / "nested" / "llm")
    (root / "cmp").mkdir()
    rows = [
        {"strategy": "classical", "throughput": 0.1, "step_latency_ms": {"p50": 0.3, "p99": 7.0}},
        {"strategy": "hybrid", "throughput": 0.05, "step_latency_ms": {"p50": 0.5, "p99": 9.0}},
    ]
    (root / "cmp" / "comparison.json").write_text(json.dumps({"rows": rows}))
    (root / "empty").mkdir()
    from fleetmind.eval.compare import compare

    compare(
        ["classical", "greedy"],
        robots=3,
        steps=30,
        seeds=2,
        out=root / "realcmp",
        workers=1,
        common={"planner_mode": "sync"},
    )
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServerThread:
    """uvicorn serving an app on 127.0.0.1 in a daemon thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="session")
def live_server(run_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard with a live simulation, serving ``run_root`` on a free port."""
    app = create_app(run_root, live=RunConfig(robots=4, steps=5000, seed=1), speed=40)
    with ServerThread(app) as srv:
        yield srv.url


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Debian's Chromium instead of a Playwright download (never `playwright install`)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: install Debian's chromium package to run these")
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": ["--no-sandbox"]}
