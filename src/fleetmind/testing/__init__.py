"""Public checkers for fleetmind and third-party envs, and scripted fakes for tests.

- :func:`check_determinism` (:mod:`fleetmind.testing.determinism`): two seeded runs of an env,
  compared at every step.
- :mod:`fleetmind.testing.fake_server`: ``FakeChatServer``, a scripted misbehaving
  OpenAI-compatible server on 127.0.0.1 (import the module; it is not loaded here). A figure
  measured against it measures fleetmind's own code, never a model.
- :mod:`fleetmind.testing.rware_twin`: ``compare_with_rware`` / ``compare_vector_with_rware``,
  the RWARE twin against the real rware package step by step (import the module; needs rware).
"""

from __future__ import annotations

from fleetmind.testing.determinism import NondeterminismError, check_determinism

__all__ = ["NondeterminismError", "check_determinism"]
