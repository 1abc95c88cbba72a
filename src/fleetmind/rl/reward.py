"""The reward a learner trains on: the environment's, or a scorer's mixed in (FIELD-NOTES §4.3, §6).

``fleetmind train --reward SPEC`` reads :class:`RewardSpec`. The grammar::

    env                          the environment reward (the default)
    llm                          an LLM score mixed in, every key at its default
    llm:KEY=VALUE,KEY=VALUE,...  keys below, any order, each at most once

    every=K        ticks of a world between two scores (integer >= 1; default 100)
    weight=W       the score's weight (number > 0, at most 10; default 0.5)
    alone          flag: the weighted score is the whole reward (no environment reward)
    samples=N      model answers averaged per score (1 to 9; default 3)
    temperature=T  sampling temperature of each answer (0 to 2; default 0.5)

Every ``every`` ticks a world's stretch since its last score is put into words by
:func:`transition`: the state before (at the last score, or the world's first tick) and after
(now), each by :func:`describe` (each robot's load and how far its goal is; no tick and no
cells, so the same situation gives the same text and the scorer's cache answers it), and the
deliveries in between; the scorer judges the change in [-1, 1]. That
tick, every robot of the world gets ``weight * score`` added to its reward (``alone``: as its
whole reward; the other ticks then pay 0). A score the scorer refuses (too few parsable answers,
or answers that disagree) is replaced by the world's last good score (0 before the first), so the
reward is never NaN. Between scores nothing is added: the learner sees the judgement once per
``every`` ticks, as in FIELD-NOTES §6, where an LLM scored the RL agent every minute.

The scorer is anything with ``evaluate(text, *, tick) -> float | None`` and ``summary()``; the
LLM one is :class:`fleetmind.llm.reward.LLMReward`, wired in by the command line (this tier
imports no LLM code). :class:`ScoredParallelEnv` wraps the PettingZoo face (tabular learners),
:class:`ScoredVectorEnv` the batched one (neural learners); both keep per-episode environment and
score parts of every agent's return apart, for the curves and the §5.4 drift check
(:func:`fleetmind.rl.diagnostics.diagnose`, ``llm_rewards``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, range_message
from fleetmind.sim.distances import UNREACHABLE, DistanceOracle
from fleetmind.sim.grid import GridMap

RewardSource = Literal["env", "llm"]

DEFAULT_EVERY = 100
DEFAULT_WEIGHT = 0.5
MAX_WEIGHT = 10.0
GOAL = (
    "Robots fetch loads at pickups and carry them to stations. Better: more loads delivered, "
    "robots with loads close to their stations, robots without loads close to their pickups."
)
"""What the scorer is told "better" means."""

# Distance bands instead of exact steps: a coarse text repeats, so the scorer's cache answers
# most states and the model is asked about a few hundred situations, not every cell pair.
_BANDS: tuple[tuple[int, str], ...] = ((0, "at"), (2, "1-2 steps from"), (5, "3-5 steps from"))
_FAR = "6 or more steps from"


@dataclass(frozen=True)
class RewardSpec:
    """A parsed ``--reward`` value (see the module docstring for the grammar).

    Attributes:
        source: ``"env"`` or ``"llm"``.
        every: ticks of a world between two scores.
        weight: the score's weight.
        alone: the weighted score replaces the environment reward.
        samples: answers averaged per score.
        temperature: sampling temperature of each answer.
    """

    source: RewardSource = "env"
    every: int = DEFAULT_EVERY
    weight: float = DEFAULT_WEIGHT
    alone: bool = False
    samples: int = 3
    temperature: float = 0.5

    @property
    def scored(self) -> bool:
        """True when a scorer takes part."""
        return self.source == "llm"

    def __str__(self) -> str:
        if not self.scored:
            return "env"
        parts = [f"every={self.every}", f"weight={self.weight:g}"]
        if self.alone:
            parts.append("alone")
        parts += [f"samples={self.samples}", f"temperature={self.temperature:g}"]
        return "llm:" + ",".join(parts)

    def bound(self, env_bound: float) -> float:
        """Largest absolute one-step reward, given the environment's (for §3.3 scaling)."""
        if not self.scored:
            return env_bound
        return self.weight if self.alone else env_bound + self.weight

    @staticmethod
    def parse(text: str) -> RewardSpec:
        """Parse a ``--reward`` value.

        Raises:
            ConfigError: one line naming the part at fault and what was expected.
        """
        spec = text.strip()
        head, sep, tail = spec.partition(":")
        head = head.strip()
        if head == "env" and not sep:
            return RewardSpec()
        if head != "llm":
            raise ConfigError(
                f"reward: expected 'env', 'llm' or 'llm:every=K,weight=W[,alone]', got {text!r}"
            )
        if sep and not tail.strip():
            raise ConfigError(f"reward: nothing after 'llm:' in {text!r}")
        fields: dict[str, Any] = {"source": "llm"}
        seen: set[str] = set()
        for raw in tail.split(",") if sep else []:
            item = raw.strip()
            key, eq, value = (p.strip() for p in item.partition("="))
            if not key:
                raise ConfigError(f"reward: an empty item in {text!r}")
            if key in seen:
                raise ConfigError(f"reward: {key!r} given twice in {text!r}")
            seen.add(key)
            if key == "alone":
                if eq:
                    raise ConfigError(f"reward: 'alone' is a flag and takes no value, in {text!r}")
                fields["alone"] = True
            elif key not in ("every", "weight", "samples", "temperature"):
                raise ConfigError(
                    f"reward: unknown key {key!r} in {text!r}; "
                    "known: every, weight, alone, samples, temperature"
                )
            elif not eq or not value:
                raise ConfigError(f"reward: {key!r} needs a value ({key}=...), in {text!r}")
            else:
                fields[key] = _value(key, value, text)
        return RewardSpec(**fields)


