"""The RWARE twin's numba kernels against its numpy reference, on random states (hypothesis)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetmind.errors import ConfigError
from fleetmind.sim import rware_twin as twin

LAYOUTS = (
    twin.layout_from_params(shelf_columns=1, column_height=3, shelf_rows=2),
    twin.layout_from_params(shelf_columns=3, column_height=8, shelf_rows=1),  # rware tiny
    twin.layout_from_string("x.x.x.x\n.g...g.\nx.x.x.x\n.......\nx.x.x.x"),
    twin.layout_from_string("xxx\nxgx\nxxx"),  # shelves everywhere: loaded robots blocked
)
STATE = (
    "pos",
    "heading",
    "carrying",
    "delivered_flag",
    "shelf_pos",
    "queue",
    "requested",
    "steps",
    "inactive",
    "robot_grid",
    "shelf_grid",
)


@st.composite
def worlds(draw: st.DrawFn) -> twin.RwareWorlds:
    """A batch of 1-4 worlds in random (crowded, loaded) states of one random setting."""
    layout = draw(st.sampled_from(LAYOUTS))
    h, w = layout.shape
    n_shelves = len(layout.shelf_cells)
    config = twin.RwareConfig(
        layout,
        draw(st.integers(1, min(h * w, 24))),
        draw(st.integers(1, n_shelves - 1)),  # a full queue leaves rware nothing to refill
        sensor_range=draw(st.integers(0, 2)),
        max_steps=draw(st.sampled_from([None, 3, 500])),
        max_inactivity_steps=draw(st.sampled_from([None, 2])),
        reward_type=draw(st.sampled_from(["individual", "global", "two_stage"])),
        normalised_coordinates=draw(st.booleans()),
    )
    b = draw(st.integers(1, 4))
    out = twin.RwareWorlds(config, b)
    out.reset(list(range(b)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = config.n_robots
    for k in range(b):
        out.pos[k] = rng.choice(h * w, size=n, replace=False)
        out.heading[k] = rng.integers(4, size=n)
        # Some robots carry a shelf (which then stands under them); the rest of the shelves
        # go to free cells, some under robots that do not carry them.
        shelves = rng.permutation(n_shelves)
        loaded = rng.random(n) < rng.random()
        loaded &= np.cumsum(loaded) <= n_shelves
        out.carrying[k] = -1
        carried = shelves[: int(loaded.sum())]
        out.carrying[k, np.flatnonzero(loaded)] = carried
        out.shelf_pos[k, carried] = out.pos[k, loaded]
        rest = shelves[len(carried) :]
        taken = set(out.pos[k, loaded].tolist())
        free = np.array([c for c in rng.permutation(h * w) if c not in taken])
        out.shelf_pos[k, rest] = free[: len(rest)]
        out.delivered_flag[k] = rng.random(n) < 0.5
        out.steps[k] = rng.integers(0, 3)
        out.inactive[k] = rng.integers(0, 2)
    out._recalc_grids()
    return out


def _same(a: twin.RwareWorlds, b: twin.RwareWorlds) -> None:
    for name in STATE:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.data())
def test_step_kernel_matches_the_numpy_step(world: twin.RwareWorlds, data: st.DataObject) -> None:
    ref = copy.deepcopy(world)
    b, n = world.pos.shape
    p = data.draw(st.sampled_from([None, (0.05, 0.6, 0.1, 0.1, 0.15)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for _ in range(data.draw(st.integers(1, 6))):
        act = rng.choice(5, size=(b, n), p=p)
        got, want = world.step(act), ref.step_reference(act)
        np.testing.assert_array_equal(got.rewards, want.rewards)
        np.testing.assert_array_equal(got.done, want.done)
        _same(world, ref)
        np.testing.assert_array_equal(world.observe_flat(), ref.observe_flat_reference())


def test_kernel_step_hands_networkx_ties_to_the_numpy_path() -> None:
    # 19 robots on the tiny layout tie often (two equal chains into one cell); the step must
    # take networkx's order there, and agree with the numpy step over a long random run.
    config = twin.RwareConfig(LAYOUTS[1], 19, 19)
    world, ref = twin.RwareWorlds(config, 8), twin.RwareWorlds(config, 8)
    world.reset(list(range(8)))
    ref.reset(list(range(8)))
    rng = np.random.default_rng(3)
    calls: list[object] = []
    resolve = world._resolve_worlds

    def spy(act: np.ndarray, ws: np.ndarray) -> np.ndarray:
        calls.append(ws)
        return resolve(act, ws)

    world._resolve_worlds = spy  # type: ignore[method-assign]
    for _ in range(300):
        act = rng.choice(5, size=(8, 19), p=(0.1, 0.6, 0.1, 0.1, 0.1))
        got, want = world.step(act), ref.step_reference(act)
        np.testing.assert_array_equal(got.rewards, want.rewards)
        _same(world, ref)
        ended = np.flatnonzero(got.done)
        if len(ended):
            world.reset(worlds=ended)
            ref.reset(worlds=ended)
    assert calls  # the numpy path did run for the ties


def test_a_bad_action_raises_and_changes_nothing() -> None:
    world = twin.RwareWorlds(twin.RwareConfig(LAYOUTS[1], 2, 2), 2)
    world.reset([0, 1])
    before = copy.deepcopy(world)
    with pytest.raises(ConfigError, match="action id must be between 0 and 4"):
        world.step(np.array([[1, 1], [1, 5]]))
    _same(world, before)
