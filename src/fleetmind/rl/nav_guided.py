"""A residual navigation policy over guidance costs, and the learner that improves it live.

The policy's logits are ``net(obs) + prior``: ``prior`` is ``-scale`` times each action's cost
relative to waiting, as the dispatch tier's guidance executor computes it (distance on the
crisscross highway map plus traffic costs; walls masked out). The network's output layer starts
at zero, so a fresh policy ranks exactly as the guidance executor does (Silver et al., 2018,
"Residual policy learning": the learner only has to find where to deviate from a good
controller). The observation is the navigation policy's (:mod:`fleetmind.rl.nav`, 111 floats),
with the five heuristic slots holding the guidance cost deltas instead.

:class:`OnlineLearner` learns while the fleet runs: actions are sampled from the policy, the
reward of a robot is its progress toward its target (cells of true distance gained) plus
``team`` times the fleet's mean progress, and every ``every`` ticks one PPO update (clipped
surrogate, GAE) runs on the window just played. A guard compares each window's deliveries with
the window before the last update and rolls that update back when deliveries fell by more than
``guard``; the shield executes every move, so no update can cause a collision. With ``lag``
the update runs on a thread beside the control loop on a copy of the policy, and its weights
take over ``lag`` ticks after the window closed (the loop waits only if it is not done by then):
a live fleet keeps ticking while it learns, and the run stays repeatable, since when the
weights change never depends on how fast the update ran.

- :class:`GuidedPolicy`: actor and critic, ``save`` / ``load`` (``.pt`` beside ``.json``).
- :func:`default_guided_path`: the policy shipped in ``fleetmind/data/nav_guided.pt``.
- :class:`LearnConfig`, :class:`OnlineLearner`: the online learner and its curve.
"""

from __future__ import annotations

import copy
import importlib.resources
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch
from numpy.typing import NDArray

import fleetmind
from fleetmind.errors import check_range
from fleetmind.rl.nav import PolicyFile
from fleetmind.rl.neural import base
from fleetmind.rl.neural.buffers import gae
from fleetmind.sim import observe

FORMAT = "fleetmind-guided-policy-v1"
PRIOR_SCALE = 4.0
"""Logits per unit of guidance cost. A closer free move then beats waiting by e^4 (98%) and an
occupied closer cell (cost +0.3) loses to a free one 23:77: exploration stays near guidance."""
MASKED = -1.0e4
"""Prior of a move into a wall: never sampled, always ranked last."""


def default_guided_path() -> Path:
    """The guided policy shipped with fleetmind (``fleetmind/data/nav_guided.pt``)."""
    return Path(str(importlib.resources.files("fleetmind") / "data" / "nav_guided.pt"))


def prior_of(cost: NDArray[np.floating], scale: float = PRIOR_SCALE) -> NDArray[np.float32]:
    """``(M, 5)`` guidance costs (``inf`` for walls, waiting in column 0) -> prior logits."""
    blocked = ~np.isfinite(cost)
    rel = np.where(blocked, 0.0, cost - cost[:, :1])
    return np.where(blocked, MASKED, -scale * rel).astype(np.float32)


def features(obs: NDArray[np.float32], cost: NDArray[np.floating]) -> NDArray[np.float32]:
    """Write the guidance cost deltas into the heuristic slots of ``(M, 111)`` observations.

    Moves into walls read 2, as the plain heuristic writes them; deltas are clipped to [-2, 2].
    """
    blocked = ~np.isfinite(cost)
    rel = np.clip(np.where(blocked, 0.0, cost - cost[:, :1]), -2.0, 2.0)
    obs[:, -observe.N_HEURISTIC :] = np.where(blocked, 2.0, rel)
    return obs