def _value(key: str, value: str, text: str) -> int | float:
    if key in ("every", "samples"):
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(
                f"reward: {key} must be a whole number, got {value!r} in {text!r}"
            ) from None
        high = None if key == "every" else 9
        if number < 1 or (high is not None and number > high):
            raise ConfigError(f"reward: {range_message(key, number, low=1, high=high)} in {text!r}")
        return number
    try:
        real = float(value)
    except ValueError:
        raise ConfigError(f"reward: {key} must be a number, got {value!r} in {text!r}") from None
    if key == "weight" and not (math.isfinite(real) and 0.0 < real <= MAX_WEIGHT):
        message = range_message("weight", value, above=0, high=MAX_WEIGHT)
        raise ConfigError(f"reward: {message} in {text!r}")
    if key == "temperature" and not (math.isfinite(real) and 0.0 <= real <= 2.0):
        message = range_message("temperature", value, low=0, high=2)
        raise ConfigError(f"reward: {message} in {text!r}")
    return real


class Scorer(Protocol):
    """What scores a described state (:class:`fleetmind.llm.reward.LLMReward` is one)."""

    def evaluate(self, state_text: str, *, tick: int | None = None) -> float | None:
        """A score in [-1, 1], or None when no trustworthy score could be had."""
        ...

    def summary(self) -> dict[str, Any]:
        """Counters for ``metrics.json`` (calls, cache hits, fallbacks, tokens, ...)."""
        ...


def _band(steps: int) -> str:
    for limit, words in _BANDS:
        if steps <= limit:
            return words
    return _FAR


def describe(
    pos: NDArray[np.integer],
    goal: NDArray[np.integer],
    carrying: NDArray[np.bool_],
    has_task: NDArray[np.bool_],
    *,
    oracle: DistanceOracle,
    delivered: int | None = None,
) -> str:
    """One world's state in compact words, for a scorer.

    Args:
        pos: ``(N, 2)`` robot cells.
        goal: ``(N, 2)`` target cells (the pickup, or the station when carrying).
        carrying: ``(N,)`` whether each robot holds a load.
        has_task: ``(N,)`` whether each robot has a task.
        oracle: shortest-path distances of the map.
        delivered: deliveries since the last score (None: no deliveries line).

    Returns:
        One line per robot (load; goal distance in bands), e.g.
        ``robot_0: carrying a load, 3-5 steps from its station``, and one for the deliveries
        when given. No tick and no cells, so the same situation always reads the same.
    """
    lines = []
    for i in range(len(pos)):
        if not has_task[i]:
            lines.append(f"robot_{i}: idle, no task")
            continue
        steps = int(oracle.to((int(goal[i, 0]), int(goal[i, 1])))[int(pos[i, 0]), int(pos[i, 1])])
        where = "cannot reach" if steps >= UNREACHABLE else _band(steps)
        if carrying[i]:
            lines.append(f"robot_{i}: carrying a load, {where} its station")
        else:
            lines.append(f"robot_{i}: no load, {where} its pickup")
    if delivered is not None:
        lines.append(f"deliveries since the last score: {delivered}")
    return "\n".join(lines)


