"""Compact text descriptions of a warehouse state for an LLM.

:func:`describe` lists the tick, each robot (cell, load, task, capabilities, faults), the open
orders with their priority, due tick, capability and note, and congestion hot spots (3x3 areas
holding the most robots). It keeps within a token budget (estimated at 4 characters per token):
past the budget it shortens lists and says how many entries it left out, never cutting a line in
half.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleetmind.sim.warehouse import Warehouse

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about 4 characters per token for English and JSON)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def hot_spots(world: Warehouse, *, top: int = 3) -> list[tuple[tuple[int, int], int]]:
    """The ``top`` 3x3 areas (by centre cell) holding at least 3 robots, most crowded first."""
    counts: Counter[tuple[int, int]] = Counter()
    for r, c in world.pos.tolist():
        counts[(r // 3 * 3 + 1, c // 3 * 3 + 1)] += 1
    return [(cell, n) for cell, n in counts.most_common(top) if n >= 3]


def _robot_line(world: Warehouse, i: int) -> str:
    r, c = world.cell_of(i)
    caps = ",".join(sorted(world.capabilities[i])) or "-"
    parts = [f"{world.robot_ids[i]} at ({r},{c}) caps={caps}"]
    if world.broken[i]:
        parts.append("BROKEN")
    order = world.task_of(i)
    if order is None:
        parts.append("idle")
    else:
        state = "carrying" if world.carrying[i] else "to pickup"
        parts.append(f"{state} {order.id}")
    return " ".join(parts)


def _order_line(order_id: str, world: Warehouse) -> str:
    o = world.order(order_id).order
    line = (
        f"{o.id} {o.priority} pickup=({o.pickup[0]},{o.pickup[1]}) "
        f"station=({o.station[0]},{o.station[1]}) due={o.due}"
    )
    if o.capability:
        line += f" needs={o.capability}"
    if o.note:
        line += f' note="{o.note}"'
    return line


def describe(world: Warehouse, *, max_tokens: int = 800) -> str:
    """Describe ``world`` in compact text within about ``max_tokens`` tokens."""
    budget = max_tokens * CHARS_PER_TOKEN
    head = [f"tick {world.tick}; {len(world.robot_ids)} robots; {len(world.open)} open orders"]
    spots = hot_spots(world)
    if spots:
        head.append("congestion: " + "; ".join(f"{n} robots near ({r},{c})" for (r, c), n in spots))
    robots = [_robot_line(world, i) for i in range(len(world.robot_ids))]
    orders = [_order_line(o.id, world) for o in world.open_orders()]
    # Orders matter most to a planner: give them up to two thirds of what is left.
    used = sum(len(x) + 1 for x in head) + 40
    order_lines = _fit(orders, (budget - used) * 2 // 3, "orders")
    used += sum(len(x) + 1 for x in order_lines)
    robot_lines = _fit(robots, budget - used, "robots")
    return "\n".join([*head, "robots:", *robot_lines, "open orders:", *order_lines])


def _fit(lines: list[str], budget: int, what: str) -> list[str]:
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > budget:
            out.append(f"... and {len(lines) - i} more {what}")
            break
        out.append(line)
        used += len(line) + 1
    return out or ["(none)"]
