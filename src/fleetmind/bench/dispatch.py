"""``fleetmind bench dispatch``: the dispatch tier's targets, measured in one process.

1. Where the planner matters: a scenario where a third of the orders carry note-only
   constraints written the way people write them (the realistic note generator). Throughput,
   on-time rate, stranded orders and constraint violations over all orders of ``assignment``,
   ``oracle``, the note-reading planner with each reader (``template``, ``rules``, ``llm``,
   ``rules+llm``) and the LLM task queue (``llm``), sync and async, several seeds, and the
   share of the assignment -> oracle gap in text-only violations that each closes.
2. Executors on League of Robot Runners maps: throughput of ``assignment + rl + shield`` against
   ``assignment + shortest-path + shield`` (target >= 90%), with the RL executor's fallback
   actions ordered by the heuristic (default) and by the policy itself, all against the
   congestion-free
   bound: the shortest-path length of every delivered task (from where its robot stood when
   assigned, through the pickup, to the station) summed, over robots x ticks.
3. Control-loop step latency p50/p95/p99 per robot count, and with an LLM planner whose every
   reply takes 2 s (a scripted server) against the assignment planner (target p99 <= 1.1x).
4. Scaling: time per tick from 10 to 1,000 robots on a large map.
5. FIELD-NOTES §5.5: the LLM moving every robot every tick (``llm-direct``) against the
   shortest-path executor on a small map: step latency, throughput, shield interventions, tokens.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.executors import RLExecutor, ShortestPathExecutor
from fleetmind.dispatch.llm_planner import LLMPlanner
from fleetmind.dispatch.notes.planner import NoteReaderPlanner
from fleetmind.dispatch.notes.readers import make_reader
from fleetmind.dispatch.planners import AssignmentPlanner
from fleetmind.llm.chat import ChatClient
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import GridMap
from fleetmind.sim.maps import load_map
from fleetmind.sim.notewriter import NoteConfig
from fleetmind.sim.orders import OrderConfig
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig
from fleetmind.testing.fake_server import FakeChatServer, Reply

LORR = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "lorr" / "maps"


def _world(grid: GridMap, n: int, steps: int, seed: int, **orders: Any) -> Warehouse:
    rate = orders.pop("rate", max(0.02, n / 40))
    cfg = WarehouseConfig(
        n_robots=n, max_steps=steps, orders=OrderConfig(rate=rate, **orders), auto_assign=False
    )
    return Warehouse(grid, cfg, seed=seed)


def congestion_free_share(world: Warehouse, oracle: DistanceOracle) -> float:
    """Shortest-path moves of delivered tasks over robot-ticks (1.0 = never waited, never idle)."""
    total = 0
    for rec in world.records:
        if rec.delivered_tick < 0 or rec.assigned_cell is None:
            continue
        pmap = oracle.to(rec.order.pickup)
        total += int(pmap[rec.assigned_cell]) + int(pmap[rec.order.station])
    return total / max(1, len(world.robot_ids) * world.tick)


PLANNER_ROWS = ("assignment", "oracle", "notes:template", "notes:rules")
MODEL_ROWS = ("notes:llm", "notes:rules+llm", "llm")


def _planner_row(name: str, grid: GridMap, client: ChatClient | None, *, background: bool) -> Any:
    if name == "assignment":
        return AssignmentPlanner(grid)
    if name == "oracle":
        return AssignmentPlanner(grid, use_hidden=True)
    if name == "llm":
        return LLMPlanner(client, grid, background=background)  # type: ignore[arg-type]
    reader = make_reader(name.split(":", 1)[1], client)
    return NoteReaderPlanner(reader, grid, background=background)


def _mean(ms: list[dict[str, Any]], key: str, sub: str | None = None) -> float:
    return float(np.mean([m[key][sub] if sub else m[key] for m in ms]))


def planners_case(
    client: ChatClient | None,
    *,
    steps: int,
    seeds: list[int],
    robots: int = 6,
    modes: tuple[str, ...] = ("sync", "async"),
    tick_period_s: float = 0.1,
    notes: NoteConfig | None = None,
) -> dict[str, Any]:
    """Planners and note readers on a scenario where a third of the orders carry note constraints.

    Every row runs the same seeds, orders and notes (the realistic generator by default). ``sync``
    waits for every plan (reproducible); ``async`` is the mode users run: real-time ticks of
    ``tick_period_s``, the loop never waits, notes that need a model are read in the background.
    Violations are over all orders (delivered or not); ``gap_closed`` is the share of the
    assignment -> oracle gap in text-only violations a row closes.
    """
    grid = load_map("warehouse-small")
    notes = notes or NoteConfig(style="realistic")
    names = list(PLANNER_ROWS) + (list(MODEL_ROWS) if client is not None else [])
    summary: dict[str, Any] = {}
    for mode in modes:
        rows: dict[str, Any] = {}
        for name in names:
            ms = []
            for seed in seeds:
                world = _world(
                    grid, robots, steps, seed, rate=robots / 40, text_share=1 / 3, notes=notes
                )
                planner = _planner_row(name, grid, client, background=mode == "async")
                loop = ControlLoop(
                    world,
                    planner,
                    ShortestPathExecutor(grid),
                    config=LoopConfig(
                        planner_mode="sync" if mode == "sync" else "async",
                        snapshot_text=name == "llm",
                        tick_period_s=tick_period_s if mode == "async" else 0.0,
                    ),
                )
                ms.append(loop.run(steps))
            rows[name] = {
                "tasks_completed": _mean(ms, "tasks_completed"),
                "throughput": _mean(ms, "throughput"),
                "on_time_rate": _mean(ms, "on_time_rate"),
                "priority_weighted_throughput": _mean(ms, "priority_weighted_throughput"),
                "violations_text_only": _mean(ms, "constraint_violations", "text_only"),
                "violations_structured": _mean(ms, "constraint_violations", "structured"),
                "orders_stranded": _mean(ms, "orders_stranded"),
                "notes_needs_review": _mean(ms, "notes_needs_review"),
                "notes_wait_expired": _mean(ms, "notes_wait_expired"),
                "planner_calls": _mean(ms, "planner_calls"),
                "llm_calls": _mean(ms, "llm_calls"),
                "llm_tokens": float(
                    np.mean([m["llm_tokens_prompt"] + m["llm_tokens_completion"] for m in ms])
                ),
                "planner_fallbacks": _mean(ms, "planner_fallbacks"),
                "planner_latency_p50_ms": _mean(ms, "planner_latency_ms", "p50"),
                "collisions": _mean(ms, "collisions"),
            }
        base = rows["assignment"]
        gap = base["violations_text_only"] - rows["oracle"]["violations_text_only"]
        for row in rows.values():
            row["gap_closed"] = (
                (base["violations_text_only"] - row["violations_text_only"]) / gap
                if gap > 0
                else None
            )
            row["throughput_vs_classical"] = (
                row["throughput"] / base["throughput"] if base["throughput"] > 0 else None
            )
        summary[mode] = rows
    return {
        "robots": robots,
        "steps": steps,
        "seeds": seeds,
        "text_share": 1 / 3,
        "notes": {"style": notes.style, "zh_share": notes.zh_share, "difficulty": notes.difficulty},
        "tick_period_s": tick_period_s,
        "modes": summary,
    }


def executors_case(map_path: Path, robots: int, *, steps: int, seed: int = 0) -> dict[str, Any]:
    """RL vs shortest-path executor on one map and fleet size, against the congestion-free bound.

    Shortest path runs twice: ties in a fixed action order (``shortest-path``) and ties broken
    by a generator seeded with ``seed`` (``shortest-path-random``); the RL executor is reported
    against both.
    """
    from fleetmind.dispatch.executors import ShortestPathRandomExecutor

    grid = load_map(map_path)
    out: dict[str, Any] = {"map": grid.name, "robots": robots, "steps": steps}
    for name in ("shortest-path", "shortest-path-random", "rl", "rl-policy-fallbacks"):
        world = _world(grid, robots, steps, seed)
        if name == "shortest-path":
            executor: Any = ShortestPathExecutor(grid)
        elif name == "shortest-path-random":
            executor = ShortestPathRandomExecutor(grid, seed=seed)
        else:
            executor = RLExecutor(grid, fallback="policy" if name != "rl" else "heuristic")
        loop = ControlLoop(
            world,
            AssignmentPlanner(grid),
            executor,
            config=LoopConfig(planner_mode="sync", snapshot_text=False),
        )
        start = time.perf_counter()
        m = loop.run(steps)
        oracle = getattr(executor, "oracle", None) or DistanceOracle(grid)
        out[name] = {
            **_pick(
                m,
                "throughput",
                "tasks_completed",
                "collisions",
                "conflicts_commanded",
                "shield_interventions",
            ),
            "congestion_free_share": congestion_free_share(world, oracle),
            "step_latency_ms": m["step_latency_ms"],
            "wall_s": time.perf_counter() - start,
        }
    sp, rl = out["shortest-path"]["throughput"], out["rl"]["throughput"]
    out["rl_vs_shortest_path"] = rl / sp if sp > 0 else None
    spr = out["shortest-path-random"]["throughput"]
    out["rl_vs_shortest_path_random"] = rl / spr if spr > 0 else None
    pure = out["rl-policy-fallbacks"]["throughput"]
    out["rl_policy_fallbacks_vs_shortest_path"] = pure / sp if sp > 0 else None
    out["target_met"] = bool(sp > 0 and rl / sp >= 0.9)
    return out


def llm_direct_case(
    client: ChatClient, *, steps: int, robots: int = 3, map_name: str = "warehouse-tiny"
) -> dict[str, Any]:
    """FIELD-NOTES §5.5 measured: the LLM moving every robot every tick vs shortest path."""
    from fleetmind.dispatch.executors import LLMDirectExecutor

    grid = load_map(map_name)
    out: dict[str, Any] = {"map": grid.name, "robots": robots, "steps": steps}
    for name in ("shortest-path", "llm-direct"):
        world = _world(grid, robots, steps, 0)
        executor: Any = (
            ShortestPathExecutor(grid)
            if name == "shortest-path"
            else LLMDirectExecutor(client, grid)
        )
        loop = ControlLoop(
            world,
            AssignmentPlanner(grid),
            executor,
            config=LoopConfig(planner_mode="sync", snapshot_text=False),
        )
        m = loop.run(steps)
        out[name] = {
            **_pick(
                m,
                "throughput",
                "step_latency_ms",
                "shield_interventions",
                "collisions",
                "llm_calls",
            ),
            "llm_tokens": m["llm_tokens_prompt"] + m["llm_tokens_completion"],
        }
    return out


def _pick(metrics: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The named entries of a run's metrics, in the order named."""
    return {k: metrics[k] for k in keys}


