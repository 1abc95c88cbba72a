"""The control loop at scale: ``fleetmind run`` on ``warehouse_large.map``, 1,000 and 10,000 robots.

``fleetmind bench scale`` calls :func:`run` and prints :func:`format_table`. Each fleet size runs
in a child process of its own (so its peak RSS is its own), as ``fleetmind run`` runs it:
assignment planner, shortest-path executor, shield on, the run recorded to a temporary folder.
A row gives the tick's p50 / p99 / max and each tier's (executor, shield, simulator, planner),
the tasks finished, the executed collisions (0 with the shield) and the peak RSS.

Baseline in the same command: on the states of the same run, every tick, the per-robot Python
reference of each vectorised part of the tick (:func:`reference_priorities`,
:func:`reference_dist_to_target`, :func:`reference_distances`, the referee
:func:`~fleetmind.safety.verify.conflicts`) is timed beside the fast path the loop uses, and the
row says how many times slower the reference is (``speedup``). The reference distances read the
same cached maps, so the ratio is the per-robot Python alone, not the breadth-first searches.
The compiled parts are timed the same way against plain code doing the same job: the shield's
push loop (:func:`~fleetmind.safety.shield.pibt_step` against PIBT's recursive push in plain
Python, the shield's test oracle, on the same inputs, results compared; it is several times
faster than the loop the kernel replaced, so the ratio is the conservative one), one distance
map a tick (:func:`~fleetmind.sim.distances.grid_bfs` against scipy's
:func:`~fleetmind.sim.distances.bfs_distances`, compared), and the world snapshot the recorder
writes at a planner call (an incremental capture, pickled, against a deep copy of the
world, pickled; their equality is tested in ``tests/eval/test_capture.py``).

Targets (issue 15): 1,000 robots p50 <= 30 ms and p99 <= 100 ms per tick; 10,000 robots
p99 <= 1 s per tick.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow.parquet as pq
from numpy.typing import NDArray
from rich.table import Table

from fleetmind.dispatch.control import ControlLoop
from fleetmind.dispatch.executors import ShortestPathExecutor
from fleetmind.dispatch.planners import priority_of
from fleetmind.eval.recorder import WorldCapture
from fleetmind.safety.shield import PushInput
from fleetmind.safety.verify import conflicts, count_conflicts
from fleetmind.sim.distances import UNREACHABLE, adjacency, bfs_distances, grid_bfs
from fleetmind.sim.grid import WAIT

MAP: Final = str(
    Path(__file__).resolve().parents[3] / "benchmarks/data/lorr/maps/warehouse_large.map"
)
TARGETS: Final[dict[int, dict[str, float]]] = {
    1000: {"p50": 30.0, "p99": 100.0},
    10000: {"p99": 1000.0},
}


def reference_priorities(loop: ControlLoop) -> NDArray[np.float64]:
    """The shield priorities one robot at a time (the loop's code before it was vectorised)."""
    w = loop.world
    pr = np.zeros(len(w.robot_ids), dtype=np.float64)
    for i in np.flatnonzero(w.has_task):
        order = w.task_of(int(i))
        if order is not None:
            pr[i] = max(priority_of(order, w.tick), loop._order_priority.get(order.id, 0.0))
    pr += 0.5 * w.carrying + 0.01 * loop._waiting
    for rid, boost in loop._boosts.items():
        if rid in w.robot_ids:
            pr[w.robot_ids.index(rid)] += boost
    return pr


def reference_dist_to_target(loop: ControlLoop) -> NDArray[np.int64]:
    """Each robot's distance to target, one map read per robot."""
    w = loop.world
    d = np.zeros(len(w.robot_ids), dtype=np.int64)
    for i in np.flatnonzero(w.has_task):
        d[i] = int(loop._oracle.to((int(w.goal[i, 0]), int(w.goal[i, 1])))[w.cell_of(int(i))])
    return np.minimum(d, UNREACHABLE)


def reference_distances(
    ex: ShortestPathExecutor, pos: NDArray[np.int32], goal: NDArray[np.int32]
) -> NDArray[np.int64]:
    """The shortest-path executor's ``(N, 5)`` distances, one map read per robot."""
    from fleetmind.sim.grid import DELTAS, N_ACTIONS

    h, w = ex.grid.shape
    out = np.full((len(pos), N_ACTIONS), UNREACHABLE, dtype=np.int64)
    nxt = pos[:, None, :] + DELTAS[None, :, :]
    padded = np.pad(ex.grid.blocked, 1, constant_values=True)
    ok = ~padded[nxt[..., 0] + 1, nxt[..., 1] + 1]
    rr = np.clip(nxt[..., 0], 0, h - 1)
    cc = np.clip(nxt[..., 1], 0, w - 1)
    for i in range(len(pos)):
        dmap = ex.oracle.to((int(goal[i, 0]), int(goal[i, 1])))
        out[i] = np.where(ok[i], dmap[rr[i], cc[i]], UNREACHABLE)
    return out


class _Timed(ControlLoop):
    """The loop, with the reference parts timed beside the fast ones on the same states."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = ("priorities", "distances", "executor", "referee", "shield", "bfs", "snapshot")
        self.fast_s = dict.fromkeys(names, 0.0)
        self.slow_s = dict(self.fast_s)
        self._capture = WorldCapture()
        self._graph = adjacency(self.world.grid.blocked).astype(np.float64)
        self._row = np.empty(self.world.grid.blocked.size, dtype=np.int32)
        kernel = self.shield._pibt
        reference = self.shield._pibt_reference

        def both(push: PushInput) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
            # The kernel reorders rows of ``cands`` in place: the reference gets them as given.
            given = push.cands.copy()
            t0 = time.perf_counter()
            act, why = kernel(push)
            t1 = time.perf_counter()
            ref_act, ref_why = reference(push._replace(cands=given))
            t2 = time.perf_counter()
            if act.tolist() != ref_act or why.tolist() != ref_why:
                raise AssertionError("bench scale: the shield kernel differs from the reference")
            self.fast_s["shield"] += t1 - t0
            self.slow_s["shield"] += t2 - t1
            return act, why

        self.shield._pibt = both  # type: ignore[method-assign]

    def _time_world_parts(self) -> None:
        """One distance map and one world snapshot, each both ways, on this tick's state."""
        w = self.world
        free = np.flatnonzero(~w.grid.blocked.reshape(-1))
        flat = int(free[(w.tick * 7919) % len(free)])  # a different target each tick
        t0 = time.perf_counter()
        grid_bfs(self.shield._blocked_flat, w.grid.shape[1], flat, self._row, UNREACHABLE)
        t1 = time.perf_counter()
        want = bfs_distances(self._graph, flat)
        t2 = time.perf_counter()
        if not np.array_equal(self._row, want):
            raise AssertionError("bench scale: the compiled search differs from scipy's")
        self.fast_s["bfs"] += t1 - t0
        self.slow_s["bfs"] += t2 - t1
        t0 = time.perf_counter()
        pickle.dumps(self._capture.take(w.tick, w, reason="bench"), protocol=5)
        t1 = time.perf_counter()
        pickle.dumps({"state": w.snapshot()}, protocol=5)
        t2 = time.perf_counter()
        self.fast_s["snapshot"] += t1 - t0
        self.slow_s["snapshot"] += t2 - t1

    def step(self) -> None:
        w = self.world
        if isinstance(self.executor, ShortestPathExecutor):
            pos, goal = w.pos.copy(), w.goal.copy()
            idx = np.flatnonzero(w.has_task)
            # The executor's first choices by distance alone (no traffic terms): the joint move
            # the referee sees without the shield; idle robots wait.
            acts = np.full(len(pos), WAIT, dtype=np.int64)
            acts[idx] = self.executor.order(self.executor.distances(pos[idx], goal[idx]))[:, 0]
            for name, fast, slow in (
                ("priorities", self._priorities, lambda: reference_priorities(self)),
                (
                    "distances",
                    lambda: self._dist_to_target(self._own_routes())[0],
                    lambda: reference_dist_to_target(self),
                ),
                (
                    "executor",
                    lambda: self.executor.distances(pos[idx], goal[idx]),
                    lambda: reference_distances(self.executor, pos[idx], goal[idx]),
                ),
                (
                    "referee",
                    lambda: count_conflicts(w.grid, pos, acts),
                    lambda: len(conflicts(w.grid, pos, acts)),
                ),
            ):
                t0 = time.perf_counter()
                a = fast()
                t1 = time.perf_counter()
                b = slow()
                t2 = time.perf_counter()
                if not np.array_equal(np.asarray(a), np.asarray(b)):
                    raise AssertionError(f"bench scale: fast {name} differs from the reference")
                self.fast_s[name] += t1 - t0
                self.slow_s[name] += t2 - t1
        self._time_world_parts()
        super().step()


def _tiers(stats: Any, lat: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    cols = {"tick": "step_ms", "executor": "executor_ms", "shield": "shield_ms", "sim": "sim_ms"}
    for name, col in cols.items():
        v = lat.column(col).to_numpy()
        out[name] = {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99))}
        out[name]["max"] = float(v.max())
    pl = np.asarray(stats.planner_ms or [0.0])
    out["planner"] = {
        "p50": float(np.percentile(pl, 50)),
        "p99": float(np.percentile(pl, 99)),
        "max": float(pl.max()),
    }
    return out


