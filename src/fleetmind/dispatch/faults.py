"""Fault injection for the recovery-cost signal of FIELD-NOTES §6.

Faults are given as short specs (flags ``--fault``, repeatable, or a config list):

- ``breakdown:ROBOT@T+K``: robot ``ROBOT`` (id or index) stops at tick ``T`` for ``K`` ticks;
- ``llm-outage@T+K``: every LLM call for ticks ``T .. T+K-1`` fails as a connection error;
- ``malformed@T+K``: every LLM reply for ticks ``T .. T+K-1`` is garbage text;
- ``surge@T:N``: ``N`` extra orders arrive at tick ``T`` (at most :data:`MAX_SURGE`: a larger
  surge is cut to it, the cut recorded in the ``fault_start`` event and the run's ``faults``);
- ``block:R1,C1-R2,C2@T+K``: the cells of rows ``R1..R2`` and columns ``C1..C2`` (cells are
  ``(row, col)``) are closed to robots for ticks ``T .. T+K-1`` (an aisle blocked: the shield
  keeps robots out, shortest-path executors route around it);
- ``block:busy@T+K``: the same, for the stretch of aisle where work waits at tick ``T``: the
  free cells of the pickup row of the oldest order a robot is on its way to (else the oldest
  open one), :data:`BUSY_REACH` columns either side, stations and chargers left open (see
  :func:`resolve_zone`);
- ``battery:ROBOT@T``: robot ``ROBOT``'s battery runs low at tick ``T``: its charge becomes the
  moves to the nearest charger plus :data:`BATTERY_MARGIN`, so it makes the charger only if it
  heads there soon (an empty robot stands still until recharged, which it cannot do alone).

``ROBOT`` is an id (``robot_3``), an index (``3``), or ``busy``: at the fault's tick, the
lowest-id robot carrying a load, else the lowest-id robot with a task, else ``robot_0``.

Ticks and lengths are at most :data:`MAX_TICKS`. :func:`check_faults` checks every fault against
the world before tick 0 (a breakdown names a robot of the fleet) and says which faults cannot
happen in the run. The run records when each fault started and ended (events ``fault_start`` /
``fault_end``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from fleetmind.errors import ConfigError, LLMConnectionError, check_range, range_message
from fleetmind.llm.chat import ChatClient, ChatOptions, ChatResult, ChatWrapper, Message
from fleetmind.sim.grid import GridMap
from fleetmind.sim.warehouse import Warehouse

log = logging.getLogger(__name__)

MAX_TICKS = 10**9
"""The largest tick or length a fault spec may give (larger ones are refused)."""
MAX_SURGE = 1000
"""The most orders one surge injects (a larger surge is cut to this, and the cut recorded)."""

BATTERY_MARGIN = 6
"""Moves of charge a ``battery`` fault leaves beyond the way to the nearest charger."""
BUSY_REACH = 2
"""Columns either side of the pickup that a ``block:busy`` fault closes."""
MAX_ZONE_CELLS = 400
"""The most cells one ``block`` fault may close."""

FaultKind = Literal["breakdown", "llm-outage", "malformed", "surge", "block", "battery"]

_PATTERNS = {
    "breakdown": re.compile(r"^breakdown:(?P<robot>[\w-]+)@(?P<start>\d+)\+(?P<length>\d+)$"),
    "llm-outage": re.compile(r"^llm-outage@(?P<start>\d+)\+(?P<length>\d+)$"),
    "malformed": re.compile(r"^malformed@(?P<start>\d+)\+(?P<length>\d+)$"),
    "surge": re.compile(r"^surge@(?P<start>\d+):(?P<count>\d+)$"),
    "block": re.compile(
        r"^block:(?P<r1>\d+),(?P<c1>\d+)-(?P<r2>\d+),(?P<c2>\d+)@(?P<start>\d+)\+(?P<length>\d+)$"
    ),
    "battery": re.compile(r"^battery:(?P<robot>[\w-]+)@(?P<start>\d+)$"),
    "block-busy": re.compile(r"^block:busy@(?P<start>\d+)\+(?P<length>\d+)$"),
}
FORMS = (
    "breakdown:ROBOT@T+K, llm-outage@T+K, malformed@T+K, surge@T:N, block:R1,C1-R2,C2@T+K, "
    "block:busy@T+K or battery:ROBOT@T"
)


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Attributes:
        kind: ``breakdown``, ``llm-outage``, ``malformed``, ``surge``, ``block`` or
            ``battery``.
        start: first tick.
        length: ticks it lasts (1 for a surge or a battery fault).
        robot: the robot of a breakdown or battery fault (``busy``: chosen at the fault's tick).
        count: orders of a surge (after the cut to :data:`MAX_SURGE`).
        spec: the text it was parsed from.
        cut: orders of a surge dropped by the cut (0 if none).
        zone: the cells a block fault closes (empty for ``block:busy`` until
            :func:`resolve_zone` chooses them at the fault's tick).
    """

    kind: FaultKind
    start: int
    length: int = 1
    robot: str | None = None
    count: int = 0
    spec: str = ""
    cut: int = 0
    zone: tuple[tuple[int, int], ...] = ()

    @property
    def zone_box(self) -> tuple[int, int, int, int] | None:
        """``(r1, c1, r2, c2)`` of a block fault's zone (None for other kinds)."""
        if not self.zone:
            return None
        rows = [r for r, _ in self.zone]
        cols = [c for _, c in self.zone]
        return min(rows), min(cols), max(rows), max(cols)

    @property
    def end(self) -> int:
        """First tick after the fault."""
        return self.start + self.length

    def active(self, tick: int) -> bool:
        """Whether the fault is on at ``tick``."""
        return self.start <= tick < self.end


