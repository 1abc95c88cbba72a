"""Scripted models for the incident desk, served by the fake server of :mod:`.fake_server`.

- :func:`misbehaving_desk`: a model that gets everything wrong in turn -- prose, broken JSON,
  unknown tools, bad arguments, ids that do not exist, the same failing call again and again,
  HTTP 500s and replies slower than the desk's deadline. The desk must still end every incident
  (by itself or through the rule fallback) with no collision and no lost order.
- :func:`proposal_follower`: a model that behaves: the coordinator takes the rule proposal
  (option ``A``), the
  executor makes the proposed calls in order and finishes, the review lets what was done stand
  (it chooses waiting). It
  exercises the desk's success path without a real model.

Both read only the request text, so a run with them is as repeatable as the loop's timing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from fleetmind.testing.fake_server import Received, Reply

MISBEHAVIOURS: tuple[str, ...] = (
    "prose",
    "broken_json",
    "unknown_tool",
    "bad_args",
    "unknown_ids",
    "repeat",
    "http_500",
    "slow",
)


def _system(received: Received) -> str:
    msgs = received.messages
    return str(msgs[0].get("content", "")) if msgs else ""


def misbehaving_desk(*, slow_s: float = 30.0) -> Callable[[Received], Reply]:
    """A script cycling through :data:`MISBEHAVIOURS`, one per request.

    Args:
        slow_s: the delay of a ``slow`` reply (longer than the desk's deadline).
    """
    count = [0]

    def script(received: Received) -> Reply:
        kind = MISBEHAVIOURS[count[0] % len(MISBEHAVIOURS)]
        count[0] += 1
        if kind == "prose":
            return Reply("I think robot 2 should probably go and help, it is closest.")
        if kind == "broken_json":
            return Reply('{"type": "call_tool", "tool": "reassign", "args": {order: ')
        if kind == "unknown_tool":
            return Reply('{"type": "call_tool", "tool": "teleport", "args": {"robot": "robot_0"}}')
        if kind == "bad_args":
            return Reply('{"type": "call_tool", "tool": "hold", "args": {"order": 5}}')
        if kind == "unknown_ids":
            return Reply(
                '{"type": "call_tool", "tool": "reassign", '
                '"args": {"order": "o99999", "robot": "robot_99"}}'
            )
        if kind == "repeat":
            return Reply(
                '{"type": "call_tool", "tool": "send_to_charger", "args": {"robot": "robot_77"}}'
            )
        if kind == "http_500":
            return Reply(status=500)
        return Reply('{"phase": "decide", "content": "late"}', delay_s=slow_s)

    return script


_CALL = re.compile(r"(\w+)\(([^()]*)\)")
_ARG = re.compile(r"(\w+)=('[^']*'|-?\d+|\[[^\]]*\])")


def _proposed(text: str) -> list[tuple[str, dict[str, object]]]:
    line = next((ln for ln in text.splitlines() if ln.startswith("Make these calls")), "")
    calls = []
    for name, inner in _CALL.findall(line):
        args: dict[str, object] = {}
        for key, raw in _ARG.findall(inner):
            args[key] = json.loads(raw.replace("'", '"').replace("(", "[").replace(")", "]"))
        calls.append((name, args))
    return calls


def proposal_follower(delay_s: float = 0.0) -> Callable[[Received], Reply]:
    """A well-behaved desk model: it takes the rule proposal and carries it out.

    Args:
        delay_s: seconds every answer takes (a slow model that still behaves).
    """

    def script(received: Received) -> Reply:
        system = _system(received)
        msgs = received.messages
        if "calling tools" in system:
            task = str(msgs[1].get("content", "")) if len(msgs) > 1 else ""
            done = sum(1 for m in msgs[2:] if m.get("role") == "assistant")
            calls = _proposed(task)
            if done < len(calls):
                name, args = calls[done]
                return Reply(
                    json.dumps({"type": "call_tool", "tool": name, "args": args}), delay_s=delay_s
                )
            return Reply(json.dumps({"type": "finish", "answer": "done"}), delay_s=delay_s)
        task = str(msgs[-1].get("content", "")) if msgs else ""
        if "Executor's report: not carried out" in task:
            # Nothing was done (the world moved on): the rules' proposal on the fresh state.
            return Reply(json.dumps({"phase": "decide", "content": "A"}), delay_s=delay_s)
        if "Executor's report:" in task:
            wait = next(
                (ln[0] for ln in task.splitlines() if ln.endswith(": no action for now")), "R"
            )
            return Reply(json.dumps({"phase": "decide", "content": wait}), delay_s=delay_s)
        return Reply(json.dumps({"phase": "decide", "content": "A"}), delay_s=delay_s)

    return script
