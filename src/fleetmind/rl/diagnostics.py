"""Plain-words diagnostics of multi-agent training curves (FIELD-NOTES §3.3, §5.1, §5.2, §5.4).

Input: per-agent reward curves (agent -> one value per episode), and optionally the same agents
trained alone (``solo``), per-agent action-entropy curves, the team curve and per-step reward
samples. :func:`diagnose` returns :class:`Finding` objects; each carries the numbers it rests on.

How each finding is decided (all thresholds live in :class:`Thresholds`):

- ``non_stationarity`` (§5.1): an agent's own reward oscillates when trained together. On the
  second half of the curve, remove the linear trend, smooth with a moving average of ``window``
  episodes, and compare the spread of the smoothed curve (``swing``) to what episode-to-episode
  noise alone would leave after smoothing (``noise_floor`` = noise std / sqrt(window), the noise
  std estimated from first differences, which slow swings barely touch). It fires when
  ``swing / noise_floor >= oscillation_ratio`` and the smoothed curve reverses at least
  ``min_reversals`` times (a reversal: crossing from above +noise_floor to below -noise_floor or
  back). When ``solo`` curves are given the agent must also be stable alone (ratio below the
  threshold); an agent that oscillates alone too has a problem of its own, not non-stationarity.
- ``free_riding`` (§5.2): the team curve rises (last quarter mean above first quarter mean by at
  least ``z`` standard errors) while one agent's own reward falls by ``z`` standard errors (and by
  at least ``min_drop_fraction`` of its early level or of the team's rise), or its action entropy
  collapses: late entropy at most ``entropy_ratio`` times the largest late entropy of the others
  and at most half its own early entropy. In a race a single winner is the team optimum
  (FIELD-NOTES §3.2), so there this finding describes the yielding agent rather than a defect;
  in lifelong tasks an idle agent costs the team.
- ``reward_scale`` (§3.3): a reward outside ``[-bound, bound]`` (default ``[-1, 1]``). Checked on
  ``step_rewards`` (per-step rewards or per-episode peaks of ``|r|``) when given, else on the
  curves themselves; long episodes sum many in-range rewards, so pass ``step_rewards`` for them.
- ``reward_drift`` (§5.4), for runs trained on a scorer's reward (``llm_rewards``: each agent's
  per-episode score part; ``env_rewards``: its environment part; ``scorer``: the scorer's
  counters, as in ``metrics.json``'s ``llm_reward``). Two patterns: the policy pleases the scorer
  (the score part rises by ``z`` standard errors from the first to the last quarter while the
  environment part does not rise by ``z`` standard errors), or the scorer contradicts itself
  (of at least ``drift_min_evaluations`` evaluations, at least ``drift_fallback_rate`` had
  samples that disagreed past the variance threshold, or the mean sample variance of the states
  it scored is at least ``drift_variance``: FIELD-NOTES §4.3's "scores differ by up to 0.3" is a
  variance of 0.09).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fleetmind.errors import ConfigError

FindingKind = Literal[
    "non_stationarity", "free_riding", "reward_scale", "reward_drift", "below_baseline"
]


@dataclass(frozen=True)
class Finding:
    """One diagnosis.

    Attributes:
        kind: ``"non_stationarity"``, ``"free_riding"``, ``"reward_scale"``,
            ``"reward_drift"`` or ``"below_baseline"``.
        agents: the agents it concerns.
        evidence: the numbers it rests on (name -> value).
        message: an explanation in plain words with the suggested fix.
    """

    kind: FindingKind
    agents: tuple[str, ...]
    evidence: dict[str, float] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class Thresholds:
    """Knobs of :func:`diagnose`.

    Attributes:
        window: smoothing window in episodes; ``None`` = ``max(5, n // 40)``.
        oscillation_ratio: smoothed swing over noise floor above which a curve oscillates.
        min_reversals: reversals of the smoothed curve needed to call it an oscillation.
        z: standard errors a rise or a drop must exceed.
        min_drop_fraction: a drop must also exceed this share of the agent's early level
            (absolute) or of the team's rise, whichever is larger.
        entropy_ratio: late entropy at most this share of the others' largest late entropy.
        bound: allowed absolute reward.
        min_episodes: curves shorter than this are not tested for trends or oscillation.
        drift_fallback_rate: share of a scorer's evaluations refused for disagreeing samples
            at which its scores count as drifting.
        drift_variance: mean sample variance per scored state at which they count as drifting.
        drift_min_evaluations: fewer model evaluations than this say nothing about a scorer.
    """

    window: int | None = None
    oscillation_ratio: float = 3.0
    min_reversals: int = 4
    z: float = 3.0
    min_drop_fraction: float = 0.1
    entropy_ratio: float = 0.3
    bound: float = 1.0
    min_episodes: int = 40
    drift_fallback_rate: float = 0.2
    drift_variance: float = 0.09
    drift_min_evaluations: int = 10


@dataclass(frozen=True)
class Oscillation:
    """Oscillation statistics of one curve's second half.

    Attributes:
        swing: std of the detrended, smoothed curve.
        noise_floor: the std that episode noise alone would leave after smoothing.
        ratio: ``swing / noise_floor`` (0 when both are 0).
        reversals: sign changes of the smoothed curve beyond +-noise_floor.
    """

    swing: float
    noise_floor: float
    ratio: float
    reversals: int


def oscillation(curve: NDArray[np.float64], window: int) -> Oscillation:
    """Measure slow oscillation in the second half of ``curve`` (see the module docstring).

    Args:
        curve: ``(n,)`` per-episode values.
        window: moving-average window in episodes.

    Returns:
        The statistics; all zero when the half is shorter than two windows.
    """
    x = curve[len(curve) // 2 :]
    if len(x) < 2 * window or window < 1:
        return Oscillation(0.0, 0.0, 0.0, 0)
    t = np.arange(len(x), dtype=np.float64)
    slope, intercept = np.polyfit(t, x, 1)
    resid = x - (slope * t + intercept)
    smooth = np.convolve(resid, np.ones(window) / window, mode="valid")
    noise = float(np.std(np.diff(x)) / math.sqrt(2.0))
    floor = noise / math.sqrt(window)
    swing = float(np.std(smooth))
    ratio = 0.0 if swing < 1e-12 else swing / floor if floor > 1e-12 else math.inf
    band = np.where(smooth > floor, 1, np.where(smooth < -floor, -1, 0))
    signs = band[band != 0]
    reversals = int(np.count_nonzero(signs[1:] != signs[:-1])) if len(signs) > 1 else 0
    return Oscillation(swing=swing, noise_floor=floor, ratio=ratio, reversals=reversals)


def _as_curves(curves: Mapping[str, ArrayLike], what: str) -> dict[str, NDArray[np.float64]]:
    out: dict[str, NDArray[np.float64]] = {}
    for agent, values in curves.items():
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 1:
            raise ConfigError(f"{what}[{agent!r}] must be 1-D, got shape {arr.shape}")
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ConfigError(f"{what}[{agent!r}][{int(bad[0])}] is not finite: {arr[bad[0]]}")
        out[str(agent)] = arr
    return out


def _quarters(x: NDArray[np.float64]) -> tuple[float, float, float]:
    """Return (early mean, late mean, standard error of their difference)."""
    q = max(len(x) // 4, 2)
    early, late = x[:q], x[-q:]
    se = math.sqrt(float(np.var(early, ddof=1)) / q + float(np.var(late, ddof=1)) / q)
    return float(early.mean()), float(late.mean()), se


def diagnose(
    rewards: Mapping[str, ArrayLike],
    *,
    solo: Mapping[str, ArrayLike] | None = None,
    entropy: Mapping[str, ArrayLike] | None = None,
    team: ArrayLike | None = None,
    step_rewards: Mapping[str, ArrayLike] | None = None,
    thresholds: Thresholds | None = None,
    llm_rewards: Mapping[str, ArrayLike] | None = None,
    env_rewards: Mapping[str, ArrayLike] | None = None,
    scorer: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Detect non-stationarity, free-riding, out-of-range rewards and reward drift in curves.

    Args:
        rewards: agent -> per-episode own reward (trained together).
        solo: agent -> per-episode reward when trained alone (optional).
        entropy: agent -> per-episode action entropy (optional).
        team: per-episode team reward; default the mean of ``rewards``.
        step_rewards: agent -> per-step rewards (or per-episode peaks of ``|r|``) for the scale
            check; default the curves themselves.
        thresholds: detection knobs.
        llm_rewards: agent -> per-episode score part of the return (scored runs).
        env_rewards: agent -> per-episode environment part of the return (scored runs).
        scorer: the scorer's counters (``evaluations``, ``variance_fallbacks``,
            ``variance_mean``), as ``metrics.json``'s ``llm_reward`` holds them.

    Returns:
        Findings, in the order non-stationarity, free-riding, reward scale, reward drift; empty
        when healthy.

    Raises:
        ConfigError: a curve is not 1-D, holds a non-finite value, or the curves differ in length.
    """
    th = thresholds or Thresholds()
    curves = _as_curves(rewards, "rewards")
    if not curves:
        raise ConfigError("rewards must hold at least one agent's curve")
    lengths = {len(c) for c in curves.values()}
    if len(lengths) != 1:
        raise ConfigError(f"rewards curves differ in length: {sorted(lengths)}")
    n = lengths.pop()
    team_curve = (
        np.mean(np.stack(list(curves.values())), axis=0)
        if team is None
        else _as_curves({"team": team}, "team")["team"]
    )
    if len(team_curve) != n:
        raise ConfigError(f"team has {len(team_curve)} episodes, rewards have {n}")
    window = th.window or max(5, n // 40)
    findings: list[Finding] = []
    if n >= th.min_episodes:
        findings += _non_stationarity(curves, solo, window, th)
        findings += _free_riding(curves, team_curve, entropy, th)
    findings += _reward_scale(curves, team_curve, step_rewards, th)
    findings += _reward_drift(llm_rewards, env_rewards, scorer, th)
    return findings


def _non_stationarity(
    curves: dict[str, NDArray[np.float64]],
    solo: Mapping[str, ArrayLike] | None,
    window: int,
    th: Thresholds,
) -> list[Finding]:
    solo_curves = _as_curves(solo, "solo") if solo is not None else {}
    out = []
    for agent, curve in curves.items():
        osc = oscillation(curve, window)
        if osc.ratio < th.oscillation_ratio or osc.reversals < th.min_reversals:
            continue
        evidence = {
            "swing": osc.swing,
            "noise_floor": osc.noise_floor,
            "ratio": osc.ratio,
            "reversals": float(osc.reversals),
            "window": float(window),
        }
        if agent in solo_curves:
            alone = oscillation(solo_curves[agent], window)
            if alone.ratio >= th.oscillation_ratio and alone.reversals >= th.min_reversals:
                continue  # unstable alone too: not caused by the other learners
            evidence["solo_ratio"] = alone.ratio
            evidence["solo_swing"] = alone.swing
            alone_words = f"Trained alone it is stable (ratio {alone.ratio:.1f})."
        else:
            alone_words = "No solo curve was given to confirm it is stable alone."
        out.append(
            Finding(
                kind="non_stationarity",
                agents=(agent,),
                evidence=evidence,
                message=(
                    f"{agent}'s own reward oscillates when trained together: over the second half "
                    f"its {window}-episode average swings by +-{osc.swing:.3g}, "
                    f"{osc.ratio:.1f}x what episode noise explains, reversing {osc.reversals} "
                    f"times. {alone_words} The other learners keep changing its world "
                    "(non-stationarity, FIELD-NOTES §5.1): move to centralised training "
                    "(fleetmind.rl.ctde) or lower the learning rate."
                ),
            )
        )
    return out


def _free_riding(
    curves: dict[str, NDArray[np.float64]],
    team_curve: NDArray[np.float64],
    entropy: Mapping[str, ArrayLike] | None,
    th: Thresholds,
) -> list[Finding]:
    t_early, t_late, t_se = _quarters(team_curve)
    rise = t_late - t_early
    if rise <= 0 or rise < th.z * t_se:
        return []
    ent = _as_curves(entropy, "entropy") if entropy is not None else {}
    late_ent = {a: _quarters(e)[1] for a, e in ent.items() if len(e) >= 8}
    early_ent = {a: _quarters(e)[0] for a, e in ent.items() if len(e) >= 8}
    out = []
    for agent, curve in curves.items():
        early, late, se = _quarters(curve)
        drop = early - late
        reward_collapse = (
            drop > th.z * se and drop >= th.min_drop_fraction * max(abs(early), rise) and drop > 0
        )
        entropy_collapse = False
        others = [late_ent[o] for o in late_ent if o != agent]
        if agent in late_ent and others:
            top = max(others)
            entropy_collapse = (
                top > 1e-9
                and late_ent[agent] <= th.entropy_ratio * top
                and late_ent[agent] <= 0.5 * early_ent[agent]
            )
        if not (reward_collapse or entropy_collapse):
            continue
        evidence = {
            "team_early": t_early,
            "team_late": t_late,
            "team_rise_se": rise / t_se if t_se > 0 else math.inf,
            "own_early": early,
            "own_late": late,
        }
        what = []
        if reward_collapse:
            evidence["own_drop_se"] = drop / se if se > 0 else math.inf
            what.append(f"its own reward fell from {early:.3g} to {late:.3g}")
        if entropy_collapse:
            evidence["entropy_early"] = early_ent[agent]
            evidence["entropy_late"] = late_ent[agent]
            evidence["others_entropy_late"] = max(others)
            what.append(
                f"its action entropy collapsed from {early_ent[agent]:.3g} to "
                f"{late_ent[agent]:.3g} nats while the others keep {max(others):.3g}"
            )
        out.append(
            Finding(
                kind="free_riding",
                agents=(agent,),
                evidence=evidence,
                message=(
                    f"The team reward rose from {t_early:.3g} to {t_late:.3g} while "
                    f"{' and '.join(what)}: {agent} looks like a free rider that stops "
                    "contributing and lets the others score (FIELD-NOTES §5.2). Give each agent a "
                    "sub-reward of its own (even with a small weight), then a difference reward "
                    "(team reward with it minus without it). In a race one winner is optimal; in "
                    "lifelong tasks an idle agent costs the team."
                ),
            )
        )
    return out


def _reward_scale(
    curves: dict[str, NDArray[np.float64]],
    team_curve: NDArray[np.float64],
    step_rewards: Mapping[str, ArrayLike] | None,
    th: Thresholds,
) -> list[Finding]:
    if step_rewards is not None:
        values = _as_curves(step_rewards, "step_rewards")
        source = "per-step rewards"
    else:
        values = dict(curves)
        values.setdefault("team", team_curve)
        source = "per-episode curves"
    peaks = {a: float(np.max(np.abs(v))) for a, v in values.items() if v.size}
    over = {a: p for a, p in peaks.items() if p > th.bound + 1e-9}
    if not over:
        return []
    worst = max(over.values())
    evidence = {f"max_abs/{a}": p for a, p in over.items()}
    evidence["bound"] = th.bound
    evidence["suggested_scale"] = th.bound / worst
    return [
        Finding(
            kind="reward_scale",
            agents=tuple(over),
            evidence=evidence,
            message=(
                f"Rewards leave [-{th.bound:g}, {th.bound:g}]: the {source} of "
                f"{', '.join(over)} reach |r| = {worst:.3g}. Normalise rewards to [-1, 1] before "
                f"learning (FIELD-NOTES §3.3), e.g. reward_scale={th.bound / worst:.3g} in "
                "fleetmind.rl.hyper.resolve."
            ),
        )
    ]


def _reward_drift(
    llm_rewards: Mapping[str, ArrayLike] | None,
    env_rewards: Mapping[str, ArrayLike] | None,
    scorer: Mapping[str, Any] | None,
    th: Thresholds,
) -> list[Finding]:
    out: list[Finding] = []
    if llm_rewards is not None and env_rewards is not None:
        llm = _as_curves(llm_rewards, "llm_rewards")
        env = _as_curves(env_rewards, "env_rewards")
        for agent, part in llm.items():
            if agent not in env or len(part) < th.min_episodes or len(env[agent]) != len(part):
                continue
            s_early, s_late, s_se = _quarters(part)
            e_early, e_late, e_se = _quarters(env[agent])
            score_rise = s_late - s_early
            env_rise = e_late - e_early
            if score_rise <= 0 or score_rise < th.z * s_se or env_rise >= th.z * e_se:
                continue
            out.append(
                Finding(
                    kind="reward_drift",
                    agents=(agent,),
                    evidence={
                        "score_early": s_early,
                        "score_late": s_late,
                        "score_rise_se": score_rise / s_se if s_se > 0 else math.inf,
                        "env_early": e_early,
                        "env_late": e_late,
                        "env_rise_se": env_rise / e_se if e_se > 0 else 0.0,
                    },
                    message=(
                        f"{agent}'s score from the scorer rose from {s_early:.3g} to "
                        f"{s_late:.3g} per episode while its environment reward went from "
                        f"{e_early:.3g} to {e_late:.3g}: the policy learns to please the scorer, "
                        "not to do the task (reward drift, FIELD-NOTES §5.4). Fix the reward "
                        "(train on the environment reward) and keep the LLM for low-frequency "
                        "decisions such as ordering tasks (§6)."
                    ),
                )
            )
    if scorer:
        evaluations = float(scorer.get("evaluations", 0) or 0)
        refused = float(scorer.get("variance_fallbacks", 0) or 0)
        variance = float(scorer.get("variance_mean", 0.0) or 0.0)
        rate = refused / evaluations if evaluations else 0.0
        enough = evaluations >= th.drift_min_evaluations
        if enough and (rate >= th.drift_fallback_rate or variance >= th.drift_variance):
            out.append(
                Finding(
                    kind="reward_drift",
                    agents=("scorer",),
                    evidence={
                        "evaluations": evaluations,
                        "variance_fallbacks": refused,
                        "variance_fallback_rate": rate,
                        "variance_mean": variance,
                    },
                    message=(
                        f"The scorer contradicts itself: {refused:.0f} of {evaluations:.0f} "
                        f"evaluations ({100 * rate:.0f}%) had samples that disagreed past the "
                        f"variance threshold, mean sample variance {variance:.3f} per state. "
                        "Scores jump while the state is the same (reward drift, FIELD-NOTES "
                        "§5.4): use discrete levels with anchors, average samples, fall back to "
                        "the previous value, or stop training on this score."
                    ),
                )
            )
    return out


HALF_OF_SHORTEST_PATH = 0.5
"""A warehouse policy under this share of shortest-path robots' deliveries is flagged."""


def baseline_findings(metrics: Mapping[str, Any]) -> list[Finding]:
    """A policy that learned nothing, or little, against the baseline its run measured.

    Reads a ``fleetmind train`` run's ``metrics.json``: on the warehouse, the evaluation's
    deliveries against shortest-path robots in the same ticks (``shortest_path_tasks_completed``);
    on rware, deliveries per episode against uniform random actions on the same episodes. Healthy
    curves say nothing about whether the policy is any good: this compares it with a policy that
    did not learn.

    Args:
        metrics: the run's ``metrics.json``.

    Returns:
        One ``below_baseline`` finding, or none.
    """
    agents = tuple(sorted((metrics.get("per_agent_deliveries") or {}).keys()))
    done = metrics.get("tasks_completed")
    ref = metrics.get("shortest_path_tasks_completed")
    if isinstance(done, int | float) and isinstance(ref, int | float) and ref > 0:
        share = float(done) / float(ref)
        if share < HALF_OF_SHORTEST_PATH:
            what = "learned nothing" if done == 0 else "is weak"
            return [
                Finding(
                    "below_baseline",
                    agents,
                    {"tasks_completed": float(done), "shortest_path": float(ref), "share": share},
                    f"the policy {what}: {int(done)} deliveries in its evaluation against "
                    f"{int(ref)} for shortest-path robots in the same ticks ({share:.0%}). "
                    "Train longer (--steps), or check the reward mode and exploration.",
                )
            ]
        return []
    mine = metrics.get("deliveries_per_episode")
    rand = metrics.get("random_deliveries_per_episode")
    if isinstance(mine, int | float) and isinstance(rand, int | float) and mine <= rand:
        return [
            Finding(
                "below_baseline",
                agents,
                {"deliveries_per_episode": float(mine), "random": float(rand)},
                f"the policy learned nothing: {mine:.2f} deliveries per episode against "
                f"{rand:.2f} for uniform random actions on the same episodes. rware's reward "
                "is sparse: give the learner more time (--minutes) before changing it.",
            )
        ]
    return []
