"""Dashboard faults: traversal, symbolic links out of the root, long names, hostile frames, Host.

The cases are those of ``fleetmind bench faults`` (:mod:`fleetmind.bench.dashboard`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fleetmind.bench.dashboard import (
    DASHBOARD_CASES,
    LINKED_RUNS,
    WS_FRAMES,
    DashboardTree,
    dashboard_tree,
    probe_dashboard,
)
from fleetmind.eval.runner import RunConfig
from fleetmind.web.app import create_app


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> DashboardTree:
    return dashboard_tree(tmp_path_factory.mktemp("dash"))


@pytest.fixture(scope="module")
def client(tree: DashboardTree) -> Iterator[TestClient]:
    # The app's own Host check (no testserver): the client says Host 127.0.0.1.
    app = create_app(tree.root, live=None)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        yield c


def test_no_path_from_outside_the_root_is_served(client: TestClient, tree: DashboardTree) -> None:
    outcomes = probe_dashboard(client, tree)
    assert len(outcomes) == len(DASHBOARD_CASES) > 100
    assert [o.case.name for o in outcomes if o.leaked] == []
    assert [f"{o.case.name}: {o.detail}" for o in outcomes if not o.clean] == []


@pytest.mark.parametrize("name", sorted(LINKED_RUNS))
def test_a_linked_file_in_a_run_folder_is_refused_with_403(client: TestClient, name: str) -> None:
    resp = client.get("/api/run/frames", params={"run": name})
    assert resp.status_code == 403, resp.text
    assert "outside the dashboard root" in resp.json()["error"]


def test_a_5000_character_name_is_a_clear_400(client: TestClient) -> None:
    resp = client.get("/api/run/meta", params={"run": "a" * 5000})
    assert resp.status_code == 400
    assert "5000 characters: too long" in resp.json()["error"]


def test_testserver_is_not_a_local_host(client: TestClient) -> None:
    assert client.get("/api/folders", headers={"host": "testserver"}).status_code == 400
    assert client.get("/api/folders").status_code == 200


def test_hostile_websocket_frames_get_an_error_and_keep_the_socket(tmp_path: Path) -> None:
    app = create_app(tmp_path, live=RunConfig(robots=2, steps=50), autoplay=False)
    with (
        TestClient(app, base_url="http://127.0.0.1") as c,
        c.websocket_connect("ws://127.0.0.1/api/live/ws") as ws,
    ):
        for label, frame in WS_FRAMES:
            if isinstance(frame, bytes):
                ws.send_bytes(frame)
            else:
                ws.send_text(frame)
            while (msg := ws.receive_json())["type"] != "error":
                pass
            assert "Traceback" not in msg["error"], label
        ws.send_json({"cmd": "step"})  # the socket still works
        while (msg := ws.receive_json())["type"] != "status" or msg["playing"]:
            pass
