"""The project's own benchmarks (``fleetmind bench ...``).

- :mod:`fleetmind.bench.sim`: simulator speed, fleetmind against rware.
"""

from __future__ import annotations
