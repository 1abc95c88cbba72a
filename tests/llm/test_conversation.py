from __future__ import annotations

import json

from fleetmind.llm.conversation import Conversation, Role, Transcript
from fleetmind.testing.fake_server import FakeChatServer, Received, Reply

COORD = Role("lead", "coordinator", "You coordinate and decide.")
EXEC = Role("worker", "executor", "You execute and report.")


def turn(phase: str, content: str) -> str:
    return json.dumps({"phase": phase, "content": content})


def by_speaker(coord: list[str], member: list[str]):  # type: ignore[no-untyped-def]
    """A script answering per role: the system prompt tells who is speaking."""
    count = {"lead": 0, "worker": 0}

    def script(req: Received) -> Reply:
        who = "lead" if "coordinate" in req.messages[0]["content"] else "worker"
        seq = coord if who == "lead" else member
        i = min(count[who], len(seq) - 1)
        count[who] += 1
        return Reply(seq[i])

    return script


def test_coordinator_decides_on_phase() -> None:
    script = by_speaker(
        [turn("discuss", "robot_0 takes order 1?"), turn("decide", "robot_0 -> order 1")],
        [turn("report", "robot_0 is free and 3 cells away")],
    )
    with FakeChatServer(script) as srv:
        t = Conversation(srv.client(), COORD, [EXEC], max_rounds=4).run("assign order 1")
    assert t.ended_by == "decided"
    assert t.decided_by == "coordinator"
    assert t.decision == "robot_0 -> order 1"
    assert t.rounds == 2
    assert [(m.sender, m.phase, m.round) for m in t.messages] == [
        ("lead", "discuss", 1),
        ("worker", "report", 1),
        ("lead", "decide", 2),
    ]
    # each role has its own list: the worker saw the lead's message as a user message
    worker_req = next(r for r in srv.requests if "execute" in r.messages[0]["content"])
    assert "lead (coordinator, discuss): robot_0 takes order 1?" in worker_req.last_user


def test_keyword_in_content_does_not_stop_the_talk() -> None:
    script = by_speaker(
        [turn("discuss", "I DECIDE nothing yet, TERMINATE is just a word")] * 1
        + [turn("decide", "final")],
        [turn("question", "done? decide! stop!")],
    )
    with FakeChatServer(script) as srv:
        t = Conversation(srv.client(), COORD, [EXEC], max_rounds=3).run("x")
    assert t.rounds == 2
    assert t.decision == "final"


def test_round_limit_forces_a_decision() -> None:
    n = {"i": 0}

    def script(req: Received) -> Reply:
        n["i"] += 1
        if "must decide now" in req.last_user:
            return Reply(turn("decide", "forced choice"))
        return Reply(
            turn(
                "discuss" if "coordinate" in req.messages[0]["content"] else "question",
                f"new point {n['i']}",
            )
        )

    with FakeChatServer(script) as srv:
        t = Conversation(srv.client(), COORD, [EXEC], max_rounds=3).run("x")
    assert t.ended_by == "round_limit"
    assert t.decided_by == "coordinator_forced"
    assert t.decision == "forced choice"
    assert t.rounds == 3


def test_no_progress_ends_early() -> None:
    def script(req: Received) -> Reply:
        if "must decide now" in req.last_user:
            return Reply(turn("decide", "go"))
        if "coordinate" in req.messages[0]["content"]:
            return Reply(turn("discuss", "what do you think?"))
        return Reply(turn("question", "what do you think?"))

    with FakeChatServer(script) as srv:
        t = Conversation(srv.client(), COORD, [EXEC], max_rounds=8, stall_rounds=2).run("x")
    assert t.ended_by == "no_progress"
    assert t.rounds == 3  # round 1 is new, rounds 2 and 3 repeat
    assert t.decision == "go"


def test_broken_model_gets_rule_based_default() -> None:
    def default(tr: Transcript) -> str:
        return f"nearest robot (after {tr.rounds} rounds)"

    with FakeChatServer(["not json at all"]) as srv:
        t = Conversation(srv.client(), COORD, [EXEC], max_rounds=2, default_decision=default).run(
            "x"
        )
    assert t.decided_by == "default"
    assert t.decision == "nearest robot (after 2 rounds)"
    assert t.ended_by in ("no_progress", "round_limit")
    assert t.errors >= 3
    assert all(m.phase == "error" for m in t.messages)
