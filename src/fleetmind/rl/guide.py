"""A learned guidance graph: the cost of every move on a map, from features any map has.

The guidance executor (``dispatch/executors/guidance.py``) routes robots on a weighted grid: LoRR's
crisscross highways, where a move against its row's or column's way costs 2 steps instead of 1.
:class:`GuideModel` replaces those two numbers with a small linear model in the spirit of
Guidance Graph Optimization (Zhang et al., 2024, lifelong MAPF with PIBT): the weight of a move
from one cell into a neighbour is ``clip(1 + theta . phi, W_MIN, W_MAX)`` steps, where ``phi``
(:data:`FEATURES`) describes the move with what every grid map has, so that one model serves
maps it was never trained on:

- ``against``: the move runs against the crisscross way (even rows east, odd rows west, even
  columns south, odd columns north);
- ``vertical``: an up or down move;
- ``corridor`` / ``wall_side``: the destination is in a one-wide aisle along the move (both
  of its neighbours across the move are walls or racks, and the aisle is at least two cells
  long: :func:`one_wide_aisles`) / exactly one of those neighbours is a wall (a lane along a
  rack);
- ``station`` / ``pickup`` / ``near_task``: the destination is a station, a pickup, or beside one;
- ``far``: the destination's distance to the nearest station or pickup, capped at 10, over 10;
- ``against_corridor``, ``against_vertical``: the products of those;
- ``lane_against``: the move runs along a lane line (a row holding a one-wide horizontal aisle
  at least two cells long, a column holding such a vertical one; :func:`lane_ranks`) against
  that line's way, where the ways alternate with the line's rank among the lane lines of its
  orientation, not with its parity. Parity fails on racks spaced an even number of cells
  apart: on ``warehouse_small`` the one-wide columns between racks are 4 apart (all north);
  ``lane_against_corridor`` is its product with ``corridor``;
- ``density_*``: fleet density (robots per free cell over 0.1, capped at 3) times ``against``,
  ``corridor``, ``against_corridor`` and ``lane_against``, so that one model can route sparse
  and jammed fleets differently.

A sparse fleet gains little from any guidance (there is little traffic to steer) and pays its
detours in full, and the linear density terms cannot take a weight back to one step as the fleet
thins out. So the model also has a *knee*: below that density every move's departure from one
step fades in proportion (``1 + theta . phi`` becomes ``1 + (density / knee) * theta . phi``),
and at or above it the weights are the linear model's exactly (knee 0: never faded).

The model also sets the executor's traffic terms (:data:`TRAFFIC`, in steps, scaled so that
together they stay below the cost of waiting: a free move along the route always beats
waiting, the lesson of ``docs/executors.md``), the cost of waiting itself, and the order of
moves that cost the same (:data:`TIES`): at random, as ``guidance``, or always vertical moves
first (or horizontal ones), so that every robot takes the same turns, as dimension-ordered
routing does, and opposite flows stop meeting where a route could go either way first.

The neutral model (:meth:`GuideModel.neutral`: ``against`` 1, every other weight 0, the
guidance executor's traffic weights) is the guidance executor exactly. Weights are whole
multiples of ``1 / SCALE`` steps: the distance maps hold int16 in units of ``1 / SCALE``.

- :class:`GuideModel`: the parameters, their flat vector for black-box search, JSON files.
- :func:`move_features`, :func:`density`: the inputs.
- :func:`default_guide_path`: the model shipped in ``fleetmind/data/guide.json``.
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Self

import numpy as np
from numpy.typing import NDArray

from fleetmind.errors import ConfigError, check_range
from fleetmind.sim.grid import DELTAS, DOWN, LEFT, N_ACTIONS, RIGHT, UP, WAIT, GridMap

FORMAT: Final = "fleetmind-guide-v1"
SCALE: Final = 10
"""Map units per step: weights are multiples of 0.1 steps."""
W_MIN: Final = 0.5
W_MAX: Final = 3.5
"""Bounds of a move's weight in steps. With ``SCALE`` 10 the longest route on a 140x500 LoRR
map (about 700 steps) stays below the int16 maps' unreachable mark (30,000) at ``W_MAX``."""
TRAFFIC_CAP: Final = 0.95
"""The traffic terms together cost at most this share of waiting (see the module docstring)."""
DENSITY_UNIT: Final = 0.1
"""Robots per free cell that read as density 1 (LoRR warehouse_small: 100 robots 0.78)."""
MOVES: Final = (UP, DOWN, LEFT, RIGHT)
KNEE_MAX: Final = 3.0
"""The largest knee: the density the model reads is capped at 3 (:func:`density`)."""

