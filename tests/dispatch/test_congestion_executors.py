"""Simple executor baselines: congestion-aware shortest path and PIBT's own ordering."""

from __future__ import annotations

import numpy as np
import pytest

from fleetmind.dispatch.executors import (
    CongestionExecutor,
    GuidanceExecutor,
    LearnedGuidanceExecutor,
    PibtOrderExecutor,
    ShortestPathExecutor,
    ShortestPathRandomExecutor,
    TrafficWeights,
)
from fleetmind.errors import ConfigError
from fleetmind.sim.distances import UNREACHABLE
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT
from fleetmind.sim.maps import load_map, parse_text_map

EXECUTORS = [CongestionExecutor, GuidanceExecutor, PibtOrderExecutor]

# An open 5x5 room: a robot at (2, 2) heading for (0, 0) has two equally short first moves,
# UP into (1, 2) and LEFT into (2, 1).
ROOM = "\n".join(["x....", ".....", ".....", ".....", "....S"])


@pytest.fixture(scope="module")
def room():
    return parse_text_map(ROOM, source="room")


@pytest.fixture(scope="module")
def grid():
    return load_map("warehouse-small")


@pytest.mark.parametrize("cls", EXECUTORS)
def test_rankings_are_permutations_led_by_a_closer_move(grid, cls, fleet_scene) -> None:
    pos, goal, active = fleet_scene(grid)
    ex = cls(grid, seed=0)
    for _ in range(3):  # the traffic count changes between calls
        ranking = ex.rank(pos, goal, active)
        assert ranking.shape == (len(pos), 5)
        assert (np.sort(ranking, axis=1) == np.arange(5)).all()
        assert (ranking[~active, 0] == WAIT).all()  # idle robots wait
    # With the default weights a free move that gets closer (on the executor's own route
    # costs) always leads: the traffic terms break ties and steer around robots, but never
    # stall a robot with a free way forward.
    dist = ex.step_costs(pos, goal)
    best = np.take_along_axis(dist, ranking[:, :1], axis=1)[:, 0]
    assert (best[active] <= dist[active, WAIT]).all()


@pytest.mark.parametrize("cls", EXECUTORS)
def test_same_seed_same_rankings(grid, cls, fleet_scene) -> None:
    pos, goal, active = fleet_scene(grid)

    def run(seed):
        ex = cls(grid, seed=seed)
        # Robots shift a little between calls, so the flow and traffic counts come into play.
        return np.stack([ex.rank(np.roll(pos, k, axis=0), goal, active) for k in range(6)])

    assert (run(3) == run(3)).all()
    assert (run(3) != run(4)).any()


@pytest.mark.parametrize("cls", EXECUTORS)
def test_prefers_the_free_cell_over_an_occupied_one(room, cls) -> None:
    # Robot 0 heads for (0, 0); robot 1 (idle) stands on (1, 2), one of its two closer cells.
    pos = np.array([[2, 2], [1, 2]], dtype=np.int32)
    goal = np.array([[0, 0], [0, 0]], dtype=np.int32)
    active = np.array([True, False])
    firsts = {int(cls(room, seed=s).rank(pos, goal, active)[0, 0]) for s in range(20)}
    assert firsts == {LEFT}
    # The plain random tie-break goes either way on the same scene.
    plain = {
        int(ShortestPathRandomExecutor(room, seed=s).rank(pos, goal, active)[0, 0])
        for s in range(20)
    }
    assert plain == {UP, LEFT}


def test_congestion_avoids_a_cell_with_recent_traffic(room) -> None:
    # Robot 1 stood on (1, 2) for ten ticks and has just left it; the cell is free now.
    goal = np.array([[0, 0], [4, 4]], dtype=np.int32)
    active = np.array([True, False])
    parked = np.array([[2, 2], [1, 2]], dtype=np.int32)
    moved_on = np.array([[2, 2], [0, 4]], dtype=np.int32)
    firsts = set()
    for seed in range(20):
        ex = CongestionExecutor(room, seed=seed)
        for _ in range(10):
            ex.rank(parked, goal, active)
        firsts.add(int(ex.rank(moved_on, goal, active)[0, 0]))
    assert firsts == {LEFT}  # the traffic count remembers (1, 2)
    # PIBT's order looks at the cells now only: with (1, 2) free it goes either way.
    seen = {
        int(PibtOrderExecutor(room, seed=s).rank(moved_on, goal, active)[0, 0]) for s in range(20)
    }
    assert seen == {UP, LEFT}


