"""The incident desk: faults, action checks, the rule handler, the LLM pair and its fallbacks."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.dispatch.desk import LLMDesk, feasible
from fleetmind.dispatch.faults import check_faults, parse_fault, resolve_zone
from fleetmind.dispatch.incidents import (
    MAX_OPTIONS,
    DeskConfig,
    DeskWorker,
    Incident,
    IncidentHost,
    Refused,
    check,
    floor_labels,
    rule_actions,
    rule_options,
    take_state,
)
from fleetmind.envs.warehouse import resolve_map
from fleetmind.errors import ConfigError
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.eval.strategies import strategy
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig
from fleetmind.testing.desk_server import misbehaving_desk, proposal_follower
from fleetmind.testing.fake_server import FakeChatServer, Reply

FAULTS = ["breakdown:busy@12+200", "block:6,5-6,9@30+40", "battery:busy@45"]


def _run(tmp_path: Path | None, **fields: Any) -> dict[str, Any]:
    cfg = RunConfig(robots=8, steps=90, seed=1, order_rate=0.15, faults=FAULTS, **fields)
    return execute(cfg, tmp_path, overwrite=True)


def _world() -> Warehouse:
    grid = resolve_map("warehouse-small")
    w = Warehouse(grid, WarehouseConfig(n_robots=4, auto_assign=False), seed=0)
    return w


# ------------------------------------------------------------------ faults
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("block:5,5-1,1@3+4", "above and left"),
        ("block:1,1-2,2@3+0", "length must be at least 1, got 0"),
        ("battery:robot_1@", "expected breakdown:ROBOT@T+K"),
        ("block:0,0-30,30@1+1", "zone cells must be at most 400, got 961"),
    ],
)
def test_bad_fault_specs_are_refused_naming_the_flag(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match="--fault") as info:
        parse_fault(spec)
    assert says in str(info.value)


def test_faults_are_checked_against_the_map_before_tick_0() -> None:
    grid = resolve_map("warehouse-small")
    robots = [f"robot_{i}" for i in range(4)]
    for spec, says in [
        ("block:0,0-0,40@3+4", "off the 20x30 map"),
        ("block:4,0-4,2@3+4", "closes a station"),
        ("battery:robot_9@3", "no robot 'robot_9'"),
    ]:
        with pytest.raises(ConfigError, match=says):
            check_faults([parse_fault(spec)], robots=robots, steps=50, uses_llm=False, grid=grid)
    ok = [parse_fault(s) for s in ("block:3,5-3,9@3+4", "battery:busy@3", "breakdown:busy@1+2")]
    assert check_faults(ok, robots=robots, steps=50, uses_llm=False, grid=grid) == []


def test_block_busy_closes_the_aisle_where_a_robot_is_heading() -> None:
    fault = parse_fault("block:busy@7+30")
    assert (fault.kind, fault.start, fault.end, fault.zone) == ("block", 7, 37, ())
    w = _world()
    # Nothing ordered yet: the map's first pickup cell, stations and chargers left open.
    first = resolve_zone(fault, w)
    assert first.zone
    assert first.zone[0][0] == w.grid.pickup_cells()[0][0]
    assert not any(
        w.grid.stations[c] or w.grid.chargers[c] or w.grid.blocked[c] for c in first.zone
    )
    w.inject([w.stream.make(0) for _ in range(3)])
    older, newer = w.open_orders()[0], w.open_orders()[1]
    assert older.pickup in resolve_zone(fault, w).zone
    # An order a robot is on its way to outranks an older open one.
    w.assign("robot_1", newer.id)
    zone = resolve_zone(fault, w).zone
    r, c = newer.pickup
    assert (r, c) in zone
    assert all(row == r and abs(col - c) <= 2 for row, col in zone)
    assert older.pickup not in zone  # (seed 0: their pickups lie apart)
    # A fixed zone stays as given.
    fixed = parse_fault("block:3,5-3,9@3+4")
    assert resolve_zone(fixed, w) is fixed


def test_a_run_records_the_zone_block_busy_chose() -> None:
    cfg = RunConfig(
        robots=8, steps=60, seed=1, order_rate=0.15, faults=["block:busy@40+10"], desk="rules"
    )
    m = execute(cfg, None)
    (log,) = m["faults"]
    r1, c1, r2, c2 = log["zone"]
    assert r1 == r2
    assert 0 <= c2 - c1 <= 4
    (inc,) = [i for i in m["incident_log"] if i["kind"] == "block"]
    # The oldest order on its way was inside: the rules hold it.
    assert [a["tool"] for a in inc["actions"]][:1] == ["hold"]


@pytest.mark.parametrize(
    "args",
    [("--fault", "block:9,9-1,1@3+4"), ("--fault", "battery:robot_42@3"), ("--desk", "maybe")],
)
def test_run_refuses_a_bad_fault_or_desk_in_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    cmd = [sys.executable, "-m", "fleetmind.cli", "run", "--steps", "5", "--out"]
    proc = subprocess.run(
        [*cmd, str(tmp_path / "r"), *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    line = lines[0]
    assert ("--fault" in line) or ("desk" in line)
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------ action checks
def test_every_action_is_checked_with_a_reason() -> None:
    w = _world()
    w.inject([w.stream.make(0) for _ in range(3)])
    oid = w.open_orders()[0].id
    w.assign("robot_1", oid)
    w.break_robot("robot_2", 50)
    state = take_state(
        w,
        fault_zone=frozenset(),
        desk_zone=frozenset(),
        zone_until=None,
        labels=floor_labels(w.grid, ()),
    )
    cases = [
        ("reassign", {"order": "o999", "robot": "robot_0"}, "unknown order"),
        ("reassign", {"order": oid, "robot": "robot_9"}, "unknown robot"),
        ("reassign", {"order": oid, "robot": "robot_2"}, "is broken"),
        ("reassign", {"order": oid, "robot": "robot_1"}, "already serves"),
        ("hold", {"order": oid, "until": 0}, "not after the current tick"),
        ("release", {"order": oid}, "not on hold"),
        ("send_to_charger", {"robot": "robot_0"}, "no battery"),
        ("hand_over", {"order": oid}, "not loaded"),
        ("unblock_zone", {"cells": [[1, 1]]}, "is not closed"),
        ("block_zone", {"cells": [[1, 5]]}, "is a wall"),
        ("boost", {"robot": "robot_2"}, "cannot move"),
    ]
    for name, args, says in cases:
        with pytest.raises(Refused, match=says):
            check(name, args, state)
    check("reassign", {"order": oid, "robot": "robot_0"}, state)  # an idle robot may take it
    target = w.open_orders()[0]
    closed = frozenset({target.pickup, (5, 2)})
    cut = take_state(
        w,
        fault_zone=closed,
        desk_zone=frozenset(),
        zone_until=99,
        labels=floor_labels(w.grid, closed),
    )
    with pytest.raises(Refused, match="zone unreachable"):
        check("reassign", {"order": target.id, "robot": "robot_0"}, cut)
    with pytest.raises(Refused, match="closed by the fault until tick 99"):
        check("unblock_zone", {"cells": [[5, 2]]}, cut)


def test_a_robot_shut_out_by_a_closed_zone_is_the_blocks_not_a_deadlock() -> None:
    w = _world()
    shut, other = w.inject([w.stream.make(0), w.stream.make(0)])
    w.assign("robot_1", shut)
    w.assign("robot_2", other)
    host = IncidentHost(w, DeskConfig(mode="off"))
    host.fault_zones["block"] = frozenset({w.order(shut).order.pickup})
    for _ in range(2):  # a second report within DEADLOCK_REPEAT ticks opens the incident
        host.deadlock(("robot_1", "robot_2"))
    (inc,) = host.incidents
    assert inc.kind == "deadlock"
    assert inc.robots == ("robot_2",)  # robot_1 waits for its pickup's aisle to open
    assert inc.orders == (other,)


def test_the_ticks_a_closed_zone_shut_an_order_out_count_as_held_whoever_handled_it() -> None:
    """Unheld, held for part of the block, or held throughout: each tick shut out counts once."""
    w = _world()
    for _ in range(5):
        w.step(np.zeros(4, dtype=np.int64))
    unheld, late, held = w.inject([w.stream.make(5), w.stream.make(5), w.stream.make(5)])
    zone = frozenset(w.order(o).order.pickup for o in (unheld, late, held))
    host = IncidentHost(w, DeskConfig(mode="off"))
    fault = dataclasses.replace(parse_fault("block:1,1-1,1@10+30"), zone=tuple(sorted(zone)))
    for _ in range(5):
        w.step(np.zeros(4, dtype=np.int64))
    host.inject(fault)  # tick 10
    w.park(held, 10**6)
    for _ in range(10):
        w.step(np.zeros(4, dtype=np.int64))
    w.park(late, 10**6)  # tick 20: a decision that came late
    for _ in range(20):
        w.step(np.zeros(4, dtype=np.int64))
    host.lift(fault)  # tick 40
    for oid in (late, held):
        assert w.unpark(oid)
    ticks = {w.records[i].order.id: t for i, t in w.held_ticks.items()}
    assert ticks == {unheld: 30, late: 30, held: 30}
    # An order that arrives once the zone is closed counts from its arrival.
    w2 = _world()
    host2 = IncidentHost(w2, DeskConfig(mode="off"))
    host2.inject(fault)
    for _ in range(12):
        w2.step(np.zeros(4, dtype=np.int64))
    (newcomer,) = w2.inject([dataclasses.replace(w2.stream.make(12), pickup=min(zone))])
    for _ in range(8):
        w2.step(np.zeros(4, dtype=np.int64))
    host2.lift(fault)
    assert w2.held_ticks == {w2.index[newcomer]: 8}


class _Inbox(DeskWorker):
    """A desk worker whose messages the test writes (the host's side of the queue)."""

    def __init__(self) -> None:
        self.out: list[tuple[str, str, dict[str, Any], Any]] = []

    def submit(self, incident: Incident) -> None:
        pass

    def poll(self) -> list[tuple[str, str, dict[str, Any], Any]]:
        out, self.out = self.out, []
        return out

    def spent(self, incident_id: str) -> tuple[int, int, int]:
        return (0, 0, 0)

    def abandon(self, incident_id: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_helper_on_its_way_to_a_pickup_waits_to_load_while_the_desk_decides() -> None:
    w = _world()
    en_route, spare = w.inject([w.stream.make(0), w.stream.make(0)])
    w.assign("robot_1", en_route)
    inbox = _Inbox()
    host = IncidentHost(w, DeskConfig(mode="llm"), worker=inbox)
    host.inject(parse_fault("breakdown:robot_0@0+50"), "robot_0")
    (inc,) = host.incidents
    inbox.out.append(("reserve", inc.id, {"robots": ["robot_1", "robot_2"]}, None))
    host.tick_start()
    assert host.reserved_robots() == {"robot_1", "robot_2"}
    gated = w.gated()
    assert gated[1]  # would it load now, it could take no other load
    assert not gated[2]  # idle: nothing to gate
    # The desk sends robot_1 elsewhere: its order goes back open, with no gate left on it.
    assert host.apply(
        inc, "reassign", {"order": spare, "robot": "robot_1"}, source="desk"
    ).startswith("applied")
    assert w.index[en_route] not in w.gates
    assert "robot_1" not in host.reserved_robots()
    # A decision that names no helper lets the others go.
    inbox.out.append(("reserve", inc.id, {"robots": []}, None))
    host.tick_start()
    assert host.reserved_robots() == frozenset()


def test_the_desk_thread_is_woken_when_the_tick_is_done_not_during_it() -> None:
    """A view served or an action applied wakes the desk only at the tick's end (tick_done)."""
    w = _world()
    (oid,) = w.inject([w.stream.make(0)])
    inbox = _Inbox()
    host = IncidentHost(w, DeskConfig(mode="llm"), worker=inbox)
    host.inject(parse_fault("breakdown:robot_0@0+50"), "robot_0")
    (inc,) = host.incidents
    replies: list[str] = []
    inbox.out.append(
        ("action", inc.id, {"tool": "hold", "args": {"order": oid, "until": 9}}, replies.append)
    )
    host.view_wanted = True
    host.tick_start()
    # Served and applied on the loop's thread, in the tick...
    assert host.view is not None
    assert w.index[oid] in w.parked
    # ...but nobody told yet: the desk thread would take the interpreter lock mid-tick.
    assert not host.view_served.is_set()
    assert replies == []
    host.tick_done()
    assert host.view_served.is_set()
    assert len(replies) == 1
    assert replies[0].startswith("applied")


def test_a_released_helper_may_load_its_order_again() -> None:
    w = _world()
    (en_route,) = w.inject([w.stream.make(0)])
    w.assign("robot_1", en_route)
    inbox = _Inbox()
    host = IncidentHost(w, DeskConfig(mode="llm"), worker=inbox)
    host.inject(parse_fault("breakdown:robot_0@0+50"), "robot_0")
    (inc,) = host.incidents
    inbox.out.append(("reserve", inc.id, {"robots": ["robot_1"]}, None))
    host.tick_start()
    assert w.gated()[1]
    inc.closed = True  # the incident closed (the desk decided, or the rules took over)
    assert host.reserved_robots() == frozenset()
    assert not w.gated()[1]


def test_sim_parks_hands_over_and_charges() -> None:
    w = _world()
    (oid,) = w.inject([w.stream.make(0)])
    w.park(oid, 3)
    assert oid not in [o.id for o in w.open_orders()]
    released: list[str] = []
    for _ in range(3):
        released += list(w.step(np.zeros(4, dtype=np.int64)).released)
    assert released == [oid]
    w.set_battery("robot_0", 5)
    w.send_to("robot_0", (0, 0))
    assert w.errand[0]
    assert w.task_of(0) is None


def test_the_coordinators_options_put_the_rules_first_and_waiting_last() -> None:
    w = _world()
    w.inject([w.stream.make(0) for _ in range(2)])
    oid = w.open_orders()[0].id
    state = take_state(
        w,
        fault_zone=frozenset(),
        desk_zone=frozenset(),
        zone_until=None,
        labels=floor_labels(w.grid, ()),
    )
    # robot_2 broke down with oid's load: the rules give it to the nearest able robot.
    r2 = dataclasses.replace(state.robots["robot_2"], broken=True, carrying=True, order=oid)
    o = dataclasses.replace(state.orders[oid], state="loaded", robot="robot_2")
    state = dataclasses.replace(
        state, robots=state.robots | {"robot_2": r2}, orders=state.orders | {oid: o}
    )
    inc = Incident("i0", "breakdown", 5, "robot_2 broke down", robots=("robot_2",), orders=(oid,))
    options = rule_options(inc, state)
    assert options[0] == rule_actions(inc, state)
    assert options[0][0][0] == "reassign"
    assert len(options) == MAX_OPTIONS
    assert options[-1] == []
    helpers = [opt[0][1]["robot"] for opt in options[:-1] if opt[0][0] == "reassign"]
    assert len(helpers) == len(set(helpers)) >= 2  # other helpers, none twice
    assert "robot_2" not in helpers
    # A deadlock with nobody to boost leaves waiting as the only option.
    quiet = Incident("i1", "deadlock", 5, "stuck", robots=())
    assert rule_options(quiet, state) == [[]]
    # Every option checks out here; boxed in by robots on all its free sides, the broken
    # robot has nowhere to set the load down: no reassign or hand-over is offered, waiting is.
    assert feasible(options, state) == options
    corner = dataclasses.replace(r2, cell=(0, 0))  # its free sides: (1, 0) and (0, 1)
    boxed = state.robots | {
        "robot_2": corner,
        "robot_0": dataclasses.replace(state.robots["robot_0"], cell=(1, 0)),
        "robot_1": dataclasses.replace(state.robots["robot_1"], cell=(0, 1)),
    }
    boxed_state = dataclasses.replace(state, robots=boxed)
    with pytest.raises(Refused, match="no free cell beside robot_2"):
        check("hand_over", {"order": oid}, boxed_state)
    assert feasible(rule_options(inc, boxed_state), boxed_state) == [[]]


def test_a_surge_without_urgent_orders_boosts_the_loads_due_first() -> None:
    w = _world()
    w.inject([w.stream.make(0) for _ in range(5)])
    state = take_state(
        w,
        fault_zone=frozenset(),
        desk_zone=frozenset(),
        zone_until=None,
        labels=floor_labels(w.grid, ()),
    )
    oids = list(state.orders)
    robots, orders = dict(state.robots), dict(state.orders)
    # Three robots carry standard orders due at 90, 40 and 60; robot_3 is broken with one due
    # at 10 (it cannot move, so boosting it would do nothing).
    riders = ["robot_0", "robot_1", "robot_2", "robot_3"]
    for rid, oid, due in zip(riders, oids[:4], [90, 40, 60, 10], strict=True):
        robots[rid] = dataclasses.replace(
            robots[rid], carrying=True, order=oid, broken=rid == "robot_3"
        )
        orders[oid] = dataclasses.replace(
            orders[oid], state="loaded", robot=rid, due=due, priority="standard"
        )
    state = dataclasses.replace(state, robots=robots, orders=orders)
    inc = Incident("i0", "surge", 5, "4 extra orders", orders=(oids[4],))
    assert rule_actions(inc, state) == [
        ("boost", {"robot": "robot_1"}),
        ("boost", {"robot": "robot_2"}),
    ]
    # So the coordinator has a choice: the rules' boosts or waiting.
    assert rule_options(inc, state) == [rule_actions(inc, state), []]
    # An urgent order's robot goes first, alone.
    orders[oids[0]] = dataclasses.replace(orders[oids[0]], priority="urgent")
    state = dataclasses.replace(state, orders=orders)
    assert rule_actions(inc, state) == [("boost", {"robot": "robot_0"})]


# ------------------------------------------------------------------ runs
def test_rules_handle_every_incident_with_no_collision_and_no_lost_order() -> None:
    m = _run(None, desk="rules")
    inc = m["incidents"]
    assert inc["total"] >= 3
    assert inc["resolved_by_rules"] + inc["unresolved"] == inc["total"]
    assert inc["resolved_by_rules"] >= 3
    assert m["collisions"] == 0
    assert m["orders_lost"] == 0
    kinds = {i["kind"] for i in m["incident_log"]}
    assert {"breakdown", "block", "battery"} <= kinds
    acted = [a for i in m["incident_log"] for a in i["actions"]]
    assert acted
    assert all(a["source"] == "rules" for a in acted)


def test_off_tracks_incidents_but_nobody_acts() -> None:
    m = _run(None, desk="off")
    assert m["incidents"]["total"] >= 3
    assert m["incidents"]["resolved_by_rules"] == 0
    assert all(not i["actions"] for i in m["incident_log"])


def _calls(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_behaving_model_resolves_through_the_desk_with_role_and_phase(tmp_path: Path) -> None:
    with FakeChatServer(proposal_follower()) as srv:
        m = _run(
            tmp_path / "run",
            desk="llm",
            tick_period_s=0.03,
            desk_deadline_ticks=60,
            llm_base_url=srv.base_url,
            llm_model="fake",
        )
    assert m["incidents"]["resolved_by_desk"] >= 1
    # Every incident with a choice was the desk's; those where only waiting was on the table
    # went to the rules without a model call.
    for log in m["incident_log"]:
        assert log["fallback"] in (
            None,
            "run ended",
            "nothing to choose: waiting is the only option",
        )
        if log["fallback"] is not None and log["fallback"].startswith("nothing"):
            assert log["calls"] == 0
    assert m["collisions"] == 0
    assert m["orders_lost"] == 0
    desk_actions = [a for i in m["incident_log"] for a in i["actions"] if a["source"] == "desk"]
    assert any(a["result"].startswith("applied") for a in desk_actions)
    calls = [c for c in _calls(tmp_path / "run") if c["context"]["caller"] == "dispatch.desk"]
    assert calls
    roles = {(c["context"]["extra"]["role"], c["context"]["extra"]["phase"]) for c in calls}
    assert ("coordinator", "decide") in roles
    assert ("executor", "act") in roles
    # Every execution was clean, so the coordinator's choice stood without a review.
    assert ("coordinator", "review") not in roles
    decides = [c for c in calls if c["context"]["extra"]["phase"] == "decide"]
    assert all(c["parsed"]["content"] == "A" for c in decides)
    for c in decides:
        # The options: the rules' own first, at most four, waiting always last.
        prompt = c["messages"][-1]["content"]
        options = prompt.split("Options:\n", 1)[1].splitlines()
        assert 1 <= len(options) <= 4
        assert options[-1].endswith("no action for now")
        assert [o[0] for o in options] == list("ABCD"[: len(options)])
        assert c["params"]["json_schema"]["$defs"]["Option"]["enum"] == list("ABCD"[: len(options)])
    acts = [c for c in calls if c["context"]["extra"]["phase"] == "act"]
    for c in acts:
        # The executor's schema is grounded in the chosen option: no tool or id beyond it.
        tools = {
            v["properties"]["tool"]["const"]
            for v in c["params"]["json_schema"]["anyOf"]
            if "tool" in v["properties"]
        }
        assert tools <= {"reassign", "hand_over", "hold", "send_to_charger", "boost"}
    tools = [c["parsed"]["tool_call"] for c in calls if (c.get("parsed") or {}).get("tool_call")]
    assert tools
    assert all({"name", "args", "validation"} <= set(t) for t in tools)
    convo = [msg for i in m["incident_log"] for msg in i["conversation"]]
    assert {"coordinator", "executor"} <= {msg["role"] for msg in convo}
    from fleetmind.eval.report import build_report

    page = build_report(tmp_path / "run").read_text()
    assert '<h2 id="incidents">' in page
    assert "<b>executor</b> [act]" in page


def test_a_misbehaving_model_ends_in_the_rule_fallback() -> None:
    with FakeChatServer(misbehaving_desk(slow_s=20.0)) as srv:
        m = _run(
            None,
            desk="llm",
            tick_period_s=0.02,
            desk_deadline_s=3.0,
            desk_deadline_ticks=40,
            llm_base_url=srv.base_url,
            llm_model="fake",
        )
    inc = m["incidents"]
    assert inc["fallbacks"] >= 1
    assert inc["resolved_by_desk"] + inc["resolved_by_rules"] + inc["unresolved"] <= inc["total"]
    assert inc["resolved_by_rules"] >= 1
    assert m["collisions"] == 0
    assert m["orders_lost"] == 0


def test_a_hanging_model_never_blocks_the_loop() -> None:
    with FakeChatServer([Reply("{}", delay_s=60)]) as srv:
        t0 = time.perf_counter()
        m = _run(
            None,
            desk="llm",
            tick_period_s=0.01,
            desk_deadline_ticks=15,
            llm_base_url=srv.base_url,
            llm_model="fake",
        )
        wall = time.perf_counter() - t0
    # 90 ticks at 10 ms: the run ends on its own clock, whatever the model does.
    assert wall < 20
    assert m["steps"] == 90
    falls = [i for i in m["incident_log"] if i["fallback"]]
    assert falls
    nothing = "nothing to choose: waiting is the only option"
    assert {i["fallback"] for i in falls} <= {"deadline_ticks", "deadline_s", nothing}
    assert any(i["fallback"].startswith("deadline") for i in falls)
    assert m["incidents"]["fallbacks"] == len(falls)


def test_the_desk_takes_a_deadlock_up_before_incidents_queued_earlier() -> None:
    class Recording(LLMDesk):
        """The desk's queue with a talk that takes 50 ms and records the order."""

        def __init__(self, client: Any) -> None:
            self.order: list[str] = []
            self.gate = threading.Event()
            super().__init__(client)

        def _handle(self, inc: Incident, client: Any) -> dict[str, Any]:
            self.gate.wait(5.0)
            self.order.append(inc.id)
            return {"fallback": None}

    with FakeChatServer([]) as srv:
        desk = Recording(srv.client())
    queued = [("i0", "breakdown"), ("i1", "surge"), ("i2", "block"), ("i3", "battery")]
    queued += [("i4", "deadlock"), ("i5", "deadlock")]
    for n, (iid, kind) in enumerate(queued):
        desk.submit(Incident(iid, kind, 10, "test"))  # type: ignore[arg-type]
        if n == 0:
            time.sleep(0.1)  # i0 is taken up at once; the rest wait behind its talk
    desk.gate.set()
    end = time.perf_counter() + 5.0
    while len(desk.order) < len(queued) and time.perf_counter() < end:
        time.sleep(0.01)
    desk.close()
    # Deadlocks first, then a stranded load or a low battery, then aisles and surges; ties
    # in arrival order.
    assert desk.order == ["i0", "i4", "i5", "i3", "i1", "i2"]


def test_strategy_suffixes_give_the_desk() -> None:
    assert strategy("classical:desk-llm")["desk"] == "llm"
    assert strategy("classical:noshield:desk-rules") == {
        **strategy("classical:noshield"),
        "desk": "rules",
    }
    with pytest.raises(ConfigError, match="desk-rules"):
        strategy("classical:desk-maybe")


@pytest.mark.llm
def test_the_desk_with_the_real_embedded_model(embedded_client: Any) -> None:
    cfg = RunConfig(
        robots=8,
        steps=80,
        seed=1,
        order_rate=0.15,
        # A low battery always offers a choice (the charger now, or wait), so the model is asked.
        faults=["battery:busy@5"],
        desk="llm",
        tick_period_s=0.25,
        desk_deadline_ticks=70,
    )
    m = execute(cfg, None, client=embedded_client)
    (inc,) = [i for i in m["incident_log"] if i["kind"] == "battery"]
    assert inc["handler"] in ("desk", "rules")
    assert inc["calls"] >= 1
    assert inc["tokens"] > 0
    assert m["collisions"] == 0
    assert m["orders_lost"] == 0


def _stumbling(choice: str) -> Any:
    """The follower, but the coordinator picks ``choice`` and each first executor call errs."""
    from fleetmind.testing.fake_server import Received

    follow = proposal_follower()
    first: set[str] = set()

    def script(received: Received) -> Reply:
        msgs = received.messages
        system = str(msgs[0].get("content", "")) if msgs else ""
        if "calling tools" in system:
            task = str(msgs[1].get("content", ""))
            if task not in first:
                first.add(task)
                return Reply('{"type": "call_tool", "tool": "teleport", "args": {}}')
            rest = [m for m in msgs if "teleport" not in str(m.get("content", ""))]
            rest = [m for i, m in enumerate(rest) if i < 2 or m.get("role") == "assistant"]
            received = dataclasses.replace(received, body=received.body | {"messages": rest})
        elif "Executor's report:" not in str(msgs[-1].get("content", "")):
            return Reply(json.dumps({"phase": "decide", "content": choice}))
        return follow(received)  # the review: the follower lets what was done stand

    return script


def _scripted_run(tmp_path: Path, choice: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A desk run against :func:`_stumbling`; its metrics and the desk's calls."""
    with FakeChatServer(_stumbling(choice)) as srv:
        m = _run(
            tmp_path / "run",
            desk="llm",
            tick_period_s=0.03,
            desk_deadline_ticks=60,
            llm_base_url=srv.base_url,
            llm_model="fake",
        )
    calls = [c for c in _calls(tmp_path / "run") if c["context"]["caller"] == "dispatch.desk"]
    return m, calls


def test_trouble_in_the_executor_brings_the_coordinators_review(tmp_path: Path) -> None:
    m, calls = _scripted_run(tmp_path, "A")
    reviews = [c for c in calls if c["context"]["extra"]["phase"] == "review"]
    assert reviews
    # The review offers the options on the fresh state and R; the script lets it stand.
    for c in reviews:
        prompt = c["messages"][-1]["content"]
        assert "Executor's report: status finished" in prompt
        assert prompt.rstrip().endswith("R: leave it to the rule handler")
        assert c["params"]["json_schema"]["$defs"]["Option"]["enum"][-1] == "R"
    convo = [msg for i in m["incident_log"] for msg in i["conversation"]]
    assert any(
        msg["phase"] == "review" and msg["content"].endswith("no action for now") for msg in convo
    )
    assert m["collisions"] == 0


def test_the_coordinator_may_choose_to_wait(tmp_path: Path) -> None:
    """The last option is always 'no action for now': choosing it runs no executor."""
    m, calls = _scripted_run(tmp_path, "D")
    decides = [c for c in calls if c["context"]["extra"]["phase"] == "decide"]
    assert decides
    # "D" exists only where there are four options; elsewhere the schema refuses it and the
    # rules' option A is applied by default.
    for log in m["incident_log"]:
        if (log["fallback"] or "").startswith("nothing to choose"):
            continue
        said = [msg["content"] for msg in log["conversation"] if msg["phase"] == "decide"]
        assert said, log
        assert said[0].startswith(("Option D: no action", "Option A")), said
    assert m["collisions"] == 0
    assert m["orders_lost"] == 0


def test_the_helper_the_coordinator_chose_waits_for_the_desk(tmp_path: Path) -> None:
    """A slow model's choice still holds when it acts: the planner leaves the helpers be.

    Each answer takes 0.3 s (about 15 ticks here), so the executor acts some 30 ticks after the
    options were drawn up; orders keep arriving, and without the hold (``RESERVE_TICKS = 0``)
    the planner had given the idle helper other work by then and the reassign was refused.
    """
    with FakeChatServer(proposal_follower(delay_s=0.3)) as srv:
        cfg = RunConfig(
            robots=8,
            steps=120,
            seed=1,
            order_rate=0.1,
            faults=["breakdown:busy@40+200"],
            desk="llm",
            tick_period_s=0.02,
            desk_deadline_ticks=80,
            llm_base_url=srv.base_url,
            llm_model="fake",
        )
        m = execute(cfg, tmp_path / "run", overwrite=True)
    (inc,) = [i for i in m["incident_log"] if i["kind"] == "breakdown"]
    assert inc["handler"] == "desk"
    assert inc["fallback"] is None
    (act,) = [a for a in inc["actions"] if a["source"] == "desk"]
    assert act["tool"] == "reassign"
    assert act["result"].startswith("applied"), act["result"]
    assert act["tick"] - inc["tick"] >= 10  # the model was slow: the hold is what held
    assert m["collisions"] == 0
    assert m["orders_lost"] == 0


def test_a_decision_the_world_overtook_goes_to_review_without_an_executor_round() -> None:
    """A low robot delivers its load while the coordinator decides on handing it over.

    The reassign it chose would only be refused, so the executor is not asked to try it (each
    round costs a small model seconds the battery may not have): the review sees the fresh
    state, where the rules' option is the charger, and that is what the executor carries out.
    """
    from fleetmind.dispatch.desk import _DeskClient

    w = _world()
    (oid,) = w.inject([w.stream.make(0)])
    before = take_state(
        w,
        fault_zone=frozenset(),
        desk_zone=frozenset(),
        zone_until=None,
        labels=floor_labels(w.grid, ()),
    )
    low = dataclasses.replace(before.robots["robot_0"], battery=20.0, carrying=True, order=oid)
    loaded = dataclasses.replace(before.orders[oid], state="loaded", robot="robot_0")
    before = dataclasses.replace(
        before, robots=before.robots | {"robot_0": low}, orders=before.orders | {oid: loaded}
    )
    # ...and once the coordinator has spoken: delivered, unloaded, still low.
    after = dataclasses.replace(
        before,
        tick=before.tick + 15,
        robots=before.robots
        | {"robot_0": dataclasses.replace(low, battery=12.0, carrying=False, order=None)},
        orders={k: v for k, v in before.orders.items() if k != oid},
    )
    inc = Incident(
        "i0", "battery", 0, "robot_0's battery is low", robots=("robot_0",), orders=(oid,)
    )
    assert rule_actions(inc, before)[0][0] == "reassign"

    class Overtaken(LLMDesk):
        """The desk with scripted views of the world and a loop that applies every action."""

        def __init__(self, client: Any) -> None:
            self.views = 0
            self.done: list[tuple[str, dict[str, Any]]] = []
            super().__init__(client)

        def _view(self, wait_s: float = 1.0) -> Any:
            self.views += 1
            return before if self.views == 1 else after

        def _queue(self, inc: Incident, name: str, args: dict[str, Any]) -> str:
            self.done.append((name, args))
            return "applied"

    with FakeChatServer(proposal_follower()) as srv:
        desk = Overtaken(srv.client())
        client = _DeskClient(desk.client)
        try:
            payload = desk._handle(inc, client)
        finally:
            desk.close()
    convo = payload["conversation"]
    said = [(m["role"], m["phase"]) for m in convo]
    # decide, then the report with no act step before it, then the review and the executor.
    assert said[:3] == [
        ("coordinator", "decide"),
        ("executor", "report"),
        ("coordinator", "review"),
    ], said
    assert convo[1]["content"].startswith("not carried out, the world moved on: reassign(")
    assert "already delivered" in convo[1]["content"]
    assert convo[2]["content"].startswith("Option A: send_to_charger(robot='robot_0')")
    assert desk.done == [("send_to_charger", {"robot": "robot_0"})]
    assert payload["fallback"] is None
    assert payload["applied"] == ["send_to_charger(robot='robot_0')"]
    # Model calls: decide, review and the executor's one call (its finish is implied); none
    # was spent on the reassign.
    assert client.calls == 3


def test_a_low_robot_gets_no_new_work_while_the_desk_decides() -> None:
    w = _world()
    (oid,) = w.inject([w.stream.make(0)])
    w.assign("robot_0", oid)
    inbox = _Inbox()
    host = IncidentHost(w, DeskConfig(mode="llm"), worker=inbox)
    host.inject(parse_fault("battery:robot_0@0"), "robot_0")
    (inc,) = host.incidents
    assert host.reserved_robots() == {"robot_0"}
    # The coordinator's options name a helper: the low robot stays held beside it.
    inbox.out.append(("reserve", inc.id, {"robots": ["robot_1"]}, None))
    host.tick_start()
    assert host.reserved_robots() == {"robot_0", "robot_1"}
    inc.closed = True  # the desk decided (or the rules took over): the planner may use it
    assert host.reserved_robots() == frozenset()
    # With the rules there is no talk to wait for, and no hold.
    rules = IncidentHost(_world(), DeskConfig(mode="rules"))
    rules.inject(parse_fault("battery:robot_0@0"), "robot_0")
    assert rules.reserved_robots() == frozenset()


def test_a_desk_wait_after_which_the_incident_cleared_is_not_resolved_by_the_desk() -> None:
    from fleetmind.dispatch.incidents import Incident, desk_decisions
    from fleetmind.dispatch.incidents.host import _by_desk, _desk_waited

    def inc(actions: list[dict], decision: dict | None) -> Incident:
        return Incident(
            "i0",
            "breakdown",
            10,
            "x",
            handler="desk",
            closed=True,
            recovered_tick=30,
            actions=actions,
            decision=decision,
        )

    waited = inc([], {"chosen": [], "rules": ["hold(order='o1', until=40)"], "deviates": True})
    acted = inc(
        [{"tool": "hold", "source": "desk", "tick": 12, "result": "applied at tick 12"}],
        {
            "chosen": ["hold(order='o1', until=40)"],
            "rules": ["hold(order='o1', until=40)"],
            "deviates": False,
        },
    )
    refused = inc([{"tool": "hold", "source": "desk", "tick": 12, "result": "refused: gone"}], None)
    assert not _by_desk(waited)
    assert _desk_waited(waited)
    assert _by_desk(acted)
    assert not _desk_waited(acted)
    assert not _by_desk(refused)
    d = desk_decisions([waited, acted, refused])
    assert d == {"decided": 2, "deviations": 1, "deviation_rate": 0.5}
