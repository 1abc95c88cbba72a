"""Tabular Q-learning (FIELD-NOTES §3.1) and independent Q-learners (§3.2).

Both learners read top to bottom: epsilon-greedy action, env step, one TD update

    Q[s, a] += alpha * (r + gamma * max_a' Q[s', a'] - Q[s, a])

with no bootstrap when the step terminated the episode (a truncation still bootstraps: the time
limit is not part of the task). Epsilon starts at ``eps_start`` and is multiplied by ``eps_decay``
after every episode, down to ``eps_min``. Greedy choices take the first maximal action
(``numpy.argmax``), as the note's code does.

Randomness: one root ``seed`` is split with ``numpy.random.SeedSequence(seed).spawn(2)`` into the
env's seed (passed to the first ``reset``) and the exploration generator; the same seed gives the
same Q-table bit for bit.

:func:`independent_q` drives any PettingZoo ``ParallelEnv`` whose observations are ``Discrete``
(or which an ``obs_to_state`` callable maps to integers): each agent keeps its own table and learns
from its own reward, treating the others as part of the environment.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypedDict, Unpack

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range

log = logging.getLogger(__name__)

ObsToState = Callable[[str, Any], int]
"""Maps ``(agent, observation)`` to a table row in ``[0, n_states)``."""


class JointPolicy(Protocol):
    """Anything that picks one action per live agent from their observations."""

    def act(self, observations: Mapping[str, Any]) -> dict[str, int]:
        """Return one action per agent in ``observations``."""
        ...


# --------------------------------------------------------------------------- shared helpers


def epsilon_schedule(
    episodes: int, start: float, decay: float, minimum: float
) -> NDArray[np.float64]:
    """Exploration rate per episode: ``max(minimum, start * decay**k)`` for episode ``k``.

    Args:
        episodes: number of episodes.
        start: epsilon of the first episode.
        decay: multiplier applied after each episode.
        minimum: floor.

    Returns:
        ``(episodes,)`` float array.
    """
    k = np.arange(episodes, dtype=np.float64)
    return np.maximum(minimum, start * np.power(decay, k))


class Schedule(TypedDict, total=False):
    """A tabular learner's training schedule; as keywords, each overrides the learner's defaults.

    Attributes:
        episodes: training episodes.
        alpha: learning rate.
        gamma: discount.
        eps_start: initial exploration rate.
        eps_decay: per-episode multiplier of the exploration rate.
        eps_min: exploration floor.
    """

    episodes: int
    alpha: float
    gamma: float
    eps_start: float
    eps_decay: float
    eps_min: float


Q_SCHEDULE: Final = Schedule(
    episodes=3000, alpha=0.1, gamma=0.95, eps_start=0.9, eps_decay=0.99, eps_min=0.02
)
""":func:`q_learning`'s defaults, the note's (§3.1)."""

IQL_SCHEDULE: Final = Schedule(
    episodes=30000, alpha=0.05, gamma=0.95, eps_start=0.6, eps_decay=0.999, eps_min=0.02
)
""":func:`independent_q`'s defaults, the note's race settings (§3.2)."""


def resolve_schedule(
    defaults: Schedule, overrides: Schedule
) -> tuple[Schedule, NDArray[np.float64]]:
    """A learner's schedule, ``overrides`` over ``defaults``, checked; and its epsilons.

    Returns:
        ``(schedule, epsilons)``: every field set; ``(episodes,)`` exploration rate per episode
        (see :func:`epsilon_schedule`).

    Raises:
        ConfigError: naming the first field out of range.
    """
    s: Schedule = {**defaults, **overrides}
    check_range("episodes", s["episodes"], low=1)
    check_range("alpha", s["alpha"], above=0, high=1)
    check_range("gamma", s["gamma"], low=0, high=1)
    check_range("eps_start", s["eps_start"], low=0, high=1)
    check_range("eps_decay", s["eps_decay"], above=0, high=1)
    check_range("eps_min", s["eps_min"], low=0, high=1)
    eps = epsilon_schedule(s["episodes"], s["eps_start"], s["eps_decay"], s["eps_min"])
    return s, eps


class UniformStream:
    """Pre-drawn uniforms and random actions from one generator, handed out one at a time.

    Drawing numbers in blocks is much faster than one ``Generator`` call per step, and the sequence
    stays a pure function of the generator's seed.
    """

    def __init__(self, rng: np.random.Generator, n_actions: int, block: int = 8192) -> None:
        self._rng = rng
        self._n_actions = n_actions
        self._block = block
        self._u: list[float] = []
        self._a: list[int] = []
        self._i = block

    def draw(self) -> tuple[float, int]:
        """Return one ``(uniform in [0, 1), random action)`` pair."""
        if self._i >= self._block:
            self._u = self._rng.random(self._block).tolist()
            self._a = self._rng.integers(0, self._n_actions, self._block).tolist()
            self._i = 0
        i = self._i
        self._i += 1
        return self._u[i], self._a[i]


def entropy_of_counts(counts: NDArray[np.int64]) -> float:
    """Shannon entropy (nats) of an action histogram; 0.0 for an empty one."""
    total = int(counts.sum())
    if total == 0:
        return 0.0
    p = counts[counts > 0] / total
    return float(-(p * np.log(p)).sum())


def discrete_n(space: Any, what: str) -> int:
    """Return ``space.n`` for a ``Discrete`` space starting at 0, else raise ``ConfigError``."""
    if not isinstance(space, spaces.Discrete) or int(space.start) != 0:
        raise ConfigError(
            f"{what} must be gymnasium.spaces.Discrete starting at 0 (or pass obs_to_state and "
            f"n_states), got {space!r}"
        )
    return int(space.n)


def _default_obs_to_state(agent: str, obs: Any) -> int:
    return int(obs)


# --------------------------------------------------------------------------- single agent (§3.1)


@dataclass(frozen=True, eq=False)
class QResult:
    """What :func:`q_learning` learned.

    Attributes:
        q: ``(n_states, n_actions)`` Q-table.
        returns: ``(episodes,)`` undiscounted return of each training episode.
        lengths: ``(episodes,)`` steps of each training episode.
        epsilons: ``(episodes,)`` exploration rate used in each episode.
        path: states visited by one greedy episode after training, start state first.
        reached_goal: whether that greedy episode terminated (rather than hit the time limit).
        start_state: the state the env resets to.
        grid_width: columns of the grid, used to print cells as ``(row, col)`` (0 = no grid).
        action_names: names of the action columns.
    """

    q: NDArray[np.float64]  # (n_states, n_actions)
    returns: NDArray[np.float64]  # (episodes,)
    lengths: NDArray[np.int64]  # (episodes,)
    epsilons: NDArray[np.float64]  # (episodes,)
    path: tuple[int, ...]
    reached_goal: bool
    start_state: int
    grid_width: int = 4
    action_names: tuple[str, ...] = ("up", "down", "left", "right")

    def greedy_path(self) -> list[int]:
        """States of the greedy episode, start first; its step count is ``len(path) - 1``."""
        return list(self.path)

    @property
    def start_value(self) -> float:
        """``max_a Q[start, a]``: the learned value of the start state."""
        return float(self.q[self.start_state].max())

    def format_table(self) -> str:
        """Return the Q-table as text: one row per state, one column per action, greedy mark."""
        names = self.action_names
        head = f"{'state':>5} {'cell':>6} " + " ".join(f"{n:>8}" for n in names) + "  greedy"
        lines = [head]
        for s, row in enumerate(self.q):
            cell = f"{divmod(s, self.grid_width)}" if self.grid_width else ""
            values = " ".join(f"{v:8.4f}" for v in row)
            lines.append(f"{s:>5} {cell:>6} {values}  {names[int(np.argmax(row))]}")
        return "\n".join(lines)


def q_learning(env: Any, *, seed: int = 0, **schedule: Unpack[Schedule]) -> QResult:
    """Tabular epsilon-greedy Q-learning on a Gymnasium env with Discrete spaces (§3.1).

    The defaults are the note's (:data:`Q_SCHEDULE`): alpha 0.1, gamma 0.95, epsilon 0.9 decaying
    x0.99 per episode to 0.02, 3000 episodes. On :func:`fleetmind.envs.gridworld.make_gridworld`
    the greedy path is the optimal 6 steps. If ``start_value`` stays low, slow the epsilon decay
    before touching alpha.

    Args:
        env: a ``gymnasium.Env`` with ``Discrete`` observation and action spaces.
        seed: root seed (env seed and exploration generator are spawned from it).
        **schedule: :class:`Schedule` keywords overriding :data:`Q_SCHEDULE`.

    Returns:
        The Q-table, training curves and one greedy episode.

    Raises:
        ConfigError: a hyperparameter is out of range or a space is not ``Discrete``.
    """
    sched, eps = resolve_schedule(Q_SCHEDULE, schedule)
    episodes, alpha, gamma = sched["episodes"], sched["alpha"], sched["gamma"]
    n_states = discrete_n(env.observation_space, "observation_space")
    n_actions = discrete_n(env.action_space, "action_space")
    env_seq, explore_seq = np.random.SeedSequence(seed).spawn(2)
    env_seed = int(env_seq.generate_state(1)[0])
    stream = UniformStream(np.random.default_rng(explore_seq), n_actions)
    q = np.zeros((n_states, n_actions), dtype=np.float64)
    returns = np.zeros(episodes, dtype=np.float64)
    lengths = np.zeros(episodes, dtype=np.int64)
    # A plain list of rows is several times faster than numpy scalar indexing in this loop.
    table = q.tolist()

    obs, _ = env.reset(seed=env_seed)
    start_state = int(obs)
    for ep in range(episodes):
        if ep > 0:
            obs, _ = env.reset()
        s = int(obs)
        epsilon = float(eps[ep])
        total = 0.0
        steps = 0
        while True:
            u, random_action = stream.draw()
            row = table[s]
            a = random_action if u < epsilon else row.index(max(row))
            obs, reward, terminated, truncated, _ = env.step(a)
            s2 = int(obs)
            r = float(reward)
            target = r if terminated else r + gamma * max(table[s2])
            row[a] += alpha * (target - row[a])
            total += r
            steps += 1
            s = s2
            if terminated or truncated:
                break
        returns[ep] = total
        lengths[ep] = steps
    q[:] = np.asarray(table)

    path, reached = _greedy_episode(env, q)
    log.info(
        "q_learning: %d episodes, start value %.4f, greedy path %d steps (goal %s)",
        episodes,
        float(q[start_state].max()),
        len(path) - 1,
        reached,
    )
    width = math.isqrt(n_states) if math.isqrt(n_states) ** 2 == n_states else 0
    return QResult(
        q=q,
        returns=returns,
        lengths=lengths,
        epsilons=eps,
        path=tuple(path),
        reached_goal=reached,
        start_state=start_state,
        grid_width=width,
        action_names=_action_names(env, n_actions),
    )


def _action_names(env: Any, n_actions: int) -> tuple[str, ...]:
    names = getattr(getattr(env, "unwrapped", env), "action_names", None)
    if isinstance(names, Sequence) and len(names) == n_actions:
        return tuple(str(n) for n in names)
    if n_actions == 4:
        return ("up", "down", "left", "right")
    return tuple(f"a{i}" for i in range(n_actions))


def _greedy_episode(env: Any, q: NDArray[np.float64]) -> tuple[list[int], bool]:
    """Run one greedy episode (first maximal action) and return visited states and success."""
    obs, _ = env.reset()
    path = [int(obs)]
    while True:
        obs, _, terminated, truncated, _ = env.step(int(np.argmax(q[path[-1]])))
        path.append(int(obs))
        if terminated or truncated:
            return path, bool(terminated)


# --------------------------------------------------------------------------- multi-agent logs


@dataclass(eq=False)
class EpisodeLog:
    """Per-agent, per-episode training curves shared by the multi-agent learners.

    Attributes:
        agents: agent ids in the env's ``possible_agents`` order.
        returns: agent -> ``(episodes,)`` undiscounted return from the agent's own rewards.
        lengths: ``(episodes,)`` steps per episode.
        winners: ``(episodes,)`` index into ``agents`` of ``infos[...]["winner"]`` at the last
            step, ``-1`` when none (or the env reports no winner).
        action_entropy: agent -> ``(episodes,)`` entropy (nats) of the agent's actions that episode.
        reward_peak: agent -> ``(episodes,)`` largest absolute single-step reward that episode.
    """

    agents: tuple[str, ...]
    returns: dict[str, NDArray[np.float64]]
    lengths: NDArray[np.int64]
    winners: NDArray[np.int64]
    action_entropy: dict[str, NDArray[np.float64]]
    reward_peak: dict[str, NDArray[np.float64]]

    @classmethod
    def empty(cls, agents: Sequence[str], episodes: int) -> EpisodeLog:
        """Allocate zeroed curves for ``episodes`` episodes."""
        return cls(
            agents=tuple(agents),
            returns={a: np.zeros(episodes) for a in agents},
            lengths=np.zeros(episodes, dtype=np.int64),
            winners=np.full(episodes, -1, dtype=np.int64),
            action_entropy={a: np.zeros(episodes) for a in agents},
            reward_peak={a: np.zeros(episodes) for a in agents},
        )

    @property
    def team_returns(self) -> NDArray[np.float64]:
        """``(episodes,)`` mean of the agents' returns (equals the shared return when shared)."""
        stacked = np.stack([self.returns[a] for a in self.agents])  # (agents, episodes)
        return np.asarray(stacked.mean(axis=0), dtype=np.float64)

    def wins(self, last: int | None = None) -> dict[str, int]:
        """Count episodes each agent won, over the last ``last`` episodes (all if ``None``)."""
        w = self.winners if last is None else self.winners[-last:]
        return {a: int(np.count_nonzero(w == i)) for i, a in enumerate(self.agents)}

    def record(self, ep: int, tally: EpisodeTally, *, n_actions: Mapping[str, int]) -> None:
        """Store one finished episode (``n_actions``: each agent's action count, for entropy)."""
        for a in self.agents:
            self.returns[a][ep] = tally.totals[a]
            self.reward_peak[a][ep] = tally.peaks[a]
            counts = np.bincount(
                np.asarray(tally.actions[a], dtype=np.int64), minlength=n_actions[a]
            )
            self.action_entropy[a][ep] = entropy_of_counts(counts)
        self.lengths[ep] = tally.steps
        if tally.winner in self.agents:
            self.winners[ep] = self.agents.index(tally.winner)


