"""Tabular centralised training, decentralised execution (CTDE) for small ParallelEnvs.

Two learners, both trained on the team reward (the mean of the agents' rewards, which is the
shared reward itself when the env shares one):

- ``method="joint"``: one centralised table ``Q[s, a_joint]`` over the global state and the joint
  action (``n_actions ** n_agents`` columns), updated on the joint TD target
  ``r_team + gamma * max_b Q[s', b]``. Execution: every agent computes the same argmax joint action
  from the global state and plays its own component. That is decentralised whenever each agent
  observes the global state, as in the race (both robots observe ``s0 * 16 + s1``); ties are
  broken identically (first maximum), so the agents never disagree.
- ``method="vdn"``: a value decomposition ``Q(s, a) = sum_i Q_i(s, a_i)`` (VDN, Sunehag et al.
  2017), each ``Q_i`` moved by the shared team TD error
  ``r_team + gamma * sum_i max Q_i(s', .) - sum_i Q_i(s, a_i)``. Execution: each agent takes the
  argmax of its own table, so it needs only its own observation.

Exploration is per agent: with probability epsilon an agent plays a random action, else its greedy
component. Schedules, seeding and the per-agent curves are those of :mod:`fleetmind.rl.tabular`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Unpack

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.rl.tabular import (
    EpisodeLog,
    EpisodeTally,
    Schedule,
    discrete_n,
    explore_streams,
    resolve_schedule,
    winner_of,
)

log = logging.getLogger(__name__)

Method = Literal["joint", "vdn"]
StateFn = Callable[[Mapping[str, Any]], int]
"""Maps the observations of all agents to the global state row in ``[0, n_states)``."""

MAX_JOINT_CELLS = 20_000_000

CTDE_SCHEDULE: Final = Schedule(
    episodes=5000, alpha=0.1, gamma=0.95, eps_start=0.6, eps_decay=0.999, eps_min=0.02
)
""":func:`ctde_q`'s defaults."""


def _first_agent_state(observations: Mapping[str, Any]) -> int:
    return int(next(iter(observations.values())))


@dataclass(eq=False)
class CTDEResult(EpisodeLog):
    """What :func:`ctde_q` learned, plus the per-agent curves of ``EpisodeLog``.

    Attributes:
        method: ``"joint"`` or ``"vdn"``.
        q_joint: ``(n_states, n_actions ** n_agents)`` joint table (method ``"joint"``), else empty.
        q: agent -> ``(n_states, n_actions)`` utility table (method ``"vdn"``), else empty.
        n_actions: actions per agent (the same for all agents).
        epsilons: ``(episodes,)`` exploration rate per episode.
        state_fn: observations -> global state row, as used in training.
    """

    method: Method = "joint"
    q_joint: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    q: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    n_actions: int = 0
    epsilons: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    state_fn: StateFn = _first_agent_state

    def joint_action(self, state: int) -> dict[str, int]:
        """Greedy action of every agent in global state ``state``."""
        if self.method == "joint":
            flat = int(np.argmax(self.q_joint[state]))
            parts = np.unravel_index(flat, (self.n_actions,) * len(self.agents))
            return {a: int(p) for a, p in zip(self.agents, parts, strict=True)}
        return {a: int(np.argmax(self.q[a][state])) for a in self.agents}

    def act(self, observations: Mapping[str, Any]) -> dict[str, int]:
        """Greedy actions of the agents present in ``observations`` (decentralised execution).

        For ``"joint"`` each agent decodes its component of the argmax joint action from its own
        observation; the ``state_fn`` of training is applied to the observations given.
        """
        joint = self.joint_action(self.state_fn(observations))
        return {a: joint[a] for a in observations}


