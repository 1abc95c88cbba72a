"""Every benchmark and experiment of the project, one module per tier (``fleetmind bench ...``).

- :mod:`fleetmind.bench.sim`: simulator speed, fleetmind against rware (``bench sim``).
- :mod:`fleetmind.bench.safety`: shield resolve time for 10 to 1,000 robots (``bench safety``).
- :mod:`fleetmind.bench.learn`: neural learner speed, the nav policy against shortest path
  (``bench learn``).
- :mod:`fleetmind.bench.free_riding`: the free-riding experiment under reward modes, FIELD-NOTES
  §5.2 (``bench free-riding``).
- :mod:`fleetmind.bench.llm`: LLM runtime overhead, embedded tokens/s, valid-JSON rate
  (``bench llm``).
- :mod:`fleetmind.bench.dispatch`: planners, executors, latency and scaling of the whole loop
  (``bench dispatch``).
- :mod:`fleetmind.bench.ray`: Ray scale-out, sweeps and rollouts with 1 and 2 workers
  (``bench ray``).

The modules sit above every runtime package and nothing below imports them (tests/test_layers.py).
"""

from __future__ import annotations
