"""The compiled dense guide (``RwareShaping``) against its numpy formulation, step by step.

:class:`NumpyShaping` is the guide as it was first written, (B, N, HW) numpy broadcasts over
the global state; it lives here only as the reference of the compiled kernels
(:mod:`fleetmind.sim.rware_shaping`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from fleetmind.rl.neural.adapters import RwareShaping, TwinBatch, _carry_distances


class NumpyShaping:
    """The reference: ``RwareShaping``'s values computed with numpy broadcasts."""

    def __init__(self, worlds: Any) -> None:
        self.w = worlds
        h, wd = worlds.shape
        cells = np.arange(h * wd)
        rows, cols = cells // wd, cells % wd
        scale = float(h + wd)
        self._dist = (
            np.abs(rows[:, None] - rows[None, :]) + np.abs(cols[:, None] - cols[None, :])
        ).astype(np.float64) / scale  # (HW, HW)
        lay = worlds.config.layout
        self._carry_dist = _carry_distances(lay.highways) / scale  # (HW, HW)
        self._goals = np.array([r * wd + c for r, c in lay.goals], dtype=np.int64)
        self._shelf_cell = ~lay.highways.reshape(-1)  # (HW,)
        b, n = worlds.pos.shape
        self._claimed = np.zeros((b, worlds.n_shelves + 1), dtype=bool)
        self._delivered = np.zeros((b, n), dtype=bool)

    def _aim_distance(self, kind: NDArray[np.int64]) -> NDArray[np.float64]:
        w = self.w
        b, n = w.pos.shape
        s, cells = w.n_shelves, self._dist.shape[0]
        d = self._dist[w.pos]  # (B, N, HW)
        dc = self._carry_dist[w.pos]  # (B, N, HW)
        on_floor = np.ones((b, s + 1), dtype=bool)
        on_floor[np.arange(b)[:, None], np.where(w.carrying >= 0, w.carrying, s)] = False
        on_floor = on_floor[:, :s]  # (B, S)
        to_shelf = np.take_along_axis(d, np.broadcast_to(w.shelf_pos[:, None, :], (b, n, s)), 2)
        seek = np.where((w.requested[:, :s] & on_floor)[:, None, :], to_shelf, np.inf).min(-1)
        goal = dc[..., self._goals].min(-1)
        occupied = np.zeros((b, cells + 1), dtype=bool)
        occupied[np.arange(b)[:, None], np.where(on_floor, w.shelf_pos, cells)] = True
        empty = self._shelf_cell[None, :] & ~occupied[:, :cells]  # (B, HW)
        drop = np.where(empty[:, None, :], dc, np.inf).min(-1)
        out = np.choose(kind, [seek, goal, drop])
        return np.where(np.isfinite(out), out, 0.0)

    def _kind(self) -> NDArray[np.int64]:
        w = self.w
        s = w.n_shelves
        carried = np.where(w.carrying >= 0, w.carrying, s)
        held_req = np.take_along_axis(w.requested, carried, 1)
        return np.where(w.carrying < 0, 0, np.where(held_req, 1, 2)).astype(np.int64)

    def before(self) -> dict[str, NDArray[Any]]:
        kind = self._kind()
        return {
            "kind": kind,
            "phi": -self._aim_distance(kind),
            "carrying": self.w.carrying.copy(),
        }

    def after(
        self,
        before: dict[str, NDArray[Any]],
        delivered: NDArray[np.bool_],
        done: NDArray[np.bool_],
    ) -> NDArray[np.float32]:
        w = self.w
        s = w.n_shelves
        phi = -self._aim_distance(before["kind"])
        held = w.carrying
        bonus = np.where(held == before["carrying"], phi - before["phi"], 0.0)
        picked = (before["carrying"] < 0) & (held >= 0)
        shelf = np.where(picked, held, s)
        rows = np.arange(len(held))[:, None]
        fresh = picked & np.take_along_axis(w.requested, shelf, 1) & ~self._claimed[rows, shelf]
        self._claimed[rows, np.where(fresh, shelf, s)] = True
        self._claimed[:, s] = False
        self._claimed &= w.requested
        self._delivered |= delivered
        put_down = (before["carrying"] >= 0) & (held < 0)
        paid_drop = put_down & self._delivered
        self._delivered &= ~put_down
        bonus = bonus + 0.5 * fresh + 0.5 * paid_drop
        if done.any():
            bonus[done] = 0.0
            self._claimed[done] = False
            self._delivered[done] = False
        return np.asarray(bonus, dtype=np.float32)


_STEP = ((-1, 0), (1, 0), (0, -1), (0, 1))  # rware's headings UP, DOWN, LEFT, RIGHT
_FORWARD, _LEFT, _RIGHT, _TOGGLE = 1, 2, 3, 4