BASE_FEATURES: Final = (
    "against",
    "vertical",
    "corridor",
    "wall_side",
    "station",
    "pickup",
    "near_task",
    "far",
    "against_corridor",
    "against_vertical",
    "lane_against",
    "lane_against_corridor",
)
DENSITY_FEATURES: Final = ("against", "corridor", "against_corridor", "lane_against")
FEATURES: Final = (*BASE_FEATURES, *(f"density_{f}" for f in DENSITY_FEATURES))
TRAFFIC: Final = ("occupied", "stayer", "head_on", "incoming", "traffic", "against")
"""The traffic terms of ``dispatch.executors.TrafficWeights`` (``decay`` apart)."""
# The guidance executor's traffic weights (docs/executors.md): the neutral model's.
GUIDANCE_TRAFFIC: Final = {
    "occupied": 0.3,
    "stayer": 0.0,
    "head_on": 0.2,
    "incoming": 0.0,
    "traffic": 0.4,
    "against": 0.0,
}
GUIDANCE_DECAY: Final = 0.9
TIES: Final = ("random", "vertical", "horizontal")
"""Orders of moves that cost the same: seeded random, vertical first, horizontal first."""
_TIE_VALUE: Final = {"random": 0.0, "vertical": 1.0, "horizontal": -1.0}
# Each fixed order as tie-breakers by action (WAIT first, as shortest path's own order).
TIE_ROWS: Final = {
    "vertical": (0.0, 0.1, 0.2, 0.3, 0.4),  # WAIT, UP, DOWN, LEFT, RIGHT
    "horizontal": (0.0, 0.3, 0.4, 0.1, 0.2),  # WAIT, LEFT, RIGHT, UP, DOWN
}
# Most robots other than the mover that can want one cell: its other three neighbours.
_MAX_INCOMING: Final = 3.0


def default_guide_path() -> Path:
    """The learned guidance model shipped with fleetmind (``fleetmind/data/guide.json``)."""
    return Path(str(importlib.resources.files("fleetmind") / "data" / "guide.json"))


def density(grid: GridMap, robots: int) -> float:
    """Fleet density as the model reads it: robots per free cell over 0.1, capped at 3."""
    free = max(1, int((~grid.blocked).sum()))
    return float(min(3.0, robots / free / DENSITY_UNIT))


def _shift(a: NDArray[np.bool_], dr: int, dc: int, fill: bool) -> NDArray[np.bool_]:
    """``out[r, c] = a[r + dr, c + dc]``, ``fill`` off the grid."""
    h, w = a.shape
    pad = np.pad(a, 1, constant_values=fill)
    return pad[1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]


def _task_distance(grid: GridMap, cap: int) -> NDArray[np.float64]:
    """``(H, W)`` steps from each free cell to the nearest station or pickup, capped at ``cap``."""
    free = ~grid.blocked
    reached = (grid.stations | grid.pickups) & free
    dist = np.full(grid.shape, float(cap))
    dist[reached] = 0.0
    front = reached
    for d in range(1, cap):
        grown = front.copy()
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            grown |= _shift(front, dr, dc, False)
        new = grown & free & ~reached
        if not new.any():
            break
        dist[new] = float(d)
        reached |= new
        front = new
    return dist


def one_wide_aisles(grid: GridMap) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """``(H, W)`` cells of one-wide horizontal aisles, and of one-wide vertical ones.

    A horizontal aisle cell is free, has walls (or the edge) above and below, and a free
    neighbour left or right that does too: an aisle is at least two cells long. A single free
    cell between two obstacles (a gap in a pillar lattice, or among random obstacles) is no
    aisle: counted as one, it made every other row and column of LoRR ``sortation_large`` a
    lane line with a one-way rule, and every gap there a corridor. No cell of the warehouse
    maps here is such a gap.
    """
    free = ~grid.blocked
    horizontal = free & _shift(grid.blocked, -1, 0, True) & _shift(grid.blocked, 1, 0, True)
    vertical = free & _shift(grid.blocked, 0, -1, True) & _shift(grid.blocked, 0, 1, True)
    horizontal &= _shift(horizontal, 0, -1, False) | _shift(horizontal, 0, 1, False)
    vertical &= _shift(vertical, -1, 0, False) | _shift(vertical, 1, 0, False)
    return horizontal, vertical


