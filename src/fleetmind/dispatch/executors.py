"""Executors: every tick, rank each robot's 5 actions toward its current target.

An executor never decides alone: the shield turns the rankings into one collision-free joint move.
Rankings are ``(N, 5)`` int arrays, best action first.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, FleetmindError
from fleetmind.llm.chat import CallContext, ChatClient, Message
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.grid import ACTION_NAMES, DELTAS, N_ACTIONS, GridMap
from fleetmind.sim.observe import N_HEURISTIC, LocalObserver


class Executor(Protocol):
    """Ranks the 5 actions of every robot."""

    name: str

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
        carrying: NDArray[np.bool_],
        tick: int,
    ) -> NDArray[np.int64]:
        """``(N, 5)`` rankings, best first, for robots at ``pos`` heading to ``goal``.

        Args:
            pos: ``(N, 2)`` cells.
            goal: ``(N, 2)`` targets (ignored where ``active`` is False).
            active: ``(N,)`` robots that have a target; idle robots rank WAIT first.
            carrying: ``(N,)`` loaded robots.
            tick: the current tick.
        """
        ...


def idle_ranking(active: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """Identity rankings (WAIT first, as idle robots want) and the indices still to rank."""
    # Action ids start with WAIT (0), so the identity ranking puts waiting first.
    ranking = np.tile(np.arange(N_ACTIONS, dtype=np.int64), (len(active), 1))
    return ranking, np.flatnonzero(active)


class ShortestPathExecutor:
    """Ranks actions by the true distance-to-target after the move (cached BFS maps).

    Ties keep a fixed action order, so the ranking is deterministic. Moves into walls rank last.
    Waiting ranks by the current distance, so it comes after every move that gets closer.
    """

    name = "shortest-path"

    def __init__(self, grid: GridMap, oracle: DistanceOracle | None = None) -> None:
        self.grid = grid
        self.oracle = oracle or DistanceOracle(grid)
        h, w = grid.shape
        self._padded_blocked = np.pad(grid.blocked, 1, constant_values=True)
        self._shape = (h, w)

    def reroute(self, closed: list[tuple[int, int]]) -> None:
        """Route around closed cells (a blocked aisle): distances on the map with them as walls.

        A robot standing on a closed cell still ranks the moves off it by their distance.
        """
        import dataclasses

        base = getattr(self, "_base_grid", self.grid)
        self._base_grid = base
        blocked = base.blocked.copy()
        for r, c in closed:
            blocked[r, c] = True
        grid = dataclasses.replace(base, blocked=blocked) if closed else base
        self.grid = grid
        self.oracle = DistanceOracle(grid)
        self._padded_blocked = np.pad(grid.blocked, 1, constant_values=True)

    def distances(self, pos: NDArray[np.int32], goal: NDArray[np.int32]) -> NDArray[np.int64]:
        """``(N, 5)`` distance to target after each action (UNREACHABLE for blocked moves)."""
        w = self._shape[1]
        nxt = pos[:, None, :].astype(np.int64) + DELTAS[None, :, :]  # (N, 5, 2)
        ok = ~self._padded_blocked[nxt[..., 0] + 1, nxt[..., 1] + 1]
        # One gather over the oracle's maps for the whole fleet; blocked moves read -1.
        cells = np.where(ok, nxt[..., 0] * w + nxt[..., 1], -1)  # (N, 5)
        goal = np.asarray(goal, dtype=np.int64)
        return self.oracle.lookup(goal[:, 0] * w + goal[:, 1], cells)

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
        carrying: NDArray[np.bool_] | None = None,
        tick: int = 0,
    ) -> NDArray[np.int64]:
        """Rank actions by distance after the move; idle robots wait first."""
        ranking, idx = idle_ranking(active)
        if len(idx):
            ranking[idx] = self.order(self.distances(pos[idx], goal[idx]))
        return ranking

    def order(self, dist: NDArray[np.int64]) -> NDArray[np.int64]:
        """``(M, 5)`` distances -> ``(M, 5)`` actions, nearest first; ties in action order."""
        return np.argsort(dist, axis=1, kind="stable")


class ShortestPathRandomExecutor(ShortestPathExecutor):
    """Shortest path with ties broken at random: the honest baseline for learned executors.

    With a fixed tie order every robot whose target lies off both axes moves vertically first,
    so part of a learned executor's gain over :class:`ShortestPathExecutor` may be a gain over
    that bias alone. Here actions still rank by the true distance after the move, but actions at
    equal distance come in an order drawn from a seeded generator; moves into walls still rank
    last. The same seed (and the same sequence of calls) gives the same rankings.

    Args:
        grid: the map.
        oracle: a distance oracle of the same map (default: a new one).
        seed: a seed or a generator of the tie-breaking order (default 0).
    """

    name = "shortest-path-random"

    def __init__(
        self,
        grid: GridMap,
        oracle: DistanceOracle | None = None,
        *,
        seed: int | np.random.Generator = 0,
    ) -> None:
        super().__init__(grid, oracle)
        self.rng = np.random.default_rng(seed)

    def order(self, dist: NDArray[np.int64]) -> NDArray[np.int64]:
        """``(M, 5)`` distances -> ``(M, 5)`` actions, nearest first; ties in random order."""
        ties = self.rng.random(dist.shape)  # (M, 5) one draw per active robot and action
        # lexsort sorts by the last key first: distance, then the random tie-breaker.
        return np.lexsort((ties, dist), axis=1)


class PolicyExecutor(ABC):
    """Base of executors that rank by a policy's logits over local observations.

    Subclasses set ``observer`` (a :class:`~fleetmind.sim.observe.LocalObserver`) and implement
    :meth:`logits`; ranking, idle robots and carrying flags are handled here once.

    The policy's best action always ranks first. ``fallback`` orders the other four, which the
    shield uses only when the first choice is unsafe: ``"policy"`` by the logits; ``"heuristic"``
    (needs the heuristic values in the observation) by the shortest-path heuristic, ties broken
    by the logits. Measured with the shield (``fleetmind bench dispatch``), heuristic fallbacks
    keep far more throughput in dense traffic: the logits of a policy's non-best actions are
    poorly calibrated, because training only ever executes the sampled action.
    """

    name = "policy"
    observer: LocalObserver
    fallback: Literal["heuristic", "policy"] = "heuristic"

    @abstractmethod
    def logits(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """``(M, 5)`` action logits for ``(M, D)`` observations."""

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
        carrying: NDArray[np.bool_] | None = None,
        tick: int = 0,
    ) -> NDArray[np.int64]:
        """Rank by the policy's logits, best first (ties: lower action id); idle robots wait."""
        ranking, idx = idle_ranking(active)
        if len(idx):
            carry = np.zeros(len(pos), dtype=bool) if carrying is None else carrying
            obs = self.observer(pos[None], goal[None], carry[None], active[None])[0][idx]
            logits = self.logits(obs)
            if self.fallback == "heuristic" and self.observer.oracle is not None:
                # Heuristic values: -1 closer, 0 same, +1 farther, 2 blocked (wall).
                key = obs[:, -N_HEURISTIC:] * 100.0 - logits
                key[np.arange(len(idx)), np.argmax(logits, axis=1)] = -np.inf
            else:
                key = -logits
            ranking[idx] = np.argsort(key, axis=1, kind="stable")
        return ranking


