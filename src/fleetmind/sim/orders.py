"""Orders: what customers want, where it is, how urgent it is, and what the note says.

An :class:`Order` becomes a task for one robot: go to ``pickup``, load, carry to ``station``.
Orders differ, because choosing who does what is the planner's job and must be worth doing:

- ``priority``: ``"normal"`` or ``"urgent"`` (urgent weighs :data:`URGENT_WEIGHT` in the
  priority-weighted throughput);
- ``due``: the tick by which delivery counts as on time;
- ``capability``: an optional structured requirement (``"cold"``, ``"heavy"``) a robot must have;
- ``note``: short free text. Some constraints live *only* in the note
  (:class:`~fleetmind.sim.notes.Constraint`: ``only_robot``, ``not_robot``, ``deadline``,
  ``hold``); their ground truth is kept in ``constraints`` so a run can score them, but planners
  that read only structured fields never see it. :class:`~fleetmind.sim.notes.NoteWriter` writes
  the notes (seeded; phrasings, languages and difficulty per
  :class:`~fleetmind.sim.notes.NoteConfig`).

Orders arrive by a seeded Poisson process (:class:`OrderStream`) or from a JSON-lines task file
(:func:`load_task_file`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fleetmind.errors import ConfigError, TaskFileError, check_range
from fleetmind.sim.grid import Cell, GridMap
from fleetmind.sim.jsonl import read_jsonl
from fleetmind.sim.notes import Constraint, ConstraintModel
from fleetmind.sim.notewriter import NoteConfig, NoteWriter

Priority = Literal["normal", "urgent"]
URGENT_WEIGHT = 3.0
CAPABILITIES = ("cold", "heavy")


@dataclass(frozen=True)
class Order:
    """One customer order; it becomes one robot task.

    Attributes:
        id: stable id, ``o0``, ``o1``, ...
        tick: arrival tick.
        pickup: shelf cell to load at.
        station: drop-off cell.
        priority: ``normal`` or ``urgent``.
        due: tick by which delivery is on time.
        capability: required robot capability, or None.
        note: free text for planners that read it.
        constraints: ground truth of the text-only constraints its note states (empty: none).
    """

    id: str
    tick: int
    pickup: Cell
    station: Cell
    priority: Priority = "normal"
    due: int = 1 << 30
    capability: str | None = None
    note: str = ""
    constraints: tuple[Constraint, ...] = ()

    @property
    def weight(self) -> float:
        """Weight in the priority-weighted throughput."""
        return URGENT_WEIGHT if self.priority == "urgent" else 1.0

    def __deepcopy__(self, memo: dict[int, Any]) -> Order:
        # Immutable all the way down: a world snapshot (taken at every planner call) shares it.
        return self


@dataclass(frozen=True)
class OrderConfig:
    """How the order stream is generated.

    Attributes:
        rate: mean orders per tick (Poisson). ``None`` means every idle robot immediately gets a
            fresh random task (the RWARE-style lifelong setting used for training).
        urgent_share: share of urgent orders.
        capability_share: share of orders needing a structured capability.
        text_share: share of orders whose note carries a text-only constraint.
        due_slack: ticks between arrival and due, as a multiple of the order's travel distance
            lower bound (Manhattan pickup->station) plus ``due_base``.
        due_base: fixed slack added to every due tick.
        max_open: cap on open (unserved) orders; arrivals beyond it are dropped and counted.
        notes: how notes are written (style, language mix, difficulty).
    """

    rate: float | None = 0.1
    urgent_share: float = 0.2
    capability_share: float = 0.15
    text_share: float = 0.3
    due_slack: float = 3.0
    due_base: int = 30
    max_open: int = 10_000
    notes: NoteConfig = field(default_factory=NoteConfig)

    def __post_init__(self) -> None:
        if self.rate is not None:
            check_range("orders.rate", self.rate, above=0)
        for name in ("urgent_share", "capability_share", "text_share"):
            check_range(f"orders.{name}", getattr(self, name), low=0, high=1)


class OrderStream:
    """A seeded generator of orders for one map and fleet.

    Args:
        grid: the map (must have pickup and station cells).
        robot_ids: ids of the fleet (for ``robot`` notes).
        capabilities: per robot, the set of capabilities it has (for feasible ``robot`` notes).
        config: stream parameters.
        rng: the generator that drives every random choice of the stream.
    """

    def __init__(
        self,
        grid: GridMap,
        robot_ids: Sequence[str],
        capabilities: Sequence[frozenset[str]],
        config: OrderConfig,
        rng: np.random.Generator,
    ) -> None:
        self.grid = grid
        self.robot_ids = list(robot_ids)
        self.capabilities = list(capabilities)
        # The fleet and, per capability, the robots that have it: built once, since a note
        # reads them and the fleet may be thousands of robots (no per-robot work per order).
        self._fleet = tuple(self.robot_ids)
        self._capable: dict[str, tuple[str, ...]] = {
            cap: tuple(
                rid for rid, caps in zip(self._fleet, self.capabilities, strict=True) if cap in caps
            )
            for cap in CAPABILITIES
        }
        self.config = config
        self.rng = rng
        self._pickups = np.argwhere(grid.pickups).astype(np.int32)
        self._stations = np.argwhere(grid.stations).astype(np.int32)
        if len(self._pickups) == 0 or len(self._stations) == 0:
            raise ConfigError(f"map {grid.name!r} needs pickup and station cells to make orders")
        self._next_id = 0
        self.writer = NoteWriter(config.notes, rng)

    def __deepcopy__(self, memo: dict[int, Any]) -> OrderStream:
        # A world snapshot copies the generator state only: the grid and the tables built from
        # it never change, so the copy shares them.
        new = copy.copy(self)
        memo[id(self)] = new
        new.rng = copy.deepcopy(self.rng, memo)
        new.writer = copy.deepcopy(self.writer, memo)
        return new

    def make(self, tick: int) -> Order:
        """Draw one order arriving at ``tick``."""
        cfg = self.config
        rng = self.rng
        pickup = self._pickups[rng.integers(len(self._pickups))]
        station = self._stations[rng.integers(len(self._stations))]
        p_cell: Cell = (int(pickup[0]), int(pickup[1]))
        s_cell: Cell = (int(station[0]), int(station[1]))
        distance = abs(p_cell[0] - s_cell[0]) + abs(p_cell[1] - s_cell[1])
        urgent = bool(rng.random() < cfg.urgent_share)
        slack = cfg.due_base + cfg.due_slack * distance
        due = tick + int(slack * (0.6 if urgent else 1.0))
        capability: str | None = None
        if rng.random() < cfg.capability_share:
            capability = str(CAPABILITIES[rng.integers(len(CAPABILITIES))])
        constraints: tuple[Constraint, ...] = ()
        if rng.random() < cfg.text_share:
            # Named robots must be able to serve the order (capability), or the note is absurd.
            capable = (
                self._capable.get(capability) or self._fleet
                if capability is not None
                else self._fleet
            )
            note, constraints = self.writer.constrained(
                tick=tick, due=due, distance=distance, capable=capable, robots=self._fleet
            )
        else:
            note = self.writer.plain(tick=tick, robots=self._fleet)
        order = Order(
            id=f"o{self._next_id}",
            tick=tick,
            pickup=p_cell,
            station=s_cell,
            priority="urgent" if urgent else "normal",
            due=due,
            capability=capability,
            note=note,
            constraints=constraints,
        )
        self._next_id += 1
        return order

    def arrivals(self, tick: int) -> list[Order]:
        """Orders arriving at ``tick`` (Poisson at the configured rate; none if rate is None)."""
        if self.config.rate is None:
            return []
        return [self.make(tick) for _ in range(int(self.rng.poisson(self.config.rate)))]


class _TaskLine(BaseModel):
    """One line of a task file."""

    model_config = ConfigDict(extra="forbid")
    tick: int = Field(ge=0)
    pickup: tuple[int, int]
    station: tuple[int, int]
    priority: Priority = "normal"
    due: int | None = None
    capability: str | None = None
    note: str = ""
    constraints: list[ConstraintModel] = Field(default_factory=list)


def load_task_file(
    path: str | Path,
    grid: GridMap,
    *,
    robots: Sequence[str] | None = None,
    capabilities: Sequence[frozenset[str]] | None = None,
) -> list[Order]:
    """Read orders from a JSON-lines task file.

    Each non-empty line is an object with ``tick``, ``pickup`` ``[row, col]``, ``station``
    ``[row, col]`` and optionally ``priority``, ``due``, ``capability``, ``note`` and
    ``constraints`` (the ground truth of the note: a list of ``{"kind":
    "only_robot"|"not_robot"|"deadline"|"hold", "robot": id, "tick": t}``). Lines starting with
    ``#`` are comments.

    Args:
        path: the task file.
        grid: the map (cells must be free).
        robots: the fleet's ids; when given, a constraint naming another robot is refused.
        capabilities: each robot's capabilities; when given, an order needing a capability no
            robot has (it could never be served) is refused.

    Raises:
        TaskFileError: naming the file, line and field at fault.
    """
    p = Path(path)
    orders: list[Order] = []
    fleet_caps = frozenset().union(*capabilities) if capabilities is not None else None
    for lineno, item in read_jsonl(p, _TaskLine, what="task file"):
        for name, cell in (("pickup", item.pickup), ("station", item.station)):
            if not grid.is_free(cell):
                raise TaskFileError(f"{p}:{lineno}: field {name!r}: {cell} is not a free cell")
        cap = item.capability
        if fleet_caps is not None and cap is not None and cap not in fleet_caps:
            has = ", ".join(sorted(fleet_caps)) or "none"
            raise TaskFileError(
                f"{p}:{lineno}: field 'capability': no robot in the fleet has {cap!r}, so the "
                f"order could never be served (the fleet has: {has})"
            )
        for k, c in enumerate(item.constraints):
            if robots is not None and c.robot is not None and c.robot not in robots:
                span = f"{robots[0]}..{robots[-1]}" if robots else "no robots"
                raise TaskFileError(
                    f"{p}:{lineno}: field 'constraints[{k}].robot': {c.robot!r} is not in the "
                    f"fleet ({span})"
                )
        orders.append(
            Order(
                id=f"o{len(orders)}",
                tick=item.tick,
                pickup=item.pickup,
                station=item.station,
                priority=item.priority,
                due=item.due if item.due is not None else 1 << 30,
                capability=item.capability,
                note=item.note,
                constraints=tuple(
                    Constraint(c.kind, robot=c.robot, tick=c.tick) for c in item.constraints
                ),
            )
        )
    # Ids follow arrival order, whatever the order of lines in the file.
    orders.sort(key=lambda o: o.tick)
    return [replace(o, id=f"o{i}") for i, o in enumerate(orders)]