def ctde_q(
    env: Any,
    *,
    method: Method = "joint",
    seed: int = 0,
    state_fn: StateFn | None = None,
    n_states: int | None = None,
    **schedule: Unpack[Schedule],
) -> CTDEResult:
    """Train a tabular CTDE learner on a PettingZoo ``ParallelEnv`` with Discrete actions.

    Args:
        env: the env; every agent must have the same ``Discrete`` action space size, and the
            episode must end for all agents at once (as in the race).
        method: ``"joint"`` (centralised joint-action Q) or ``"vdn"`` (additive decomposition).
        seed: root seed (env seed and exploration generator are spawned from it).
        state_fn: observations -> global state row; default ``int`` of the first agent's
            observation (right when every agent observes the global state, as in the race).
        n_states: rows of the tables; default the first agent's ``Discrete`` observation size.
        **schedule: :class:`~fleetmind.rl.tabular.Schedule` keywords overriding
            :data:`CTDE_SCHEDULE`.

    Returns:
        The learned tables and per-agent curves.

    Raises:
        ConfigError: bad hyperparameters, unsupported spaces, or a joint table too large.
    """
    sched, eps = resolve_schedule(CTDE_SCHEDULE, schedule)
    episodes, alpha, gamma = sched["episodes"], sched["alpha"], sched["gamma"]
    if method not in ("joint", "vdn"):
        raise ConfigError(f"method must be 'joint' or 'vdn', got {method!r}")
    agents = tuple(env.possible_agents)
    n_agents = len(agents)
    sizes = {discrete_n(env.action_space(a), f"action_space({a!r})") for a in agents}
    if len(sizes) != 1:
        raise ConfigError(f"ctde_q needs equal action space sizes, got {sorted(sizes)}")
    n_act = sizes.pop()
    if n_states is None:
        if state_fn is not None:
            raise ConfigError("n_states is required when state_fn is given")
        n_states = discrete_n(env.observation_space(agents[0]), "observation_space")
    else:
        check_range("n_states", n_states, low=1)
    to_state = state_fn or _first_agent_state
    n_joint = n_act**n_agents
    if method == "joint" and n_states * n_joint > MAX_JOINT_CELLS:
        raise ConfigError(
            f"joint table of {n_states} x {n_joint} exceeds {MAX_JOINT_CELLS} cells; use 'vdn'"
        )

    n_act_map = dict.fromkeys(agents, n_act)
    env_seed, streams = explore_streams(seed, n_act_map)
    result = CTDEResult(
        **vars(EpisodeLog.empty(agents, episodes)),
        method=method,
        n_actions=n_act,
        epsilons=eps,
        state_fn=to_state,
    )
    q_joint = np.zeros((n_states, n_joint)) if method == "joint" else np.zeros((0, 0))
    util = np.zeros((n_agents, n_states, n_act))  # (agent, state, action), vdn only
    place = n_act ** np.arange(n_agents - 1, -1, -1)  # joint index = sum a_i * place_i (C order)

    observations, _ = env.reset(seed=env_seed)
    for ep in range(episodes):
        if ep > 0:
            observations, _ = env.reset()
        s = to_state(observations)
        epsilon = float(eps[ep])
        tally = EpisodeTally.start(agents)
        while env.agents:
            greedy: tuple[int, ...]
            if method == "joint":
                flat = int(np.argmax(q_joint[s]))
                greedy = tuple(int(g) for g in np.unravel_index(flat, (n_act,) * n_agents))
            else:
                greedy = tuple(int(np.argmax(util[i, s])) for i in range(n_agents))
            chosen = np.empty(n_agents, dtype=np.int64)
            for i, a in enumerate(agents):
                u, random_action = streams[a].draw()
                chosen[i] = random_action if u < epsilon else int(greedy[i])
                tally.actions[a].append(int(chosen[i]))
            actions = {a: int(chosen[i]) for i, a in enumerate(agents)}
            observations, rewards, terms, _, infos = env.step(actions)
            tally.steps += 1
            r_each = [float(rewards.get(a, 0.0)) for a in agents]
            r_team = float(np.mean(r_each))
            done = any(terms.get(a, False) for a in agents)
            s2 = s if done else to_state(observations)
            if method == "joint":
                j = int(chosen @ place)
                target = r_team if done else r_team + gamma * float(q_joint[s2].max())
                q_joint[s, j] += alpha * (target - q_joint[s, j])
            else:
                idx = np.arange(n_agents)
                current = float(util[idx, s, chosen].sum())
                target = r_team if done else r_team + gamma * float(util[:, s2].max(axis=1).sum())
                util[idx, s, chosen] += alpha * (target - current)
            for a, r in zip(agents, r_each, strict=True):
                tally.add(a, r)
            tally.winner = winner_of(infos)
            s = s2
        result.record(ep, tally, n_actions=n_act_map)

    result.q_joint = q_joint
    if method == "vdn":
        result.q = {a: util[i].copy() for i, a in enumerate(agents)}
    log.info(
        "ctde_q(%s): %d episodes, wins in the last 1000: %s", method, episodes, result.wins(1000)
    )
    return result
