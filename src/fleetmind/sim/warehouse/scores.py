"""An episode's scores: throughput, on-time rate, constraint violations, per robot."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.notes import broken_by
from fleetmind.sim.warehouse.records import OrderRecord


class ScoredWorld(Protocol):
    """What the scores read of a world (:class:`~fleetmind.sim.warehouse.world.Warehouse`)."""

    records: list[OrderRecord]
    capabilities: tuple[frozenset[str], ...]
    robot_ids: list[str]
    tick: int
    collision_attempts: int
    wall_bumps: int
    open: list[int]
    orders_dropped: int
    gates_expired: dict[str, int]
    delivered_by: NDArray[np.int64]
    reward_sum: NDArray[np.float64]


def violations(world: ScoredWorld) -> dict[str, int]:
    """Constraint violations over all orders, delivered or not.

    ``structured``: a robot without the required capability loaded the order. ``text_only``:
    orders with a note-only constraint that was broken or made impossible (loaded by a robot
    the note excludes, loaded before its hold, or not delivered before its deadline, whether
    delivered late or still undelivered when the deadline passed).
    """
    structured = 0
    text_only = 0
    for rec in world.records:
        o = rec.order
        loader = rec.robot if rec.picked_tick >= 0 else -1
        if (
            loader >= 0
            and o.capability is not None
            and o.capability not in world.capabilities[loader]
        ):
            structured += 1
        if o.constraints and broken_by(
            o.constraints,
            robot=world.robot_ids[loader] if loader >= 0 else None,
            picked_tick=rec.picked_tick,
            delivered_tick=rec.delivered_tick,
            now=world.tick,
        ):
            text_only += 1
    return {"structured": structured, "text_only": text_only}


def metrics(world: ScoredWorld) -> dict[str, Any]:
    """Scores of the episode so far (keys of the DESIGN.md metrics contract)."""
    done = [r for r in world.records if r.delivered_tick >= 0]
    steps = max(world.tick, 1)
    on_time = sum(1 for r in done if r.delivered_tick <= r.order.due)
    # Stranded: not delivered and already past due. On-time is a rate over every order whose
    # fate is known (delivered, or stranded), so an order nobody serves counts against it.
    stranded = sum(1 for r in world.records if r.delivered_tick < 0 and world.tick > r.order.due)
    decided = len(done) + stranded
    return {
        "steps": world.tick,
        "robots": len(world.robot_ids),
        "tasks_completed": len(done),
        "throughput": len(done) / steps,
        "on_time_rate": on_time / decided if decided else 0.0,
        "orders_stranded": stranded,
        "orders_undelivered": len(world.records) - len(done),
        "priority_weighted_throughput": sum(r.order.weight for r in done) / steps,
        "constraint_violations": violations(world),
        "collision_attempts": world.collision_attempts,
        "wall_bumps": world.wall_bumps,
        "orders_arrived": len(world.records),
        "orders_open": len(world.open),
        "orders_dropped": world.orders_dropped,
        "gates_expired": dict(world.gates_expired),
        "per_agent_deliveries": {
            rid: int(d) for rid, d in zip(world.robot_ids, world.delivered_by, strict=True)
        },
        "per_agent_reward": {
            rid: float(r) for rid, r in zip(world.robot_ids, world.reward_sum, strict=True)
        },
    }