def test_head_on_costs_more_than_following(room) -> None:
    # Robot 0 at (2, 2) heads for (0, 0). Robot 1 on (1, 2) heads down through robot 0's cell
    # (a swap the shield must break); robot 2 on (2, 1) heads left, away from robot 0.
    pos = np.array([[2, 2], [1, 2], [2, 1]], dtype=np.int32)
    goal = np.array([[0, 0], [4, 2], [2, 0]], dtype=np.int32)
    active = np.ones(3, dtype=bool)
    firsts = {
        int(CongestionExecutor(room, seed=s).rank(pos, goal, active)[0, 0]) for s in range(20)
    }
    assert firsts == {LEFT}


def test_bad_decay_is_refused(room) -> None:
    with pytest.raises(ConfigError, match="decay"):
        CongestionExecutor(room, weights=TrafficWeights(decay=1.0))


@pytest.mark.parametrize("name", ["congestion", "guidance", "pibt"])
def test_registered_and_a_shielded_run_delivers_without_collisions(grid, name) -> None:
    from fleetmind.eval.runner import RunConfig, execute, make_executor

    cfg = RunConfig(map="warehouse-small", robots=16, steps=150, seed=2, executor=name)
    ex = make_executor(cfg, grid, None)
    assert getattr(ex, "name", None) == name
    a, b = execute(cfg, None), execute(cfg, None)
    assert a["tasks_completed"] == b["tasks_completed"] > 0
    assert a["shield_interventions"] == b["shield_interventions"]
    assert a["collisions"] == 0
    base = execute(cfg.model_copy(update={"executor": "shortest-path"}), None)
    assert base["executor"] == ShortestPathExecutor.name != a["executor"]


def test_guidance_follows_the_way_of_the_lanes(room) -> None:
    # Robot at (1, 1) heading for (3, 3): DOWN and RIGHT are equally short. Row 1 runs west and
    # column 1 north, so both are against the way; one step on, row 2 runs east and column 2
    # south. A robot at (2, 2) heading for (0, 0) has UP (column 2 runs south: against) and LEFT
    # (row 2 runs east: against); from (2, 2) to (4, 4): DOWN and RIGHT are both with the way.
    ex = GuidanceExecutor(room, seed=0)
    costs = ex.step_costs(np.array([[2, 2]], np.int32), np.array([[4, 4]], np.int32))[0]
    assert costs[DOWN] == costs[RIGHT] < costs[WAIT] < costs[UP]
    # A detour along the lanes beats a shorter path against them: (2, 1) to (0, 1) is 2 steps
    # up column 1 (runs north: with the way) ...
    up = ex.step_costs(np.array([[2, 1]], np.int32), np.array([[0, 1]], np.int32))[0]
    assert up[UP] == 2
    # ... but (2, 2) to (0, 2) against column 2's way costs more than the lane next door.
    against = ex.step_costs(np.array([[2, 2]], np.int32), np.array([[0, 2]], np.int32))[0]
    assert against[UP] > 2
    plain = ShortestPathExecutor(room).distances(
        np.array([[2, 2]], np.int32), np.array([[0, 2]], np.int32)
    )[0]
    assert plain[UP] == 1
    # highway 1: no guidance, the same ranking as the congestion executor.
    pos = np.array([[2, 2], [1, 2], [3, 0]], dtype=np.int32)
    goal = np.array([[0, 0], [4, 4], [0, 4]], dtype=np.int32)
    active = np.ones(3, dtype=bool)
    for seed in range(5):
        a = GuidanceExecutor(room, seed=seed, highway=1).rank(pos, goal, active)
        b = CongestionExecutor(room, seed=seed).rank(pos, goal, active)
        assert (a == b).all()
    with pytest.raises(ConfigError, match="highway"):
        GuidanceExecutor(room, highway=1.5)