@dataclass(eq=False)
class EpisodeTally:
    """One episode's running figures, kept by a multi-agent learner until :meth:`EpisodeLog.record`.

    Attributes:
        totals: agent -> return so far.
        peaks: agent -> largest absolute single-step reward so far.
        actions: agent -> actions taken.
        steps: steps so far.
        winner: the env's ``infos[...]["winner"]`` at the last step (None: none).
    """

    totals: dict[str, float]
    peaks: dict[str, float]
    actions: dict[str, list[int]]
    steps: int = 0
    winner: Any = None

    @classmethod
    def start(cls, agents: Sequence[str]) -> EpisodeTally:
        """An episode's tally before its first step."""
        return cls(dict.fromkeys(agents, 0.0), dict.fromkeys(agents, 0.0), {a: [] for a in agents})

    def add(self, agent: str, reward: float) -> None:
        """Count one step's reward of ``agent``."""
        self.totals[agent] += reward
        self.peaks[agent] = max(self.peaks[agent], abs(reward))


def explore_streams(
    seed: int, n_actions: Mapping[str, int]
) -> tuple[int, dict[str, UniformStream]]:
    """The env seed and each agent's exploration stream, both from the root ``seed``.

    The streams share one generator, created in ``n_actions``' (the agents') order.
    """
    env_seq, explore_seq = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(explore_seq)
    streams = {a: UniformStream(rng, n) for a, n in n_actions.items()}
    return int(env_seq.generate_state(1)[0]), streams


