"""End to end: the page in headless Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

READY = "m => window.fleetmind.ready && window.fleetmind.mode === m"


@pytest.fixture
def page(page: Any) -> Any:
    """The plugin's page with every console error and page error collected."""
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
    page.set_default_timeout(20_000)
    page.set_viewport_size({"width": 1500, "height": 950})
    return page


def test_live_robots_move_on_the_canvas(page: Any, live_server: str, tmp_path: Path) -> None:
    page.goto(f"{live_server}/#live")
    page.wait_for_function(READY, arg="live")
    first = page.evaluate("() => ({tick: fleetmind.frame.tick, pos: fleetmind.frame.pos})")
    page.wait_for_function(f"() => fleetmind.frame.tick >= {first['tick'] + 10}")
    later = page.evaluate("() => ({tick: fleetmind.frame.tick, pos: fleetmind.frame.pos})")
    assert later["pos"] != first["pos"], "robots moved between two reads"
    drawn, tick = page.evaluate(
        "() => [document.getElementById('map').dataset.tick, fleetmind.frame.tick]"
    )
    assert drawn == str(tick)
    # The canvas really holds the drawing: each robot's disc colour beside its cell centre.
    pixels = page.evaluate(
        """() => {
            const c = document.getElementById('map'), ctx = c.getContext('2d');
            const f = fleetmind.frame, px = fleetmind.cell;
            return f.pos.map(([r, col], i) => {
                const x = Math.floor(col * px + px * 0.8), y = Math.floor(r * px + px / 2);
                const d = ctx.getImageData(x, y, 1, 1).data;
                return {broken: f.broken[i], got: `rgb(${d[0]},${d[1]},${d[2]})`};
            });
        }"""
    )
    expected = page.evaluate("() => fleetmind.frame.pos.map((_, i) => robotColour(i))")
    for i, px in enumerate(pixels):
        if not px["broken"]:
            assert px["got"] == expected[i], i
    # Pause stops the ticks; the chart and KPI panels are filled.
    page.click("#play")
    page.wait_for_function("() => fleetmind.state === 'paused'")
    paused_at = page.evaluate("fleetmind.frame.tick")
    time.sleep(0.5)
    assert page.evaluate("fleetmind.frame.tick") == paused_at
    page.click("#step")
    page.wait_for_function(f"() => fleetmind.frame.tick === {paused_at + 1}")
    assert page.locator("#kpis tr").count() >= 5
    page.screenshot(path=str(tmp_path / "live.png"))
    page.click("#play")
    page.wait_for_function("() => fleetmind.state === 'running'")
    assert page.errors == []


def test_replay_scrubber_and_call_log(page: Any, live_server: str, tmp_path: Path) -> None:
    page.goto(f"{live_server}/#run=nested/llm")
    page.wait_for_function(READY, arg="replay")
    assert page.evaluate("fleetmind.ticks") == 40
    assert page.evaluate("fleetmind.tick") == 0
    page.fill("#scrubber", "25")
    page.wait_for_function("() => fleetmind.tick === 25")
    pos25 = page.evaluate("fleetmind.frame.pos")
    page.fill("#scrubber", "5")
    page.wait_for_function("() => fleetmind.tick === 5")
    assert page.evaluate("fleetmind.frame.pos") != pos25
    # The first planner decision (after the warm-up call) fell back after malformed replies:
    # its call log says so.
    page.locator(".decision", has_text="fallback").first.click()
    page.wait_for_selector("#call-log:not([hidden]) .call")
    body = page.inner_text("#call-log-body")
    assert "{not json at all" in body
    assert "fallback: yes" in body
    assert "You dispatch warehouse robots" in body
    assert page.locator("#call-log .call-error").count() >= 1
    tick = page.evaluate("fleetmind.callLog.tick")
    page.wait_for_function(f"() => fleetmind.tick === {tick}")  # the scrubber jumped there
    page.screenshot(path=str(tmp_path / "replay.png"), full_page=True)
    page.click("#call-log-close")
    assert page.locator("#call-log").is_hidden()
    assert page.errors == []


def test_comparison_and_wrong_folder_pages(page: Any, live_server: str, tmp_path: Path) -> None:
    page.goto(f"{live_server}/#compare=cmp")
    page.wait_for_function(READY, arg="compare")
    assert page.locator("#sim-view").is_hidden()
    headers = page.locator("#compare-table th").all_inner_texts()
    assert headers == ["strategy", "throughput", "step_latency_ms.p50", "step_latency_ms.p99"]
    assert page.locator("#compare-table tbody tr").count() == 2
    page.goto(f"{live_server}/#compare=realcmp")
    page.wait_for_function("() => fleetmind.ready && fleetmind.source === 'realcmp'")
    headers = page.locator("#compare-table th").all_inner_texts()
    assert headers == ["metric", "classical", "greedy"]
    page.screenshot(path=str(tmp_path / "compare.png"))
    page.locator(".run-link").last.click()  # greedy, seed 1: opens its replay
    page.wait_for_function(READY, arg="replay")
    assert page.evaluate("fleetmind.source") == "realcmp/greedy/seed-1"
    page.goto(f"{live_server}/#run=../../etc")
    page.wait_for_function("() => fleetmind.error !== null")
    assert page.inner_text("#error") == "folder '../../etc': '..' is not allowed"
    assert page.locator("#sim-view").is_hidden()
    page.screenshot(path=str(tmp_path / "error.png"))


def test_incidents_card_shows_each_incident_and_its_actions(page: Any, live_server: str) -> None:
    page.goto(f"{live_server}/#run=desk")
    page.wait_for_function(READY, arg="replay")
    assert page.locator("#incidents-card").is_visible()
    incidents = page.evaluate("fleetmind.incidents")
    assert incidents
    assert incidents[0]["kind"] == "breakdown"
    assert incidents[0]["handler"] == "rules"
    page.locator("#incidents details.incident").first.click()
    text = page.inner_text("#incidents")
    assert "breakdown" in text
    assert "rules" in text
    assert page.errors == []
