"""The learner base and the pieces every neural learner shares, written once and tested once.

- :func:`mlp`, :func:`with_agent_id` and :class:`AgentMLP`: networks and the agent-id one-hot
  input of parameter sharing.
- :func:`torch_generator` / :func:`init_seed`: torch randomness drawn from the run's
  ``numpy.random.SeedSequence``; no global random state is touched.
- :class:`BatchEnv`: the batched multi-agent env the learners drive (``make_vector`` is one,
  :class:`fleetmind.rl.neural.adapters.ParallelBatch` turns ParallelEnvs such as rware into one).
- :class:`EpisodeTracker`, :class:`TrainResult`, :class:`Event`: per-agent episode return
  curves, what ``train`` returns, and what it reports to callbacks.
- :class:`Learner`, :class:`TrainLoop`, :func:`save_checkpoint`, :func:`load_checkpoint`: the
  training loop's shell and bookkeeping; :func:`descend` and :func:`polyak`: one gradient step
  and one target update.

Return estimators and buffers live in :mod:`fleetmind.rl.neural.buffers`.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypedDict, TypeVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fleetmind.envs.vector import BatchStep
from fleetmind.errors import ConfigError

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- networks


def mlp(
    in_dim: int,
    out_dim: int,
    hidden: Sequence[int] = (64, 64),
    *,
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
    in_norm: bool = False,
) -> nn.Sequential:
    """A multilayer perceptron with orthogonal init (gain sqrt(2) inside, ``out_gain`` last).

    Args:
        in_dim: input features.
        out_dim: outputs.
        hidden: hidden layer widths.
        activation: activation class between layers.
        out_gain: orthogonal gain of the output layer (0.01 for policy heads, 1 for values).
        in_norm: start with a ``LayerNorm`` over the inputs (MAPPO's feature normalisation:
            rware's observations mix cell coordinates up to ~20 with 0/1 flags).
    """
    layers: list[nn.Module] = [nn.LayerNorm(in_dim)] if in_norm else []
    last = in_dim
    for width in hidden:
        lin = nn.Linear(last, width)
        nn.init.orthogonal_(lin.weight, gain=float(np.sqrt(2.0)))
        nn.init.zeros_(lin.bias)
        layers += [lin, activation()]
        last = width
    head = nn.Linear(last, out_dim)
    nn.init.orthogonal_(head.weight, gain=out_gain)
    nn.init.zeros_(head.bias)
    layers.append(head)
    return nn.Sequential(*layers)


def with_agent_id(x: torch.Tensor, n_agents: int) -> torch.Tensor:
    """Append the agent-id one-hot to ``(..., N, D)`` inputs -> ``(..., N, D + N)``."""
    if x.shape[-2] != n_agents:
        raise ValueError(f"expected {n_agents} agents on axis -2, got shape {tuple(x.shape)}")
    eye = torch.eye(n_agents, dtype=x.dtype, device=x.device)
    return torch.cat([x, eye.expand(*x.shape[:-1], n_agents)], dim=-1)


ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}
"""Activation names a config may give (ReLU is several times cheaper than tanh on CPU)."""


class NetOptions(TypedDict, total=False):
    """The network options a learner's config may set for its per-agent networks.

    Attributes:
        activation: hidden activation, a key of :data:`ACTIVATIONS` (default ``tanh``).
        feature_norm: start with a ``LayerNorm`` over the inputs (default False).
    """

    activation: str
    feature_norm: bool


class AgentMLP(nn.Module):
    """A parameter-shared per-agent network: ``(..., N, D)`` inputs -> ``(..., N, out_dim)``.

    Every agent's row goes through the same :func:`mlp`, the agent-id one-hot appended first when
    ``agent_id`` (so the shared weights can still tell the agents apart).

    Args:
        in_dim: ``D``.
        out_dim: outputs per agent.
        n_agents: ``N``.
        hidden: hidden layer widths.
        agent_id: append the agent-id one-hot.
        out_gain: orthogonal gain of the output layer.
        activation: hidden activation, a key of :data:`ACTIVATIONS`.
        feature_norm: start with a ``LayerNorm`` over the inputs (rware's observations mix cell
            coordinates up to ~20 with 0/1 flags).
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        n_agents: int,
        hidden: Sequence[int],
        agent_id: bool,
        *,
        out_gain: float = 1.0,
        activation: str = "tanh",
        feature_norm: bool = False,
    ) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.agent_id = agent_id
        self.net = mlp(
            in_dim + (n_agents if agent_id else 0),
            out_dim,
            hidden,
            activation=ACTIVATIONS[activation],
            out_gain=out_gain,
            in_norm=feature_norm,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Every agent's outputs."""
        out: torch.Tensor = self.net(with_agent_id(x, self.n_agents) if self.agent_id else x)
        return out


# --------------------------------------------------------------------------- seeding


def torch_generator(seq: np.random.SeedSequence) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded from ``seq``."""
    g = torch.Generator()
    g.manual_seed(int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)))
    return g


def init_seed(seq: np.random.SeedSequence) -> int:
    """An int seed for ``torch.manual_seed`` inside ``torch.random.fork_rng`` (network init)."""
    return int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def build_seeded(seq: np.random.SeedSequence, build: Callable[[], nn.Module]) -> nn.Module:
    """Call ``build`` with torch's global generator seeded from ``seq``, then restore it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed(seq))
        return build()


def sample_categorical(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One sample per row of ``(..., A)`` logits, drawn with ``generator``."""
    probs = torch.softmax(logits, dim=-1).reshape(-1, logits.shape[-1])
    return torch.multinomial(probs, 1, generator=generator).reshape(logits.shape[:-1])


Act = Callable[[NDArray[np.float32]], NDArray[np.int64]]
"""An evaluation policy: ``(..., D)`` observations -> ``(...,)`` actions."""


def start_episodes(policy: object) -> None:
    """Reset a stateful policy's memory (a recurrent one's hidden states), if it keeps any.

    The evaluators call it when they build an ``Act``: each evaluation starts new episodes.
    """
    reset = getattr(policy, "reset_state", None)
    if callable(reset):
        reset()


def greedy_actions(policy: Callable[[torch.Tensor], torch.Tensor]) -> Act:
    """The argmax of a policy's logits (MAT: its greedy autoregressive decoding)."""
    start_episodes(policy)

    def act(obs: NDArray[np.float32]) -> NDArray[np.int64]:
        with torch.no_grad():
            out: NDArray[np.int64] = policy(torch.from_numpy(obs)).argmax(-1).numpy()
        return out

    return act


def sampled_actions(policy: Callable[[torch.Tensor], torch.Tensor], seed: int) -> Act:
    """Actions drawn from the policy as trained, with a seeded generator.

    A policy whose agents act one after another (MAT: each agent conditioned on the actions the
    earlier agents *sampled*) has a ``sample(obs, generator)`` method, used here; its logits
    alone would condition each agent on the earlier agents' greedy actions, a different policy.
    Any other policy's actions are drawn from its logits, every agent independently.
    """
    gen = torch.Generator()
    gen.manual_seed(seed)
    start_episodes(policy)
    sample = getattr(policy, "sample", None)

    def act(obs: NDArray[np.float32]) -> NDArray[np.int64]:
        with torch.no_grad():
            x = torch.from_numpy(obs)
            drawn = sample(x, gen) if callable(sample) else sample_categorical(policy(x), gen)
            out: NDArray[np.int64] = drawn.numpy()
        return out

    return act


class ValueNorm:
    """Running mean and std of value targets (MAPPO's ``ValueNorm``, a debiased average).

    The critic learns targets in normalised units: rware's sparse deliveries give returns of
    order 0.01 early and of order 1 later, a range no fixed scale serves. ``beta`` close to 1
    weighs every update almost equally; the variance is floored (``min_var``) so that near-zero
    returns early in training are not blown up.

    Args:
        beta: decay of the running moments per :meth:`update`.
        min_var: floor of the variance.
    """

    def __init__(self, beta: float = 0.99999, min_var: float = 1e-2) -> None:
        self.beta = beta
        self.min_var = min_var
        self.mean = 0.0
        self.mean_sq = 0.0
        self.debias = 0.0

    def update(self, x: torch.Tensor) -> None:
        """Fold a batch of targets into the running moments."""
        b = self.beta
        self.mean = b * self.mean + (1 - b) * float(x.mean())
        self.mean_sq = b * self.mean_sq + (1 - b) * float((x.double() ** 2).mean())
        self.debias = b * self.debias + (1 - b)

    def stats(self) -> tuple[float, float]:
        """``(mean, std)`` of the targets seen (``(0, 1)`` before any update)."""
        if self.debias <= 0:
            return 0.0, 1.0
        mean = self.mean / self.debias
        var = max(self.mean_sq / self.debias - mean**2, self.min_var)
        return mean, float(np.sqrt(var))

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """Targets in the critic's units."""
        mean, std = self.stats()
        return (x - mean) / std

    def denormalise(self, x: NDArray[np.float32]) -> NDArray[np.float32]:
        """Critic outputs back in return units."""
        mean, std = self.stats()
        return (x * std + mean).astype(np.float32)

    def state_dict(self) -> dict[str, float]:
        """The running moments, for checkpoints."""
        return {"mean": self.mean, "mean_sq": self.mean_sq, "debias": self.debias}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Restore :meth:`state_dict`."""
        self.mean, self.mean_sq, self.debias = state["mean"], state["mean_sq"], state["debias"]


# --------------------------------------------------------------------------- env protocol


class BatchEnv(Protocol):
    """A batch of ``num_envs`` multi-agent worlds (``WarehouseVectorEnv`` is one).

    ``step`` resets finished worlds in place. When ``info`` holds ``final_obs (B, N, D)`` (and
    ``final_state (B, S)``), they are the observations of the states the finished worlds reached;
    without them learners fall back as documented in each algorithm.
    """

    num_envs: int
    n_robots: int
    obs_size: int
    n_actions: int

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Observations ``(B, N, D)``."""
        ...

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """``(obs, rewards (B, N), terminated (B,), truncated (B,), info)``."""
        ...

    def global_state(self) -> NDArray[np.float32]:
        """``(B, S)`` global state."""
        ...


# --------------------------------------------------------------------------- curves and results


class EpisodeTracker:
    """Accumulates each agent's undiscounted return per world and records finished episodes.

    Args:
        num_envs: worlds.
        agents: agent ids (``robot_0`` ..).
    """

    def __init__(self, num_envs: int, agents: Sequence[str]) -> None:
        self.agents = list(agents)
        self.running = np.zeros((num_envs, len(agents)), dtype=np.float64)
        self.running_deliveries = np.zeros((num_envs, len(agents)), dtype=np.int64)
        self.running_peak = np.zeros((num_envs, len(agents)), dtype=np.float64)
        self.returns: dict[str, list[float]] = {a: [] for a in self.agents}
        self.deliveries: dict[str, list[int]] = {a: [] for a in self.agents}
        self.peaks: dict[str, list[float]] = {a: [] for a in self.agents}
        self.end_steps: list[int] = []

    def update(
        self,
        rewards: NDArray[np.floating],
        done: NDArray[np.bool_],
        step: int,
        delivered: NDArray[np.bool_] | None = None,
        learned: NDArray[np.floating] | None = None,
    ) -> list[dict[str, float]]:
        """Add ``(B, N)`` rewards; close the worlds where ``done (B,)``; return closed returns.

        ``learned`` are the rewards the learner trains on (after scaling); the largest ``|r|``
        of each episode is kept in ``peaks`` (of ``rewards`` when ``learned`` is None), for the
        §3.3 reward-scale check.
        """
        self.running += rewards
        self.running_peak = np.maximum(
            self.running_peak, np.abs(rewards if learned is None else learned)
        )
        if delivered is not None:
            self.running_deliveries += delivered
        closed = []
        for w in np.flatnonzero(done):
            ep = {a: float(self.running[w, i]) for i, a in enumerate(self.agents)}
            for i, a in enumerate(self.agents):
                self.returns[a].append(ep[a])
                self.deliveries[a].append(int(self.running_deliveries[w, i]))
                self.peaks[a].append(float(self.running_peak[w, i]))
            self.end_steps.append(step)
            closed.append(ep)
            self.running[w] = 0.0
            self.running_peak[w] = 0.0
            self.running_deliveries[w] = 0
        return closed

    def state_dict(self) -> dict[str, Any]:
        """Curves so far, for checkpoints."""
        return {
            "returns": self.returns,
            "deliveries": self.deliveries,
            "peaks": self.peaks,
            "end_steps": self.end_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore curves from a checkpoint (running sums start from zero)."""
        self.returns = {a: list(v) for a, v in state["returns"].items()}
        self.deliveries = {a: list(v) for a, v in state["deliveries"].items()}
        self.peaks = {
            a: list(v) for a, v in state.get("peaks", {a: [] for a in self.agents}).items()
        }
        self.end_steps = list(state["end_steps"])


@dataclass(frozen=True)
class Event:
    """What a learner reports to callbacks.

    Attributes:
        kind: ``"update"`` (after each gradient phase), ``"episode"`` (a world finished; scalars
            hold ``robot_i`` returns) or ``"checkpoint"``.
        step: environment steps so far (batched steps x worlds).
        scalars: namespaced values, e.g. ``train/loss``, ``train/agent/robot_0/return``.
        policy: on ``update`` events of the PPO loop, the live policy module (obs -> logits),
            so a callback can evaluate it mid-run (under ``torch.no_grad``; never train it).
    """

    kind: str
    step: int
    scalars: dict[str, float] = field(default_factory=dict)
    policy: nn.Module | None = None


Callback = Callable[[Event], None]


def emit(callbacks: Sequence[Callback], event: Event) -> None:
    """Send ``event`` to every callback."""
    for cb in callbacks:
        cb(event)


def record_episodes(
    tracker: EpisodeTracker,
    callbacks: Sequence[Callback],
    rewards: NDArray[np.floating],
    done: NDArray[np.bool_],
    step: int,
    info: dict[str, Any],
    learned: NDArray[np.floating],
) -> None:
    """Add one batched step to ``tracker`` and send an ``episode`` event per finished world.

    The event's scalars are ``train/agent/robot_i/return`` and ``train/episode_return_mean``.
    """
    for ep in tracker.update(rewards, done, step, info.get("delivered"), learned):
        scal = {f"train/agent/{ag}/return": r for ag, r in ep.items()}
        scal["train/episode_return_mean"] = float(np.mean(list(ep.values())))
        emit(callbacks, Event("episode", step, scal))


@dataclass(frozen=True)
class RunOptions:
    """How far and where one training run goes: the keyword arguments of every ``train``.

    Attributes:
        seed: root seed.
        steps: world steps to reach in total, resumes included.
        out_dir: checkpoint folder (required when checkpointing or resuming).
        callbacks: receive :class:`Event` s.
        checkpoint_every: checkpoint every this many updates (PPO) or gradient steps (DQN); 0:
            only at the end, when ``out_dir`` is given.
        resume: continue from ``out_dir/checkpoint.pt`` when it exists.
        time_limit_s: start no new step (PPO: no new rollout) once this many seconds of the
            call have passed, even short of ``steps`` (None: no limit); for comparisons at equal
            wall time.
        excluded_s: seconds of the call spent outside training so far (evaluations inside
            callbacks), left out of ``time_limit_s``.
    """

    seed: int = 0
    steps: int = 100_000
    out_dir: Path | None = None
    callbacks: Sequence[Callback] = ()
    checkpoint_every: int = 0
    resume: bool = False
    time_limit_s: float | None = None
    excluded_s: Callable[[], float] | None = None

    def out_of_time(self, t0: float) -> bool:
        """Whether ``time_limit_s`` has passed since ``t0`` (a ``perf_counter()`` reading).

        Seconds that ``excluded_s()`` reports (e.g. evaluations run by a callback) do not count.
        """
        if self.time_limit_s is None:
            return False
        away = self.excluded_s() if self.excluded_s is not None else 0.0
        return time.perf_counter() - t0 - away >= self.time_limit_s

    def checkpoint_due(self, updates: int) -> bool:
        """Whether a checkpoint is due after ``updates`` updates (before the final one)."""
        return (
            self.out_dir is not None
            and bool(self.checkpoint_every)
            and updates % self.checkpoint_every == 0
        )

    def resume_checkpoint(self, algo: str) -> dict[str, Any] | None:
        """The checkpoint a resumed run continues from (None: a fresh run, or none saved yet).

        Raises:
            ConfigError: ``resume`` without ``out_dir``, or the checkpoint is another algorithm's.
        """
        if not self.resume:
            return None
        if self.out_dir is None:
            raise ConfigError("resume=True needs out_dir")
        ck = load_checkpoint(self.out_dir)
        if ck is not None and ck["algo"] != algo:
            raise ConfigError(f"{self.out_dir}/checkpoint.pt holds {ck['algo']!r}, not {algo!r}")
        return ck


ConfigT = TypeVar("ConfigT")


class Learner(Generic[ConfigT]):
    """The ``train`` of a learner module; its signature, the same for every algorithm, lives here.

    ``train(env, config=None, *, seed=0, steps=100_000, out_dir=None, callbacks=(),
    checkpoint_every=0, resume=False, time_limit_s=None, excluded_s=None) -> TrainResult``:
    ``env`` is a
    :class:`BatchEnv`, ``config`` None means the algorithm's default, the keyword arguments are
    those of :class:`RunOptions`.

    Args:
        run: trains with the resolved config and the run's options.
        default: builds the default config.
        doc: what this learner trains and what its result's ``policy`` is.
    """

    def __init__(
        self,
        run: Callable[[BatchEnv, ConfigT, RunOptions], TrainResult],
        default: Callable[[], ConfigT],
        doc: str,
    ) -> None:
        self._run = run
        self._default = default
        self.__doc__ = doc

    def __call__(
        self,
        env: BatchEnv,
        config: ConfigT | None = None,
        *,
        seed: int = 0,
        steps: int = 100_000,
        out_dir: Path | None = None,
        callbacks: Sequence[Callback] = (),
        checkpoint_every: int = 0,
        resume: bool = False,
        time_limit_s: float | None = None,
        excluded_s: Callable[[], float] | None = None,
    ) -> TrainResult:
        """Train on ``env`` (see the class docstring)."""
        options = RunOptions(
            seed, steps, out_dir, callbacks, checkpoint_every, resume, time_limit_s, excluded_s
        )
        return self._run(env, config if config is not None else self._default(), options)


@dataclass(eq=False)
class TrainResult:
    """What a neural learner's ``train`` returns.

    Attributes:
        algo: algorithm name.
        steps: environment steps done in total (worlds x batched steps, resumes included).
        updates: gradient phases done in total.
        returns: agent -> undiscounted return of each finished episode.
        deliveries: agent -> deliveries in each finished episode (0 when the env reports none).
        peaks: agent -> largest ``|r|`` the learner trained on in each finished episode.
        episode_end_steps: the step at which each episode ended.
        losses: name -> value after each update.
        policy: the trained module mapping ``(..., N, D)`` observations to ``(..., N, A)``
            logits or Q-values (agent id appended inside).
        config: resolved hyperparameters (JSON-ready).
        wall_s: seconds spent in this call.
    """

    algo: str
    steps: int
    updates: int
    returns: dict[str, list[float]]
    deliveries: dict[str, list[int]]
    peaks: dict[str, list[float]]
    episode_end_steps: list[int]
    losses: dict[str, list[float]]
    policy: nn.Module
    config: dict[str, Any]
    wall_s: float

    @property
    def samples_per_s(self) -> float:
        """Environment steps (agent-world steps counted once per world) per second of this call."""
        return self.steps_this_call / self.wall_s if self.wall_s > 0 else 0.0

    steps_this_call: int = 0


# --------------------------------------------------------------------------- checkpoints


CHECKPOINT = "checkpoint.pt"


def emit_update(
    callbacks: Sequence[Callback],
    step: int,
    losses: dict[str, list[float]],
    updates: int,
    *,
    window: int = 50,
    policy: nn.Module | None = None,
) -> None:
    """Report an ``update`` event: each loss's mean over its last ``window`` values."""
    scalars = {f"train/loss/{k}": float(np.mean(v[-window:])) for k, v in losses.items() if v}
    emit(callbacks, Event("update", step, scalars | {"train/updates": float(updates)}, policy))


def descend(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    params: Iterable[nn.Parameter],
    max_grad_norm: float,
) -> None:
    """One gradient step on ``loss``: zero, backpropagate, clip ``params`` to the norm, step."""
    optimizer.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()


def polyak(src: nn.Module, dst: nn.Module, tau: float) -> None:
    """Move the target ``dst`` towards ``src``: ``dst = (1 - tau) * dst + tau * src``."""
    with torch.no_grad():
        for p, tp in zip(src.parameters(), dst.parameters(), strict=True):
            tp.mul_(1.0 - tau).add_(p, alpha=tau)


class TrainLoop:
    """The bookkeeping every training loop keeps: steps, updates, losses, curves, checkpoints.

    A checkpoint holds ``algo``, each of ``parts`` under its key (modules, optimizers,
    :class:`ValueNorm`: their ``state_dict``; torch generators: their state; a part that is None
    is saved as None and not restored), the :class:`EpisodeTracker` (``tracker``), ``losses``,
    ``steps``, ``updates``, the resolved ``config`` and what ``extra()`` returns.

    Args:
        algo: name recorded in results and checkpoints.
        env: the batched env (for the tracker's worlds and agents).
        run: the run's options.
        losses: the loss curves' names.
        parts: what a checkpoint saves and a resume restores, by checkpoint key.
        config: the resolved config.
        t0: ``perf_counter()`` when the call started.
        extra: more checkpoint entries, computed at each checkpoint (restored by the caller
            from what :meth:`resume` returns).
    """

    def __init__(
        self,
        algo: str,
        env: BatchEnv,
        run: RunOptions,
        *,
        losses: Sequence[str],
        parts: dict[str, Any],
        config: dict[str, Any],
        t0: float,
        extra: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.algo = algo
        self.run = run
        self.num_envs = env.num_envs
        self.tracker = EpisodeTracker(env.num_envs, [f"robot_{i}" for i in range(env.n_robots)])
        self.losses: dict[str, list[float]] = {k: [] for k in losses}
        self.parts = {**parts, "tracker": self.tracker}
        self.config = config
        self.t0 = t0
        self.extra = extra
        self.steps = self.updates = self.start_steps = 0

    def resume(self, note: str = "") -> dict[str, Any] | None:
        """Restore the parts, curves and counters from the run's checkpoint, if it resumes.

        Returns:
            The checkpoint (None: a fresh run), for what ``extra`` saved.
        """
        ck = self.run.resume_checkpoint(self.algo)
        if ck is None:
            return None
        for key, part in self.parts.items():
            if part is None:
                continue
            if isinstance(part, torch.Generator):
                part.set_state(ck[key])
            else:
                part.load_state_dict(ck[key])
        self.losses = ck["losses"]
        self.steps, self.updates = int(ck["steps"]), int(ck["updates"])
        self.start_steps = self.steps
        log.info("%s: resumed from %s at step %d%s", self.algo, self.run.out_dir, self.steps, note)
        return ck

    def reset(self, env: BatchEnv, env_seq: np.random.SeedSequence) -> NDArray[np.float32]:
        """Reset ``env`` for this call and return the observations.

        A resumed run starts fresh episodes from a seed that depends on where it resumes.
        """
        obs, _ = env.reset(seed=int(env_seq.generate_state(self.updates + 1)[-1]))
        return obs

    def going(self) -> bool:
        """Whether to take another step: short of ``run.steps`` and of the time limit."""
        return self.steps < self.run.steps and not self.run.out_of_time(self.t0)

    def record(
        self,
        rewards: NDArray[np.floating],
        done: NDArray[np.bool_],
        info: dict[str, Any],
        learned: NDArray[np.floating],
    ) -> None:
        """Count one batched step of every world and report the episodes it finished."""
        self.steps += self.num_envs
        record_episodes(self.tracker, self.run.callbacks, rewards, done, self.steps, info, learned)

    def updated(
        self, *, every: int = 50, window: int = 50, policy: nn.Module | None = None
    ) -> None:
        """Count one update (its losses appended); report every ``every``; checkpoint when due."""
        self.updates += 1
        if self.updates % every == 0:
            emit_update(
                self.run.callbacks,
                self.steps,
                self.losses,
                self.updates,
                window=window,
                policy=policy,
            )
        if self.run.checkpoint_due(self.updates):
            self.checkpoint()

    def checkpoint(self) -> None:
        """Save the checkpoint to ``run.out_dir`` and report it."""
        assert self.run.out_dir is not None
        state: dict[str, Any] = {"algo": self.algo}
        for key, part in self.parts.items():
            if part is None:
                state[key] = None
            elif isinstance(part, torch.Generator):
                state[key] = part.get_state()
            else:
                state[key] = part.state_dict()
        state |= {
            **(self.extra() if self.extra is not None else {}),
            "losses": self.losses,
            "steps": self.steps,
            "updates": self.updates,
            "config": self.config,
        }
        save_checkpoint(self.run.out_dir, state)
        emit(self.run.callbacks, Event("checkpoint", self.steps))

    def finish(self, policy: nn.Module) -> TrainResult:
        """The final checkpoint (with ``out_dir``) and the run's result."""
        if self.run.out_dir is not None:
            self.checkpoint()
        tr = self.tracker
        result = TrainResult(
            algo=self.algo,
            steps=self.steps,
            updates=self.updates,
            returns=tr.returns,
            deliveries=tr.deliveries,
            peaks=tr.peaks,
            episode_end_steps=tr.end_steps,
            losses=self.losses,
            policy=policy,
            config=self.config,
            wall_s=time.perf_counter() - self.t0,
            steps_this_call=self.steps - self.start_steps,
        )
        log.info(
            "%s: %d steps, %d updates, %.1f s", self.algo, self.steps, self.updates, result.wall_s
        )
        return result


def save_checkpoint(out_dir: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``out_dir/checkpoint.pt`` atomically (temp file, then rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / CHECKPOINT
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
    os.close(fd)
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(out_dir: Path) -> dict[str, Any] | None:
    """The checkpoint in ``out_dir``, or None when there is none."""
    path = out_dir / CHECKPOINT
    if not path.exists():
        return None
    state: dict[str, Any] = torch.load(path, weights_only=False)
    return state
