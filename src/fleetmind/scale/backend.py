"""Where a sweep's runs execute: in this process, in local processes, or as Ray tasks.

:func:`map_runs` is the one call behind ``--backend {local,ray}`` and ``--ray-address``: it maps a
function over independent work items (one compare run, one training seed, one replay) and
returns the results in item order, whichever backend ran them.

- ``local`` (the default) never imports Ray. With ``workers`` None or 1 the items run one after
  the other in this process; with ``workers > 1`` in a ``ProcessPoolExecutor`` (spawned
  processes, so ``fn`` and the items must be picklable by reference: module-level functions of
  an installed module).
- ``ray`` runs one Ray task per item, each with its own resources (``num_cpus``, ``memory``)
  and ``max_retries``: a task whose worker process dies (killed, out of memory, node lost) is
  run again, so the sweep completes. Exceptions raised by ``fn`` itself are not retried (a bad
  config fails the same way every time) and come back as the original exception type. At most
  ``workers`` tasks are in flight (None: as many as the cluster has CPUs for).

Ray is started on demand: ``address=None`` starts a local instance (stopped again when the call
returns), ``"auto"`` or ``"HOST:PORT"`` joins a running cluster (see ``docs/ray.md``); an
instance that is already initialised (``ray.init`` by the caller) is used and left running.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Literal, TypedDict, TypeVar

from fleetmind.errors import ConfigError, FleetmindError, check_range

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
Backend = Literal["local", "ray"]
BACKENDS: tuple[str, ...] = ("local", "ray")


class RemoteRunError(FleetmindError):
    """A Ray task could not complete: its worker died more often than ``max_retries`` allows."""


def check_backend(backend: str, address: str | None = None) -> None:
    """Validate a ``--backend`` / ``--ray-address`` pair.

    Raises:
        ConfigError: an unknown backend, an address without the ray backend, or the ray
            backend without Ray installed.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if address is not None and backend != "ray":
        raise ConfigError("ray-address: only used with --backend ray")
    if backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ConfigError(
                "backend ray: Ray is not installed; install the extra: pip install 'fleetmind[ray]'"
            )


def import_ray() -> Any:
    """Import Ray quietly (no token-auth notice on a local instance, no usage-stats prompt)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    return ray


@contextlib.contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[Any]:
    """Yield the ``ray`` module with a connected instance; stop it afterwards if started here.

    Args:
        address: None starts a local instance; ``"auto"`` or ``"HOST:PORT"`` joins a cluster.
        num_cpus: CPUs of a new local instance (None: Ray counts them); ignored for a cluster.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": True,
    }
    if address is None:
        kwargs["num_cpus"] = num_cpus
    else:
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise ConfigError(f"ray-address {address!r}: cannot connect ({exc})") from None
    log.info("ray: connected (%s)", address or "local instance")
    try:
        yield ray
    finally:
        ray.shutdown()


def _invoke(fn: Callable[[T], R], item: T) -> R:
    """Run one item inside a Ray worker."""
    return fn(item)


class BackendOptions(TypedDict, total=False):
    """The keyword options of :func:`map_runs`, for functions that hand them on (see there)."""

    backend: str
    address: str | None
    max_retries: int
    workers: int | None
    num_cpus: float
    memory: int | None
    progress: Callable[[int, int], None] | None


def map_runs(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    backend: str = "local",
    address: str | None = None,
    max_retries: int = 3,
    workers: int | None = None,
    num_cpus: float = 1.0,
    memory: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]`` on the chosen backend, results in item order.

    Args:
        fn: a module-level function of an installed module (Ray workers and spawned processes
            import it by name).
        items: independent work items (picklable).
        backend: ``"local"`` or ``"ray"``.
        address: ray only: None (start a local instance), ``"auto"`` or ``"HOST:PORT"``.
        max_retries: ray only: re-runs of a task whose worker process died.
        workers: items in flight at once (local: None or 1 runs in this process; ray: None
            lets the cluster's CPUs decide).
        num_cpus: ray only: CPUs reserved by each task.
        memory: ray only: bytes of memory reserved by each task (None: no reservation).
        progress: called with ``(done, total)`` after each finished item.

    Returns:
        ``fn(item)`` for each item, in the order of ``items``.

    Raises:
        ConfigError: a bad backend, address or worker count.
        RemoteRunError: a Ray task whose worker died more than ``max_retries`` times.
        Exception: whatever ``fn`` raised for the first failing item (its own type).
    """
    check_backend(backend, address)
    if workers is not None:
        check_range("workers", workers, low=1)
    check_range("max_retries", max_retries, low=0)
    items = list(items)
    if not items:
        return []
    if backend == "local":
        return _map_local(fn, items, workers, progress)
    return _map_ray(
        fn,
        items,
        address=address,
        max_retries=max_retries,
        workers=workers,
        num_cpus=num_cpus,
        memory=memory,
        progress=progress,
    )


def _map_local(
    fn: Callable[[T], R],
    items: list[T],
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[R]:
    total = len(items)
    if workers is None or workers == 1 or total == 1:
        results = []
        for i, item in enumerate(items):
            results.append(fn(item))
            if progress is not None:
                progress(i + 1, total)
        return results
    # Spawned, not forked: the parent may hold threads (progress bars, torch pools).
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(fn, item) for item in items]
        out: list[R] = []
        for i, fut in enumerate(futures):
            out.append(fut.result())
            if progress is not None:
                progress(i + 1, total)
        return out


def _map_ray(
    fn: Callable[[T], R],
    items: list[T],
    *,
    address: str | None,
    max_retries: int,
    workers: int | None,
    num_cpus: float,
    memory: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[R]:
    with ray_session(address) as ray:
        options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "max_retries": max_retries,
            "retry_exceptions": False,
        }
        if memory is not None:
            options["memory"] = memory
        task = ray.remote(_invoke).options(**options)
        fn_ref = ray.put(fn)
        total = len(items)
        limit = workers or total
        index_of: dict[Any, int] = {}
        results: dict[int, R] = {}
        pending: list[Any] = []
        next_item = 0
        while len(results) < total:
            while next_item < total and len(pending) < limit:
                ref = task.remote(fn_ref, items[next_item])
                index_of[ref] = next_item
                pending.append(ref)
                next_item += 1
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = index_of.pop(ref)
                results[i] = _get(ray, ref, i, max_retries)
                if progress is not None:
                    progress(len(results), total)
        return [results[i] for i in range(total)]


def _get(ray: Any, ref: Any, index: int, max_retries: int) -> Any:
    from ray import exceptions as rex

    try:
        return ray.get(ref)
    except rex.RayTaskError as exc:
        # The exception raised by ``fn``: hand back its own type (ConfigError stays ConfigError).
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        raise cause from None
    except (rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError) as exc:
        raise RemoteRunError(
            f"item {index}: its Ray worker died more than max_retries={max_retries} times "
            f"({type(exc).__name__})"
        ) from exc
