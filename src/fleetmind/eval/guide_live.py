"""A live fleet that keeps learning its guidance graph from its own orders.

``fleetmind run --executor learned-guidance --learn-every N`` runs the fleet on a guide model
(:mod:`fleetmind.rl.guide`) and, every ``N`` ticks, improves it from the run's own recorded
experience: the orders that arrived over the last ``replay`` ticks (pickup, station, arrival,
priority, due, capability) are written to a task file, and candidate models are scored by
replaying those orders in the simulator, assignment planner and shield on, from fleets started
on ``replays`` seeded sets of cells. The candidates come from one CMA-ES search that lasts the
whole run (:class:`LiveGuideLearner` asks it for a generation per window and tells it their
replay scores), so each window's update builds on every earlier one.

What takes over: the search's mean, if it replays better than the model the fleet runs now
(the generation's candidates only steer the search: the best of a few noisy replays overstates
itself). A guard then watches the live fleet:
when the first window under a new model delivers less than ``1 - guard`` of the window before
the update, the model before it comes back (a rollback). The shield decides every move, so no
update, good or bad, can execute a collision.

With ``lag`` the search runs in a separate process beside the loop and its result takes over
``lag`` ticks after the window closed (the loop waits for it only if it is not done by then),
so that a run repeats exactly whatever the timing. ``updates`` off records the same per-window
curve and never searches: the control run of ``fleetmind bench executors --learn``.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import check_range
from fleetmind.rl.guide import GuideModel

if TYPE_CHECKING:
    from fleetmind.dispatch.executors import LearnedGuidanceExecutor
    from fleetmind.sim.warehouse import Warehouse

logger = logging.getLogger(__name__)

Replay = Callable[[dict[str, Any], str, int, str], int]
"""One replay: the run's fields (map, robots, steps, planner), a guide model file, a fleet
start seed and a task file in; tasks delivered out (``fleetmind.eval.runner.replay_tasks``,
handed in by the runner, which this module does not import: the runner builds the learner)."""


class RunFields(Protocol):
    """What the learner reads of the live run's configuration (``RunConfig`` has them)."""

    @property
    def map(self) -> str:
        """The map."""
        ...

    @property
    def robots(self) -> int:
        """The fleet size."""
        ...

    @property
    def planner(self) -> str:
        """The planner."""
        ...

    @property
    def steps(self) -> int:
        """The run's ticks."""
        ...


@dataclass(frozen=True)
class LiveLearnConfig:
    """Settings of :class:`LiveGuideLearner`.

    Attributes:
        every: ticks a window; an update (one search generation) ends each window.
        lag: ticks the update runs beside the loop before it takes over (0: in the tick).
        guard: the rollback threshold (None: never roll back).
        replay: ticks of recorded orders each replay covers (the last ones).
        replays: seeded fleet starts each candidate is replayed from.
        popsize: candidates a generation.
        sigma: the search's initial step size (times each parameter's own scale).
        seed: seed of the search's samples and of the replays' fleet starts.
        updates: search and update (False: record the curve only).

    Raises:
        ConfigError: on counts below one, a lag not below ``every`` or a guard out of [0, 1).
    """

    every: int = 500
    lag: int = 0
    guard: float | None = 0.03
    replay: int = 500
    replays: int = 2
    popsize: int = 8
    sigma: float = 0.3
    seed: int = 0
    updates: bool = True

    def __post_init__(self) -> None:
        """Refuse settings that could not learn."""
        for name in ("every", "replay", "replays", "popsize"):
            check_range(name, getattr(self, name), low=1, where="learn")
        check_range("sigma", self.sigma, above=0, where="learn")
        check_range("lag", self.lag, low=0, below=self.every, where="learn")
        if self.guard is not None:
            check_range("guard", self.guard, low=0, below=1, where="learn")


