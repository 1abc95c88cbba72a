"""Standard faces of the simulator: Gymnasium, PettingZoo ParallelEnv and a batched vector env.

- :func:`make_gridworld`: the 4x4 grid of FIELD-NOTES §3.1 (Gymnasium).
- :func:`make_race`: the two-robot race of §3.2 (PettingZoo ParallelEnv).
- :func:`make_parallel`: the warehouse (PettingZoo ParallelEnv).
- :func:`make_vector`: many warehouse worlds as one numpy batch.
- :func:`make_rware_twin` / :func:`make_rware_vector`: the exact RWARE 2.0 twin by rware's env
  ids (``make_parallel("rware-tiny-2ag-v2")`` is the first).
"""

from __future__ import annotations

from fleetmind.envs.gridworld import make_gridworld
from fleetmind.envs.race import make_race
from fleetmind.envs.rware_twin import (
    RwareTwinParallelEnv,
    RwareTwinVectorEnv,
    make_rware_twin,
    make_rware_vector,
)
from fleetmind.envs.vector import WarehouseVectorEnv, make_vector
from fleetmind.envs.warehouse import WarehouseParallelEnv, make_parallel

__all__ = [
    "RwareTwinParallelEnv",
    "RwareTwinVectorEnv",
    "WarehouseParallelEnv",
    "WarehouseVectorEnv",
    "make_gridworld",
    "make_parallel",
    "make_race",
    "make_rware_twin",
    "make_rware_vector",
    "make_vector",
]
