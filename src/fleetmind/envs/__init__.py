"""Standard faces of the simulator: Gymnasium, PettingZoo ParallelEnv and a batched vector env.

- :func:`make_gridworld`: the 4x4 grid of FIELD-NOTES §3.1 (Gymnasium).
- :func:`make_race`: the two-robot race of §3.2 (PettingZoo ParallelEnv).
- :func:`make_parallel`: the warehouse (PettingZoo ParallelEnv), or the RWARE twin by env id
  (defined here, above both modules, so that neither imports the other).
- :func:`make_vector`: many warehouse worlds as one numpy batch.
- :func:`make_rware_twin` / :func:`make_rware_vector`: the exact RWARE 2.0 twin by rware's env
  ids (``make_parallel("rware-tiny-2ag-v2")`` is the first).
"""

from __future__ import annotations

from typing import Any, overload

from fleetmind.envs.gridworld import make_gridworld
from fleetmind.envs.race import make_race
from fleetmind.envs.rware_gym import register_ids
from fleetmind.envs.rware_twin import (
    RwareTwinParallelEnv,
    RwareTwinVectorEnv,
    is_rware_id,
    make_rware_twin,
    make_rware_vector,
)
from fleetmind.envs.vector import WarehouseVectorEnv, make_vector
from fleetmind.envs.warehouse import WarehouseParallelEnv, resolve_map
from fleetmind.errors import ConfigError
from fleetmind.sim.grid import GridMap

# gymnasium.make("fleetmind:fleetmind/rware-tiny-2ag-v2") finds the twin (envs/rware_gym.py).
register_ids()

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


@overload
def make_parallel(
    map: str | GridMap, robots: int, *, seed: int | None = None, **options: Any
) -> WarehouseParallelEnv: ...


@overload
def make_parallel(
    map: str, robots: None = None, *, seed: int | None = None, **options: Any
) -> RwareTwinParallelEnv: ...


def make_parallel(
    map: str | GridMap,
    robots: int | None = None,
    *,
    seed: int | None = None,
    **options: Any,
) -> WarehouseParallelEnv | RwareTwinParallelEnv:
    """The warehouse as a PettingZoo ParallelEnv.

    Args:
        map: a preset name, a map file, an rware layout string, or a GridMap; or an rware
            env id such as ``rware-tiny-2ag-v2`` (then the exact RWARE twin of
            :mod:`fleetmind.envs.rware_twin`, which needs no rware installed; leave
            ``robots`` out, the id carries the agent count).
        robots: fleet size (required for every map but an rware id).
        seed: root seed.
        **options: ``max_steps``, ``reward_mode`` (``individual``, ``shared``, ``mixed(w)``,
            ``difference``), ``order_rate`` (None: a fresh task for every idle robot), ``obs``
            (``local`` or ``tabular``), ``radius``, ``heuristic`` (add the shortest-path
            heuristic values to local observations, default True), ``render_mode``. For an
            rware id: rware's constructor arguments (see :mod:`fleetmind.envs.rware_twin`).

    Raises:
        ConfigError: ``robots`` given with an rware id, or missing with any other map.
    """
    if is_rware_id(map):
        assert isinstance(map, str)
        if robots is not None:
            raise ConfigError(
                f"robots: {map!r} is an rware env id, which carries its agent count; "
                f"call make_parallel({map!r}) without robots"
            )
        return make_rware_twin(map, seed=seed, **options)
    if robots is None:
        raise ConfigError(f"robots: required for map {str(map)[:80]!r} (only rware ids omit it)")
    return WarehouseParallelEnv(resolve_map(map), robots, seed=seed, **options)
