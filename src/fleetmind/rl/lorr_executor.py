"""A learned GO/STOP policy for the LoRR 2026 executor tier, its training problems and its learner.

Spec (the executor that uses it is :class:`fleetmind.dispatch.lorr2026.LearnedExecutor`):

- Observation, one row per robot and tick (:data:`FEATURES`, all in [0, 1]): whether the
  rule executor's temporal dependency graph lets it go, whether it may go early behind a
  leader leaving its target cell the same way, whether an action is under way and how far,
  whether the next staged action is a turn, how many actions are staged, how many robots queue
  behind it and for its target cell, whether the robot ahead or the robots around are delayed,
  how many cells around are occupied, and how many robots around were stopped last tick.
- Action: GO or STOP, one parameter-shared linear score ``features @ weights``; GO when it is
  positive and the robot is admissible (the graph lets it go, or it may go early). The policy
  only chooses among safe orders: the plan's visiting order of every cell is kept, and the
  action model still has the last word.
- Objective: tasks finished (the benchmark's own measure) with the problems' delays on, summed
  over seeded training problems that are none of the scored ones: random-obstacle and
  shelf-row maps generated here (:func:`training_problems`).
- Learner: the cross-entropy method over the weights (:func:`cem`), with common random numbers
  (every candidate of a generation plays the same problems and delay seeds).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.sim.lorr.instance import DelayConfig, Instance, read_instance, write_instance

FEATURES: tuple[str, ...] = (
    "bias",
    "rule_go",
    "early_go",
    "started",
    "turn",
    "progress",
    "staged",
    "behind",
    "target_queue",
    "ahead_delayed",
    "near_delayed",
    "near_busy",
    "near_stopped",
)
"""Names of the observation columns, in order."""

RULES = np.array([-0.5, 1.0] + [0.0] * (len(FEATURES) - 2))
"""Weights that reproduce the rule executor: GO exactly where the graph says GO."""

EARLY = np.array([-0.5, 1.0, 1.0] + [0.0] * (len(FEATURES) - 3))
"""Weights of the simple pipelining rule: GO wherever admissible (the graph, or early)."""

WEIGHTS = Path(__file__).resolve().parents[1] / "data" / "lorr_executor.json"
"""The trained weights shipped with the package (``fleetmind lorr train-executor`` rewrites)."""


@dataclass(frozen=True)
class LinearPolicy:
    """A parameter-shared linear GO/STOP score over :data:`FEATURES`.

    Attributes:
        weights: ``(len(FEATURES),)`` weights.
    """

    weights: NDArray[np.float64]

    def __post_init__(self) -> None:
        if self.weights.shape != (len(FEATURES),):
            raise ConfigError(
                f"executor policy: {len(FEATURES)} weights expected, got {self.weights.shape}"
            )

    def go(self, x: NDArray[np.float64], admissible: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """``(n,)`` GO for robots admissible and scored above zero (``x``: ``(n, F)``)."""
        return admissible & (x @ self.weights > 0)


def save(path: Path, weights: NDArray[np.float64], meta: dict[str, Any]) -> None:
    """Write the weights and how they were trained as JSON."""
    body = {"features": list(FEATURES), "weights": [float(w) for w in weights], **meta}
    path.write_text(json.dumps(body, indent=2) + "\n")


def load(path: Path = WEIGHTS) -> tuple[LinearPolicy, dict[str, Any]]:
    """The policy in ``path`` and the file's other fields.

    Raises:
        ConfigError: unreadable file, or features that are not :data:`FEATURES`.
    """
    try:
        body = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read executor weights ({exc})") from None
    if not isinstance(body, dict) or body.get("features") != list(FEATURES):
        raise ConfigError(f"{path}: field 'features' must be {list(FEATURES)}")
    weights = body.get("weights")
    if not isinstance(weights, list) or not all(isinstance(w, int | float) for w in weights):
        raise ConfigError(f"{path}: field 'weights' must be a list of numbers")
    return LinearPolicy(np.asarray(weights, dtype=np.float64)), body


def _largest_component(free: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The largest 4-connected free region (the rest becomes wall: every task is reachable)."""
    from scipy.ndimage import label

    labels, count = label(free)
    if count == 0:
        return free
    sizes = np.bincount(np.asarray(labels).ravel())
    sizes[0] = 0
    out: NDArray[np.bool_] = np.asarray(labels) == int(sizes.argmax())
    return out


def _random_map(rng: np.random.Generator, h: int, w: int, density: float) -> NDArray[np.bool_]:
    return _largest_component(rng.random((h, w)) >= density)


def _shelf_map(rng: np.random.Generator, h: int, w: int) -> NDArray[np.bool_]:
    """Rows of 1 x 4..8 shelves with aisles (a small warehouse)."""
    free = np.ones((h, w), dtype=bool)
    for r in range(2, h - 2, 3):
        c = 2
        while c < w - 3:
            length = int(rng.integers(4, 9))
            free[r, c : min(c + length, w - 2)] = False
            c += length + int(rng.integers(1, 3))
    return _largest_component(free)


DELAY_MODELS: tuple[DelayConfig, ...] = (
    DelayConfig(0, 1, 5, "bernoulli", 0.02, "gaussian", 0.5, 0.22),
    DelayConfig(0, 10, 30, "poisson", 0.01, "uniform", 0.5, 0.22),
    DelayConfig(0, 1, 10, "bernoulli", 0.01, "uniform", 0.5, 0.22),
)
"""Delay settings the training problems cycle through (ranges like the 2026 examples')."""


