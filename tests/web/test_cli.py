"""`fleetmind serve` as a user runs it: flags, bad input, start and a clean Ctrl+C."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import free_port

FLEETMIND = [sys.executable, "-m", "fleetmind.cli"]


def test_serve_help_lists_the_options() -> None:
    out = subprocess.run(
        [*FLEETMIND, "serve", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for flag in ("--host", "--port", "--root", "--live", "--no-live", "--map", "--speed"):
        assert flag in out


def test_a_missing_root_without_live_is_a_one_line_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*FLEETMIND, "serve", "--no-live", "--root", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "no such folder" in " ".join(proc.stderr.split())  # Rich wraps at 80 columns
    assert "Traceback" not in proc.stderr


def test_a_bad_live_option_is_a_one_line_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*FLEETMIND, "serve", "--root", str(tmp_path), "--robots", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "robots" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.timeout(90)
def test_serve_runs_live_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            *FLEETMIND,
            "serve",
            "--port",
            str(port),
            "--root",
            str(tmp_path / "runs"),
            "--robots",
            "3",
            "--speed",
            "100",
            "--record",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/api/live/status", timeout=2).json()
                if status["tick"] >= 20:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        assert status is not None
        assert status["tick"] >= 20
        assert status["config"]["robots"] == 3
        assert status["steps"] == 1000
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    folder = tmp_path / "runs" / status["run"]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["steps"] >= 20  # the live episode was flushed and closed on shutdown


def test_serve_writes_nothing_under_root_unless_asked(tmp_path: Path) -> None:
    port = free_port()
    root = tmp_path / "runs"
    root.mkdir()
    proc = subprocess.Popen(
        [*FLEETMIND, "serve", "--port", str(port), "--root", str(root), "--speed", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, tick = time.monotonic() + 60, 0
        while time.monotonic() < deadline and tick < 60:
            with contextlib.suppress(httpx.HTTPError):
                tick = httpx.get(f"http://127.0.0.1:{port}/api/live/status", timeout=2).json()[
                    "tick"
                ]
            time.sleep(0.1)
        assert tick >= 60  # past the recorder's first flush (every 50 ticks)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert list(root.iterdir()) == []


@pytest.mark.timeout(90)
def test_serve_off_loopback_prints_a_token_and_keeps_the_host_check(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*FLEETMIND, "serve", "--host", "0.0.0.0", "--port", str(port), "--root", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "?token=" in line
        token = line.split("?token=")[1].split()[0]
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{url}/api/folders", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        evil = httpx.get(f"{url}/api/folders", headers={"host": "evil.example"}, timeout=5)
        assert evil.status_code == 400
        cmd = {"cmd": "pause"}
        assert httpx.post(f"{url}/api/live/control", json=cmd, timeout=5).status_code == 401
        auth = {"authorization": f"Bearer {token}"}
        ok = httpx.post(f"{url}/api/live/control", json=cmd, headers=auth, timeout=5)
        assert ok.status_code == 200, ok.text
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