def winner_of(infos: Mapping[str, Mapping[str, Any]]) -> Any:
    """The first ``infos[agent]["winner"]`` of a step (None: no agent's info names one)."""
    for info in infos.values():
        if "winner" in info:
            return info["winner"]
    return None


# --------------------------------------------------------------------------- independent (§3.2)


@dataclass(eq=False)
class IQLResult(EpisodeLog):
    """What :func:`independent_q` learned: one Q-table per agent plus the curves of EpisodeLog.

    Attributes:
        q: agent -> ``(n_states, n_actions)`` Q-table.
        epsilons: ``(episodes,)`` exploration rate per episode.
        obs_to_state: the observation-to-row map used in training.
    """

    q: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    epsilons: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    obs_to_state: ObsToState = _default_obs_to_state

    def act(self, observations: Mapping[str, Any]) -> dict[str, int]:
        """Greedy action (first maximal) of each agent present in ``observations``."""
        return {
            a: int(np.argmax(self.q[a][self.obs_to_state(a, o)])) for a, o in observations.items()
        }


def independent_q(
    env: Any,
    *,
    seed: int = 0,
    obs_to_state: ObsToState | None = None,
    n_states: int | None = None,
    lam: float = 0.0,
    **schedule: Unpack[Schedule],
) -> IQLResult:
    """Independent Q-learners on a PettingZoo ``ParallelEnv`` (§3.2).

    Each agent has its own ``(n_states, n_actions)`` table, explores with its own epsilon-greedy
    draws (one shared exploration generator, agents in ``possible_agents`` order) and learns from
    its own reward only. The defaults are the note's race settings (:data:`IQL_SCHEDULE`: alpha
    0.05, half the single-agent value; epsilon 0.6 decaying x0.999 to 0.02; 30000 episodes).

    Args:
        env: a PettingZoo ``ParallelEnv``; action spaces must be ``Discrete``.
        seed: root seed.
        obs_to_state: maps ``(agent, observation)`` to a row; default ``int(observation)``, which
            needs ``Discrete`` observation spaces.
        n_states: table rows; required with ``obs_to_state`` unless the spaces are ``Discrete``.
        lam: eligibility-trace decay of Watkins's Q(lambda) (Sutton and Barto, 2018, §12.10):
            each TD error also updates the agent's recent pairs, weighted ``(gamma * lam)^k``
            for the pair ``k`` steps back, with replacing traces cut at an exploratory action.
            A sparse reward (a delivery tens of ticks after the choices that led to it) then
            reaches those choices in one episode instead of one step per visit. ``0`` is the
            one-step update above, exactly.
        **schedule: :class:`Schedule` keywords overriding :data:`IQL_SCHEDULE`.

    Returns:
        Per-agent Q-tables, returns, wins, action entropies and reward peaks.

    Raises:
        ConfigError: bad hyperparameters or spaces that cannot index a table.
    """
    sched, eps = resolve_schedule(IQL_SCHEDULE, schedule)
    episodes, alpha, gamma = sched["episodes"], sched["alpha"], sched["gamma"]
    check_range("lam", lam, low=0, high=1)
    decay = gamma * lam
    agents = tuple(env.possible_agents)
    rows = _table_rows(env, agents, obs_to_state, n_states)
    to_state = obs_to_state or _default_obs_to_state
    n_act = {a: discrete_n(env.action_space(a), f"action_space({a!r})") for a in agents}
    env_seed, streams = explore_streams(seed, n_act)
    tables = {a: np.zeros((rows[a], n_act[a])).tolist() for a in agents}
    result = IQLResult(**vars(EpisodeLog.empty(agents, episodes)), epsilons=eps)

    observations, _ = env.reset(seed=env_seed)
    for ep in range(episodes):
        if ep > 0:
            observations, _ = env.reset()
        states = {a: to_state(a, o) for a, o in observations.items()}
        traces: dict[str, dict[tuple[int, int], float]] = {a: {} for a in agents}
        epsilon = float(eps[ep])
        tally = EpisodeTally.start(agents)
        while env.agents:
            actions: dict[str, int] = {}
            explored: dict[str, bool] = {}
            for a in env.agents:
                u, random_action = streams[a].draw()
                row = tables[a][states[a]]
                best = max(row)
                actions[a] = random_action if u < epsilon else row.index(best)
                explored[a] = row[actions[a]] < best
                tally.actions[a].append(actions[a])
            observations, rewards, terms, _truncs, infos = env.step(actions)
            tally.steps += 1
            for a, act in actions.items():
                r = float(rewards.get(a, 0.0))
                state = states[a]
                row = tables[a][state]
                if terms.get(a, False):
                    target = r
                else:
                    s2 = to_state(a, observations[a])
                    target = r + gamma * max(tables[a][s2])
                    states[a] = s2
                if decay == 0.0:
                    row[act] += alpha * (target - row[act])
                else:
                    _trace_update(
                        tables[a], traces[a], (state, act), alpha * (target - row[act]),
                        decay, cut=explored[a],
                    )  # fmt: skip
                tally.add(a, r)
            tally.winner = winner_of(infos)
        result.record(ep, tally, n_actions=n_act)

    result.q = {a: np.asarray(tables[a], dtype=np.float64) for a in agents}
    result.obs_to_state = to_state
    log.info("independent_q: %d episodes, wins in the last 1000: %s", episodes, result.wins(1000))
    return result