def _case(robots: int, steps: int, map_spec: str, compare_ticks: int) -> dict[str, Any]:
    """One fleet size, as ``fleetmind run`` runs it, then the reference comparison (a child)."""
    import fleetmind.eval.runner as runner
    from fleetmind.eval.runner import RunConfig, execute

    def config(n_steps: int) -> RunConfig:
        return RunConfig(
            map=map_spec,
            robots=robots,
            steps=n_steps,
            planner="assignment",
            executor="shortest-path",
        )

    loops: list[ControlLoop] = []
    plain = ControlLoop

    def keep(*args: Any, **kwargs: Any) -> ControlLoop:
        loops.append(plain(*args, **kwargs))
        return loops[-1]

    # The runner builds the loop inside execute(); this child process swaps in a constructor
    # that keeps a handle on it (its stats and distance maps), nothing else changes.
    setattr(runner, "ControlLoop", keep)  # noqa: B010
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        m = execute(config(steps), Path(tmp) / "run")
        wall = time.perf_counter() - start
        lat = pq.read_table(Path(tmp) / "run" / "latency.parquet")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    loop = loops[0]
    row: dict[str, Any] = {
        "robots": robots,
        "steps": steps,
        "tiers": _tiers(loop.stats, lat),
        "tasks_completed": m["tasks_completed"],
        "collisions": m["collisions"],
        "planner_calls": m["planner_calls"],
        "peak_rss_mb": rss_mb,
        "distance_maps": {"cached": loop._oracle.cached, "mb": loop._oracle.nbytes / 2**20},
        "wall_s": wall,
    }
    # The baseline: the same run again (not recorded), the reference timed beside the fast path.
    loops.clear()
    timed: list[_Timed] = []

    def keep_timed(*args: Any, **kwargs: Any) -> _Timed:
        timed.append(_Timed(*args, **kwargs))
        return timed[-1]

    setattr(runner, "ControlLoop", keep_timed)  # noqa: B010
    execute(config(compare_ticks), None)
    ref = timed[0]
    row["compare_ticks"] = compare_ticks
    row["reference_ms"] = {k: 1e3 * v for k, v in ref.slow_s.items()}
    row["fast_ms"] = {k: 1e3 * v for k, v in ref.fast_s.items()}
    row["speedup"] = {k: ref.slow_s[k] / v if v > 0 else 0.0 for k, v in ref.fast_s.items()}
    return row


