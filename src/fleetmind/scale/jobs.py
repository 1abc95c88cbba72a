"""The work items of a sweep, and run folders that come back from wherever a run executed.

A :class:`FolderJob` is one call ``fn(**kwargs, <out_arg>=folder)`` that writes a run folder:
one ``fleetmind run`` of a compare (:func:`dispatch_job`), one training seed (:func:`train_job`),
or any other module-level function with an output-folder argument (a replay, a bench case).
:func:`run_jobs` maps :func:`run_folder_job` over jobs with :func:`~.backend.map_runs` and
returns each call's result, with the run folder in place under the requested path:

- in this process, in a local process, or in a Ray worker on this machine the run writes its
  folder directly (same disk);
- on another machine (a Ray worker whose host name differs from the driver's, or ``ship=True``)
  it writes into a temporary folder there, the folder's files travel back with the result, and
  the driver writes them under the requested path; any mention of the temporary path in the
  result or in the folder's JSON files is rewritten to the requested path. Results and folders
  are thus the same as with the local backend.

Each job pins torch's intra-op threads (``threads``, default 1) in every backend, so a run's
floating-point results do not depend on how many cores the process that ran it saw.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from fleetmind.errors import ConfigError
from fleetmind.scale.backend import BackendOptions, map_runs

TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".csv", ".txt")
"""Files of a shipped folder in which the temporary path is rewritten."""


@dataclass(frozen=True)
class FolderJob:
    """One call that writes a run folder.

    Attributes:
        fn: a module-level function of an installed module (workers import it by name).
        kwargs: its keyword arguments, without the output folder.
        out_dir: the run folder to write (None: the call writes none).
        out_arg: the name of ``fn``'s output-folder argument.
        threads: torch intra-op threads while the call runs (None: leave torch alone).
        origin: the host name of the process that submitted the job (filled by
            :func:`run_jobs`); a worker on another host ships the folder back.
        ship: always ship the folder back (for tests and for clusters whose nodes share a host
            name).
    """

    fn: Callable[..., Any]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    out_dir: str | None = None
    out_arg: str = "out_dir"
    threads: int | None = 1
    origin: str | None = None
    ship: bool = False


@dataclass(frozen=True)
class Shipped:
    """What a worker sends back: the result, and the folder's files when it ran elsewhere.

    Attributes:
        result: ``fn``'s return value.
        files: relative path -> bytes of every file of the folder (None: written in place).
        staged: the temporary folder the files were written to on the worker.
    """

    result: Any
    files: dict[str, bytes] | None = None
    staged: str | None = None


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Pin torch's intra-op threads to ``n`` for the block (no-op for None or without torch)."""
    if n is None:
        yield
        return
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_folder_job(job: FolderJob) -> Shipped:
    """Run one job where this process is (the function each Ray task or process runs)."""
    with torch_threads(job.threads):
        if job.out_dir is None:
            return Shipped(job.fn(**job.kwargs))
        away = job.origin is not None and job.origin != socket.gethostname()
        if not (job.ship or away):
            return Shipped(job.fn(**job.kwargs, **{job.out_arg: Path(job.out_dir)}))
        with tempfile.TemporaryDirectory(prefix="fleetmind-ship-") as tmp:
            stage = Path(tmp) / Path(job.out_dir).name
            result = job.fn(**job.kwargs, **{job.out_arg: stage})
            files = {
                p.relative_to(stage).as_posix(): p.read_bytes()
                for p in sorted(stage.rglob("*"))
                if p.is_file()
            }
            return Shipped(result, files, str(stage))


def land(shipped: Shipped, out_dir: str | None) -> Any:
    """Write a shipped folder under ``out_dir`` and return the result with paths rewritten."""
    if shipped.files is None or out_dir is None or shipped.staged is None:
        return shipped.result
    dest = Path(out_dir)
    if dest.exists():
        shutil.rmtree(dest)
    old, new = shipped.staged, str(dest)
    for rel, data in shipped.files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in TEXT_SUFFIXES:
            with suppress(UnicodeDecodeError):  # a binary file with a text suffix stays as is
                data = data.decode("utf-8").replace(old, new).encode("utf-8")
        path.write_bytes(data)
    return rewrite_paths(shipped.result, old, new)