TRACE_FLOOR = 0.01
"""Eligibility below which a pair leaves the trace (``0.9 * 0.95`` decays to it in 30 steps)."""


def _trace_update(
    table: list[list[float]],
    trace: dict[tuple[int, int], float],
    pair: tuple[int, int],
    step: float,
    decay: float,
    *,
    cut: bool,
) -> None:
    """One Watkins's Q(lambda) update: ``step`` (alpha times the TD error) on every traced pair.

    ``pair`` was just taken; ``cut`` (it was exploratory) empties the trace first, since the
    greedy policy's return no longer follows the earlier pairs.
    """
    if cut:
        trace.clear()
    trace[pair] = 1.0  # replacing traces
    faded = []
    for (state, action), e in trace.items():
        table[state][action] += step * e
        e *= decay
        if e < TRACE_FLOOR:
            faded.append((state, action))
        else:
            trace[(state, action)] = e
    for key in faded:
        del trace[key]


def _table_rows(
    env: Any, agents: Sequence[str], obs_to_state: ObsToState | None, n_states: int | None
) -> dict[str, int]:
    """Rows of each agent's table: ``n_states`` if given, else the Discrete observation size."""
    if n_states is not None:
        check_range("n_states", n_states, low=1)
        return dict.fromkeys(agents, n_states)
    if obs_to_state is not None:
        raise ConfigError("n_states is required when obs_to_state is given")
    return {a: discrete_n(env.observation_space(a), f"observation_space({a!r})") for a in agents}


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Rollout:
    """One greedy episode of a joint policy.

    Attributes:
        returns: agent -> undiscounted return.
        steps: joint steps taken.
        winner: ``infos[...]["winner"]`` at the last step (``None`` if none).
        collisions: steps whose infos reported ``collision``.
        terminated: whether the episode ended by termination (not the time limit).
    """

    returns: dict[str, float]
    steps: int
    winner: str | None
    collisions: int
    terminated: bool


def rollout(env: Any, policy: JointPolicy, *, seed: int | None = 0) -> Rollout:
    """Play one episode of ``policy`` on a ParallelEnv without exploration or learning.

    Args:
        env: a PettingZoo ``ParallelEnv``.
        policy: anything with ``act(observations) -> {agent: action}``.
        seed: seed for ``env.reset``.

    Returns:
        Returns, length, winner and collision count of the episode.
    """
    observations, _ = env.reset(seed=seed)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    steps = collisions = 0
    winner = None
    terminated = False
    while env.agents:
        observations, rewards, terms, _, infos = env.step(policy.act(observations))
        steps += 1
        for a, r in rewards.items():
            returns[a] += float(r)
        winner = winner_of(infos)
        collisions += int(any(bool(i.get("collision", False)) for i in infos.values()))
        terminated = any(terms.values())
    return Rollout(
        returns=returns, steps=steps, winner=winner, collisions=collisions, terminated=terminated
    )