def replay_scores(
    run: dict[str, Any],
    task_lines: list[str],
    vectors: list[list[float]],
    seeds: list[int],
    replay: Replay,
) -> list[list[int]]:
    """Tasks each model delivers replaying the recorded orders from each fleet start.

    Runs where it is called (the loop's process, or the learner's own beside it).

    Args:
        run: the fields of the replays' run configuration (map, robots, steps, planner).
        task_lines: the task file's lines (the recorded orders, ticks from 0).
        vectors: the models, as :meth:`GuideModel.to_vector` values.
        seeds: the fleet starts.
        replay: runs one replay (:data:`Replay`; a module-level function, so that it reaches
            the learner's process by name).

    Returns:
        ``[model][seed]`` tasks delivered.
    """
    out: list[list[int]] = []
    with tempfile.TemporaryDirectory(prefix="fleetmind-live-") as tmp:
        tasks = Path(tmp) / "orders.jsonl"
        tasks.write_text("\n".join(task_lines) + "\n", encoding="utf-8")
        model = Path(tmp) / "model.json"
        for vector in vectors:
            GuideModel.from_vector(np.asarray(vector)).save(model)
            out.append([replay(run, str(model), seed, str(tasks)) for seed in seeds])
    return out


@dataclass
class _Pending:
    """A generation being scored, and the tick its result takes over."""

    due: int
    xs: list[NDArray[np.float64]]
    vectors: list[list[float]]
    row: dict[str, Any]
    future: Future[list[list[int]]] | None = None
    scores: list[list[int]] | None = None


