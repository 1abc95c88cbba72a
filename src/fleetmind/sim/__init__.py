"""The warehouse simulator: maps, orders, tick dynamics, rewards, observations, text, rendering.

``sim`` imports nothing of fleetmind but :mod:`fleetmind.errors`. Main entry points:
:class:`~fleetmind.sim.warehouse.Warehouse` (one world with orders, faults and scores),
:class:`~fleetmind.sim.vector.VectorWarehouse` (many worlds at once, for training),
:func:`~fleetmind.sim.maps.load_map` and :func:`~fleetmind.sim.dynamics.resolve_moves`.
"""
