"""Scale-out on Ray: sweeps as Ray tasks, rollout workers as Ray actors, RLlib compatibility.

- :mod:`.backend`: :func:`~.backend.map_runs`, the function behind ``--backend {local,ray}`` and
  ``--ray-address`` (local stays the default and never imports Ray).
- :mod:`.jobs`: the work items a sweep maps over (one dispatch run, one training run), with run
  folders shipped back from other nodes.
- :mod:`.rollout`: :class:`~.rollout.ShardedVectorEnv`, the warehouse vector env split over
  rollout workers (in-process shards or Ray actors) behind the batched-env face the neural
  learners drive.
- :mod:`.rllib`: RLlib's multi-agent PPO on ``make_parallel`` through RLlib's PettingZoo wrapper,
  and :class:`~.rllib.RLlibExecutor`, which runs the trained module as a fleetmind executor.
- its benchmark (sweep wall time, rollout samples/s with 1 and 2 workers) is
  :mod:`fleetmind.bench.ray` (``fleetmind bench ray``).

Ray is the optional extra ``fleetmind[ray]``; this package imports it only inside the functions
that need it. See ``docs/ray.md``.
"""

from __future__ import annotations