def parse_fault(spec: str) -> Fault:
    """Parse one fault spec (see the module docstring).

    Raises:
        ConfigError: naming ``--fault``, the spec and the forms expected, or the number out of
            range.
    """
    text = spec.strip()
    for kind, pattern in _PATTERNS.items():
        m = pattern.match(text)
        if m is None:
            continue
        numbers = {k: v for k, v in m.groupdict().items() if k != "robot" and v is not None}
        for name, digits in numbers.items():
            # Check the digits before int(): a 10,000-digit number is slow to convert.
            if len(digits) > 10 or int(digits) > MAX_TICKS:
                shown = digits[:20] + ("..." if len(digits) > 20 else "")
                message = range_message(name, shown, high=MAX_TICKS)
                raise ConfigError(f"--fault {spec!r}: {message}")
        start = int(m["start"])
        if kind == "surge":
            asked = int(m["count"])
            count = min(asked, MAX_SURGE)
            if asked > count:
                log.warning(
                    "--fault %r: a surge injects at most %d orders; %d cut",
                    text,
                    MAX_SURGE,
                    asked - count,
                )
            return Fault("surge", start, 1, count=count, spec=text, cut=asked - count)
        if kind == "battery":
            return Fault("battery", start, 1, robot=_robot_id(m["robot"]), spec=text)
        length = int(m["length"])
        check_range("length", length, low=1, where=f"--fault {spec!r}")
        if kind == "block-busy":
            return Fault("block", start, length, spec=text)
        if kind == "block":
            r1, c1, r2, c2 = (int(m[k]) for k in ("r1", "c1", "r2", "c2"))
            if r1 > r2 or c1 > c2:
                raise ConfigError(
                    f"--fault {spec!r}: the zone's first cell ({r1},{c1}) must be above and left "
                    f"of its last ({r2},{c2})"
                )
            cells = (r2 - r1 + 1) * (c2 - c1 + 1)
            check_range("zone cells", cells, high=MAX_ZONE_CELLS, where=f"--fault {spec!r}")
            zone = tuple((r, c) for r in range(r1, r2 + 1) for c in range(c1, c2 + 1))
            return Fault("block", start, length, spec=text, zone=zone)
        robot = m.groupdict().get("robot")
        return Fault(
            kind,  # type: ignore[arg-type]
            start,
            length,
            robot=None if robot is None else _robot_id(robot),
            spec=text,
        )
    raise ConfigError(f"--fault {spec!r}: expected {FORMS}")


def _robot_id(text: str) -> str:
    return f"robot_{text}" if text.isdigit() else text


def check_faults(
    faults: Sequence[Fault],
    *,
    robots: Sequence[str],
    steps: int,
    uses_llm: bool,
    grid: GridMap | None = None,
) -> list[str]:
    """Check faults against the world before tick 0; returns warnings (also logged).

    Args:
        faults: the parsed faults.
        robots: the fleet's robot ids.
        steps: ticks of the run.
        uses_llm: whether a tier calls an LLM (LLM faults do nothing otherwise).
        grid: the map (checks block zones and chargers when given).

    Raises:
        ConfigError: a breakdown or battery fault names a robot that is not in the fleet, a
            block zone leaves the map, covers no free cell or closes a station, or a battery
            fault comes on a map without a charger (names ``--fault``).
    """
    warnings: list[str] = []
    for f in faults:
        if grid is not None:
            _check_on_grid(f, grid)
        if f.kind in ("breakdown", "battery") and f.robot != "busy" and f.robot not in robots:
            last = f"robot_0..{robots[-1]}" if robots else "no robots"
            raise ConfigError(
                f"--fault {f.spec!r}: no robot {f.robot!r} in a fleet of {len(robots)} ({last})"
            )
        if f.start >= steps:
            warnings.append(
                f"--fault {f.spec!r}: starts at tick {f.start}, after the run's last "
                f"tick ({steps - 1}): it never happens"
            )
        elif f.kind in ("llm-outage", "malformed") and not uses_llm:
            warnings.append(
                f"--fault {f.spec!r}: no tier of this run calls an LLM: it does nothing"
            )
    for w in warnings:
        log.warning("%s", w)
    return warnings


