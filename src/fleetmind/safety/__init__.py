"""fleetmind.safety: the shield tier.

Turns each robot's ranking of its 5 actions into one collision-free joint move (one step of PIBT),
detects robots that stopped making progress and gives them an escape, and ships an independent
checker of joint moves.

Public API:
    Shield, ShieldDecision, sanitise_preferences: the shield (:mod:`fleetmind.safety.shield`).
    DeadlockMonitor: deadlock/livelock detection (:mod:`fleetmind.safety.deadlock`).
    conflicts, Conflict: the independent checker (:mod:`fleetmind.safety.verify`).
"""

from __future__ import annotations

from fleetmind.safety.deadlock import DeadlockMonitor, MonitorInputError
from fleetmind.safety.shield import (
    FILL_ORDER,
    RULES,
    Shield,
    ShieldDecision,
    ShieldInputError,
    sanitise_preferences,
)
from fleetmind.safety.verify import Conflict, VerifyInputError, conflicts

__all__ = [
    "FILL_ORDER",
    "RULES",
    "Conflict",
    "DeadlockMonitor",
    "MonitorInputError",
    "Shield",
    "ShieldDecision",
    "ShieldInputError",
    "VerifyInputError",
    "conflicts",
    "sanitise_preferences",
]