def test_guidance_routes_around_closed_cells(room) -> None:
    # (2, 2) to (0, 2): the way up column 2 closed at (1, 2), guidance must go round it.
    ex = GuidanceExecutor(room, seed=0)
    pos, goal = np.array([[2, 2]], np.int32), np.array([[0, 2]], np.int32)
    before = ex.step_costs(pos, goal)[0]
    ex.reroute([(1, 2)])
    after = ex.step_costs(pos, goal)[0]
    assert after[UP] >= UNREACHABLE  # a move into the closed cell
    assert after[WAIT] > before[WAIT]  # the way round is longer
    assert ex.rank(pos, goal, np.array([True]))[0, 0] in (LEFT, RIGHT)
    # The traffic pass sees the closed cell as a wall too: that move costs infinitely much.
    key, _ = ex.costs(pos, goal, np.array([0]))
    assert np.isinf(key[0, UP])
    assert np.isfinite(key[0, [WAIT, DOWN, LEFT, RIGHT]]).all()


class _ReferenceTraffic:
    """The congestion costs as plain numpy, every cell decayed every tick (the first version).

    The executors compute the same costs in one compiled pass with counts decayed lazily
    (``dispatch/traffic.py``); this is what they are checked against.
    """

    opposite = np.array([WAIT, DOWN, UP, RIGHT, LEFT])

    def __init__(self, shape, weights: TrafficWeights) -> None:
        h, w = shape
        self.w, self.cells, self.wt = w, h * w, weights
        self.heat = np.zeros(h * w)
        self.flow = np.zeros((h * w, 5))
        self.last = np.zeros(0, dtype=np.int64)

    def keys(self, blocked, pos, idx, dist, ties):
        from fleetmind.sim.grid import DELTAS

        w, wt, d = self.w, self.wt, self.wt.decay
        h = self.cells // w
        here = pos[:, 0].astype(np.int64) * w + pos[:, 1]
        self.heat = self.heat * d + np.bincount(here, minlength=self.cells)
        self.flow *= d
        if self.last.shape == here.shape:
            step = here - self.last
            move = np.select(
                [step == -w, step == w, step == -1, step == 1], [UP, DOWN, LEFT, RIGHT], WAIT
            )
            np.add.at(self.flow, (here, move), 1.0)
        self.last = here
        nxt = pos[idx, None, :].astype(np.int64) + DELTAS[None, :, :]
        padded = np.pad(blocked, 1, constant_values=True)
        ok = ~padded[nxt[..., 0] + 1, nxt[..., 1] + 1]
        flat = np.where(ok, np.clip(nxt[..., 0], 0, h - 1) * w + np.clip(nxt[..., 1], 0, w - 1), 0)
        first = np.lexsort((ties, dist), axis=1)[:, 0]
        rows = np.arange(len(idx))
        intent = np.full(len(pos), -1, dtype=np.int64)
        moving = (first != WAIT) & ok[rows, first]  # a move into a wall is no move
        intent[idx[moving]] = flat[rows[moving], first[moving]]
        occupant = np.full(self.cells, -1, dtype=np.int64)
        occupant[here] = np.arange(len(pos))
        incoming = np.bincount(intent[intent >= 0], minlength=self.cells).astype(float)
        holder = occupant[flat]
        held = (holder >= 0) & ok
        holder_intent = np.where(held, intent[np.maximum(holder, 0)], -1)
        head_on = held & (holder_intent == here[idx, None])
        stays = held & ((holder_intent < 0) | head_on)
        own = intent[idx, None] == flat
        cost = (
            wt.occupied * held
            + wt.stayer * stays
            + wt.head_on * head_on
            + wt.incoming * (incoming[flat] - own)
            + wt.traffic * (1.0 - d) * self.heat[flat]
            + wt.against * (1.0 - d) * self.flow[flat, self.opposite[None, :]]
        )
        key = np.where(ok, dist + cost, np.inf)
        key[:, WAIT] = dist[:, WAIT]
        return key