def resolve_robot(fault: Fault, world: Warehouse) -> str:
    """The robot a breakdown or battery fault strikes (``busy`` chosen now, see the docstring)."""
    if fault.robot != "busy":
        return str(fault.robot)
    for mask in (world.carrying & ~world.broken, world.has_task & ~world.broken):
        idx = np.flatnonzero(mask)
        if len(idx):
            return world.robot_ids[int(idx[0])]
    return world.robot_ids[0]


def resolve_zone(fault: Fault, world: Warehouse) -> Fault:
    """The fault with its zone: a ``block:busy`` fault's cells are chosen now (others as given).

    The aisle where work waits: the pickup of the oldest order a robot is on its way to, else
    of the oldest open order (held ones aside), else of the newest order, else the map's first
    pickup cell; the free cells of that row within :data:`BUSY_REACH` columns, stations and
    chargers left open.
    """
    if fault.kind != "block" or fault.zone:
        return fault
    grid = world.grid
    waiting = [
        rec
        for idx, rec in enumerate(world.records)
        if rec.delivered_tick < 0 and rec.picked_tick < 0 and idx not in world.parked
    ]
    on_way = [rec for rec in waiting if rec.robot >= 0]
    if on_way or waiting:
        cell = (on_way or waiting)[0].order.pickup
    elif world.records:
        cell = world.records[-1].order.pickup
    else:
        cell = (grid.pickup_cells() or grid.free_cells())[0]
    r, c = cell
    keep = ~(grid.blocked | grid.stations | grid.chargers)
    zone = tuple(
        (r, cc)
        for cc in range(max(0, c - BUSY_REACH), min(grid.shape[1], c + BUSY_REACH + 1))
        if keep[r, cc]
    )
    return replace(fault, zone=zone)


def _check_on_grid(f: Fault, grid: GridMap) -> None:
    h, w = grid.shape
    box = f.zone_box
    if box is not None:
        r1, c1, r2, c2 = box
        if r2 >= h or c2 >= w:
            raise ConfigError(
                f"--fault {f.spec!r}: the zone reaches ({r2},{c2}), off the {h}x{w} map "
                f"{grid.name!r}"
            )
        cells = grid.blocked[r1 : r2 + 1, c1 : c2 + 1]
        if cells.all():
            raise ConfigError(f"--fault {f.spec!r}: the zone covers no free cell (all walls)")
        if grid.stations[r1 : r2 + 1, c1 : c2 + 1].any():
            raise ConfigError(
                f"--fault {f.spec!r}: the zone closes a station; block an aisle instead"
            )
    if f.kind == "battery" and not grid.chargers.any():
        raise ConfigError(f"--fault {f.spec!r}: map {grid.name!r} has no charger")


class FaultyClient(ChatWrapper):
    """A ChatClient that fails or garbles calls whose tick falls in a fault window.

    The tick comes from the call's :class:`~fleetmind.llm.chat.CallContext` (the snapshot tick).
    """

    def __init__(self, inner: ChatClient, faults: list[Fault]) -> None:
        super().__init__(inner)
        self.outages = [f for f in faults if f.kind == "llm-outage"]
        self.garbles = [f for f in faults if f.kind == "malformed"]

    def respond(self, messages: list[Message], options: ChatOptions) -> ChatResult:
        """Forward the call unless a fault window covers its tick."""
        context = options.context
        tick = context.tick if context is not None and context.tick is not None else -1
        if any(f.active(tick) for f in self.outages):
            raise LLMConnectionError(f"injected LLM outage at tick {tick}")
        result = options.send(self.inner, messages)
        if any(f.active(tick) for f in self.garbles):
            return ChatResult(
                text='{"assignments": [ {robot: ??? ' + "#" * 20,
                usage=result.usage,
                latency_s=result.latency_s,
                model=result.model,
            )
        return result