class GuidedPolicy(torch.nn.Module, PolicyFile):
    """Residual actor (zero-initialised output) and critic over the guided observation.

    Args:
        obs_size: observation length (111 for radius 2).
        hidden: hidden layer widths of both networks.
        scale: the prior's logits per unit of guidance cost.
        seed: seed of the initial weights.
        metadata: what :meth:`save` writes beside the weights.
    """

    file_format = FORMAT
    file_what = "guided policy"

    def __init__(
        self,
        obs_size: int = observe.local_size(2, heuristic=True),
        hidden: tuple[int, ...] = (64, 64),
        *,
        scale: float = PRIOR_SCALE,
        seed: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.obs_size = obs_size
        self.hidden = tuple(hidden)
        self.scale = float(scale)
        # Output gain 0: the residual starts at zero, so the fresh policy is the guidance order.
        with torch.random.fork_rng():
            torch.manual_seed(seed)  # the hidden layers' init is part of a seeded run
            self.actor = base.mlp(obs_size, observe.N_HEURISTIC, hidden, out_gain=0.0)
            self.critic = base.mlp(obs_size, 1, hidden, out_gain=1.0)
        self.metadata: dict[str, Any] = {
            "format": FORMAT,
            "obs_size": obs_size,
            "hidden": list(self.hidden),
            "scale": self.scale,
            "radius": 2,
            "fleetmind_version": fleetmind.__version__,
            **(metadata or {}),
        }

    def logits(self, obs: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
        """``(M, 5)`` logits: the residual plus the guidance prior."""
        out: torch.Tensor = self.actor(obs) + prior
        return out

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``(M,)`` values."""
        out: torch.Tensor = self.critic(obs).squeeze(-1)
        return out

    def greedy(self, obs: NDArray[np.float32], prior: NDArray[np.float32]) -> NDArray[np.float32]:
        """``(M, 5)`` logits as numpy (no gradient): what the executor ranks by."""
        with torch.no_grad():
            out: NDArray[np.float32] = self.logits(
                torch.from_numpy(obs), torch.from_numpy(prior)
            ).numpy()
        return out

    def policy_weights(self) -> dict[str, Any]:
        """The state dict of both networks."""
        return self.state_dict()

    @classmethod
    def from_file(cls, path: Path, meta: dict[str, Any], blob: dict[str, Any]) -> Self:
        """The policy of a guided policy file, in inference mode."""
        policy = cls(
            int(meta["obs_size"]),
            tuple(int(x) for x in meta["hidden"]),
            scale=float(meta["scale"]),
            metadata=meta,
        )
        policy.load_state_dict(blob["state_dict"])
        return policy.eval()


@dataclass(frozen=True)
class LearnConfig:
    """Settings of :class:`OnlineLearner` (``fleetmind run --learn``).

    Attributes:
        every: ticks per window; one update at the end of each.
        epochs: PPO passes over a window.
        minibatch: samples per gradient step.
        lr: Adam step size.
        gamma: discount per tick.
        lam: GAE lambda.
        clip: PPO ratio clip.
        ent_coef: entropy bonus.
        team: weight of the fleet's mean progress in every robot's reward.
        guard: roll back an update when the next window's deliveries fall below
            ``(1 - guard)`` times the window before it; ``None``: never roll back.
        seed: seed of the action samples and minibatch order.
        lag: 0: each update runs inside the tick that closes its window; ``N``: beside the
            loop, its weights applied ``N`` ticks later (``0 < N < every``).
    """

    every: int = 250
    epochs: int = 8
    minibatch: int = 4096
    lr: float = 2e-3
    gamma: float = 0.95
    lam: float = 0.9
    clip: float = 0.2
    ent_coef: float = 0.0
    team: float = 1.0
    guard: float | None = 0.03
    seed: int = 0
    lag: int = 0

    def __post_init__(self) -> None:
        for name in ("every", "epochs", "minibatch"):
            check_range(name, getattr(self, name), low=1, where="learn")
        check_range("gamma", self.gamma, above=0, high=1, where="learn")
        check_range("lam", self.lam, low=0, high=1, where="learn")
        if self.guard is not None:
            check_range("guard", self.guard, low=0, below=1, where="learn")
        check_range("lag", self.lag, low=0, below=self.every, where="learn")


@dataclass
class _Window:
    """One window of play: per tick, every robot's inputs, action and outcome."""

    obs: list[NDArray[np.float32]] = field(default_factory=list)
    prior: list[NDArray[np.float32]] = field(default_factory=list)
    action: list[NDArray[np.int64]] = field(default_factory=list)
    logp: list[NDArray[np.float32]] = field(default_factory=list)
    value: list[NDArray[np.float32]] = field(default_factory=list)
    active: list[NDArray[np.bool_]] = field(default_factory=list)
    reward: list[NDArray[np.float32]] = field(default_factory=list)
    deliveries: int = 0
    start: int = 0


@dataclass(eq=False)
class _Pending:
    """An update running beside the loop, and the tick its weights take over."""

    row: dict[str, Any]
    due: int
    policy: GuidedPolicy
    opt: torch.optim.Optimizer
    thread: threading.Thread | None = None
    result: dict[str, float] | None = None
    error: Exception | None = None


class OnlineLearner:
    """Samples the fleet's actions from a :class:`GuidedPolicy` and updates it every window.

    The executor calls :meth:`act` once per tick (all robots, with the active mask) and
    :meth:`outcome` once the tick's moves are known (at the next call), which closes the step.

    Args:
        policy: the policy to improve (updated in place).
        config: the learner's settings.
    """

    def __init__(self, policy: GuidedPolicy, config: LearnConfig | None = None) -> None:
        self.policy = policy
        self.config = config or LearnConfig()
        self._gen = torch.Generator().manual_seed(self.config.seed)
        self._opt = torch.optim.Adam(policy.parameters(), lr=self.config.lr, eps=1e-5)
        self._win = _Window()
        self._reference: float | None = None
        self._backup: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.curve: list[dict[str, Any]] = []
        self.updates = 0
        self.rollbacks = 0
        self.waited_s = 0.0
        self._pending: _Pending | None = None

    def act(
        self, obs: NDArray[np.float32], prior: NDArray[np.float32], active: NDArray[np.bool_]
    ) -> NDArray[np.int64]:
        """``(N,)`` sampled actions of every robot (idle robots' samples are not learned from)."""
        with torch.no_grad():
            o, p = torch.from_numpy(obs), torch.from_numpy(prior)
            logp = torch.log_softmax(self.policy.logits(o, p), dim=-1)
            a = torch.multinomial(logp.exp(), 1, generator=self._gen).squeeze(-1)
            w = self._win
            w.obs.append(obs)
            w.prior.append(prior)
            w.action.append(a.numpy().astype(np.int64))
            w.logp.append(logp.gather(-1, a[:, None]).squeeze(-1).numpy())
            w.value.append(self.policy.value(o).numpy())
            w.active.append(active.copy())
        return w.action[-1]

    def outcome(
        self, progress: NDArray[np.floating], deliveries: int, tick: int
    ) -> dict[str, Any] | None:
        """Close the last :meth:`act`: each robot's progress and the tick's deliveries.

        Returns the update record when this step ended a window (the update ran), else None.
        """
        if self._pending is not None and tick >= self._pending.due:
            self._apply_pending(tick)
        w = self._win
        active = w.active[-1]
        progress = np.where(active, progress, 0.0)
        team = float(progress[active].mean()) if active.any() else 0.0
        w.reward.append((progress + self.config.team * team).astype(np.float32))
        w.deliveries += int(deliveries)
        if len(w.reward) < self.config.every:
            return None
        return self._end_window(tick)

    def _end_window(self, tick: int) -> dict[str, Any]:
        """Guard the last update against this window, then learn from this window."""
        w = self._win
        rate = w.deliveries / len(w.reward)
        row: dict[str, Any] = {
            "start": w.start,
            "end": tick,
            "deliveries": w.deliveries,
            "deliveries_per_tick": rate,
            "version": self.updates - self.rollbacks,
            "rolled_back": False,
        }
        cfg = self.config
        limit = None
        if self._reference is not None and cfg.guard is not None:
            limit = (1.0 - cfg.guard) * self._reference
        backup = self._backup
        if backup is not None and limit is not None and rate < limit:
            # The last update lowered throughput: restore the weights before it, and do not
            # learn from play under the rejected weights.
            self.policy.load_state_dict(backup[0])
            self._opt.load_state_dict(backup[1])
            self.rollbacks += 1
            row["rolled_back"] = True
            self._backup = None
            self.curve.append(row)
            self._win = _Window(start=tick)
            return row
        self._reference = rate
        self._backup = (
            copy.deepcopy(self.policy.state_dict()),
            copy.deepcopy(self._opt.state_dict()),
        )
        if cfg.lag:
            self._start_pending(row, tick)
        else:
            row.update(self._update(self.policy, self._opt, self._win, self._gen))
        self.updates += 1
        self.curve.append(row)
        self._win = _Window(start=tick)
        return row

    def _start_pending(self, row: dict[str, Any], tick: int) -> None:
        """Start this window's update on a copy of the policy, on a thread."""
        train = copy.deepcopy(self.policy)
        opt = torch.optim.Adam(train.parameters(), lr=self.config.lr, eps=1e-5)
        opt.load_state_dict(self._opt.state_dict())
        # Its own stream: the loop's thread keeps drawing the fleet's samples meanwhile.
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + self.updates + 1)
        pending = _Pending(row=row, due=tick + self.config.lag, policy=train, opt=opt)
        win = self._win

        def work() -> None:
            try:
                pending.result = self._update(train, opt, win, gen)
            except Exception as exc:  # raised again on the loop's thread when applied
                pending.error = exc

        pending.thread = threading.Thread(target=work, name="nav-learner", daemon=True)
        pending.thread.start()
        self._pending = pending

    def _apply_pending(self, tick: int) -> None:
        """Wait for the update on its thread (if still running) and take its weights."""
        p, self._pending = self._pending, None
        assert p is not None
        assert p.thread is not None
        t0 = time.perf_counter()
        p.thread.join()
        waited = time.perf_counter() - t0
        self.waited_s += waited
        if p.error is not None:
            raise p.error
        p.row.update(p.result or {})
        p.row["applied_tick"] = tick
        p.row["wait_s"] = waited
        self.policy.load_state_dict(p.policy.state_dict())
        self._opt.load_state_dict(p.opt.state_dict())

    def _update(
        self,
        policy: GuidedPolicy,
        opt: torch.optim.Optimizer,
        w: _Window,
        gen: torch.Generator,
    ) -> dict[str, float]:
        """One PPO update (clipped surrogate, GAE) of ``policy`` on window ``w``."""
        cfg = self.config
        values = np.stack(w.value)  # (T, N)
        rewards = np.stack(w.reward)
        active = np.stack(w.active)
        # Lifelong play: no terminal step; the last tick bootstraps from its own value.
        next_values = np.concatenate([values[1:], values[-1:]], axis=0)
        none = np.zeros_like(active)
        adv, ret = gae(rewards, values, next_values, none, none, cfg.gamma, cfg.lam)
        keep = active.reshape(-1)
        obs = torch.from_numpy(np.stack(w.obs).reshape(-1, policy.obs_size)[keep])
        prior = torch.from_numpy(np.stack(w.prior).reshape(-1, observe.N_HEURISTIC)[keep])
        act = torch.from_numpy(np.stack(w.action).reshape(-1)[keep])
        old_logp = torch.from_numpy(np.stack(w.logp).reshape(-1)[keep])
        a = torch.from_numpy(adv.reshape(-1)[keep].astype(np.float32))
        a = (a - a.mean()) / (a.std() + 1e-8)
        r = torch.from_numpy(ret.reshape(-1)[keep].astype(np.float32))
        n = len(act)
        losses: list[float] = []
        kls: list[float] = []
        policy.train()
        for _ in range(cfg.epochs):
            order = torch.randperm(n, generator=gen)
            for i in range(0, n, cfg.minibatch):
                b = order[i : i + cfg.minibatch]
                logp = torch.log_softmax(policy.logits(obs[b], prior[b]), dim=-1)
                log_ratio = logp.gather(-1, act[b, None]).squeeze(-1) - old_logp[b]
                ratio = log_ratio.exp()
                surrogate = torch.min(ratio * a[b], ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a[b])
                v_loss = 0.5 * ((policy.value(obs[b]) - r[b]) ** 2).mean()
                entropy = -(logp.exp() * logp).sum(-1).mean()
                loss = -surrogate.mean() + 0.5 * v_loss - cfg.ent_coef * entropy
                base.descend(opt, loss, list(policy.parameters()), 0.5)
                losses.append(float(loss.item()))
                kls.append(float(((ratio - 1) - log_ratio).mean().item()))
        policy.eval()
        return {
            "samples": n,
            "loss": float(np.mean(losses)) if losses else 0.0,
            "approx_kl": float(np.mean(kls)) if kls else 0.0,
        }

    def stats(self) -> dict[str, Any]:
        """The learner's record: settings, updates, rollbacks and the per-window curve.

        Read only (the loop may ask mid-run): an update whose weights have not taken over
        yet has no ``applied_tick`` in its row.
        """
        return {
            "waited_s": self.waited_s,
            "learn": asdict(self.config),
            "updates": self.updates,
            "rollbacks": self.rollbacks,
            "curve": list(self.curve),
        }