def rewrite_paths(obj: Any, old: str, new: str) -> Any:
    """``obj`` with ``old`` replaced by ``new`` in every string and path inside it."""
    if isinstance(obj, str):
        return obj.replace(old, new)
    if isinstance(obj, Path):
        return Path(str(obj).replace(old, new))
    if isinstance(obj, dict):
        return {k: rewrite_paths(v, old, new) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(rewrite_paths(v, old, new) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: rewrite_paths(getattr(obj, f.name), old, new)
            for f in dataclasses.fields(obj)
            if f.init
        }
        return dataclasses.replace(obj, **changes)
    return obj


def run_jobs(jobs: Sequence[FolderJob], **options: Unpack[BackendOptions]) -> list[Any]:
    """Run every job on the backend; each result in job order, run folders in place.

    Args:
        jobs: the work items.
        **options: the backend options of :func:`~fleetmind.scale.backend.map_runs` (backend,
            address, max_retries, workers, num_cpus, memory, progress), with its defaults; for
            torch jobs set ``num_cpus`` to their ``threads``.

    Returns:
        Each job's result (``fn``'s return value, paths rewritten when shipped).
    """
    outs = [j.out_dir for j in jobs if j.out_dir is not None]
    resolved = [str(Path(o).resolve()) for o in outs]
    if len(set(resolved)) != len(resolved):
        raise ConfigError("out_dir: two jobs of one sweep write the same run folder")
    origin = socket.gethostname()
    stamped = [
        dataclasses.replace(
            j,
            origin=j.origin or origin,
            out_dir=str(Path(j.out_dir).resolve()) if j.out_dir is not None else None,
        )
        for j in jobs
    ]
    shipped = map_runs(
        run_folder_job,
        stamped,
        **options,
    )
    return [land(s, j.out_dir) for s, j in zip(shipped, stamped, strict=True)]


# --------------------------------------------------------------------------- ready-made jobs


def _dispatch(config: Mapping[str, Any], out_dir: Path | None) -> dict[str, Any]:
    from fleetmind.eval.runner import RunConfig, execute

    # A job owns its folder: a retry after a worker died replaces the partial run (callers such
    # as compare check their folders for earlier runs before any job starts).
    return execute(RunConfig.model_validate(dict(config)), out_dir, overwrite=True)


def dispatch_job(
    config: Mapping[str, Any] | Any, out_dir: str | os.PathLike[str] | None, **options: Any
) -> FolderJob:
    """One ``fleetmind run`` (a compare cell) as a job; its result is the metrics dict.

    Args:
        config: a :class:`fleetmind.eval.runner.RunConfig` or its fields.
        out_dir: the run folder (None: record nothing).
        **options: other :class:`FolderJob` fields (``threads``, ``ship``).
    """
    fields = config.model_dump() if hasattr(config, "model_dump") else dict(config)
    return FolderJob(
        fn=_dispatch,
        kwargs={"config": fields},
        out_dir=None if out_dir is None else str(out_dir),
        **options,
    )


def _train(**kwargs: Any) -> Any:
    from fleetmind.rl.train import train

    return train(**kwargs)


def train_job(out_dir: str | os.PathLike[str], **train_kwargs: Any) -> FolderJob:
    """One ``fleetmind train`` run (one seed or config) as a job; its result is a ``TrainRun``.

    Args:
        out_dir: the run folder.
        **train_kwargs: arguments of :func:`fleetmind.rl.train.train` (``map``, ``robots``,
            ``algo``, ``seed``, ``steps``, ...); ``progress`` defaults to False and ``backend``
            must stay ``"local"`` (the job already runs where the backend put it). ``threads``
            and ``ship`` go to the :class:`FolderJob`.
    """
    options = {k: train_kwargs.pop(k) for k in ("threads", "ship") if k in train_kwargs}
    if train_kwargs.get("backend", "local") != "local":
        raise ConfigError("train_job: the job itself runs locally; pass backend to run_jobs")
    train_kwargs.setdefault("progress", False)
    return FolderJob(fn=_train, kwargs=train_kwargs, out_dir=str(out_dir), **options)