def lane_ranks(grid: GridMap) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(H,)`` and ``(W,)`` rank of each row and column among the lane lines; -1 if none.

    A lane row holds a cell of a one-wide horizontal aisle (:func:`one_wide_aisles`); a lane
    column, one of a vertical aisle.
    """
    return _lane_ranks(*one_wide_aisles(grid))


def _lane_ranks(
    horizontal: NDArray[np.bool_], vertical: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """:func:`lane_ranks` from the aisle cells :func:`one_wide_aisles` gives."""
    out = []
    for any_line in (horizontal.any(axis=1), vertical.any(axis=0)):
        lines: NDArray[np.bool_] = np.asarray(any_line, dtype=bool)
        rank = np.full(lines.shape[0], -1, dtype=np.int64)
        rank[lines] = np.arange(int(lines.sum()))
        out.append(rank)
    return out[0], out[1]


def move_features(grid: GridMap, robots: int) -> NDArray[np.float64]:
    """``(H * W, 4, F)`` features of the moves up, down, left, right from every cell.

    Rows of moves that leave the grid or end in a wall are computed all the same (the caller
    never reads them). ``F`` is ``len(FEATURES)``, in that order.
    """
    h, w = grid.shape
    blocked = grid.blocked
    rows, cols = np.divmod(np.arange(h * w), w)
    task = grid.stations | grid.pickups
    near = np.zeros_like(task)
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        near |= _shift(task, dr, dc, False)
    near &= ~task
    far = _task_distance(grid, 10) / 10.0
    dens = density(grid, robots)
    aisles = one_wide_aisles(grid)  # (horizontal, vertical)
    row_rank, col_rank = _lane_ranks(*aisles)
    lane_row, lane_col = row_rank[rows], col_rank[cols]  # (H * W,) -1 off lane lines
    # Lane ways, as the crisscross: even-ranked rows east, odd west; even columns south, odd north.
    lane_with = {
        UP: lane_col % 2 == 1,
        DOWN: lane_col % 2 == 0,
        LEFT: lane_row % 2 == 1,
        RIGHT: lane_row % 2 == 0,
    }
    out = np.zeros((h * w, len(MOVES), len(FEATURES)))
    for j, action in enumerate(MOVES):
        dr, dc = (int(x) for x in DELTAS[action])
        vertical = action in (UP, DOWN)
        # The destination's neighbours across the move: left and right of a vertical move.
        pr, pc = (0, 1) if vertical else (1, 0)
        side_a = _shift(_shift(blocked, pr, pc, True), dr, dc, True)
        side_b = _shift(_shift(blocked, -pr, -pc, True), dr, dc, True)
        # Into a one-wide aisle along the move (both sides walls, and no lone gap).
        corridor = _shift(aisles[vertical], dr, dc, False).ravel().astype(np.float64)
        with_way = {
            UP: cols % 2 == 1,
            DOWN: cols % 2 == 0,
            LEFT: rows % 2 == 1,
            RIGHT: rows % 2 == 0,
        }[action]
        against = (~with_way).astype(np.float64)
        on_lane = (lane_col if vertical else lane_row) >= 0
        lane_against = (on_lane & ~lane_with[action]).astype(np.float64)
        dest = {
            "station": _shift(grid.stations, dr, dc, False),
            "pickup": _shift(grid.pickups, dr, dc, False),
            "near_task": _shift(near, dr, dc, False),
        }
        base = {
            "against": against,
            "vertical": np.full(h * w, float(vertical)),
            "corridor": corridor,
            "wall_side": (side_a ^ side_b).ravel().astype(np.float64),
            **{k: v.ravel().astype(np.float64) for k, v in dest.items()},
            "far": _shift_float(far, dr, dc).ravel(),
            "against_corridor": against * corridor,
            "against_vertical": against * float(vertical),
            "lane_against": lane_against,
            "lane_against_corridor": lane_against * corridor,
        }
        for k, name in enumerate(BASE_FEATURES):
            out[:, j, k] = base[name]
        for k, name in enumerate(DENSITY_FEATURES):
            out[:, j, len(BASE_FEATURES) + k] = dens * base[name]
    return out


def _shift_float(a: NDArray[np.float64], dr: int, dc: int) -> NDArray[np.float64]:
    h, w = a.shape
    pad = np.pad(a, 1, constant_values=0.0)
    return pad[1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]


def _tie_order(value: float) -> str:
    """The tie order a search's value stands for (see :meth:`GuideModel.from_vector`)."""
    if value > 0.5:
        return "vertical"
    if value < -0.5:
        return "horizontal"
    return "random"