def transition(before: str, after: str, *, ticks: int, delivered: int) -> str:
    """The stretch a score judges: the state before, the state after, the deliveries between.

    Args:
        before: :func:`describe` of the state at the stretch's start (no deliveries line).
        after: :func:`describe` of the state now (no deliveries line).
        ticks: the stretch's length in ticks (the spec's ``every``: the same for every score,
            so the text still repeats and the cache answers).
        delivered: deliveries during the stretch.

    Returns:
        ``Before (K ticks ago):``, the before lines, ``After:``, the after lines, and
        ``Deliveries in between: D``.
    """
    return (
        f"Before ({ticks} ticks ago):\n{before}\nAfter:\n{after}\n"
        f"Deliveries in between: {delivered}"
    )


class _Scoring:
    """The per-world bookkeeping both wrappers share: when to score, the mix, the curves.

    Args:
        spec: the reward spec.
        scorer: the scorer (None with ``spec.source == "env"``: only the curves are kept).
        worlds: worlds stepped together.
        agents: agent ids in robot order.
        grid: the map, for distances.
        resets_on_done: a world that ended this tick already shows its next episode (the
            vector env resets in place), so its score waits a tick.
    """

    def __init__(
        self,
        spec: RewardSpec,
        scorer: Scorer | None,
        worlds: int,
        agents: list[str],
        grid: GridMap,
        *,
        resets_on_done: bool = False,
    ) -> None:
        if spec.scored and scorer is None:
            raise ConfigError("reward: an LLM reward needs a scorer")
        self.spec = spec
        self.scorer = scorer if spec.scored else None
        self.agents = agents
        self.resets_on_done = resets_on_done
        self.oracle = DistanceOracle(grid)
        n = len(agents)
        self.since_score = np.zeros(worlds, dtype=np.int64)
        # Each world's state text at its last score (the next stretch's "before"); None until
        # the world's first tick.
        self.before: list[str | None] = [None] * worlds
        self.delivered_since = np.zeros(worlds, dtype=np.int64)
        self.last = np.zeros(worlds, dtype=np.float64)
        self.env_run = np.zeros((worlds, n), dtype=np.float64)
        self.llm_run = np.zeros((worlds, n), dtype=np.float64)
        self.deliveries_run = np.zeros((worlds, n), dtype=np.int64)
        self.env_returns: dict[str, list[float]] = {a: [] for a in agents}
        self.llm_returns: dict[str, list[float]] = {a: [] for a in agents}
        self.deliveries: dict[str, list[int]] = {a: [] for a in agents}
        self.ticks = 0
        self.scores = 0
        self.fallbacks = 0
        self.score_values: list[float] = []

    def mix(
        self,
        rewards: NDArray[np.floating],  # (B, N) environment rewards
        delivered: NDArray[np.bool_],  # (B, N)
        done: NDArray[np.bool_],  # (B,)
        state: Any,  # world index -> (pos, goal, carrying, has_task)
    ) -> NDArray[np.float64]:
        """The rewards to train on this tick, ``(B, N)``; closes the episodes of ``done``."""
        self.ticks += 1
        env = np.asarray(rewards, dtype=np.float64)
        self.env_run += env
        self.deliveries_run += delivered
        self.delivered_since += delivered.sum(axis=1)
        self.since_score += 1
        out = env.copy()
        if self.scorer is not None:
            for world, text in enumerate(self.before):
                if text is None:
                    self.before[world] = self._describe(state(world))
            bonus = np.zeros(len(env), dtype=np.float64)
            due = self.since_score >= self.spec.every
            if self.resets_on_done:
                due &= ~done
            for b in np.flatnonzero(due):
                bonus[b] = self.spec.weight * self._score(int(b), state(int(b)))
            self.llm_run += bonus[:, None]
            out = bonus[:, None] + (0.0 if self.spec.alone else env)
            out = np.broadcast_to(out, env.shape).copy()
        for b in np.flatnonzero(done):
            for i, a in enumerate(self.agents):
                self.env_returns[a].append(float(self.env_run[b, i]))
                self.llm_returns[a].append(float(self.llm_run[b, i]))
                self.deliveries[a].append(int(self.deliveries_run[b, i]))
            self.env_run[b] = 0.0
            self.llm_run[b] = 0.0
            self.deliveries_run[b] = 0
        return out

    def _describe(self, state: tuple[Any, Any, Any, Any]) -> str:
        pos, goal, carrying, has_task = state
        return describe(pos, goal, carrying, has_task, oracle=self.oracle)

    def _score(self, world: int, state: tuple[Any, Any, Any, Any]) -> float:
        assert self.scorer is not None
        after = self._describe(state)
        before = self.before[world]
        assert before is not None  # set on the world's first tick
        text = transition(
            before,
            after,
            ticks=int(self.since_score[world]),
            delivered=int(self.delivered_since[world]),
        )
        self.before[world] = after
        value = self.scorer.evaluate(text, tick=self.ticks)
        self.scores += 1
        self.since_score[world] = 0
        self.delivered_since[world] = 0
        if value is None or not math.isfinite(value):
            self.fallbacks += 1
            return float(self.last[world])
        value = min(1.0, max(-1.0, float(value)))
        self.last[world] = value
        self.score_values.append(value)
        return value

    def summary(self) -> dict[str, Any]:
        """``metrics.json``'s ``llm_reward``: the scorer's counters and this wrapper's."""
        if self.scorer is None:
            return {}
        values = np.asarray(self.score_values, dtype=np.float64)
        return {
            **self.scorer.summary(),
            "spec": str(self.spec),
            "scored_ticks": self.scores,
            "fallback_ticks": self.fallbacks,
            "score_mean": float(values.mean()) if values.size else 0.0,
            "score_std": float(values.std()) if values.size else 0.0,
        }

    def curves(self) -> dict[str, Mapping[str, list[float]]]:
        """Per-episode environment and score parts of every agent's return (scored runs)."""
        if self.scorer is None:
            return {}
        return {"env": self.env_returns, "llm": self.llm_returns}


