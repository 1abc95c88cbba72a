"""Batch RL on a recorded run's transitions, with off-policy estimates (no new interaction).

:func:`rl_replay` trains a tabular learner in batch on the recorded transitions:
batch-constrained fitted Q iteration (greedy only among actions the data holds, which keeps it
off unseen actions) on the state ``(target offset clipped to ±4, carrying, has task)``,
independently per robot and pooled; then per-agent reward-curve variance and the doctor's
findings (:func:`fleetmind.rl.diagnostics.diagnose`), and off-policy estimates of the learned
policy's value against the behaviour policy: tabular fitted Q evaluation (FQE) and weighted
importance sampling (WIS) over fixed-length segments, with the behaviour policy estimated from
action counts and the learned policy softened by ``epsilon``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.eval.store import (
    load_episode,
)

# ---------------------------------------------------------------------- RL replay
CLIP = 4
N_ACTIONS = 5
N_STATES = (2 * CLIP + 1) ** 2 * 4


def encode_states(
    cells: NDArray[np.int64], targets: NDArray[np.int64], carrying: NDArray[Any], task: NDArray[Any]
) -> NDArray[np.int64]:
    """Tabular state ids: target offset (clipped to ±4), carrying, has task.

    Args:
        cells: ``(T, 2)`` cells.
        targets: ``(T, 2)`` target cells.
        carrying: ``(T,)`` loaded.
        task: ``(T,)`` has a task.
    """
    d = np.clip(targets - cells, -CLIP, CLIP) + CLIP
    flags = carrying.astype(np.int64) * 2 + task.astype(np.int64)
    states: NDArray[np.int64] = (d[:, 0] * (2 * CLIP + 1) + d[:, 1]) * 4 + flags
    return states


@dataclass(frozen=True)
class Transitions:
    """Recorded transitions of one or more robots (arrays of equal length T)."""

    robot: NDArray[np.int64]
    s: NDArray[np.int64]
    a: NDArray[np.int64]
    r: NDArray[np.float64]
    s2: NDArray[np.int64]
    done: NDArray[np.bool_]

    def subset(self, mask: NDArray[np.bool_]) -> Transitions:
        """The transitions where ``mask`` holds."""
        return Transitions(
            self.robot[mask],
            self.s[mask],
            self.a[mask],
            self.r[mask],
            self.s2[mask],
            self.done[mask],
        )


def transitions(table: pa.Table) -> Transitions:
    """Consecutive-tick transitions per robot from the episode rows (rewards scaled to [-1, 1]).

    The state at tick ``t`` uses the target, load and task recorded after tick ``t - 1`` (what the
    robot knew when it moved; the episode rows hold them after the move).

    Raises:
        ConfigError: the run was recorded without target columns.
    """
    if "target_row" not in table.column_names:
        raise ConfigError("episode.parquet has no target_row/target_col: re-record the run")

    def col(name: str) -> NDArray[Any]:
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False))

    robot, tick = col("robot").astype(np.int64), col("tick").astype(np.int64)
    order = np.lexsort((tick, robot))
    robot, tick = robot[order], tick[order]
    cells = np.stack([col("row"), col("col")], axis=1).astype(np.int64)[order]
    targets = np.stack([col("target_row"), col("target_col")], axis=1).astype(np.int64)[order]
    carrying = col("carrying").astype(bool)[order]
    task = col("has_task").astype(bool)[order]
    action = col("executed").astype(np.int64)[order]
    reward = col("reward").astype(np.float64)[order]
    n = len(tick)
    done = col("done").astype(bool)[order] if "done" in table.column_names else np.zeros(n, bool)
    prev = np.roll(np.arange(n), 1)
    has_prev = (robot[prev] == robot) & (tick[prev] == tick - 1)
    pre_targets = np.where(has_prev[:, None], targets[prev], cells)
    pre_carrying = np.where(has_prev, carrying[prev], False)
    pre_task = np.where(has_prev, task[prev], False)
    states = encode_states(cells, pre_targets, pre_carrying, pre_task)
    nxt = np.roll(np.arange(n), -1)
    same = (robot[nxt] == robot) & (tick[nxt] == tick + 1)
    keep = same | done
    scale = max(1.0, float(np.abs(reward).max(initial=0.0)))
    return Transitions(
        robot=robot[keep],
        s=states[keep],
        a=action[keep],
        r=reward[keep] / scale,
        s2=np.where(same, states[nxt], states)[keep],
        done=(done & ~same)[keep],
    )


def fitted_q(
    tr: Transitions, *, gamma: float, iterations: int, policy: NDArray[np.int64] | None = None
) -> NDArray[np.float64]:
    """Tabular fitted Q iteration (``policy`` None) or fitted Q evaluation of ``policy``.

    Each iteration sets Q(s, a) to the mean target over the recorded (s, a) pairs, target
    ``r + gamma * Q(s', a')`` with ``a'`` greedy among seen actions (FQI) or ``policy[s']`` (FQE).
    Unseen (s, a) stay at ``-inf`` for the greedy choice (batch-constrained).
    """
    sa = tr.s * N_ACTIONS + tr.a
    counts = np.bincount(sa, minlength=N_STATES * N_ACTIONS).astype(np.float64)
    seen = (counts > 0).reshape(N_STATES, N_ACTIONS)
    q = np.zeros((N_STATES, N_ACTIONS), dtype=np.float64)
    for _ in range(iterations):
        if policy is None:
            nxt = np.where(seen, q, -np.inf).max(axis=1)
            nxt = np.where(np.isfinite(nxt), nxt, 0.0)[tr.s2]
        else:
            nxt = q[tr.s2, policy[tr.s2]]
        target = tr.r + gamma * (~tr.done) * nxt
        sums = np.bincount(sa, weights=target, minlength=N_STATES * N_ACTIONS)
        q = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0).reshape(N_STATES, N_ACTIONS)
    return q


def greedy(q: NDArray[np.float64], tr: Transitions) -> NDArray[np.int64]:
    """The greedy policy among actions seen in ``tr`` (WAIT where a state was never seen)."""
    counts = np.bincount(tr.s * N_ACTIONS + tr.a, minlength=N_STATES * N_ACTIONS)
    seen = counts.reshape(N_STATES, N_ACTIONS) > 0
    pol: NDArray[np.int64] = np.where(seen, q, -np.inf).argmax(axis=1).astype(np.int64)
    return pol


def behaviour_policy(tr: Transitions) -> NDArray[np.float64]:
    """``pi_b(a | s)`` from action counts (uniform where a state was never seen)."""
    counts = np.bincount(tr.s * N_ACTIONS + tr.a, minlength=N_STATES * N_ACTIONS).reshape(
        N_STATES, N_ACTIONS
    )
    tot = counts.sum(axis=1, keepdims=True)
    probs: NDArray[np.float64] = np.where(tot > 0, counts / np.maximum(tot, 1), 1.0 / N_ACTIONS)
    return probs


def wis(
    tr: Transitions,
    target: NDArray[np.float64],
    behaviour: NDArray[np.float64],
    *,
    gamma: float,
    segment: int,
) -> dict[str, float]:
    """Weighted importance sampling over fixed-length segments of each robot's trajectory.

    Args:
        tr: transitions.
        target: ``pi(a | s)`` of the evaluated policy, shape ``(states, 5)``.
        behaviour: ``pi_b(a | s)``, same shape.
        gamma: discount.
        segment: segment length in ticks.

    Returns:
        ``value`` (WIS estimate of the discounted segment return), ``behaviour_value`` (the
        on-policy mean return), ``ess`` (effective sample size) and ``segments``.
    """
    weights, returns = [], []
    for robot in np.unique(tr.robot):
        idx = np.flatnonzero(tr.robot == robot)
        for lo in range(0, len(idx) - segment + 1, segment):
            seg = idx[lo : lo + segment]
            ratio = target[tr.s[seg], tr.a[seg]] / behaviour[tr.s[seg], tr.a[seg]]
            weights.append(float(np.prod(ratio)))
            returns.append(float(np.sum(tr.r[seg] * gamma ** np.arange(len(seg)))))
    w = np.asarray(weights)
    g = np.asarray(returns)
    if not len(w):
        return {"value": float("nan"), "behaviour_value": float("nan"), "ess": 0.0, "segments": 0}
    total = w.sum()
    return {
        "value": float((w * g).sum() / total) if total > 0 else float("nan"),
        "behaviour_value": float(g.mean()),
        "ess": float(total**2 / (w**2).sum()) if total > 0 else 0.0,
        "segments": float(len(w)),
    }


def reward_curves(table: pa.Table, window: int) -> dict[str, NDArray[np.float64]]:
    """Per-robot reward summed over consecutive windows of ``window`` ticks."""
    robot = table.column("robot").to_numpy()
    tick = table.column("tick").to_numpy().astype(np.int64)
    reward = table.column("reward").to_numpy().astype(np.float64)
    bins = int(tick.max()) // window + 1
    out = {}
    for r in np.unique(robot):
        m = robot == r
        curve = np.bincount(tick[m] // window, weights=reward[m], minlength=bins)
        out[f"robot_{int(r)}"] = curve.astype(np.float64)
    return out


def rl_replay(
    run_dir: str | Path,
    *,
    gamma: float = 0.95,
    iterations: int = 60,
    epsilon: float = 0.05,
    segment: int = 20,
    window: int = 25,
) -> dict[str, Any]:
    """Batch RL on the recorded transitions; variance of per-agent curves; off-policy value.

    Args:
        run_dir: the recorded run folder.
        gamma: discount.
        iterations: fitted Q iterations.
        epsilon: the learned policy's softening for importance sampling.
        segment: WIS segment length (ticks).
        window: ticks per point of the per-agent reward curves.

    Returns:
        ``pooled`` (learned on all robots), ``per_agent`` (independent learners), ``curves``
        (per-robot reward per window), ``curve_variance``, ``findings`` of the doctor.
    """
    from fleetmind.rl.diagnostics import diagnose

    table = load_episode(run_dir)
    tr = transitions(table)

    def evaluate(data: Transitions) -> dict[str, Any]:
        q = fitted_q(data, gamma=gamma, iterations=iterations)
        pol = greedy(q, data)
        pi = np.full((N_STATES, N_ACTIONS), epsilon / N_ACTIONS)
        pi[np.arange(N_STATES), pol] += 1.0 - epsilon
        pb = behaviour_policy(data)
        q_pi = fitted_q(data, gamma=gamma, iterations=iterations, policy=pol)
        starts = data.s
        fqe = float(q_pi[starts, pol[starts]].mean()) if len(starts) else float("nan")
        # Behaviour value by FQE with the expected next value under pi_b.
        sa = data.s * N_ACTIONS + data.a
        counts = np.bincount(sa, minlength=N_STATES * N_ACTIONS).astype(np.float64)
        qb = np.zeros((N_STATES, N_ACTIONS))
        for _ in range(iterations):
            nxt = (pb * qb).sum(axis=1)[data.s2]
            sums = np.bincount(
                sa, weights=data.r + gamma * (~data.done) * nxt, minlength=N_STATES * N_ACTIONS
            )
            qb = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0).reshape(
                N_STATES, N_ACTIONS
            )
        fqe_b = float((pb * qb).sum(axis=1)[starts].mean()) if len(starts) else float("nan")
        return {
            "transitions": len(data.s),
            "states_seen": len(np.unique(data.s)),
            "agreement_with_behaviour": float(np.mean(pol[data.s] == data.a))
            if len(data.s)
            else 0.0,
            "fqe_value": fqe,
            "fqe_behaviour_value": fqe_b,
            "fqi_greedy_value": float(q[starts, pol[starts]].mean()) if len(starts) else 0.0,
            "wis": wis(data, pi, pb, gamma=gamma, segment=segment),
        }

    per_agent = {f"robot_{int(r)}": evaluate(tr.subset(tr.robot == r)) for r in np.unique(tr.robot)}
    curves = reward_curves(table, window)
    variance = {k: float(np.var(v)) for k, v in curves.items()}
    totals = np.array([float(v.sum()) for v in curves.values()])
    findings: list[dict[str, Any]] = []
    try:
        findings = [
            {"kind": f.kind, "agents": list(f.agents), "message": f.message, "evidence": f.evidence}
            for f in diagnose(curves)
        ]
    except ConfigError as exc:
        findings = [{"kind": "error", "agents": [], "message": str(exc), "evidence": {}}]
    return {
        "gamma": gamma,
        "pooled": evaluate(tr),
        "per_agent": per_agent,
        "curves": {k: v.tolist() for k, v in curves.items()},
        "curve_window": window,
        "curve_variance": variance,
        "reward_spread": {
            "mean": float(totals.mean()) if len(totals) else 0.0,
            "std": float(totals.std()) if len(totals) else 0.0,
        },
        "findings": findings,
    }
