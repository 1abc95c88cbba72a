"""Public checkers for fleetmind and third-party envs, and helpers for tests."""

from __future__ import annotations

from fleetmind.testing.determinism import NondeterminismError, check_determinism

__all__ = ["NondeterminismError", "check_determinism"]
