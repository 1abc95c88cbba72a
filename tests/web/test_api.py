"""The dashboard's JSON API against real run folders (TestClient, no browser)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from fleetmind.eval.runner import RunConfig
from fleetmind.sim.maps import load_map
from fleetmind.web.runs import grid_rows

from .conftest import dashboard


def _episode(folder: Path) -> Any:
    parts = sorted((folder / "episode.parquet").glob("part-*.parquet"))
    import pyarrow as pa

    return pa.concat_tables([pq.read_table(p) for p in parts]).to_pandas()


@pytest.fixture(scope="module")
def client(run_root: Path) -> Iterator[TestClient]:
    with TestClient(dashboard(run_root, live=None)) as c:
        yield c


def _error(resp: Any, status: int) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    assert "Traceback" not in body["error"]
    return str(body["error"])


# ---------------------------------------------------------------------- listing and page
def test_folders_lists_runs_and_comparisons(client: TestClient) -> None:
    body = client.get("/api/folders").json()
    kinds = {f["name"]: f["kind"] for f in body["folders"]}
    assert kinds["classical"] == "run"
    assert kinds["realcmp"] == "compare"
    assert kinds["realcmp/greedy/seed-1"] == "run"
    assert kinds["nested/llm"] == "run"
    assert kinds["cmp"] == "compare"
    assert "empty" not in kinds
    assert body["live"] is False


def test_page_and_assets_are_served_from_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
    assert '<canvas id="map"' in page.text
    js = client.get("/static/app.js")
    assert js.status_code == 200
    assert "window.fleetmind" in js.text
    # Nothing is fetched from elsewhere: no CDN, no external URL in the page or its assets.
    for text in (page.text, js.text, client.get("/static/style.css").text):
        assert "http://" not in text
        assert "https://" not in text


def test_unknown_route_is_a_json_404(client: TestClient) -> None:
    assert "Not Found" in _error(client.get("/api/nothing"), 404)


def test_a_foreign_host_header_is_refused(client: TestClient) -> None:
    resp = client.get("/api/folders", headers={"host": "evil.example:8000"})
    assert resp.status_code == 400


# ---------------------------------------------------------------------- refused folders
@pytest.mark.parametrize(
    ("run", "status"),
    [
        ("../", 400),
        ("..", 400),
        ("classical/../..", 400),
        ("/etc", 400),
        ("nope", 404),
        ("empty", 422),
        ("cmp", 422),
    ],
)
def test_wrong_folders_give_clear_json_errors(client: TestClient, run: str, status: int) -> None:
    for route in ("meta", "frames", "series", "decisions"):
        message = _error(client.get(f"/api/run/{route}", params={"run": run}), status)
        assert run.rstrip("/") in message or "folder" in message


def test_an_absolute_path_to_a_real_run_is_refused(client: TestClient, run_root: Path) -> None:
    msg = _error(client.get("/api/run/meta", params={"run": str(run_root / "classical")}), 400)
    assert "relative" in msg


def test_a_symlink_out_of_the_root_is_refused(run_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (outside / "episode.parquet").mkdir()
    link = run_root / "sneaky"
    os.symlink(outside, link)
    try:
        with TestClient(dashboard(run_root, live=None)) as c:
            msg = _error(c.get("/api/run/meta", params={"run": "sneaky"}), 400)
            assert "outside the dashboard root" in msg
            names = [f["name"] for f in c.get("/api/folders").json()["folders"]]
            assert "sneaky" not in names
    finally:
        link.unlink()


def test_url_encoded_dots_are_still_refused(client: TestClient) -> None:
    resp = client.get("/api/run/meta?run=%2e%2e%2f%2e%2e")
    assert "'..' is not allowed" in _error(resp, 400)


def test_missing_parameter_is_a_422_naming_it(client: TestClient) -> None:
    assert "run" in _error(client.get("/api/run/meta"), 422)


def test_a_broken_config_names_file_and_line(run_root: Path, tmp_path: Path) -> None:
    bad = run_root / "broken"
    (bad / "episode.parquet").mkdir(parents=True)
    (bad / "config.json").write_text('{\n  "config": {,\n}')
    try:
        with TestClient(dashboard(run_root, live=None)) as c:
            msg = _error(c.get("/api/run/meta", params={"run": "broken"}), 422)
            assert msg.startswith("config.json:2:")
    finally:
        for p in sorted(bad.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        bad.rmdir()


# ---------------------------------------------------------------------- run data
def test_meta_describes_the_run(client: TestClient, run_root: Path) -> None:
    meta = client.get("/api/run/meta", params={"run": "classical"}).json()
    assert meta["ticks"] == 60
    assert meta["robots"] == ["robot_0", "robot_1", "robot_2", "robot_3"]
    assert meta["map"] == grid_rows(load_map("warehouse-small"))
    assert meta["config"]["seed"] == 3
    recorded = json.loads((run_root / "classical" / "metrics.json").read_text())
    assert meta["metrics"]["tasks_completed"] == recorded["tasks_completed"]
    assert meta["has_targets"] is True
    assert meta["problems"] == []


def test_frames_match_the_recorded_episode(client: TestClient, run_root: Path) -> None:
    df = _episode(run_root / "classical")
    body = client.get("/api/run/frames", params={"run": "classical", "start": 10, "stop": 30})
    frames = body.json()["frames"]
    assert [f["tick"] for f in frames] == list(range(10, 30))
    for f in frames:
        t = f["tick"]
        here = df[df.tick == t].sort_values("robot")
        before = df[df.tick == t - 1].sort_values("robot")
        assert f["pos"] == here[["row", "col"]].to_numpy().tolist()
        assert f["carrying"] == before["carrying"].tolist()
        assert f["shield"] == before["shield_override"].tolist()
        assert f["executed"] == before["executed"].tolist()
        for i, (target, has, tr, tc) in enumerate(
            zip(f["target"], before.has_task, before.target_row, before.target_col, strict=True)
        ):
            assert target == ([int(tr), int(tc)] if has else None), (t, i)
        np.testing.assert_allclose(
            f["reward"],
            df[df.tick < t].groupby("robot")["reward"].sum().sort_index().to_numpy(),
            atol=1e-5,
        )


def test_frames_start_empty_handed_and_clip_to_the_run(client: TestClient) -> None:
    first = client.get("/api/run/frames", params={"run": "classical", "stop": 1}).json()
    f0 = first["frames"][0]
    assert f0["target"] == [None] * 4
    assert f0["carrying"] == [False] * 4
    tail = client.get("/api/run/frames", params={"run": "classical", "start": 55, "stop": 999})
    assert [f["tick"] for f in tail.json()["frames"]] == [55, 56, 57, 58, 59]
    past = client.get("/api/run/frames", params={"run": "classical", "start": 500})
    assert past.json()["frames"] == []
    assert "start" in _error(
        client.get("/api/run/frames", params={"run": "classical", "start": -1}), 422
    )


def test_series_end_at_the_recorded_totals(client: TestClient, run_root: Path) -> None:
    s = client.get("/api/run/series", params={"run": "classical", "points": 20}).json()
    metrics = json.loads((run_root / "classical" / "metrics.json").read_text())
    assert len(s["tick"]) <= 20
    assert s["tick"][0] == 0
    assert s["tick"][-1] == 59
    assert set(s["reward"]) == set(metrics["per_agent_reward"])
    for rid, total in metrics["per_agent_reward"].items():
        assert s["reward"][rid][-1] == pytest.approx(total, abs=1e-4)
    assert s["delivered"][-1] == metrics["tasks_completed"]
    assert s["throughput"][-1] == pytest.approx(metrics["tasks_completed"] / 60, abs=1e-6)
    assert s["shield"][-1] == metrics["shield_interventions"]
    assert all(a <= b for a, b in zip(s["delivered"], s["delivered"][1:], strict=False))


def test_solver_decisions_have_no_calls(client: TestClient, run_root: Path) -> None:
    body = client.get("/api/run/decisions", params={"run": "classical"}).json()
    metrics = json.loads((run_root / "classical" / "metrics.json").read_text())
    decisions = body["decisions"]
    assert len(decisions) == metrics["planner_calls"]
    assert all(d["calls"] == 0 for d in decisions)
    # Every decision has its plan, except one still in flight when the run ended.
    assert all(d["source"] == "assignment" for d in decisions[:-1])
    assert decisions[-1]["source"] in ("assignment", None)
    assert [d["tick"] for d in decisions] == sorted(d["tick"] for d in decisions)


def test_llm_decision_shows_prompt_output_errors_and_fallback(
    client: TestClient, run_root: Path
) -> None:
    decisions = client.get("/api/run/decisions", params={"run": "nested/llm"}).json()["decisions"]
    lines = (run_root / "nested" / "llm" / "calls.jsonl").read_text().splitlines()
    assert sum(d["calls"] for d in decisions) == len(lines)
    # The planner's warm-up call (it sets the decision deadline) is listed apart, before.
    assert decisions[0]["kind"] == "warmup"
    assert decisions[0]["fallback"] is False
    first = next(d for d in decisions if d["kind"] == "planner")
    assert first["fallback"] is True
    assert first["source"] == "fallback:assignment"
    assert first["call_errors"] == first["calls"] >= 1
    body = client.get("/api/run/decision", params={"run": "nested/llm", "tick": first["tick"]})
    d = body.json()
    assert d["tick"] == first["tick"]
    assert len(d["call_log"]) == first["calls"]
    call = d["call_log"][0]
    assert call["output"] == "{not json at all"
    assert call["parse_error"]
    assert call["messages"][0]["role"] == "system"
    assert "dispatch" in call["messages"][0]["content"]
    ok = [x for x in decisions if x["kind"] == "planner" and not x["fallback"] and x["calls"]]
    assert ok, "later decisions get valid (empty) plans"
    good = client.get("/api/run/decision", params={"run": "nested/llm", "tick": ok[0]["tick"]})
    assert good.json()["call_log"][-1]["parse_error"] is None


def test_a_tick_without_decision_is_404(client: TestClient) -> None:
    decisions = client.get("/api/run/decisions", params={"run": "classical"}).json()["decisions"]
    quiet = min(set(range(60)) - {d["tick"] for d in decisions})
    msg = _error(client.get("/api/run/decision", params={"run": "classical", "tick": quiet}), 404)
    assert f"tick {quiet}" in msg


def test_a_corrupt_call_line_is_reported_not_fatal(run_root: Path, tmp_path: Path) -> None:
    import shutil

    copy = run_root / "corrupt"
    shutil.copytree(run_root / "nested" / "llm", copy)
    try:
        with (copy / "calls.jsonl").open("a") as fh:
            fh.write("{oops\n")
        n = len((copy / "calls.jsonl").read_text().splitlines())
        with TestClient(dashboard(run_root, live=None)) as c:
            body = c.get("/api/run/decisions", params={"run": "corrupt"}).json()
        assert body["problems"] == [
            f"calls.jsonl:{n}: not valid JSON (Expecting property name enclosed in double quotes)"
        ]
        assert sum(d["calls"] for d in body["decisions"]) == n - 1
    finally:
        shutil.rmtree(copy)


# ---------------------------------------------------------------------- comparisons
def test_comparison_table_flattens_nested_metrics(client: TestClient) -> None:
    body = client.get("/api/compare", params={"folder": "cmp"}).json()
    assert body["display"]["columns"] == [
        "strategy",
        "throughput",
        "step_latency_ms.p50",
        "step_latency_ms.p99",
    ]
    assert body["display"]["rows"] == [["classical", 0.1, 0.3, 7.0], ["hybrid", 0.05, 0.5, 9.0]]
    assert len(body["data"]["rows"]) == 2


def test_fleetmind_compare_output_is_shown_with_run_links(
    client: TestClient, run_root: Path
) -> None:
    from fleetmind.eval.compare import ROWS, format_cell

    body = client.get("/api/compare", params={"folder": "realcmp"}).json()
    saved = json.loads((run_root / "realcmp" / "comparison.json").read_text())
    show = body["display"]
    assert show["columns"] == ["metric", "classical", "greedy"]
    assert [r[0] for r in show["rows"]] == [label for _, label in ROWS]
    k = [key for key, _ in ROWS].index("throughput")
    assert show["rows"][k][1:] == [
        format_cell(saved["table"]["classical"]["throughput"]),
        format_cell(saved["table"]["greedy"]["throughput"]),
    ]
    assert show["runs"] == {
        "classical": ["realcmp/classical/seed-0", "realcmp/classical/seed-1"],
        "greedy": ["realcmp/greedy/seed-0", "realcmp/greedy/seed-1"],
    }
    meta = client.get("/api/run/meta", params={"run": show["runs"]["greedy"][1]}).json()
    assert meta["config"]["planner"] == "greedy"
    assert meta["config"]["seed"] == 1


def test_comparison_without_rows_names_the_field(run_root: Path) -> None:
    bad = run_root / "badcmp"
    bad.mkdir()
    (bad / "comparison.json").write_text(json.dumps({"strategies": []}))
    try:
        with TestClient(dashboard(run_root, live=None)) as c:
            assert "'rows'" in _error(c.get("/api/compare", params={"folder": "badcmp"}), 422)
            assert "not a comparison folder" in _error(
                c.get("/api/compare", params={"folder": "classical"}), 422
            )
            assert "'..'" in _error(c.get("/api/compare", params={"folder": "../x"}), 400)
    finally:
        (bad / "comparison.json").unlink()
        bad.rmdir()


# ---------------------------------------------------------------------- live
def test_live_is_404_when_off(client: TestClient) -> None:
    assert "--live" in _error(client.get("/api/live/status"), 404)
    assert client.post("/api/live/control", json={"cmd": "play"}).status_code == 404


def _wait(pred: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_live_controls_and_recording(tmp_path: Path) -> None:
    cfg = RunConfig(robots=3, steps=40, seed=2, flush_every=10)
    app = dashboard(tmp_path, live=cfg, speed=400, autoplay=False)
    with TestClient(app) as c:
        _wait(lambda: c.get("/api/live/status").json()["state"] == "paused")
        st = c.get("/api/live/status").json()
        assert st["tick"] == 0
        assert st["playing"] is False
        assert st["config"]["llm_api_key"] is None
        c.post("/api/live/control", json={"cmd": "step"})
        _wait(lambda: c.get("/api/live/status").json()["tick"] == 1)
        c.post("/api/live/control", json={"cmd": "step"})
        _wait(lambda: c.get("/api/live/status").json()["tick"] == 2)
        time.sleep(0.2)
        assert c.get("/api/live/status").json()["tick"] == 2  # paused: no more ticks
        assert (
            c.post("/api/live/control", json={"cmd": "speed", "value": 1e9}).json()["speed"] == 500
        )
        assert "unknown command" in _error(
            c.post("/api/live/control", json={"cmd": "explode"}), 400
        )
        assert "live control: speed must be above 0, got -1" in _error(
            c.post("/api/live/control", json={"cmd": "speed", "value": -1}), 400
        )
        msg = _error(c.post("/api/live/control", json={"cmd": "play", "x": 1}), 422)
        assert msg == "x: Extra inputs are not permitted"
        c.post("/api/live/control", json={"cmd": "play"})
        _wait(lambda: c.get("/api/live/status").json()["state"] == "finished")
        st = c.get("/api/live/status").json()
        assert st["tick"] == 40
        run = st["run"]
        assert run.startswith("live/")
        meta = c.get("/api/run/meta", params={"run": run}).json()
        assert meta["ticks"] == 40
        assert meta["robots"] == ["robot_0", "robot_1", "robot_2"]
        assert meta["metrics"]["steps"] == 40


def test_live_websocket_streams_moving_robots(tmp_path: Path) -> None:
    app = dashboard(tmp_path, live=RunConfig(robots=4, steps=400, seed=0), speed=200)
    with TestClient(app) as c, c.websocket_connect("/api/live/ws") as ws:
        seen: dict[str, list[dict[str, Any]]] = {"status": [], "init": [], "frame": []}
        while len(seen["frame"]) < 40:
            msg = ws.receive_json()
            seen.setdefault(msg["type"], []).append(msg)
        init = seen["init"][0]
        assert init["robots"] == ["robot_0", "robot_1", "robot_2", "robot_3"]
        assert init["map"] == grid_rows(load_map("warehouse-small"))
        ticks = [f["tick"] for f in seen["frame"]]
        assert ticks == sorted(ticks)
        assert ticks[-1] > ticks[0]
        assert seen["frame"][0]["pos"] != seen["frame"][-1]["pos"]
        frame = seen["frame"][-1]
        for key in ("target", "carrying", "broken", "shield", "open", "reward", "delivered"):
            assert key in frame
        assert len(frame["pos"]) == 4
        ws.send_json({"cmd": "pause"})
        while True:
            msg = ws.receive_json()
            if msg["type"] == "status" and not msg["playing"]:
                break
        ws.send_json({"cmd": "bogus"})
        while (msg := ws.receive_json())["type"] != "error":
            pass
        assert "unknown command" in msg["error"]


def test_live_websocket_refuses_a_foreign_origin(tmp_path: Path) -> None:
    from starlette.websockets import WebSocketDisconnect

    app = dashboard(tmp_path, live=RunConfig(robots=2, steps=10), autoplay=False)
    with (
        TestClient(app) as c,
        pytest.raises(WebSocketDisconnect) as info,
        c.websocket_connect("/api/live/ws", headers={"origin": "http://evil.example"}) as ws,
    ):
        ws.receive_json()
    assert info.value.code == 1008


def test_a_live_config_that_cannot_start_shows_the_error(tmp_path: Path) -> None:
    app = dashboard(tmp_path, live=RunConfig(map="no-such-map", robots=2, steps=10))
    with TestClient(app) as c:
        _wait(lambda: c.get("/api/live/status").json()["state"] == "error")
        err = c.get("/api/live/status").json()["error"]
        assert "no-such-map" in err


def test_a_delivery_on_the_last_tick_counts(tmp_path: Path) -> None:
    from fleetmind.eval.recorder import RunRecorder

    rec = RunRecorder(tmp_path / "tiny")
    rec.write_config({"map": "warehouse-small", "steps": 3})
    for t in range(3):
        rec.on_tick(
            t,
            {
                "robot": np.array([0], dtype=np.int32),
                "row": np.array([0], dtype=np.int32),
                "col": np.array([t], dtype=np.int32),
                "reward": np.array([0.5], dtype=np.float32),
            },
        )
    # The loop stamps events with the tick count after the move: the last move is tick 2.
    rec.on_event({"tick": 3, "kind": "delivered", "ids": ["o0", "o1"]})
    rec.close()
    with TestClient(dashboard(tmp_path, live=None)) as c:
        s = c.get("/api/run/series", params={"run": "tiny"}).json()
        assert s["tick"] == [0, 1, 2]
        assert s["delivered"] == [0, 0, 2]
        assert s["reward"]["robot_0"] == [0.5, 1.0, 1.5]
        frames = c.get("/api/run/frames", params={"run": "tiny"}).json()["frames"]
        assert [f["pos"] for f in frames] == [[[0, 0]], [[0, 1]], [[0, 2]]]
        assert frames[0]["target"] == [None]  # no target columns recorded: no targets shown
        assert c.get("/api/run/meta", params={"run": "tiny"}).json()["has_targets"] is False


# ---------------------------------------------------------------------- access off loopback
def test_live_controls_need_the_token_when_one_is_set(tmp_path: Path) -> None:
    app = dashboard(tmp_path, live=RunConfig(robots=2, steps=50), autoplay=False, token="s3cret")
    with TestClient(app) as c:
        body = {"cmd": "play"}
        assert "token" in _error(c.post("/api/live/control", json=body), 401)
        wrong = {"authorization": "Bearer nope"}
        assert "token" in _error(c.post("/api/live/control", json=body, headers=wrong), 401)
        ok = c.post("/api/live/control", json=body, headers={"authorization": "Bearer s3cret"})
        assert ok.json()["playing"] is True
        assert c.get("/api/live/status").status_code == 200  # reading needs no token
        with c.websocket_connect("/api/live/ws") as ws:  # no token: streams, refuses commands
            ws.send_json({"cmd": "pause"})
            while (msg := ws.receive_json())["type"] != "error":
                pass
            assert "token" in msg["error"]
        with c.websocket_connect("/api/live/ws?token=s3cret") as ws:
            ws.send_json({"cmd": "pause"})
            while (msg := ws.receive_json())["type"] != "status" or msg["playing"]:
                pass
        from starlette.websockets import WebSocketDisconnect

        with (
            pytest.raises(WebSocketDisconnect),
            c.websocket_connect("/api/live/ws?token=nope") as ws,
        ):
            ws.receive_json()


def test_off_loopback_the_host_check_stays_and_a_token_is_made() -> None:
    from fleetmind.web.server import access

    local = access("127.0.0.1")
    assert local.token is None
    assert "testserver" not in local.hosts
    wide = access("0.0.0.0")
    assert wide.generated
    assert wide.token is not None
    assert len(wide.token) >= 20
    assert "0.0.0.0" not in wide.hosts
    assert "127.0.0.1" in wide.hosts
    assert "evil.example" not in wide.hosts
    assert wide.url("0.0.0.0", 8000).endswith(f"/?token={wide.token}")
    given = access("10.1.2.3", token="mine", allowed_hosts=["fleet.lan"])
    assert (given.token, given.generated) == ("mine", False)
    assert {"10.1.2.3", "fleet.lan"} <= set(given.hosts)


def test_a_training_folder_is_named_and_sent_to_doctor(run_root: Path) -> None:
    train = run_root / "train"
    train.mkdir()
    (train / "curves.csv").write_text("episode\n0\n")
    (train / "config.json").write_text("{}")
    with TestClient(dashboard(run_root, live=None)) as c:
        msg = _error(c.get("/api/run/meta", params={"run": "train"}), 422)
    assert "a training run (fleetmind train" in msg
    assert "`fleetmind doctor train`" in msg
    assert str(run_root) not in msg  # names under the root only
