"""Learn the guidance graph of ``learned-guidance`` by black-box search on fleet throughput.

The search (``fleetmind nav guide``) is CMA-ES (Hansen's ``cma``) over the flat parameter vector
of :class:`fleetmind.rl.guide.GuideModel`: move-weight coefficients, traffic weights, their
decay and the cost of waiting. Evolution strategies are a recognised way to do reinforcement
learning when the return is cheap to measure and its gradient is not (Salimans et al., 2017):
here the return of a candidate is fleet throughput measured through the real dispatch loop,
:func:`fleetmind.eval.runner.execute` with the assignment planner and the shield on, exactly as
``fleetmind run`` and ``fleetmind bench executors`` run it, so nothing is learned on a proxy.

Fitness of a candidate: the mean, over every training map, fleet size and the generation's
seeds, of its tasks delivered over the ``guidance`` executor's on the same map, size and seed
(so 1.0 is "as good as guidance" and fleet sizes weigh alike). Every candidate of a
generation runs the same seeds (common random numbers: CMA-ES only ranks candidates within a
generation); the seeds rotate through a training pool from one generation to the next. At the
end the search's mean and the best candidate it saw are scored again on validation seeds
(also training-only), and the better one is kept.

Seeds 0-2 are the benchmark's: the defaults never train or validate on them.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.rl.guide import FEATURES, TRAFFIC, GuideModel

logger = logging.getLogger(__name__)

LORR_SMALL = str(
    Path(__file__).resolve().parents[3]
    / "benchmarks"
    / "data"
    / "lorr"
    / "maps"
    / "warehouse_small.map"
)
BENCH_SEEDS = frozenset({0, 1, 2})
"""The seeds ``fleetmind bench executors`` measures on; refused for training."""


@dataclass(frozen=True)
class GuideSearch:
    """Settings of one search.

    Attributes:
        maps: training maps.
        robots: fleet sizes (sparse to jammed).
        seeds: the training seed pool, taken ``seeds_per_gen`` at a time in turn.
        seeds_per_gen: seeds every candidate of a generation runs.
        validate: seeds of the final choice between the search's mean and its best candidate.
        steps: ticks of each run.
        generations: CMA-ES generations.
        popsize: candidates a generation (0: CMA-ES's default, 4 + 3 ln(dimension)).
        sigma: initial step size (times each parameter's own scale).
        seed: seed of the search's samples.

    Raises:
        ConfigError: on an empty list, a bench seed among the training or validation seeds, or
            a count below one.
    """

    maps: tuple[str, ...] = (LORR_SMALL,)
    robots: tuple[int, ...] = (100, 200)
    seeds: tuple[int, ...] = tuple(range(100, 112))
    seeds_per_gen: int = 3
    validate: tuple[int, ...] = (200, 201, 202, 203)
    steps: int = 300
    generations: int = 20
    popsize: int = 0
    sigma: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        """Refuse settings that could not train, or that would train on the bench's seeds."""
        if not self.maps or not self.robots or not self.seeds:
            raise ConfigError("guide search: maps, robots and seeds need one value each")
        leaked = sorted(BENCH_SEEDS & (set(self.seeds) | set(self.validate)))
        if leaked:
            raise ConfigError(f"guide search: seeds {leaked} are the benchmark's; train on others")
        if min(self.seeds_per_gen, self.generations, self.steps) < 1 or self.popsize < 0:
            raise ConfigError("guide search: seeds_per_gen, generations, steps must be >= 1")


def search_scales() -> NDArray[np.float64]:
    """Each parameter's search scale: move weights in steps, traffic terms, decay, wait."""
    return np.array([0.5] * len(FEATURES) + [0.15] * len(TRAFFIC) + [0.03, 0.3])


class Scorer:
    """Tasks delivered by a guide model, and by ``guidance``, on a map, fleet size and seed.

    ``guidance`` runs are cached: every candidate is compared with the same baseline runs.
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.runs = 0
        self._baseline: dict[tuple[str, int, int], int] = {}
        self._dir = tempfile.TemporaryDirectory(prefix="fleetmind-guide-")

    def tasks(self, executor: str, map_name: str, robots: int, seed: int, model: str | None) -> int:
        """Tasks delivered by one run, assignment planner, shield on."""
        cfg = RunConfig(
            map=map_name,
            robots=robots,
            steps=self.steps,
            planner="assignment",
            executor=executor,
            policy=model,
            seed=seed,
        )
        metrics = execute(cfg, None)
        self.runs += 1
        if int(metrics["collisions"]) != 0:  # the shield's contract; a bug if it ever fails
            raise AssertionError(f"{executor} executed a collision with the shield on: {cfg}")
        return int(metrics["tasks_completed"])

    def baseline(self, map_name: str, robots: int, seed: int) -> int:
        """Tasks delivered by ``guidance`` (cached)."""
        key = (map_name, robots, seed)
        if key not in self._baseline:
            self._baseline[key] = self.tasks("guidance", map_name, robots, seed, None)
        return self._baseline[key]

    def fitness(
        self, model: GuideModel, maps: tuple[str, ...], robots: tuple[int, ...], seeds: list[int]
    ) -> tuple[float, dict[str, float]]:
        """Mean of tasks over guidance's tasks, and that mean per ``map/robots``."""
        path = Path(self._dir.name) / "candidate.json"
        model.save(path)
        per: dict[str, float] = {}
        for m in maps:
            for n in robots:
                ratios = [
                    self.tasks("learned-guidance", m, n, s, str(path))
                    / max(1, self.baseline(m, n, s))
                    for s in seeds
                ]
                per[f"{Path(m).stem}/{n}"] = float(np.mean(ratios))
        return float(np.mean(list(per.values()))), per

    def close(self) -> None:
        """Remove the candidate files."""
        self._dir.cleanup()


def search(
    cfg: GuideSearch,
    *,
    init: GuideModel | None = None,
    out: str | Path | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    note: dict[str, Any] | None = None,
) -> GuideModel:
    """Run the search; returns the chosen model (also written to ``out`` if given).

    Args:
        cfg: the settings.
        init: the starting point (default: the neutral model, ``guidance`` itself).
        out: where to write the model; written after every generation too (the search so far).
        progress: called with each generation's record.
        note: more metadata to save with the model (where it started, the command).
    """
    import cma

    t0 = time.perf_counter()
    start = init or GuideModel.neutral()
    stds = search_scales()
    opts: dict[str, Any] = {
        "seed": cfg.seed + 1,  # cma reads 0 as "seed from the clock"
        "CMA_stds": stds.tolist(),
        "verbose": -9,
    }
    if cfg.popsize:
        opts["popsize"] = cfg.popsize
    es = cma.CMAEvolutionStrategy(start.to_vector().tolist(), cfg.sigma, opts)
    scorer = Scorer(cfg.steps)
    log: list[dict[str, Any]] = []
    best: tuple[float, NDArray[np.float64]] = (-np.inf, start.to_vector())
    try:
        for gen in range(cfg.generations):
            k = cfg.seeds_per_gen
            seeds = [cfg.seeds[(gen * k + j) % len(cfg.seeds)] for j in range(k)]
            xs = es.ask()
            scores = []
            for x in xs:
                f, _ = scorer.fitness(GuideModel.from_vector(x), cfg.maps, cfg.robots, seeds)
                scores.append(f)
            es.tell(xs, [-f for f in scores])  # CMA-ES minimises
            top = int(np.argmax(scores))
            if scores[top] > best[0]:
                best = (scores[top], np.asarray(xs[top]))
            row = {
                "generation": gen,
                "seeds": seeds,
                "best": round(float(scores[top]), 4),
                "mean": round(float(np.mean(scores)), 4),
                "sigma": round(float(es.sigma), 4),
                "runs": scorer.runs,
                "wall_s": round(time.perf_counter() - t0, 1),
            }
            log.append(row)
            logger.info("guide search: %s", row)
            if progress:
                progress(row)
            if out is not None:
                _checkpoint(es, cfg, log, out, t0)
        # The final choice, on seeds no generation ranked by: the search's mean or its best.
        val: dict[str, Any] = {}
        choices = {
            "mean": np.asarray(es.mean),
            "best": best[1],
        }
        for name, x in choices.items():
            f, per = scorer.fitness(
                GuideModel.from_vector(x), cfg.maps, cfg.robots, list(cfg.validate)
            )
            val[name] = {
                "fitness": round(f, 4),
                "per_case": {k: round(v, 4) for k, v in per.items()},
            }
        pick = max(choices, key=lambda n: val[n]["fitness"])
        model = GuideModel.from_vector(
            choices[pick],
            **_metadata(cfg, log, t0, scorer.runs, chosen=pick, validation=val, **(note or {})),
        )
        if progress:
            progress({"validation": val, "chosen": pick})
        if out is not None:
            model.save(out)
        return model
    finally:
        scorer.close()


def _metadata(
    cfg: GuideSearch, log: list[dict[str, Any]], t0: float, runs: int, **extra: Any
) -> dict[str, Any]:
    """How the model was made, saved with it."""
    settings = asdict(cfg)
    settings["maps"] = [Path(m).name for m in cfg.maps]
    return {
        "trained_by": "fleetmind nav guide (CMA-ES on fleet throughput, eval/guide_train.py)",
        "search": settings,
        "generations": log,
        "runs": runs,
        "wall_s": round(time.perf_counter() - t0, 1),
        **extra,
    }


def _checkpoint(
    es: Any, cfg: GuideSearch, log: list[dict[str, Any]], out: str | Path, t0: float
) -> None:
    """Write the search's mean so far (a killed search still leaves a usable file)."""
    model = GuideModel.from_vector(
        np.asarray(es.mean), **_metadata(cfg, log, t0, log[-1]["runs"], chosen="mean (unfinished)")
    )
    model.save(out)
