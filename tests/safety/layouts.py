"""ASCII layouts and a shortest-path ranking for the shield's scenario tests.

Layout legend: ``#`` wall, ``.`` free, ``X`` forbidden (free but banned), a letter ``A``..``W``
a robot (robot index = alphabetical order), ``a``..``w`` that robot's target.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fleetmind.sim.grid import DELTAS, GridMap


@dataclass
class Scene:
    grid: GridMap
    positions: NDArray[np.int32]  # (N, 2)
    targets: dict[int, tuple[int, int]]
    forbidden: list[tuple[int, int]]


def parse(text: str) -> Scene:
    lines = [ln.strip() for ln in text.strip().splitlines()]
    height, width = len(lines), len(lines[0])
    blocked = np.zeros((height, width), dtype=bool)
    robots: dict[str, tuple[int, int]] = {}
    goals: dict[str, tuple[int, int]] = {}
    forbidden = []
    for r, line in enumerate(lines):
        assert len(line) == width, f"line {r + 1}: ragged layout"
        for c, ch in enumerate(line):
            if ch == "#":
                blocked[r, c] = True
            elif ch == "X":
                forbidden.append((r, c))
            elif ch.isupper():
                robots[ch] = (r, c)
            elif ch.islower():
                goals[ch.upper()] = (r, c)
    names = sorted(robots)
    none = np.zeros_like(blocked)
    grid = GridMap("layout", blocked, none, none.copy(), none.copy())
    positions = np.array([robots[k] for k in names], dtype=np.int32).reshape(-1, 2)
    targets = {names.index(k): v for k, v in goals.items()}
    return Scene(grid, positions, targets, forbidden)


def distances(grid: GridMap, goal: tuple[int, int]) -> NDArray[np.int64]:
    """BFS distance of every cell to ``goal`` (a large number where unreachable or blocked)."""
    height, width = grid.shape
    far = 10**6
    dist = np.full((height, width), far, dtype=np.int64)
    dist[goal] = 0
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in DELTAS[1:].tolist():
            nr, nc = r + dr, c + dc
            inside = 0 <= nr < height and 0 <= nc < width
            if inside and not grid.blocked[nr, nc] and dist[nr, nc] == far:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def rank(grid: GridMap, pos: NDArray[np.int32], dist: NDArray[np.int64]) -> list[int]:
    """The 5 actions ranked by the distance of the cell they lead to (stable by action id)."""
    height, width = grid.shape
    keys = []
    for a, (dr, dc) in enumerate(DELTAS.tolist()):
        r, c = int(pos[0]) + dr, int(pos[1]) + dc
        ok = 0 <= r < height and 0 <= c < width and not grid.blocked[r, c]
        keys.append((int(dist[r, c]) if ok else 10**7, a))
    return [a for _, a in sorted(keys)]
