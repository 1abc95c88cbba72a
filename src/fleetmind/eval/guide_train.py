"""Learn the guidance graph of ``learned-guidance`` by black-box search on fleet throughput.

The search (``fleetmind nav guide``) is CMA-ES (Hansen's ``cma``) over the flat parameter vector
of :class:`fleetmind.rl.guide.GuideModel`: move-weight coefficients, traffic weights, their
decay and the cost of waiting. Evolution strategies are a recognised way to do reinforcement
learning when the return is cheap to measure and its gradient is not (Salimans et al., 2017):
here the return of a candidate is fleet throughput measured through the real dispatch loop,
:func:`fleetmind.eval.runner.execute` with the assignment planner and the shield on, exactly as
``fleetmind run`` and ``fleetmind bench executors`` run it, so nothing is learned on a proxy.

Fitness of a candidate: the mean, over every training case (a map and a fleet size) and the
generation's seeds, of its tasks delivered over the ``guidance`` executor's on the same map,
size and seed (so 1.0 is "as good as guidance", and cases weigh alike). Training on several
maps matters because a feature's meaning depends on the layout: where aisles are two wide,
every aisle cell is beside a rack and so a pickup, and a cost on stepping onto pickups learned
on one-wide aisles taxes every move down an aisle. Every candidate of a
generation runs the same seeds (common random numbers: CMA-ES only ranks candidates within a
generation); the seeds rotate through a training pool from one generation to the next. At the
end the search's mean and the best candidate it saw are scored again on validation seeds
(also training-only), and the better one is kept.

Cases whose gains differ in scale need ``fitness="rank"``: a layout where ``guidance`` jams can
give a candidate 1.7x, and the mean of ratios then follows that case alone, trading away a few
percent on every other. With ``rank`` a candidate's score is its mean rank, over cases, among
the generation's candidates (CMA-ES uses only the order, so every case weighs alike in it);
"best candidate" is then not comparable across generations, and the search's mean is kept.
A generation's runs are independent: with ``workers`` > 1 they run in that many processes,
and the search is the same run for run.

Seeds 0-2 are the benchmark's: the defaults never train or validate on them.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.rl.guide import GuideModel

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

Case = tuple[str, int]
"""A training case: a map (preset name or file) and a fleet size."""


def cases_of(maps: Iterable[str], robots: Iterable[int]) -> tuple[Case, ...]:
    """Every map at every fleet size."""
    sizes = tuple(robots)
    return tuple((m, n) for m in maps for n in sizes)


@dataclass(frozen=True)
class GuideSearch:
    """Settings of one search.

    Attributes:
        cases: training cases, each a map and a fleet size (sparse to jammed; several maps,
            so that the weights carry over to maps the search never saw).
        seeds: the training seed pool, taken ``seeds_per_gen`` at a time in turn.
        seeds_per_gen: seeds every candidate of a generation runs.
        validate: seeds of the final choice between the search's mean and its best candidate.
        steps: ticks of each run.
        generations: CMA-ES generations.
        popsize: candidates a generation (0: CMA-ES's default, 4 + 3 ln(dimension)).
        sigma: initial step size (times each parameter's own scale).
        seed: seed of the search's samples.
        workers: processes the runs of a generation share (the result does not depend on it).
        fitness: ``ratio`` (mean over cases of tasks over guidance's) or ``rank`` (mean over
            cases of the candidate's rank in its generation: every case weighs alike).
        only: the parameters to search (:meth:`GuideModel.names`); the others stay at the
            starting model's values. Empty: all of them.

    Raises:
        ConfigError: on an empty list, a bench seed among the training or validation seeds, a
            fleet size or a count below one.
    """

    cases: tuple[Case, ...] = ((LORR_SMALL, 100), (LORR_SMALL, 200))
    seeds: tuple[int, ...] = tuple(range(100, 112))
    seeds_per_gen: int = 3
    validate: tuple[int, ...] = (200, 201, 202, 203)
    steps: int = 300
    generations: int = 20
    popsize: int = 0
    sigma: float = 1.0
    seed: int = 0
    workers: int = 1
    fitness: str = "ratio"
    only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse settings that could not train, or that would train on the bench's seeds."""
        if not self.cases or not self.seeds:
            raise ConfigError("guide search: cases and seeds need one value each")
        unknown = sorted(set(self.only) - set(GuideModel.names()))
        if unknown:
            raise ConfigError(
                f"guide search: --only names no parameter {unknown} "
                f"(known: {', '.join(GuideModel.names())})"
            )
        if self.fitness not in ("ratio", "rank"):
            raise ConfigError(f"guide search: fitness {self.fitness!r} is not ratio or rank")
        for _, n in self.cases:
            check_range("fleet size", n, low=1, where="guide search")
        leaked = sorted(BENCH_SEEDS & (set(self.seeds) | set(self.validate)))
        if leaked:
            raise ConfigError(f"guide search: seeds {leaked} are the benchmark's; train on others")
        for name in ("seeds_per_gen", "generations", "steps", "workers"):
            check_range(name, getattr(self, name), low=1, where="guide search")
        check_range("popsize", self.popsize, low=0, where="guide search")


Run = tuple[str, str, int, int, int, str | None]
"""One run: executor, map, fleet size, seed, ticks, guide model file (None: the shipped)."""


def _tasks(run: Run) -> int:
    """Tasks delivered by one run, assignment planner, shield on (in a worker process too)."""
    executor, map_name, robots, seed, steps, model = run
    cfg = RunConfig(
        map=map_name,
        robots=robots,
        steps=steps,
        planner="assignment",
        executor=executor,
        policy=model,
        seed=seed,
    )
    metrics = execute(cfg, None)
    if int(metrics["collisions"]) != 0:  # the shield's contract; a bug if it ever fails
        raise AssertionError(f"{executor} executed a collision with the shield on: {cfg}")
    return int(metrics["tasks_completed"])


class Scorer:
    """Tasks delivered by guide models, and by ``guidance``, on cases and seeds.

    ``guidance`` runs are cached: every candidate is compared with the same baseline runs.
    With ``workers`` > 1 the runs of one call share that many processes.
    """

    def __init__(self, steps: int, workers: int = 1) -> None:
        self.steps = steps
        self.runs = 0
        self._baseline: dict[tuple[str, int, int], int] = {}
        self._dir = tempfile.TemporaryDirectory(prefix="fleetmind-guide-")
        self._pool = ProcessPoolExecutor(max_workers=workers) if workers > 1 else None

    def _run(self, runs: Sequence[Run]) -> list[int]:
        """Tasks of each run, in order."""
        self.runs += len(runs)
        if self._pool is None:
            return [_tasks(r) for r in runs]
        return list(self._pool.map(_tasks, runs))

    def fitness(
        self, models: list[GuideModel], cases: tuple[Case, ...], seeds: list[int]
    ) -> list[tuple[float, dict[str, float]]]:
        """Each model's mean of tasks over guidance's tasks, and that mean per ``map/robots``."""
        todo = [(m, n, s) for m, n in cases for s in seeds if (m, n, s) not in self._baseline]
        done = self._run([("guidance", m, n, s, self.steps, None) for m, n, s in todo])
        self._baseline.update(zip(todo, done, strict=True))
        paths = []
        for k, model in enumerate(models):
            paths.append(str(Path(self._dir.name) / f"candidate-{k}.json"))
            model.save(paths[-1])
        runs = [
            ("learned-guidance", m, n, s, self.steps, path)
            for path in paths
            for m, n in cases
            for s in seeds
        ]
        tasks = np.array(self._run(runs), dtype=np.float64).reshape(len(models), len(cases), -1)
        base = np.array([[max(1, self._baseline[(m, n, s)]) for s in seeds] for m, n in cases])
        ratios = (tasks / base).mean(axis=2)  # (models, cases)
        names = [f"{Path(m).stem}/{n}" for m, n in cases]
        return [(float(row.mean()), dict(zip(names, row.tolist(), strict=True))) for row in ratios]

    def close(self) -> None:
        """Stop the workers and remove the candidate files."""
        if self._pool is not None:
            self._pool.shutdown()
        self._dir.cleanup()


def mean_rank(per_case: list[dict[str, float]]) -> list[float]:
    """Each candidate's mean, over cases, of its rank among the candidates (0: last; ties share).

    Args:
        per_case: each candidate's ratio to ``guidance`` per case (the same cases for all).
    """
    from scipy.stats import rankdata

    table = np.array([[per[k] for k in per_case[0]] for per in per_case])  # (candidates, cases)
    ranks = np.column_stack([rankdata(col) - 1.0 for col in table.T])
    return [float(r) for r in ranks.mean(axis=1)]


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
    x0 = start.to_vector()
    # The entries searched (all, or those named in ``only``); the rest stay at ``x0``'s.
    free = np.array([i for i, n in enumerate(GuideModel.names()) if not cfg.only or n in cfg.only])

    def whole(x: Any) -> NDArray[np.float64]:
        v = x0.copy()
        v[free] = np.asarray(x, dtype=np.float64)
        return v

    opts: dict[str, Any] = {
        "seed": cfg.seed + 1,  # cma reads 0 as "seed from the clock"
        "CMA_stds": GuideModel.search_scales()[free].tolist(),
        "verbose": -9,
    }
    if cfg.popsize:
        opts["popsize"] = cfg.popsize
    es = cma.CMAEvolutionStrategy(x0[free].tolist(), cfg.sigma, opts)
    scorer = Scorer(cfg.steps, cfg.workers)
    log: list[dict[str, Any]] = []
    best: tuple[float, NDArray[np.float64]] = (-np.inf, start.to_vector())
    try:
        for gen in range(cfg.generations):
            k = cfg.seeds_per_gen
            seeds = [cfg.seeds[(gen * k + j) % len(cfg.seeds)] for j in range(k)]
            asked = es.ask()
            xs = [whole(x) for x in asked]
            fits = scorer.fitness([GuideModel.from_vector(x) for x in xs], cfg.cases, seeds)
            scores = [f for f, _ in fits]
            order = scores if cfg.fitness == "ratio" else mean_rank([per for _, per in fits])
            es.tell(asked, [-f for f in order])  # CMA-ES minimises
            top = int(np.argmax(order))
            if cfg.fitness == "ratio" and scores[top] > best[0]:
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
                _checkpoint(whole(es.mean), cfg, log, out, t0)
        # The final choice, on seeds no generation ranked by: the search's mean or its best.
        val: dict[str, Any] = {}
        choices = {"mean": whole(es.mean)}
        if cfg.fitness == "ratio":
            choices["best"] = best[1]
        fits = scorer.fitness(
            [GuideModel.from_vector(x) for x in choices.values()], cfg.cases, list(cfg.validate)
        )
        for name, (f, per) in zip(choices, fits, strict=True):
            val[name] = {
                "fitness": round(f, 4),
                "per_case": {k: round(v, 4) for k, v in per.items()},
            }
        pick = max(choices, key=lambda n: val[n]["fitness"])
        model = GuideModel.from_vector(
            choices[pick],
            **_metadata(
                cfg,
                log,
                t0,
                scorer.runs,
                chosen=pick,
                validation=val,
                start=dict(zip(GuideModel.names(), start.to_vector().tolist(), strict=True)),
                **(note or {}),
            ),
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
    settings["cases"] = [[Path(m).name, n] for m, n in cfg.cases]
    return {
        "trained_by": "fleetmind nav guide (CMA-ES on fleet throughput, eval/guide_train.py)",
        "search": settings,
        "generations": log,
        "runs": runs,
        "wall_s": round(time.perf_counter() - t0, 1),
        **extra,
    }


def _checkpoint(
    mean: NDArray[np.float64],
    cfg: GuideSearch,
    log: list[dict[str, Any]],
    out: str | Path,
    t0: float,
) -> None:
    """Write the search's mean so far (a killed search still leaves a usable file)."""
    model = GuideModel.from_vector(
        mean, **_metadata(cfg, log, t0, log[-1]["runs"], chosen="mean (unfinished)")
    )
    model.save(out)