class RLExecutor(PolicyExecutor):
    """The goal-conditioned navigation policy of :mod:`fleetmind.rl.nav` ranks all 5 actions.

    Args:
        grid: the map.
        policy_path: a policy file written by ``NavPolicy.save``; default: the policy shipped
            with fleetmind (trained by fleetmind itself, see ``docs/neural.md``).
    """

    name = "rl"

    def __init__(
        self,
        grid: GridMap,
        policy_path: str | Path | None = None,
        *,
        fallback: Literal["heuristic", "policy"] = "heuristic",
    ) -> None:
        import torch

        from fleetmind.rl.nav import NavPolicy, default_policy_path

        # One thread: the control loop shares 2 cores with the planner (and an embedded LLM).
        torch.set_num_threads(1)
        self.policy = NavPolicy.load(policy_path or default_policy_path())
        self.fallback = fallback
        self.observer = LocalObserver(
            grid.blocked,
            grid.pickups,
            self.policy.radius,
            oracle=DistanceOracle(grid),
            task_cells=grid.pickups | grid.stations,
        )

    def logits(self, obs: NDArray[np.float32]) -> NDArray[np.float32]:
        """The navigation policy's logits."""
        return self.policy.logits(obs)


class LLMDirectExecutor:
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
        self.fallback = ShortestPathExecutor(grid)
        self.max_robots = max_robots
        self.calls = 0
        self.failures = 0
        self.tokens_prompt = 0
        self.tokens_completion = 0
        self.latency_ms: list[float] = []

    def rank(
        self,
        pos: NDArray[np.int32],
        goal: NDArray[np.int32],
        active: NDArray[np.bool_],
        carrying: NDArray[np.bool_] | None = None,
        tick: int = 0,
    ) -> NDArray[np.int64]:
        """Ask the model for every active robot's move this tick."""
        n = len(pos)
        if n > self.max_robots:
            raise ConfigError(
                f"executor llm-direct: at most {self.max_robots} robots (one LLM call per tick "
                f"steers the whole fleet); got {n}"
            )
        ranking = self.fallback.rank(pos, goal, active)
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            return ranking
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
                context=CallContext(caller="dispatch.executor", decision_type="move", tick=tick),
            )
        except FleetmindError:
            self.failures += 1
            return ranking
        self.latency_ms.append(result.latency_s * 1e3)
        self.tokens_prompt += result.usage.prompt_tokens
        self.tokens_completion += result.usage.completion_tokens
        try:
            moves = json.loads(result.text)["moves"]
            chosen = {m["robot"]: ACTION_NAMES.index(m["move"]) for m in moves}
        except (ValueError, KeyError, TypeError):
            self.failures += 1
            return ranking
        for i in idx:
            a = chosen.get(f"robot_{i}")
            if a is not None:
                row = [a, *[x for x in ranking[i] if x != a]]
                ranking[i] = row
        return ranking

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