def run(
    *,
    robots: tuple[int, ...] = (1000, 10000),
    steps: int = 200,
    map_spec: str = MAP,
    compare_ticks: int = 30,
    quick: bool = False,
) -> dict[str, Any]:
    """Run every fleet size in a child process; the rows, with the targets beside them."""
    if quick:
        steps, compare_ticks = min(steps, 30), min(compare_ticks, 10)
    ctx = mp.get_context("spawn")
    rows = []
    for n in robots:
        with ctx.Pool(1) as pool:
            rows.append(pool.apply(_case, (n, steps, map_spec, compare_ticks)))
    for row in rows:
        want = TARGETS.get(row["robots"], {})
        row["targets_ms"] = want
        row["meets"] = all(row["tiers"]["tick"][q] <= v for q, v in want.items()) if want else None
    return {"map": map_spec, "rows": rows, "machine": "2 shared cores (timings vary with load)"}


def format_table(result: dict[str, Any]) -> Table:
    """The rows as a table."""
    t = Table(title=f"control loop at scale ({Path(result['map']).name}; {result['machine']})")
    cols = ("robots", "tick p50/p99/max ms", "executor", "shield", "sim", "planner", "tasks")
    for col in (*cols, "collisions", "peak RSS", "reference / fast", "target"):
        t.add_column(col)
    for r in result["rows"]:
        ti = r["tiers"]

        def f(k: str, ti: dict[str, dict[str, float]] = ti) -> str:
            return "{p50:.0f}/{p99:.0f}/{max:.0f}".format(**ti[k])

        sp = r["speedup"]
        t.add_row(
            f"{r['robots']:,}",
            f("tick"),
            f("executor"),
            f("shield"),
            f("sim"),
            f("planner"),
            str(r["tasks_completed"]),
            str(r["collisions"]),
            f"{r['peak_rss_mb']:,.0f} MB",
            " ".join(f"{k} {v:.1f}x" for k, v in sp.items()),
            ", ".join(f"{q}<={v:.0f}" for q, v in r["targets_ms"].items())
            + ("" if r["meets"] is None else (" met" if r["meets"] else " MISSED")),
        )
    return t