@dataclass(frozen=True)
class GuideModel:
    """The learned guidance: move weights from features, traffic terms, waiting, the tie order.

    Attributes:
        theta: weight of each feature of :data:`FEATURES` (missing ones read 0).
        traffic: the traffic terms of :data:`TRAFFIC`, in steps, before the cap.
        decay: per-tick decay of the traffic counts, in [0, 0.99].
        wait: cost of waiting, in steps (>= 0.5).
        ties: the order of moves that cost the same, one of :data:`TIES`.
        knee: the density below which move weights fade toward one step, in [0, 3] (0: never;
            see the module docstring).
        metadata: how the model was made (free-form, saved with it).

    Raises:
        ConfigError: an unknown feature, traffic term or tie order, or a value out of range.
    """

    theta: dict[str, float]
    traffic: dict[str, float] = field(default_factory=lambda: dict(GUIDANCE_TRAFFIC))
    decay: float = GUIDANCE_DECAY
    wait: float = 1.0
    ties: str = "random"
    knee: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        """Refuse unknown names and values out of range."""
        unknown = sorted(set(self.theta) - set(FEATURES)) + sorted(set(self.traffic) - set(TRAFFIC))
        if unknown:
            raise ConfigError(f"guide model: unknown feature or traffic term {unknown}")
        check_range("decay", self.decay, low=0, high=0.99, where="guide model")
        check_range("wait", self.wait, low=W_MIN, high=W_MAX, where="guide model")
        for term, weight in self.traffic.items():
            check_range(f"traffic[{term!r}]", weight, low=0, where="guide model")
        if self.ties not in TIES:
            raise ConfigError(f"guide model: ties {self.ties!r} not one of {', '.join(TIES)}")
        check_range("knee", self.knee, low=0, high=KNEE_MAX, where="guide model")

    @classmethod
    def neutral(cls) -> Self:
        """The guidance executor's own costs: highway weight 2, its traffic weights."""
        return cls(theta={"against": 1.0})

    @classmethod
    def lanes(cls) -> Self:
        """The hand-set lane prior the shipped search starts from.

        Crisscross parity off lane lines (``against`` 1), and on them the alternating lane ways
        instead of parity inside one-wide aisles (``against_corridor`` -1, ``lane_against`` 1);
        the guidance executor's traffic weights.
        """
        return cls(theta={"against": 1.0, "against_corridor": -1.0, "lane_against": 1.0})

    # ------------------------------------------------------------------ costs

    def move_weights(self, grid: GridMap, robots: int) -> NDArray[np.int64]:
        """``(H * W, 5)`` cost of each action from each cell in ``1 / SCALE`` steps.

        Column ``WAIT`` is the cost of waiting; moves off the grid or into walls hold a weight
        too (never used: callers mask them).
        """
        phi = move_features(grid, robots)  # (H * W, 4, F)
        theta = np.array([self.theta.get(f, 0.0) for f in FEATURES])
        weight = np.clip(1.0 + self.fade(grid, robots) * (phi @ theta), W_MIN, W_MAX)  # (H*W, 4)
        out = np.empty((phi.shape[0], N_ACTIONS), dtype=np.int64)
        out[:, WAIT] = round(self.wait * SCALE)
        for j, action in enumerate(MOVES):
            out[:, action] = np.rint(weight[:, j] * SCALE).astype(np.int64)
        return out

    def fade(self, grid: GridMap, robots: int) -> float:
        """The share of each move weight's departure from one step kept at this density.

        ``density / knee`` below the knee, 1 at or above it (and always 1 with knee 0).
        """
        if self.knee <= 0.0:
            return 1.0
        return min(1.0, density(grid, robots) / self.knee)

    def traffic_costs(self) -> dict[str, float]:
        """The traffic terms in steps, scaled down so that together they cost under waiting.

        ``incoming`` counts each robot that wants the cell (at most three), so it weighs three
        times in the cap.
        """
        t = {k: float(self.traffic.get(k, 0.0)) for k in TRAFFIC}
        total = sum(t.values()) + (_MAX_INCOMING - 1.0) * t["incoming"]
        cap = TRAFFIC_CAP * self.wait
        if total > cap:
            t = {k: v * cap / total for k, v in t.items()}
        return t

    # ----------------------------------------------------------- flat vector

    @staticmethod
    def names() -> tuple[str, ...]:
        """Names of the entries of :meth:`to_vector`, in order."""
        return (*FEATURES, *(f"traffic_{k}" for k in TRAFFIC), "decay", "wait", "ties", "knee")

    @staticmethod
    def search_scales() -> NDArray[np.float64]:
        """Each entry's search scale: move weights in steps, traffic terms, decay, wait, ties, knee.

        The step sizes of the searches over :meth:`to_vector` (``fleetmind nav guide`` and the
        live learner of ``fleetmind run --learn-every``).
        """
        return np.array([0.5] * len(FEATURES) + [0.15] * len(TRAFFIC) + [0.03, 0.3, 1.0, 0.25])

    def to_vector(self) -> NDArray[np.float64]:
        """The parameters as one flat vector (the search space of ``fleetmind nav guide``)."""
        return np.array(
            [
                *(self.theta.get(f, 0.0) for f in FEATURES),
                *(self.traffic.get(k, 0.0) for k in TRAFFIC),
                self.decay,
                self.wait,
                _TIE_VALUE[self.ties],
                self.knee,
            ]
        )

    @classmethod
    def from_vector(cls, x: NDArray[np.float64], **metadata: Any) -> Self:
        """A model from a flat vector, clipped into range (black-box search proposes anything).

        The entry ``ties`` picks the tie order: above 0.5 vertical first, below -0.5 horizontal
        first, random between.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (len(cls.names()),):
            raise ConfigError(f"guide model: expected {len(cls.names())} values, got {x.shape}")
        nf, nt = len(FEATURES), len(TRAFFIC)
        return cls(
            theta={f: float(v) for f, v in zip(FEATURES, x[:nf], strict=True)},
            traffic={k: float(max(0.0, v)) for k, v in zip(TRAFFIC, x[nf : nf + nt], strict=True)},
            decay=float(np.clip(x[nf + nt], 0.0, 0.99)),
            wait=float(np.clip(x[nf + nt + 1], W_MIN, W_MAX)),
            ties=_tie_order(float(x[nf + nt + 2])),
            knee=float(np.clip(x[nf + nt + 3], 0.0, KNEE_MAX)),
            metadata=dict(metadata),
        )

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> None:
        """Write the model as JSON."""
        data = {
            "format": FORMAT,
            "theta": self.theta,
            "traffic": self.traffic,
            "decay": self.decay,
            "wait": self.wait,
            "ties": self.ties,
            "knee": self.knee,
            "metadata": self.metadata,
        }
        Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a model written by :meth:`save`.

        Raises:
            ConfigError: naming the file when it is missing, not JSON or not a guide model.
        """
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{p}: not a readable guide model ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ConfigError(f"{p}: not a guide model (format {FORMAT!r} expected)")
        try:
            return cls(
                theta={str(k): float(v) for k, v in data["theta"].items()},
                traffic={str(k): float(v) for k, v in data["traffic"].items()},
                decay=float(data["decay"]),
                wait=float(data["wait"]),
                ties=str(data.get("ties", "random")),  # files before tie orders: random
                knee=float(data.get("knee", 0.0)),  # files before the knee: never faded
                metadata=dict(data.get("metadata") or {}),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ConfigError(f"{p}: bad guide model field ({exc})") from None
        except ConfigError as exc:  # a value out of range: say which file
            raise ConfigError(f"{p}: {exc}") from None