def training_problems(seed: int, count: int = 4, folder: Path | None = None) -> list[Instance]:
    """``count`` seeded 2026 problems on generated maps (none of the scored problems' maps).

    Problem ``k`` alternates random-obstacle (density 0.1-0.25) and shelf-row maps of 24-40
    cells a side, 40-160 robots on distinct free cells, 2,000 one- or two-errand tasks,
    ``agentCounter`` 3 or 10 and a delay setting of :data:`DELAY_MODELS`.

    Args:
        seed: root seed (maps, starts, tasks).
        count: problems.
        folder: where to write the files (a temporary folder if ``None``).
    """
    root = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="lorr-train-"))
    out = []
    for k, child in enumerate(np.random.SeedSequence(seed).spawn(count)):
        rng = np.random.default_rng(child)
        h, w = int(rng.integers(24, 41)), int(rng.integers(24, 41))
        free = _shelf_map(rng, h, w) if k % 2 else _random_map(rng, h, w, rng.uniform(0.1, 0.25))
        cells = np.flatnonzero(free.ravel())
        robots = min(int(rng.integers(40, 161)), len(cells) // 4)
        starts = rng.choice(cells, size=robots, replace=False)
        lens = rng.integers(1, 3, size=2000)
        tasks = [rng.choice(cells, size=int(n), replace=False).tolist() for n in lens]
        rows = ["".join("." if f else "@" for f in line) for line in free]
        path = write_instance(root, rows, starts.tolist(), tasks, name=f"train_{seed}_{k}")
        inst = read_instance(path)
        delay = replace(DELAY_MODELS[k % len(DELAY_MODELS)], seed=seed + k)
        out.append(replace(inst, edition="2026", agent_counter=(3, 10)[(k // 2) % 2], delay=delay))
    return out


def problems_2024(
    seed: int,
    count: int = 5,
    *,
    kind: str = "random",
    size: int = 32,
    robots: int = 100,
    folder: Path | None = None,
) -> list[Instance]:
    """``count`` seeded 2024 problems on generated maps, for developing the planner.

    ``kind`` ``random``: random obstacles at density 0.2 (the kind of the 2024 random maps);
    ``shelf``: rows of shelves with aisles. ``size`` cells a side, ``robots`` on distinct free
    cells, 5,000 two-errand tasks, the largest connected free region only. None of them is a
    scored map.
    """
    if kind not in ("random", "shelf"):
        raise ConfigError(f"problem kind must be random or shelf, got {kind!r}")
    root = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="lorr-dev-"))
    out = []
    for k, child in enumerate(np.random.SeedSequence([seed, 2024]).spawn(count)):
        rng = np.random.default_rng(child)
        free = _shelf_map(rng, size, size) if kind == "shelf" else _random_map(rng, size, size, 0.2)
        cells = np.flatnonzero(free.ravel())
        n = min(robots, len(cells) // 2)
        starts = rng.choice(cells, size=n, replace=False)
        tasks = [rng.choice(cells, size=2, replace=False).tolist() for _ in range(5000)]
        rows = ["".join("." if f else "@" for f in line) for line in free]
        name = f"dev_{kind}_{size}_{n}_{seed}_{k}"
        out.append(read_instance(write_instance(root, rows, starts.tolist(), tasks, name=name)))
    return out


def cem(
    objective: Callable[[NDArray[np.float64], int], float],
    init: NDArray[np.float64],
    *,
    seed: int,
    generations: int,
    population: int = 10,
    elite: int = 3,
    sigma: float = 0.5,
    min_sigma: float = 0.05,
    progress: Callable[[int, float, float], None] | None = None,
) -> tuple[NDArray[np.float64], list[dict[str, float]]]:
    """Maximise ``objective(weights, generation)`` by the cross-entropy method.

    Each generation samples ``population`` weight vectors around the mean (the mean itself is
    always one of them, so a generation never loses the incumbent's score), keeps the
    ``elite`` best, and refits mean and per-weight spread to them (plus decaying noise).
    ``objective`` gets the
    generation number so that every candidate of a generation meets the same random draws.

    Returns:
        The final mean (scores of different generations meet different draws, so the mean,
        not the luckiest candidate, is the answer) and one record per generation.
    """
    rng = np.random.default_rng(seed)
    mean = init.astype(np.float64).copy()
    std = np.full_like(mean, sigma)
    history = []
    for g in range(generations):
        cand = mean + std * rng.standard_normal((population, len(mean)))
        cand[0] = mean
        scores = np.array([objective(c, g) for c in cand])
        order = np.argsort(-scores, kind="stable")
        top = cand[order[:elite]]
        mean = top.mean(axis=0)
        # Decaying extra noise keeps a few elites from collapsing the spread too early
        # (Szita and Lorincz's noisy cross-entropy method).
        extra = (sigma * max(0.0, 1.0 - (g + 1) / generations)) ** 2 / 4
        std = np.maximum(np.sqrt(top.var(axis=0) + extra), min_sigma)
        history.append(
            {"generation": g, "incumbent": float(scores[0]), "best": float(scores[order[0]])}
        )
        if progress is not None:
            progress(g, float(scores[0]), float(scores[order[0]]))
    return mean, history
