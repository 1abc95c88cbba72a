"""An executor that asks a language model for every robot's next move (a baseline)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.executors.base import (
    FleetTick,
    RankingExecutor,
    ShortestPathExecutor,
)
from fleetmind.errors import ConfigError, FleetmindError
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import (
    ACTION_NAMES,
    GridMap,
)


class LLMDirectExecutor(RankingExecutor):
    """The LLM picks every robot's move every tick (FIELD-NOTES §5.5 advises against it).

    This executor exists to measure why: latency and throughput.

    One call per tick for the whole fleet; the model's move goes first in each robot's ranking,
    the shortest-path order fills the rest (so the shield can still pick a safe move). A failed
    call or an unusable answer leaves the shortest-path ranking and is counted. Small maps only.

    Args:
        client: the chat backend.
        grid: the map.
        max_robots: refuse larger fleets (one prompt per tick grows with the fleet).
    """

    name = "llm-direct"

    def __init__(self, client: ChatClient, grid: GridMap, *, max_robots: int = 12) -> None:
        self.client = client
        self.grid = grid
        self.fallback = ShortestPathExecutor(grid)
        self.max_robots = max_robots
        self.calls = 0
        self.failures = 0
        self.tokens_prompt = 0
        self.tokens_completion = 0
        self.latency_ms: list[float] = []

    def rank_active(
        self, fleet: FleetTick, ranking: NDArray[np.int64], idx: NDArray[np.intp]
    ) -> None:
        """Ask the model for every active robot's move this tick."""
        pos, goal = fleet.pos, fleet.goal
        n = len(pos)
        if n > self.max_robots:
            raise ConfigError(
                f"executor llm-direct: at most {self.max_robots} robots (one LLM call per tick "
                f"steers the whole fleet); got {n}"
            )
        self.fallback.rank_active(fleet, ranking, idx)
        if len(idx) == 0:
            return
        lines = [
            f"robot_{i} at ({pos[i, 0]},{pos[i, 1]}) target ({goal[i, 0]},{goal[i, 1]})"
            for i in idx
        ]
        ids = [f"robot_{i}" for i in idx]
        messages = [
            Message.system(
                "You steer warehouse robots on a grid; row grows downward, col grows rightward. "
                "For each robot pick one move toward its target: up, down, left, right or wait. "
                'Answer JSON only: {"moves": [{"robot": "robot_0", "move": "up"}]}'
            ),
            Message.user("\n".join(lines)),
        ]
        schema = _moves_schema(ids)
        self.calls += 1
        try:
            result = self.client.chat(
                messages,
                temperature=0.0,
                max_tokens=16 + 14 * len(ids),
                json_schema=schema,
                context=CallContext(
                    caller="dispatch.executor", decision_type="move", tick=fleet.tick
                ),
            )
        except FleetmindError:
            self.failures += 1
            return
        self.latency_ms.append(result.latency_s * 1e3)
        self.tokens_prompt += result.usage.prompt_tokens
        self.tokens_completion += result.usage.completion_tokens
        try:
            moves = json.loads(result.text)["moves"]
            chosen = {m["robot"]: ACTION_NAMES.index(m["move"]) for m in moves}
        except (ValueError, KeyError, TypeError):
            self.failures += 1
            return
        for i in idx:
            a = chosen.get(f"robot_{i}")
            if a is not None:
                row = [a, *[x for x in ranking[i] if x != a]]
                ranking[i] = row

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells: the shortest-path order behind the model's moves does."""
        self.fallback.reroute(closed)
        self.grid = self.fallback.grid

    @property
    def oracle(self) -> DistanceOracle:
        """The fallback's distance maps; the control loop shares them."""
        return self.fallback.oracle

    def stats(self) -> dict[str, Any]:
        """LLM calls, failures, tokens and latency of the executor."""
        lat = np.asarray(self.latency_ms or [0.0])
        return {
            "llm_calls": self.calls,
            "llm_failures": self.failures,
            "llm_tokens_prompt": self.tokens_prompt,
            "llm_tokens_completion": self.tokens_completion,
            "llm_latency_ms": {f"p{q}": float(np.percentile(lat, q)) for q in (50, 95, 99)},
        }


def _moves_schema(robot_ids: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "moves": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "robot": {"type": "string", "enum": robot_ids},
                        "move": {"type": "string", "enum": list(ACTION_NAMES)},
                    },
                    "required": ["robot", "move"],
                },
            }
        },
        "required": ["moves"],
    }
