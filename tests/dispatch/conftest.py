from __future__ import annotations

import numpy as np
import pytest

from fleetmind.sim.maps import load_map
from fleetmind.sim.orders import Order, OrderConfig
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig


@pytest.fixture
def small():
    return load_map("warehouse-small")


def make_world(grid, n=6, *, steps=300, rate=0.15, seed=0, text_share=0.3, orders=None, start=None):
    cfg = WarehouseConfig(
        n_robots=n,
        max_steps=steps,
        orders=OrderConfig(rate=rate, text_share=text_share),
        auto_assign=False,
    )
    return Warehouse(grid, cfg, seed=seed, orders=orders, start=start)


def orders_at(grid, ticks, *, seed=0, **kw) -> list[Order]:
    rng = np.random.default_rng(seed)
    pickups = grid.pickup_cells()
    stations = grid.station_cells()
    return [
        Order(
            id=f"o{i}",
            tick=t,
            pickup=pickups[int(rng.integers(len(pickups)))],
            station=stations[int(rng.integers(len(stations)))],
            **kw,
        )
        for i, t in enumerate(ticks)
    ]