@pytest.mark.parametrize("decay", [0.0, 0.5, 0.9])
def test_the_compiled_traffic_pass_equals_the_numpy_reference(grid, fleet_scene, decay) -> None:
    from fleetmind.dispatch.traffic import order

    # Every term on, so that each one is checked; robots move between calls (traffic flows).
    weights = TrafficWeights(
        occupied=0.3, stayer=0.2, head_on=0.25, incoming=0.1, traffic=0.4, against=0.3, decay=decay
    )
    pos, goal, active = fleet_scene(grid, n=80, seed=2)
    ex = CongestionExecutor(grid, seed=4, weights=weights)
    ref = _ReferenceTraffic(grid.shape, weights)
    rng = np.random.default_rng(0)
    for tick in range(40):
        idx = np.flatnonzero(active)
        state = ex.rng.bit_generator.state
        key, ties = ex.costs(pos, goal, idx)
        ex.rng.bit_generator.state = state  # the reference draws the same tie-breakers
        dist = ex.step_costs(pos[idx], goal[idx])
        want = ref.keys(grid.blocked, pos, idx, dist, ex.rng.random(dist.shape))
        assert np.array_equal(np.isinf(key), np.isinf(want))
        np.testing.assert_allclose(key[np.isfinite(key)], want[np.isfinite(want)], rtol=1e-12)
        assert (order(key, ties) == np.lexsort((ties, key), axis=1)).all()
        # Each robot takes its best free move, half the time (so some wait, some meet).
        ranking = ex.rank(pos, goal, active)  # advances the executor's traffic a second time
        ref.keys(grid.blocked, pos, idx, dist, ties)  # and the reference's
        go = rng.random(len(pos)) < 0.5
        step = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])[ranking[:, 0]]
        nxt = pos + np.where(go[:, None], step, 0)
        taken = set()
        for i in range(len(pos)):  # one robot a cell: a robot whose cell is taken stays
            cell = (int(nxt[i, 0]), int(nxt[i, 1]))
            if cell in taken or grid.blocked[cell]:
                cell = (int(pos[i, 0]), int(pos[i, 1]))
            taken.add(cell)
            nxt[i] = cell
        if len(taken) == len(pos):
            pos = nxt.astype(np.int32)
        active = active if tick % 7 else ~active | (rng.random(len(pos)) < 0.7)


@pytest.mark.parametrize("cls", [*EXECUTORS, LearnedGuidanceExecutor])
def test_the_one_call_ranking_equals_ordering_the_costs(grid, cls) -> None:
    # ``rank`` runs a tick in one compiled call; ``costs`` then ``order`` are the same steps one
    # by one. Random scenes every tick, some robots idle, goals off the pickups, then a reroute.
    from fleetmind.dispatch.traffic import order

    fused, stepwise = cls(grid, seed=3), cls(grid, seed=3)
    rng = np.random.default_rng(1)
    free = np.argwhere(~grid.blocked)
    for tick in range(30):
        if tick == 15:
            closed = [tuple(int(v) for v in free[k]) for k in rng.choice(len(free), 5)]
            fused.reroute(closed)
            stepwise.reroute(closed)
        pos = free[rng.choice(len(free), 60, replace=False)].astype(np.int32)
        goal = free[rng.choice(len(free), 60)].astype(np.int32)
        active = rng.random(60) < 0.8
        got = fused.rank(pos, goal, active, None, tick)
        idx = np.flatnonzero(active)
        key, ties = stepwise.costs(pos, goal, idx)
        want = np.tile(np.arange(5), (60, 1))
        want[idx] = order(key, ties)
        assert np.array_equal(got, want), tick


def test_counts_are_kept_only_while_a_term_reads_them(grid, fleet_scene) -> None:
    # Without a ``traffic`` or ``against`` weight the counts are not written; a retune that
    # turns one on again starts them at zero (none left from before the pause), so the executor
    # then costs moves exactly as one that began counting at that tick.
    pos, goal, active = fleet_scene(grid, n=40, seed=5)
    idx = np.flatnonzero(active)
    uncounted = TrafficWeights(occupied=0.3, stayer=0.2, head_on=0.2, traffic=0.0, against=0.0)
    counted = TrafficWeights(occupied=0.3, stayer=0.2, head_on=0.2, traffic=0.4, against=0.3)
    ex = CongestionExecutor(grid, seed=1, weights=counted)
    for tick in range(3):
        ex.rank(pos, goal, active, None, tick)
    assert ex.traffic.counts.any()
    ex.traffic.retune(uncounted.decay, ex._terms(uncounted))
    written = ex.traffic.counts.copy()
    for tick in range(3, 6):
        ex.rank(pos, goal, active, None, tick)
    assert not ex.traffic.counting
    assert np.array_equal(ex.traffic.counts, written)  # not counted while nothing reads them
    ex.traffic.retune(counted.decay, ex._terms(counted))
    fresh = CongestionExecutor(grid, seed=1, weights=counted)
    ex.rng, fresh.rng = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(3):
        got, _ = ex.costs(pos, goal, idx)
        want, _ = fresh.costs(pos, goal, idx)
        np.testing.assert_array_equal(got, want)