def valid_plan(prompt: str) -> list[dict[str, Any]]:
    """A valid assignment list for an :class:`LLMPlanner` prompt (idle robots, open orders)."""
    idle = re.search(r"Idle robots: (.*)", prompt)
    robots = []
    for part in (idle.group(1) if idle else "").split(", robot_"):
        m = re.match(r"(?:robot_)?(\d+) at .*?(?:caps=(\S+))?$", part.strip())
        if m:
            robots.append((f"robot_{m.group(1)}", set((m.group(2) or "").split(","))))
    plan = []
    for line in prompt.splitlines():
        m = re.match(r"(o\d+x?): ", line)
        if not m:
            continue
        needs = re.search(r"; needs (\w+)", line)
        need = needs.group(1) if needs else None
        pick = next((r for r in robots if need is None or need in r[1]), None)
        if pick is not None:
            plan.append({"robot": pick[0], "order": m.group(1), "priority": 0})
            robots.remove(pick)
    return plan


def slow_llm_case(*, steps: int, robots: int = 16, delay_s: float = 2.0) -> dict[str, Any]:
    """p99 step latency with an LLM planner whose replies take ``delay_s`` vs the solver."""
    grid = load_map("warehouse-small")
    result: dict[str, Any] = {"delay_s": delay_s, "robots": robots, "steps": steps}

    def reply(received: Any) -> Reply:
        # A slow model that answers well: a valid plan (idle robots to open orders, capabilities
        # respected) after the delay, so the fleet works while it waits and the plans are used.
        return Reply(json.dumps({"assignments": valid_plan(received.last_user)}), delay_s=delay_s)

    for name in ("assignment", "llm-2s"):
        world = _world(grid, robots, steps, 0)
        # Real-time ticks as in the demo: a 2 s reply lands 20 ticks later, inside the plan
        # age limit, so its plans are applied (and the fleet is measured working).
        cfg = LoopConfig(
            planner_mode="async", tick_period_s=0.1, snapshot_text=name != "assignment"
        )
        if name == "assignment":
            loop = ControlLoop(
                world, AssignmentPlanner(grid), ShortestPathExecutor(grid), config=cfg
            )
            m = loop.run(steps)
        else:
            with FakeChatServer(reply) as srv:
                planner = LLMPlanner(srv.client(timeout_s=30.0), grid)
                loop = ControlLoop(world, planner, ShortestPathExecutor(grid), config=cfg)
                m = loop.run(steps)
        result[name] = _pick(
            m,
            "step_latency_ms",
            "planner_calls",
            "planner_fallbacks",
            "assignments_applied",
            "tasks_completed",
        )
    a = result["assignment"]["step_latency_ms"]["p99"]
    b = result["llm-2s"]["step_latency_ms"]["p99"]
    result["p99_ratio"] = b / a if a > 0 else None
    result["target_met"] = bool(a > 0 and b / a <= 1.1)
    return result