def _worker_actions(worlds: Any, rng: np.random.Generator, noise: float) -> NDArray[np.int64]:
    """``(B, N)`` actions of a rough worker: to a requested shelf, to a goal, back to a shelf cell.

    Greedy in Manhattan distance with ``noise`` random actions, so robots pick up, deliver
    and put down often enough for every term of the guide to be paid, and still collide,
    block each other and wander (what random actions reach).
    """
    w = worlds
    h, wd = w.shape
    highway = w.config.layout.highways
    goals = list(w.config.layout.goals)
    b, n = w.pos.shape
    acts = rng.integers(5, size=(b, n))
    for k in range(b):
        floor = set(range(w.n_shelves)) - {int(c) for c in w.carrying[k] if c >= 0}
        stands = {int(w.shelf_pos[k, j]) for j in floor}
        for i in range(n):
            if rng.random() < noise:
                continue
            r, c = divmod(int(w.pos[k, i]), wd)
            held = int(w.carrying[k, i])
            if held < 0:
                aims = [divmod(int(w.shelf_pos[k, j]), wd) for j in floor if w.requested[k, j]]
            elif w.requested[k, held]:
                aims = goals
            else:
                aims = [
                    (rr, cc)
                    for rr in range(h)
                    for cc in range(wd)
                    if not highway[rr, cc] and rr * wd + cc not in stands
                ]
            if not aims:
                continue
            tr, tc = min(aims, key=lambda a: abs(a[0] - r) + abs(a[1] - c))
            if (tr, tc) == (r, c):
                if held < 0 or not w.requested[k, held]:
                    acts[k, i] = _TOGGLE
                continue
            good = [
                d
                for d, (dr, dc) in enumerate(_STEP)
                if abs(r + dr - tr) + abs(c + dc - tc) < abs(r - tr) + abs(c - tc)
                and (held < 0 or highway[r + dr, c + dc] or (r + dr, c + dc) == (tr, tc))
            ]
            if not good:
                continue
            if int(w.heading[k, i]) in good:
                acts[k, i] = _FORWARD
            else:
                acts[k, i] = _LEFT if rng.random() < 0.5 else _RIGHT
    return acts


@pytest.mark.parametrize("env_id", ["rware-tiny-2ag-v2", "rware-small-4ag-v2"])
@pytest.mark.parametrize(("seed", "noise"), [(0, 0.2), (1, 0.5), (2, 1.0)])
def test_compiled_guide_equals_the_numpy_reference(env_id: str, seed: int, noise: float) -> None:
    weight = 0.2
    env = TwinBatch(env_id, 16, seed=seed, shaping=weight, max_steps=150)
    plain = TwinBatch(env_id, 16, seed=seed, max_steps=150)
    env.reset(seed=seed)
    plain.reset(seed=seed)
    worlds = env.env.worlds
    ref = NumpyShaping(worlds)
    shaper = env._shaper
    assert isinstance(shaper, RwareShaping)
    rng = np.random.default_rng(seed)
    kinds = np.zeros(3, dtype=np.int64)
    fresh = paid = delivered = ends = 0
    for t in range(500):
        acts = _worker_actions(worlds, rng, noise)
        start = ref.before()
        got_start = shaper.before()
        for key in ("kind", "phi", "carrying"):
            np.testing.assert_array_equal(got_start[key], start[key], err_msg=f"{key}, step {t}")
        kinds += np.bincount(start["kind"].ravel(), minlength=3)
        _o, rewards, term, trunc, info = env.step(acts)
        _o, rewards0, _t, _tr, _i = plain.step(acts)
        want = ref.after(start, info["delivered"], term | trunc)
        np.testing.assert_array_equal(info["shaping"], weight * want, err_msg=f"step {t}")
        np.testing.assert_array_equal(rewards, (rewards0 + weight * want).astype(np.float32))
        np.testing.assert_array_equal(shaper._claimed, ref._claimed, err_msg=f"step {t}")
        np.testing.assert_array_equal(shaper._delivered, ref._delivered, err_msg=f"step {t}")
        held = worlds.carrying >= 0
        was = start["carrying"] >= 0
        fresh += int((held & ~was & (want == 0.5)).sum())
        paid += int((~held & was & (want == 0.5)).sum())
        delivered += int(info["delivered"].sum())
        ends += int((term | trunc).sum())
    assert ends >= 16 * 3  # every world restarted, more than once
    assert fresh > 0
    if noise < 1.0:  # the worker delivers; random actions almost never do
        assert kinds.min() > 0
        assert delivered > 0
        assert paid > 0


def test_no_aim_gives_a_flat_potential() -> None:
    """Every requested shelf carried: empty-handed robots have no aim, and earn nothing."""
    env = TwinBatch("rware-tiny-2ag-v2", 1, seed=0, shaping=1.0, request_queue_size=1)
    env.reset(seed=0)
    w = env.env.worlds
    shelf = int(w.queue[0, 0])
    w.pos[0, 0] = w.shelf_pos[0, shelf]
    w.carrying[0, 0] = shelf
    w.pos[0, 1] = 0 if w.shelf_pos[0, shelf] != 0 else 1
    w._recalc_grids()
    env._shaper = RwareShaping(w)
    ref = NumpyShaping(w)
    start = env._shaper.before()
    assert start["kind"][0, 1] == 0
    assert start["phi"][0, 1] == 0.0
    np.testing.assert_array_equal(start["phi"], ref.before()["phi"])
    for act in (1, 2, 1):  # robot 1 drives about: no potential to gain
        assert env.step(np.array([[0, act]]))[4]["shaping"][0, 1] == 0.0