class ScoredParallelEnv:
    """A warehouse ParallelEnv whose rewards are mixed with a scorer's (see the module docstring).

    Everything but :meth:`reset` and :meth:`step` is the wrapped env's.

    Args:
        env: a :class:`fleetmind.envs.warehouse.WarehouseParallelEnv`.
        spec: the reward spec.
        scorer: the scorer (None for ``env``: rewards pass unchanged, deliveries are counted).
        normalise: applied to the mixed rewards before the learner sees them (the §3.3 scale,
            :meth:`fleetmind.rl.hyper.Hyper.normalise`); the curves keep the raw parts.
    """

    def __init__(
        self,
        env: Any,
        spec: RewardSpec,
        scorer: Scorer | None = None,
        *,
        normalise: Callable[[NDArray[np.float64]], NDArray[np.float64]] | None = None,
    ) -> None:
        self.env = env
        self.normalise = normalise
        self.scoring = _Scoring(spec, scorer, 1, list(env.possible_agents), env.grid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Reset the wrapped env (the per-world score clock keeps running)."""
        out: tuple[dict[str, Any], dict[str, dict[str, Any]]] = self.env.reset(
            seed=seed, options=options
        )
        return out

    def step(self, actions: dict[str, int]) -> tuple[Any, dict[str, float], Any, Any, Any]:
        """One tick of the wrapped env with the mixed rewards."""
        obs, rewards, term, trunc, infos = self.env.step(actions)
        agents = self.scoring.agents
        r = np.array([[rewards.get(a, 0.0) for a in agents]], dtype=np.float64)
        d = np.array([[bool(infos.get(a, {}).get("delivered", False)) for a in agents]])
        done = np.array([any(trunc.values()) or any(term.values())])
        w = self.env.world
        mixed = self.scoring.mix(r, d, done, lambda _b: (w.pos, w.goal, w.carrying, w.has_task))
        if self.normalise is not None:
            mixed = self.normalise(mixed)
        return obs, {a: float(mixed[0, i]) for i, a in enumerate(agents)}, term, trunc, infos


class ScoredVectorEnv:
    """A batched warehouse env whose rewards are mixed with a scorer's (see the module docstring).

    Everything but :meth:`step` is the wrapped env's.

    Args:
        env: a :class:`fleetmind.envs.vector.WarehouseVectorEnv`.
        spec: the reward spec.
        scorer: the scorer.
    """

    def __init__(self, env: Any, spec: RewardSpec, scorer: Scorer | None = None) -> None:
        self.env = env
        agents = [f"robot_{i}" for i in range(env.n_robots)]
        self.scoring = _Scoring(spec, scorer, env.num_envs, agents, env.grid, resets_on_done=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, actions: NDArray[np.integer]) -> tuple[Any, NDArray[np.float32], Any, Any, Any]:
        """One batched tick with the mixed rewards."""
        obs, rewards, term, trunc, info = self.env.step(actions)
        s = self.env.sim
        mixed = self.scoring.mix(
            rewards,
            np.asarray(info.get("delivered", np.zeros_like(rewards, dtype=bool)), dtype=bool),
            np.asarray(term) | np.asarray(trunc),
            lambda b: (s.pos[b], s.goal[b], s.carrying[b], s.has_task[b]),
        )
        return obs, mixed.astype(np.float32), term, trunc, info
