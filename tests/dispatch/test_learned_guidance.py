"""The learned-guidance executor: a guidance graph learned by CMA-ES (rl/guide.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from fleetmind.dispatch.executors import GuidanceExecutor, LearnedGuidanceExecutor
from fleetmind.errors import ConfigError
from fleetmind.rl import guide
from fleetmind.rl.guide import GuideModel
from fleetmind.sim.grid import DOWN, LEFT, RIGHT, UP, WAIT
from fleetmind.sim.maps import load_map, parse_text_map

# A 3x7 map: row 1 is a one-wide corridor between walls, with free cells above and below its ends.
CORRIDOR = "\n".join([".#####.", "x.....S", ".#####."])


@pytest.fixture(scope="module")
def grid():
    return load_map("warehouse-small")


def _shifted(pos, grid, k):
    """The scene with every robot moved ``k`` steps along a free direction (traffic counts move)."""
    h, w = grid.shape
    out = pos.copy()
    for i in range(len(out)):
        r, c = out[i]
        for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0))[(i + k) % 4 :]:
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and not grid.blocked[rr, cc]:
                out[i] = (rr, cc)
                break
    return out


def test_the_neutral_model_ranks_exactly_as_guidance(grid, fleet_scene) -> None:
    pos, goal, active = fleet_scene(grid, n=60, seed=3)
    plain = GuidanceExecutor(grid, seed=5)
    learned = LearnedGuidanceExecutor(grid, seed=5, model=GuideModel.neutral(), robots=60)
    for k in range(12):  # traffic counts build up between calls
        p = _shifted(pos, grid, k)
        assert (plain.rank(p, goal, active) == learned.rank(p, goal, active)).all()


def test_a_changed_model_ranks_differently(grid, fleet_scene) -> None:
    pos, goal, active = fleet_scene(grid, n=60, seed=3)
    plain = GuidanceExecutor(grid, seed=5)
    model = GuideModel(theta={"against": 0.2, "corridor": 1.5})
    learned = LearnedGuidanceExecutor(grid, seed=5, model=model, robots=60)
    assert (plain.rank(pos, goal, active) != learned.rank(pos, goal, active)).any()


def test_the_shipped_model_loads_and_a_free_closer_move_leads(grid, fleet_scene) -> None:
    model = GuideModel.load(guide.default_guide_path())
    assert model.metadata  # says how it was made
    ex = LearnedGuidanceExecutor(grid, seed=0, robots=100)
    assert ex.model == model
    pos, goal, active = fleet_scene(grid, n=40, seed=1)
    for _ in range(3):
        ranking = ex.rank(pos, goal, active)
        assert (np.sort(ranking, axis=1) == np.arange(5)).all()
        assert (ranking[~active, 0] == WAIT).all()
    # Waiting never beats the best move on the executor's own route costs.
    cost = ex.step_costs(pos, goal)
    best = np.take_along_axis(cost, ranking[:, :1], axis=1)[:, 0]
    assert (best[active] <= cost[active, WAIT]).all()


def test_features_see_corridors_stations_and_the_way() -> None:
    g = parse_text_map(CORRIDOR, source="corridor")
    phi = guide.move_features(g, robots=2).reshape(3, 7, 4, -1)
    f = {name: k for k, name in enumerate(guide.FEATURES)}
    right, left = guide.MOVES.index(RIGHT), guide.MOVES.index(LEFT)
    up, down = guide.MOVES.index(UP), guide.MOVES.index(DOWN)
    # Row 1 runs west: RIGHT along it is against the way, LEFT with it.
    assert phi[1, 2, right, f["against"]] == 1.0
    assert phi[1, 3, left, f["against"]] == 0.0
    # Inside the corridor both cells across a horizontal move are walls; at its end not.
    assert phi[1, 2, right, f["corridor"]] == 1.0
    assert phi[1, 5, right, f["corridor"]] == 0.0  # into (1, 6): open above and below
    assert phi[1, 5, right, f["station"]] == 1.0
    assert phi[1, 4, right, f["near_task"]] == 1.0
    assert phi[0, 0, down, f["pickup"]] == 1.0
    assert phi[1, 0, up, f["vertical"]] == 1.0
    assert phi[1, 2, right, f["against_corridor"]] == 1.0
    # Density features: robots per free cell over 0.1 times the base feature.
    d = guide.density(g, 2)
    assert d == pytest.approx(2 / 11 / 0.1)
    assert phi[1, 2, right, f["density_against_corridor"]] == pytest.approx(d)


def test_lanes_alternate_by_rank_where_parity_does_not() -> None:
    # Racks two rows apart: the one-wide aisles (rows 1, 3, 5) all have odd parity.
    rows_text = ["#######", "x.....S", "#######", "......S", "#######", "......S", "#######"]
    text = "\n".join([*rows_text, ".......", "......."])
    g = parse_text_map(text, source="racks")
    rows, _ = guide.lane_ranks(g)
    assert list(np.flatnonzero(rows >= 0)) == [1, 3, 5]
    f = {name: k for k, name in enumerate(guide.FEATURES)}
    phi = guide.move_features(g, robots=2).reshape(9, 7, 4, -1)
    right = guide.MOVES.index(RIGHT)
    # Parity: all three rows run west. Lanes: row 1 east, row 3 west, row 5 east.
    assert [phi[r, 2, right, f["against"]] for r in (1, 3, 5)] == [1.0, 1.0, 1.0]
    assert [phi[r, 2, right, f["lane_against"]] for r in (1, 3, 5)] == [0.0, 1.0, 0.0]
    assert phi[7, 2, right, f["lane_against"]] == 0.0  # not a lane row


def test_a_gap_between_two_obstacles_is_no_lane() -> None:
    # Pillars one cell apart (a sortation floor): each gap has obstacles on both sides, but no
    # aisle runs through it (no lane line, no corridor). Row 5 holds a two-cell aisle (columns
    # 4 and 5): the one lane line.
    text = "\n".join(
        [
            "x.......S",
            ".#.#.#.#.",
            ".........",
            ".#.#.#.#.",
            "....##...",
            ".........",
            "....##...",
            ".........",
            "x.......S",
        ]
    )
    g = parse_text_map(text, source="pillars")
    rows, cols = guide.lane_ranks(g)
    assert list(np.flatnonzero(rows >= 0)) == [5]
    assert list(np.flatnonzero(cols >= 0)) == []
    f = {name: k for k, name in enumerate(guide.FEATURES)}
    phi = guide.move_features(g, robots=2).reshape(9, 9, 4, -1)
    left, right = guide.MOVES.index(LEFT), guide.MOVES.index(RIGHT)
    assert phi[2, 2, left, f["lane_against"]] == 0.0  # row 2: gaps between pillars only
    # Into a gap is no corridor; into the aisle is.
    assert phi[0, 2, guide.MOVES.index(DOWN), f["corridor"]] == 0.0
    assert phi[5, 3, right, f["corridor"]] == 1.0
    # Lane rank 0 runs east, as the crisscross's even rows.
    assert (phi[5, 5, left, f["lane_against"]], phi[5, 5, right, f["lane_against"]]) == (1.0, 0.0)


def test_weights_stay_in_range_and_traffic_under_waiting(grid) -> None:
    model = GuideModel.from_vector(np.full(len(GuideModel.names()), 5.0))
    w = model.move_weights(grid, 100)
    assert w[:, 1:].min() >= guide.W_MIN * guide.SCALE
    assert w.max() <= guide.W_MAX * guide.SCALE
    t = model.traffic_costs()
    total = sum(t.values()) + 2 * t["incoming"]
    assert total <= guide.TRAFFIC_CAP * model.wait + 1e-9


def test_below_the_knee_weights_fade_toward_one_step_and_above_it_stay_exact(grid) -> None:
    shipped = GuideModel.load(guide.default_guide_path())
    assert shipped.knee > 0
    unfaded = replace(shipped, knee=0.0)
    free = int((~grid.blocked).sum())
    at_knee = int(np.ceil(shipped.knee * guide.DENSITY_UNIT * free))  # the density of the knee
    for robots in (at_knee, 2 * at_knee):
        assert shipped.fade(grid, robots) == 1.0
        assert (shipped.move_weights(grid, robots) == unfaded.move_weights(grid, robots)).all()
    moves = [UP, DOWN, LEFT, RIGHT]
    one = guide.SCALE
    spread = []
    for robots in (at_knee // 2, at_knee // 8, 1):
        fade = shipped.fade(grid, robots)
        assert fade == pytest.approx(guide.density(grid, robots) / shipped.knee)
        w = shipped.move_weights(grid, robots)[:, moves]
        full = unfaded.move_weights(grid, robots)[:, moves]
        # Each weight keeps ``fade`` of its departure from one step (to the rounding of a unit),
        # where the full weight was not cut at a bound.
        inside = (full > guide.W_MIN * one) & (full < guide.W_MAX * one)
        assert inside.mean() > 0.9
        assert np.abs((w - one) - fade * (full - one))[inside].max() <= 1
        spread.append(np.abs(w - one).mean())
    assert spread[0] > spread[1] > spread[2]  # the sparser the fleet, the plainer the map
    assert GuideModel(theta={"against": 1.0}, knee=3.0).fade(grid, 1) < 0.01
    with pytest.raises(ConfigError, match="knee"):
        GuideModel(theta={}, knee=-0.1)
    with pytest.raises(ConfigError, match=r"^guide model: traffic\['occupied'\] must be at least"):
        GuideModel(theta={}, traffic={"occupied": -1.0})


def test_the_knee_is_in_the_vector_and_files_and_old_files_never_fade(tmp_path) -> None:
    model = GuideModel(theta={"against": 1.0}, knee=0.5)
    x = model.to_vector()
    assert x[GuideModel.names().index("knee")] == 0.5
    assert GuideModel.from_vector(x).knee == 0.5
    x[GuideModel.names().index("knee")] = 9.0  # a search's proposal, clipped into range
    assert GuideModel.from_vector(x).knee == guide.KNEE_MAX
    model.save(tmp_path / "g.json")
    assert GuideModel.load(tmp_path / "g.json").knee == 0.5
    data = json.loads((tmp_path / "g.json").read_text())
    del data["knee"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert GuideModel.load(tmp_path / "old.json").knee == 0.0


def test_vector_and_file_round_trip(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = GuideModel.neutral().to_vector() + rng.normal(0, 0.1, len(GuideModel.names()))
    model = GuideModel.from_vector(x, note="test")
    assert np.allclose(GuideModel.from_vector(model.to_vector()).to_vector(), model.to_vector())
    model.save(tmp_path / "g.json")
    back = GuideModel.load(tmp_path / "g.json")
    assert back == model
    assert back.metadata == {"note": "test"}


def test_a_fixed_tie_order_without_lanes_or_traffic_ranks_as_shortest_path(
    grid, fleet_scene
) -> None:
    from fleetmind.dispatch.executors import ShortestPathExecutor

    pos, goal, active = fleet_scene(grid, n=60, seed=3)
    # Every move one step, no traffic terms, waiting one step: route costs are SCALE times the
    # true distances plus one step, so only the tie order separates equal moves.
    no_traffic = dict.fromkeys(guide.TRAFFIC, 0.0)
    flat = GuideModel(theta={}, traffic=no_traffic, wait=1.0, ties="vertical")
    fixed = LearnedGuidanceExecutor(grid, seed=5, model=flat, robots=60)
    plain = ShortestPathExecutor(grid)
    # The same costs with random ties: some equal moves come the other way round.
    drawn = LearnedGuidanceExecutor(grid, seed=5, model=replace(flat, ties="random"), robots=60)
    sideways = replace(flat, ties="horizontal")
    across = LearnedGuidanceExecutor(grid, seed=5, model=sideways, robots=60)
    differs = {"random": False, "horizontal": False}
    for k in range(8):
        p = _shifted(pos, grid, k)
        want = plain.rank(p, goal, active)
        assert (fixed.rank(p, goal, active) == want).all()
        differs["random"] |= bool((drawn.rank(p, goal, active) != want).any())
        h = across.rank(p, goal, active)
        differs["horizontal"] |= bool((h != want).any())
        # Where the nearest vertical and the nearest horizontal move are equally close, the
        # first move is vertical under one order and horizontal under the other.
        idx = np.flatnonzero(active)
        d = plain.distances(p[idx], goal[idx])
        vert, horiz = d[:, [UP, DOWN]].min(axis=1), d[:, [LEFT, RIGHT]].min(axis=1)
        tied = idx[(vert == horiz) & (vert < d[:, WAIT])]
        assert len(tied) > 0
        assert np.isin(want[tied, 0], [UP, DOWN]).all()
        assert np.isin(h[tied, 0], [LEFT, RIGHT]).all()
    assert differs == {"random": True, "horizontal": True}


def test_the_tie_order_is_part_of_the_model_and_its_files(tmp_path) -> None:
    model = GuideModel(theta={"against": 1.0}, ties="vertical")
    assert GuideModel.from_vector(model.to_vector()).ties == "vertical"
    for value, ties in ((0.9, "vertical"), (0.2, "random"), (-0.7, "horizontal")):
        x = GuideModel.neutral().to_vector()
        x[GuideModel.names().index("ties")] = value
        assert GuideModel.from_vector(x).ties == ties
    model.save(tmp_path / "g.json")
    assert GuideModel.load(tmp_path / "g.json").ties == "vertical"
    # A file written before tie orders existed reads as random ties (what it ran with).
    data = json.loads((tmp_path / "g.json").read_text())
    del data["ties"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert GuideModel.load(tmp_path / "old.json").ties == "random"
    data["ties"] = "diagonal"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"bad\.json: guide model: ties 'diagonal' not one of"):
        GuideModel.load(tmp_path / "bad.json")


def test_bad_files_and_values_are_refused(tmp_path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ConfigError, match="not a guide model"):
        GuideModel.load(tmp_path / "x.json")
    with pytest.raises(ConfigError, match="readable"):
        GuideModel.load(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="unknown"):
        GuideModel(theta={"bogus": 1.0})
    with pytest.raises(ConfigError, match="not both"):
        LearnedGuidanceExecutor(
            load_map("warehouse-small"), model=GuideModel.neutral(), model_path="x.json"
        )


def test_registered_and_a_shielded_run_repeats(grid, tmp_path) -> None:
    from fleetmind.eval.runner import RunConfig, execute, make_executor

    path = tmp_path / "neutral.json"
    GuideModel.neutral().save(path)
    cfg = RunConfig(map="warehouse-small", robots=16, steps=120, seed=2, executor="guidance")
    learned = cfg.model_copy(update={"executor": "learned-guidance", "policy": str(path)})
    assert isinstance(make_executor(learned, grid, None), LearnedGuidanceExecutor)
    a, b = execute(learned, None), execute(learned, None)
    assert a["tasks_completed"] == b["tasks_completed"] > 0
    assert a["collisions"] == 0
    # Neutral parameters: the same run as guidance, move for move.
    base = execute(cfg, None)
    assert base["tasks_completed"] == a["tasks_completed"]
    assert base["shield_interventions"] == a["shield_interventions"]


def _tiny_search(**changes: Any) -> Any:
    """A search small enough for a test: 2 generations of 3 candidates, 40-tick runs."""
    from fleetmind.eval.guide_train import GuideSearch

    settings: dict[str, Any] = {
        "cases": (("warehouse-small", 10),),
        "seeds": (100, 101),
        "seeds_per_gen": 1,
        "validate": (200,),
        "steps": 40,
        "generations": 2,
        "popsize": 3,
    }
    return GuideSearch(**{**settings, **changes})


def test_a_tiny_search_writes_a_loadable_model_and_repeats(tmp_path) -> None:
    from fleetmind.eval.guide_train import search

    cfg = _tiny_search()
    rows = []
    a = search(cfg, out=tmp_path / "a.json", progress=rows.append)
    loaded = GuideModel.load(tmp_path / "a.json")
    assert loaded == a
    assert [r["generation"] for r in rows if "generation" in r] == [0, 1]
    assert a.metadata["chosen"] in ("mean", "best")
    # Where the search started is saved with it: here the neutral model.
    start = [loaded.metadata["start"][name] for name in GuideModel.names()]
    assert start == GuideModel.neutral().to_vector().tolist()
    # 2 generations of 3 candidates, guidance on seeds 100, 101 and 200, 2 validated models.
    assert a.metadata["runs"] == 2 * 3 + 3 + 2
    b = search(cfg)
    assert np.array_equal(a.to_vector(), b.to_vector())
    LearnedGuidanceExecutor(load_map("warehouse-small"), model_path=tmp_path / "a.json")


def test_a_search_over_several_maps_in_two_processes_is_the_same_search() -> None:
    from fleetmind.eval.guide_train import search

    cfg = _tiny_search(cases=(("warehouse-small", 10), ("warehouse-tiny", 3)))
    one = search(cfg)
    two = search(replace(cfg, workers=2))
    assert np.array_equal(one.to_vector(), two.to_vector())
    assert one.metadata["validation"] == two.metadata["validation"]
    # Each case is scored on its own map and size, and named in the scores.
    assert set(one.metadata["validation"]["mean"]["per_case"]) == {
        "warehouse-small/10",
        "warehouse-tiny/3",
    }
    assert one.metadata["search"]["cases"] == [["warehouse-small", 10], ["warehouse-tiny", 3]]


def test_a_search_of_some_parameters_keeps_the_others_where_they_started() -> None:
    from fleetmind.eval.guide_train import GuideSearch, search

    start = GuideModel.load(guide.default_guide_path())
    only = ("wait", "traffic_stayer")
    got = search(replace(_tiny_search(), only=only, sigma=1.0), init=start)
    names = GuideModel.names()
    moved = {n for n, a, b in zip(names, got.to_vector(), start.to_vector(), strict=True) if a != b}
    assert moved
    assert moved <= set(only)
    assert list(got.metadata["search"]["only"]) == list(only)
    with pytest.raises(ConfigError, match=r"--only names no parameter \['bogus'\]"):
        GuideSearch(only=("wait", "bogus"))


def test_the_search_refuses_the_bench_seeds() -> None:
    from fleetmind.eval.guide_train import GuideSearch

    with pytest.raises(ConfigError, match="benchmark"):
        GuideSearch(seeds=(1, 100))
    with pytest.raises(ConfigError, match="benchmark"):
        GuideSearch(validate=(0,))


def test_the_nav_guide_command_writes_a_model(tmp_path) -> None:
    from typer.testing import CliRunner

    from fleetmind.cli import app

    out = tmp_path / "g.json"
    args = ["nav", "guide", "--out", str(out), "--maps", "warehouse-small", "--robots", "10"]
    args += ["--steps", "30", "--generations", "1", "--popsize", "3", "--seeds", "100-101"]
    args += ["--seeds-per-gen", "2", "--validate", "200", "--init", "lanes", "--json"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    model = GuideModel.load(out)
    assert model.metadata["init"] == "lanes"
    assert model.metadata["search"]["seeds"] == [100, 101]
    bad = CliRunner().invoke(app, [*args[:4], "--seeds", "1,100"])
    assert bad.exit_code != 0
    for cases in ("warehouse-small", "warehouse-small:x", ":10"):
        bad = CliRunner().invoke(app, [*args[:4], "--cases", cases])
        assert bad.exit_code != 0
        assert "--cases: expected MAP:ROBOTS" in str(bad.exception)


def test_the_loop_has_guidance_maps_made_ahead_and_room_kept_for_the_fleet() -> None:
    from fleetmind.dispatch.control import ControlLoop, LoopConfig
    from fleetmind.eval.runner import RunConfig, make_planner, prepare

    lorr = "benchmarks/data/lorr/maps/warehouse_small.map"
    cfg = RunConfig(map=lorr, robots=30, steps=60, executor="learned-guidance", seed=3)
    ready = prepare(cfg)
    ex = ready.executor
    assert isinstance(ex, LearnedGuidanceExecutor)
    pickups = int(ready.grid.pickups.sum())
    assert ex.guide.cached == pickups  # the pickups' maps, made before any tick
    loop = ControlLoop(
        ready.world,
        make_planner(cfg, ready.grid, None),
        ex,
        config=LoopConfig(planner_mode="sync"),
    )
    assert ex.guide.max_cached >= 2 * 30 + pickups + 64  # room for the fleet's maps
    assert loop.run(60)["tasks_completed"] > 0
    # Stations asked for at assignment were searched by the worker, most before a tick
    # needed them (``computed`` counts the pickups' maps made at the start and any made
    # inside a tick); the maps equal fresh ones.
    assert ex.guide.computed_ahead > ex.guide.computed - pickups
    w = ready.world
    pos, goal = w.pos.astype(np.int32), w.goal.astype(np.int32)
    fresh = LearnedGuidanceExecutor(ready.grid, seed=0, robots=30)
    assert (ex.step_costs(pos, goal) == fresh.step_costs(pos, goal)).all()


def test_the_deadlock_monitor_watches_the_cost_maps_routes_and_stations_get_no_plain_map() -> None:
    from fleetmind.dispatch.control import ControlLoop, LoopConfig
    from fleetmind.eval.runner import RunConfig, make_planner, prepare

    lorr = "benchmarks/data/lorr/maps/warehouse_small.map"
    cfg = RunConfig(map=lorr, robots=30, steps=60, executor="learned-guidance", seed=3)
    ready = prepare(cfg)
    ex = ready.executor
    planner = make_planner(cfg, ready.grid, None)
    loop = ControlLoop(ready.world, planner, ex, config=LoopConfig(planner_mode="sync"))
    plain, w, width = loop._oracle, ready.world, ready.grid.shape[1]
    resolve = loop.shield.resolve
    last = np.full(len(w.robot_ids), -1)
    seen = {"changed": 0, "same": 0}

    def watched(*args, dist_to_target, target_changed, **kw):
        # What the monitor is handed: the executor's own route costs (1/SCALE steps) to each
        # target, and the robots whose target is not the one it had last tick.
        nonlocal last
        idx = np.flatnonzero(w.has_task)
        targets = w.goal[idx].astype(np.int64) @ [width, 1]
        assert (dist_to_target[idx] == ex.guide.lookup(targets, w.pos[idx] @ [width, 1])).all()
        now = np.full(len(last), -1)
        now[idx] = targets
        if seen["changed"]:  # after the first tick (everything new then)
            assert (target_changed == (now != last)).all()
        last = now
        seen["changed"] += int(target_changed[idx].sum())
        seen["same"] += int((~target_changed[idx]).sum())
        return resolve(*args, dist_to_target=dist_to_target, target_changed=target_changed, **kw)

    loop.shield.resolve = watched
    assert loop.run(60)["tasks_completed"] > 0
    assert seen["same"] > 5 * seen["changed"] > 0
    # The plain maps made are the planner's pickups' only: no station's.
    made = plain.counts()
    assert made["made_in_caller"] + made["made_ahead"] <= int(ready.grid.pickups.sum())
    # A new model means new maps, so every robot's cost may jump: all count as changed.
    ex.set_model(guide.GuideModel.neutral())
    assert loop._progress()[1].all()
    assert not loop._progress()[1][w.has_task].any()


def test_rank_fitness_weighs_every_case_alike() -> None:
    from fleetmind.eval.guide_train import GuideSearch, mean_rank

    # A: far ahead on one case, behind on two; B: a little ahead on those two.
    per = [
        {"a": 1.70, "b": 1.00, "c": 1.00},
        {"a": 1.00, "b": 1.04, "c": 1.05},
        {"a": 1.00, "b": 1.02, "c": 1.00},
    ]
    ratio = [float(np.mean(list(p.values()))) for p in per]
    assert int(np.argmax(ratio)) == 0  # the mean of ratios follows case a alone
    ranks = mean_rank(per)
    assert int(np.argmax(ranks)) == 1
    assert ranks == pytest.approx([(2 + 0 + 0.5) / 3, (0.5 + 2 + 2) / 3, (0.5 + 1 + 0.5) / 3])
    with pytest.raises(ConfigError, match="fitness"):
        GuideSearch(fitness="best")


def test_a_rank_search_keeps_its_mean() -> None:
    from fleetmind.eval.guide_train import search

    cases = (("warehouse-small", 10), ("warehouse-tiny", 3))
    cfg = _tiny_search(cases=cases, generations=1, fitness="rank")
    model = search(cfg)
    assert model.metadata["chosen"] == "mean"
    assert set(model.metadata["validation"]) == {"mean"}
    assert model.metadata["search"]["fitness"] == "rank"