def scaling_case(counts: list[int], *, steps: int, map_path: Path | str) -> dict[str, Any]:
    """Time per tick against fleet size on one map (assignment + shortest-path + shield)."""
    grid = load_map(map_path)
    rows = []
    for n in counts:
        world = _world(grid, n, steps, 0)
        loop = ControlLoop(
            world,
            AssignmentPlanner(grid),
            ShortestPathExecutor(grid),
            config=LoopConfig(planner_mode="sync", snapshot_text=False),
        )
        m = loop.run(steps)
        rows.append(
            {
                "robots": n,
                **_pick(m, "step_latency_ms", "tier_latency_ms", "throughput", "collisions"),
            }
        )
    return {"map": grid.name, "steps": steps, "rows": rows}


def run(*, quick: bool = False, llm: bool = True) -> dict[str, Any]:
    """All dispatch measurements; ``quick`` shrinks every case to a smoke run."""
    from contextlib import ExitStack

    result: dict[str, Any] = {"quick": quick}
    with ExitStack() as stack:
        client = None
        if llm:
            from fleetmind.llm.embedded import EmbeddedServer

            client = stack.enter_context(EmbeddedServer(n_threads=1)).client()
        result["planners"] = planners_case(
            client,
            steps=60 if quick else 300,
            seeds=[0] if quick else [0, 1, 2],
            modes=("sync",) if quick else ("sync", "async"),
        )
        if client is not None:
            result["llm_direct"] = llm_direct_case(client, steps=30 if quick else 100)
    lorr_small = LORR / "warehouse_small.map"
    lorr_large = LORR / "warehouse_large.map"
    if lorr_small.exists():
        counts = [50] if quick else [50, 100, 200]
        result["executors"] = [
            executors_case(lorr_small, n, steps=50 if quick else 300) for n in counts
        ]
        if not quick and lorr_large.exists():
            result["executors"].append(executors_case(lorr_large, 1000, steps=200))
    else:
        result["executors"] = f"skipped: League of Robot Runners maps not found at {LORR}"
    result["slow_llm"] = slow_llm_case(steps=60 if quick else 300)
    scale_map: Path | str = lorr_large if lorr_large.exists() else "warehouse-large"
    result["scaling"] = scaling_case(
        [10, 100] if quick else [10, 30, 100, 300, 1000],
        steps=20 if quick else 100,
        map_path=scale_map,
    )
    return result
