"""A local Ray instance shared by the tests of this folder, shut down at the end."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[Any]:
    """``ray`` with a local 2-CPU instance (started once per session, stopped after)."""
    pytest.importorskip("ray")
    from fleetmind.scale.backend import import_ray

    ray = import_ray()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def by_value(module_name: str) -> ModuleType:
    """Let Ray workers receive a test module's functions by value (tests are not importable)."""
    from ray import cloudpickle

    module = sys.modules[module_name]
    cloudpickle.register_pickle_by_value(module)
    return module