class LiveGuideLearner:
    """Improves a running ``learned-guidance`` executor's model every window (module docstring).

    Call :meth:`after_tick` after every tick of the loop (``ControlLoop.run``'s ``progress``).

    Args:
        run: the live run's configuration (map, robots, planner of the replays).
        world: the live simulator (its order records and deliveries are read).
        executor: the live executor (its model is replaced on an update or rollback).
        config: the learner's settings.
        replay: runs one replay (:data:`Replay`).
    """

    def __init__(
        self,
        run: RunFields,
        world: Warehouse,
        executor: LearnedGuidanceExecutor,
        config: LiveLearnConfig,
        replay: Replay,
    ) -> None:
        import cma

        self.config = config
        self.replay = replay
        self.world = world
        self.executor = executor
        self.run = {"map": run.map, "robots": run.robots, "planner": run.planner}
        self.steps = run.steps  # no update starts on the run's last tick
        self.model: GuideModel = executor.model
        # The knee says how the weights fade as a fleet thins out; one live fleet has one
        # density, so its search holds the knee where the model has it.
        self._free = np.array([i for i, n in enumerate(GuideModel.names()) if n != "knee"])
        opts = {
            "seed": config.seed + 1,  # cma reads 0 as "seed from the clock"
            "CMA_stds": GuideModel.search_scales()[self._free].tolist(),
            "popsize": config.popsize,
            "verbose": -9,
        }
        start = self.model.to_vector()[self._free].tolist()
        self._es = cma.CMAEvolutionStrategy(start, config.sigma, opts)
        self._pool: ProcessPoolExecutor | None = None
        self._pending: _Pending | None = None
        self._window_start = 0
        self._delivered_at_start = 0
        self._reference: float | None = None  # deliveries a tick of the window before an update
        self._backup: GuideModel | None = None  # the model before the update on trial
        self.curve: list[dict[str, Any]] = []
        self.updates = 0
        self.rollbacks = 0
        self.version = 0

    # ----------------------------------------------------------------- the loop's hook
    def after_tick(self, tick: int) -> None:
        """``tick`` ticks are done: take over a finished update when due, close a window."""
        pending = self._pending
        if pending is not None and tick >= pending.due:
            self._finish(pending, tick)
        if tick - self._window_start >= self.config.every:
            self._end_window(tick)

    def close(self) -> None:
        """Stop the learner's process (an update still running is dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # ----------------------------------------------------------------- windows
    def _end_window(self, tick: int) -> None:
        delivered = int(self.world.metrics()["tasks_completed"])
        count = delivered - self._delivered_at_start
        rate = count / max(1, tick - self._window_start)
        row: dict[str, Any] = {
            "start": self._window_start,
            "end": tick,
            "deliveries": count,
            "deliveries_per_tick": rate,
            "version": self.version,
            "rolled_back": False,
        }
        self._window_start, self._delivered_at_start = tick, delivered
        cfg = self.config
        limit = None
        if self._reference is not None and cfg.guard is not None:
            limit = (1.0 - cfg.guard) * self._reference
        if self._backup is not None and limit is not None and rate < limit:
            # The last update lowered throughput: the model before it comes back, and the
            # window played under the rejected model is not a reference.
            self._use(self._backup)
            self._backup = None
            self.rollbacks += 1
            row["rolled_back"] = True
            self.curve.append(row)
            return
        self._reference = rate
        self._backup = None
        self.curve.append(row)
        if cfg.updates and self._pending is None and tick < self.steps:
            self._start(row, tick)

    def _recorded(self, tick: int) -> list[str]:
        """The task file of the orders that arrived over the last ``replay`` ticks."""
        start = max(0, tick - self.config.replay)
        lines = []
        for rec in self.world.records:
            o = rec.order
            if o.tick < start or o.tick >= tick:
                continue
            line: dict[str, Any] = {
                "tick": o.tick - start,
                "pickup": list(o.pickup),
                "station": list(o.station),
                "priority": o.priority,
                "due": max(0, o.due - start) if o.due < (1 << 30) else None,
                "capability": o.capability,
            }
            lines.append(json.dumps({k: v for k, v in line.items() if v is not None}))
        return lines

    def _start(self, row: dict[str, Any], tick: int) -> None:
        """Ask the search for a generation and have it scored on the recorded orders."""
        cfg = self.config
        xs = [np.asarray(x) for x in self._es.ask()]
        current = self.model.to_vector()
        searched = (np.asarray(self._es.mean), *xs)
        vectors = [current.tolist()]
        for x in searched:  # whole models: the searched entries, the knee the fleet's
            v = current.copy()
            v[self._free] = x
            vectors.append(v.tolist())
        seeds = [cfg.seed * 1_000 + self.updates * cfg.replays + j for j in range(cfg.replays)]
        run = {**self.run, "steps": min(cfg.replay, tick)}
        args = (run, self._recorded(tick), vectors, seeds, self.replay)
        pending = _Pending(due=tick + cfg.lag, xs=xs, vectors=vectors, row=row)
        if not cfg.lag:
            pending.scores = replay_scores(*args)
            self._finish(pending, tick)
            return
        if self._pool is None:
            # A fresh interpreter: the loop's threads (map workers, the planner) stay out.
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
        pending.future = self._pool.submit(replay_scores, *args)
        self._pending = pending

    def _finish(self, pending: _Pending, tick: int) -> None:
        """Tell the search the scores; its mean takes over if it replays better than the fleet's."""
        self._pending = None
        scores = pending.scores if pending.future is None else pending.future.result()
        assert scores is not None
        total = np.array([sum(s) for s in scores], dtype=np.float64)  # (2 + popsize,)
        self._es.tell(pending.xs, (-total[2:]).tolist())  # CMA-ES minimises
        self.updates += 1
        row = pending.row
        best = int(total[2:].max())
        row["update"] = {"current": int(total[0]), "mean": int(total[1]), "best": best}
        # The search's mean, not its luckiest candidate: the best of a generation's noisy
        # replays overstates it (a search on warehouse-medium: the best candidate replayed
        # 1.07x guidance and validated at 1.00x, the mean 1.02x).
        if total[1] > total[0]:
            self._backup = self.model
            self.version += 1
            note = {
                "trained_by": "live learning on the run's own orders (eval/guide_live.py)",
                "map": self.run["map"],
                "robots": self.run["robots"],
                "version": self.version,
                "tick": tick,
            }
            self._use(GuideModel.from_vector(np.asarray(pending.vectors[1]), **note))
            row["applied_tick"] = tick

    def _use(self, model: GuideModel) -> None:
        """The fleet runs ``model`` from the next tick."""
        self.model = model
        self.executor.set_model(model)

    def stats(self) -> dict[str, Any]:
        """The learner's record: settings, updates, rollbacks and the per-window curve."""
        return {
            "learn": asdict(self.config),
            "updates": self.updates,
            "rollbacks": self.rollbacks,
            "curve": list(self.curve),
            "model": {
                "theta": self.model.theta,
                "traffic": self.model.traffic,
                "knee": self.model.knee,
            },
        }
