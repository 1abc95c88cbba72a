"""Executors: every tick, rank each robot's 5 actions toward its current target.

An executor never decides alone: the shield turns the rankings into one collision-free joint move.
Rankings are ``(N, 5)`` int arrays, best action first.

One family a module: :mod:`.base` (the :class:`Executor` contract, shortest path),
:mod:`.policy` (a learned policy's logits), :mod:`.llm_direct` (a model picks every move),
:mod:`.congestion` (shortest path with traffic costs, PIBT's order), :mod:`.guidance` (a
guidance graph's move weights, learned or not, and RL over guidance). Callers import from here.
"""

from __future__ import annotations

from fleetmind.dispatch.executors.base import (
    Executor,
    FleetTick,
    RankingExecutor,
    ShortestPathExecutor,
    ShortestPathRandomExecutor,
    idle_ranking,
)
from fleetmind.dispatch.executors.congestion import (
    CongestionExecutor,
    PibtOrderExecutor,
    TrafficWeights,
)
from fleetmind.dispatch.executors.guidance import (
    GuidanceExecutor,
    GuidedRLExecutor,
    LearnedGuidanceExecutor,
)
from fleetmind.dispatch.executors.llm_direct import (
    LLMDirectExecutor,
)
from fleetmind.dispatch.executors.policy import (
    PolicyExecutor,
    RLExecutor,
)

__all__ = [
    "CongestionExecutor",
    "Executor",
    "FleetTick",
    "GuidanceExecutor",
    "GuidedRLExecutor",
    "LLMDirectExecutor",
    "LearnedGuidanceExecutor",
    "PibtOrderExecutor",
    "PolicyExecutor",
    "RLExecutor",
    "RankingExecutor",
    "ShortestPathExecutor",
    "ShortestPathRandomExecutor",
    "TrafficWeights",
    "idle_ranking",
]
