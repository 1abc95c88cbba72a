"""The warehouse env's step (one compiled call per quiet tick) against the step it replaced.

The reference below is the env's step as it was before the tick learned to observe: the world's
public ``step`` (its ``StepResult``), then the numpy reference of the observations
(:meth:`~fleetmind.sim.observe.LocalObserver.reference`) or the tabular codes, then the dicts.
Two envs from one seed run side by side on random joint actions (agents left out, robots steered
to their targets part of the time so pickups, deliveries and new orders happen, time limits and
resets included); every observation, reward, termination, truncation and info must agree bit for
bit, with the same types, at every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetmind.bench.sim import RWARE_LAYOUTS
from fleetmind.envs import make_parallel
from fleetmind.envs.warehouse import WarehouseParallelEnv
from fleetmind.sim import observe
from fleetmind.sim.maps import parse_rware_layout
from fleetmind.sim.warehouse import Tick

MAPS = {
    "rware-tiny": (parse_rware_layout(RWARE_LAYOUTS["rware-tiny"], source="rware-tiny"), 2),
    "rware-large": (parse_rware_layout(RWARE_LAYOUTS["rware-large"], source="rware-large"), 19),
    "warehouse-tiny": ("warehouse-tiny", 4),
    "warehouse-small": ("warehouse-small", 7),
}
OPTIONS: list[dict[str, Any]] = [
    {},
    {"reward_mode": "shared"},
    {"reward_mode": "mixed(0.3)"},
    {"reward_mode": "difference"},
    {"radius": 1},
    {"radius": 3, "heuristic": False},
    {"obs": "tabular"},
    {"order_rate": 0.3},
]


def _reference_step(
    env: WarehouseParallelEnv, observer: observe.LocalObserver, actions: dict[str, int]
) -> tuple[dict[str, Any], ...]:
    """The env's step before the fused tick (world.step, numpy observations, the dicts)."""
    acts = np.array([int(actions.get(a, 0)) for a in env.possible_agents], dtype=np.int64)
    w = env.world
    res = w.step(acts)
    delivered_now = [False] * len(env.possible_agents)
    for oid in res.delivered:
        delivered_now[w.order(oid).robot] = True
    batch = (w.pos[None], w.goal[None], w.carrying[None], w.has_task[None])
    if env.obs_kind == "local":
        obs = dict(zip(env.agents, observer.reference(observe.Fleet(*batch))[0], strict=True))
    else:
        codes = observer.tabular(observe.Fleet(*batch))[0]
        obs = {a: np.int64(codes[i]) for i, a in enumerate(env.agents)}
    rewards = dict(zip(env.agents, res.rewards.tolist(), strict=True))
    terminations = dict.fromkeys(env.agents, False)
    truncations = dict.fromkeys(env.agents, res.truncated)
    per_agent = zip(
        env.agents,
        delivered_now,
        w.delivered_by.tolist(),
        res.conflict.tolist(),
        res.wall_bump.tolist(),
        strict=True,
    )
    infos = {
        a: {"delivered": d, "deliveries": n, "conflict": c, "wall_bump": b}
        for a, d, n, c, b in per_agent
    }
    if res.truncated:
        env.agents = []
    return obs, rewards, terminations, truncations, infos


def _same(got: Any, want: Any) -> None:
    """Equal with the same types all the way down; arrays bit for bit (signed zeros too)."""
    assert type(got) is type(want)
    if isinstance(want, np.ndarray | np.generic):
        assert got.dtype == want.dtype
        assert np.shape(got) == np.shape(want)
        assert got.tobytes() == want.tobytes()
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, tuple | list):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            _same(a, b)
    else:
        assert got == want


def _joint(env: WarehouseParallelEnv, rng: np.random.Generator, steer: bool) -> dict[str, int]:
    """Random actions, some agents left out; steered robots head for their targets."""
    acts = {a: int(rng.integers(5)) for a in env.possible_agents if rng.random() > 0.05}
    if steer:
        w = env.world
        for i, a in enumerate(env.possible_agents):
            dr, dc = (w.goal[i] - w.pos[i]).tolist()
            if a in acts and rng.random() < 0.85:
                acts[a] = 1 if dr < 0 else 2 if dr > 0 else 3 if dc < 0 else 4 if dc > 0 else 0
    return acts


def _run(map_name: str, options: dict[str, Any], seed: int, steps: int) -> dict[str, int]:
    """Step a fast and a reference env side by side; the counts of what happened."""
    grid, robots = MAPS[map_name]
    kw = {"seed": seed, "max_steps": 90, **options}
    fast = make_parallel(grid, robots, **kw)
    ref = make_parallel(grid, robots, **kw)
    observer = observe.LocalObserver.for_map(
        fast.grid, options.get("radius", 2), heuristic=options.get("heuristic", True)
    )
    _same(fast.reset(seed=seed), ref.reset(seed=seed))
    rng = np.random.default_rng(seed)
    kept: list[tuple[dict[str, Any], dict[str, Any]]] = []
    counts = {"deliveries": 0, "resets": 0, "observed": 0}
    advance = fast.world.advance

    def counted(*args: Any, **kwargs: Any) -> Tick:
        tick = advance(*args, **kwargs)
        counts["observed"] += tick.observed  # the kernel's own observations were used
        return tick

    fast.world.advance = counted  # type: ignore[method-assign]
    for t in range(steps):
        actions = _joint(fast, rng, steer=t % 60 < 40)
        got = fast.step(actions)
        want = _reference_step(ref, observer, actions)
        _same(got, want)
        kept.append((got[0], want[0]))
        counts["deliveries"] += sum(info["delivered"] for info in got[4].values())
        if not fast.agents:
            assert not ref.agents
            _same(fast.reset(), ref.reset())
            counts["resets"] += 1
            fast.world.advance = counted  # type: ignore[method-assign]
    # Observations handed out earlier are not overwritten by later steps.
    for got_obs, want_obs in kept:
        _same(got_obs, want_obs)
    _same(fast.world.metrics(), ref.world.metrics())
    _same(fast.state(), ref.state())
    return counts


@pytest.mark.parametrize("map_name", list(MAPS))
def test_fast_step_matches_the_reference_step(map_name: str) -> None:
    counts = _run(map_name, {}, seed=3, steps=400)
    # Long enough for the events the fast path hands to Python, and for time limits; most
    # ticks are quiet, observed by the kernel.
    assert counts["deliveries"] > 0
    assert counts["resets"] >= 4
    assert counts["observed"] > 200


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(list(MAPS)),
    st.sampled_from(OPTIONS),
    st.integers(0, 2**32 - 1),
)
def test_fast_step_matches_the_reference_step_on_random_settings(
    map_name: str, options: dict[str, Any], seed: int
) -> None:
    counts = _run(map_name, options, seed, steps=200)
    if options.get("obs", "local") == "local" and "order_rate" not in options:
        assert counts["observed"] > 0


def test_stepping_a_finished_episode_still_fails() -> None:
    env = make_parallel("warehouse-tiny", 2, seed=0, max_steps=2)
    env.reset(seed=0)
    env.step({})
    env.step({})
    assert env.agents == []
    with pytest.raises(ValueError, match="episode is over"):  # as before: a ValueError
        env.step({})
