"""The LLM desk's status tools: what they read off the world view and what they log."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fleetmind.dispatch.desk import LLMDesk
from fleetmind.dispatch.incidents import Refused


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any], str]] = []

    def tool_result(self, name: str, args: dict[str, Any], validation: str) -> None:
        self.lines.append((name, args, validation))


class _View:
    def robot(self, robot: str) -> Any:
        if robot != "robot_0":
            raise Refused(f"no robot {robot}")
        return SimpleNamespace(
            id="robot_0",
            cell=(1, 2),
            broken=False,
            battery=float("inf"),
            carrying=True,
            order="o1",
            errand=None,
            capabilities={"lift", "cold"},
        )

    def order(self, order: str) -> Any:
        if order != "o1":
            raise Refused(f"no order {order}")
        return SimpleNamespace(
            id="o1",
            state="open",
            robot=None,
            pickup=(0, 0),
            station=(3, 3),
            priority="urgent",
            due=10,
            parked_until=None,
        )


def _tools(view: _View | None, log: _Log) -> dict[str, Any]:
    desk = LLMDesk.__new__(LLMDesk)  # the tools need only the view; no model, no host
    desk._view = lambda wait_s=1.0: view  # type: ignore[method-assign]
    tools = desk._all_tools(SimpleNamespace(id="i1"), log, [])  # type: ignore[arg-type]
    return {t.name: t.fn for t in tools}


def test_status_tools_read_the_view_and_log_ok() -> None:
    log = _Log()
    tools = _tools(_View(), log)
    robot = tools["robot_status"]("robot_0")
    assert robot["cell"] == [1, 2]
    assert robot["battery"] is None  # no battery model: infinite charge reads as none
    assert robot["capabilities"] == ["cold", "lift"]
    assert tools["order_status"]("o1")["pickup"] == [0, 0]
    assert log.lines == [
        ("robot_status", {"robot": "robot_0"}, "ok"),
        ("order_status", {"order": "o1"}, "ok"),
    ]


def test_status_tools_log_a_refusal_and_raise_it() -> None:
    log = _Log()
    tools = _tools(_View(), log)
    with pytest.raises(Refused, match="no robot robot_9"):
        tools["robot_status"]("robot_9")
    with pytest.raises(Refused, match="no order o9"):
        tools["order_status"]("o9")
    assert log.lines == [
        ("robot_status", {"robot": "robot_9"}, "refused: no robot robot_9"),
        ("order_status", {"order": "o9"}, "refused: no order o9"),
    ]


def test_status_tools_refuse_without_a_view() -> None:
    log = _Log()
    with pytest.raises(Refused, match="no view"):
        _tools(None, log)["order_status"]("o1")
    assert log.lines == []
