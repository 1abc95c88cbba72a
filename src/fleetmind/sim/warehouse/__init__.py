"""One warehouse world: robots, orders, tasks, faults, battery, rewards and scores.

:class:`Warehouse` is the simulator the dispatch tier drives and the PettingZoo env wraps. The
per-tick work is numpy over the fleet (:func:`fleetmind.sim.dynamics.resolve_moves`); Python runs
only per event (an order arriving, a pickup, a delivery).

A robot with a task heads for the order's pickup cell; standing on it, it loads and heads for the
station; standing on the station while loaded, it delivers and becomes idle. Who serves which
order is decided outside (``assign``) unless ``auto_assign`` is on, in which case the oldest open
order goes to the nearest idle robot that has the required capability. With
``OrderConfig(rate=None)`` every idle robot at once gets a fresh random task (the lifelong
RWARE-style setting for training).

Scores (see :meth:`Warehouse.metrics`): throughput (deliveries per tick), on-time rate,
priority-weighted throughput, constraint violations (``structured``: a robot without the required
capability served the order; ``text_only``: a constraint that only the note states was broken),
collision attempts and wall bumps.

One job a module: :mod:`.config` (the episode's settings), :mod:`.records` (an order's fate,
what a tick did), :mod:`.world` (:class:`Warehouse`: robots, orders, tasks, faults, the tick),
:mod:`.scores` (the metrics). Callers import from here.
"""

from __future__ import annotations

from fleetmind.sim.warehouse.config import (
    BatteryConfig,
    WarehouseConfig,
    default_capabilities,
)
from fleetmind.sim.warehouse.records import (
    OrderRecord,
    StepResult,
    Tick,
)
from fleetmind.sim.warehouse.world import (
    Warehouse,
)

__all__ = [
    "BatteryConfig",
    "OrderRecord",
    "StepResult",
    "Tick",
    "Warehouse",
    "WarehouseConfig",
    "default_capabilities",
]
