"""``fleetmind bench lorr`` under the 2024 rules, and the 2023 team-size curves.

The two 2024 Test Round instances against their best-known results (94,232 tasks in 5,000 steps
on ``warehouse_large_5000``, 15,508 in 2,000 on ``sortation_large_2000``), once per lever set of
:data:`~fleetmind.bench.lorr.LEVER_SETS`, and errands per step against team size under the 2023
rules. Each run keeps a folder (``lorr_output.json`` in the start kit's layout, ``metrics.json``,
then :data:`ROW_FILE` last); the output file is replayed by
:func:`~fleetmind.bench.lorr.validate_file` (the code of ``fleetmind lorr validate``); a rerun
with the same settings reads the finished runs back (resumable). Where a real output of the
start kit's default entry exists for an instance and length (``../shared/data/lorr/outputs``),
its score stands beside the row.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleetmind.bench.lorr import (
    BEST_KNOWN,
    DEFAULT_LEVERS,
    LEVER_SETS,
    SHARED,
    format_row,
    resolve,
    row,
    run_instance,
    validate_file,
)
from fleetmind.errors import ConfigError

CURVES: dict[str, tuple[int, ...]] = {
    "warehouse_small": (10, 50, 100, 200, 400, 800),
    "sortation_large": (400, 800, 1200, 2000),
    "warehouse_large": (200, 400, 600, 800, 1000, 2000, 3000, 4000, 5000),
}
"""2023 team sizes of each curve (``warehouse_large`` is in ``../shared/data/lorr`` only; a
point whose instance is absent is skipped and listed)."""

QUICK_STEPS: dict[str, int] = {
    "2024/sortation_large_2000": 200,
    "2024/random_32_32_20_100": 300,
}
"""``bench lorr --quick``: the 2024 instances and their steps (``random_32_32_20_100`` is in
``../shared/data/lorr`` only, and 300 steps is the length of the start kit default's real output
for it, the baseline beside the row)."""

ROW_FILE = "row.json"
"""The file a finished benchmark run writes last: its settings and its table row."""


def kit_defaults(data: Path = SHARED) -> dict[tuple[str, int], int]:
    """Tasks the start kit's default entry finished, by (instance name, steps).

    Read from the real 2023/2024 start-kit outputs of ``outputs/pairs.json`` whose file name
    ends in ``_default`` (none if the shared folder is absent).
    """
    path = data / "outputs" / "pairs.json"
    if not path.exists():
        return {}
    out = {}
    for p in json.loads(path.read_text()):
        if p["edition"] in ("2023", "2024") and Path(p["output"]).stem.endswith("_default"):
            key = (f"{p['edition']}/{Path(p['input']).stem}", int(p["makespan"]))
            out[key] = int(p["numTaskFinished"])
    return out


def bench_run(
    name: str,
    folder: Path,
    *,
    steps: int | None,
    time_limit: float | None,
    levers: str,
    seed: int = 0,
    kit: dict[tuple[str, int], int] | None = None,
) -> tuple[dict[str, Any], bool]:
    """One benchmark run in its own folder, or the finished run already there.

    The folder gets ``lorr_output.json`` (the start kit's layout), ``metrics.json``,
    ``config.json`` and, last, :data:`ROW_FILE` (the settings and the row): a folder with that
    file and the same settings is finished and read back; other settings run again.

    Args:
        name: an instance (short name or path).
        folder: the run folder.
        steps: steps (``None``: the best-known result's, else 5,000).
        time_limit: seconds per step (``None``: unlimited).
        levers: a name of :data:`LEVER_SETS`.
        seed: seed of the planner's tie-breaks.
        kit: :func:`kit_defaults` (the start kit default's score beside the row).

    Returns:
        The row (with ``validates``: the output file passes :func:`validate_file`) and whether
        it was read back from a finished run.
    """
    path = resolve(name)
    # Through JSON so that a saved copy compares equal (tuples become lists).
    settings = json.loads(
        json.dumps(
            {
                "instance": str(path.resolve()),
                "steps": steps,
                "time_limit": time_limit,
                "levers": levers,
                "lever_values": dataclasses.asdict(LEVER_SETS[levers]),
                "seed": seed,
            }
        )
    )
    marker = folder / ROW_FILE
    if marker.exists():
        try:
            saved = json.loads(marker.read_text())
        except (OSError, ValueError):
            saved = {}
        if saved.get("settings") == settings and isinstance(saved.get("row"), dict):
            return saved["row"], True
        marker.unlink()  # other settings: this run is redone, not half-trusted
    m = run_instance(
        path, steps=steps, time_limit=time_limit, out=folder, levers=LEVER_SETS[levers],
        seed=seed, episode=False,
    )  # fmt: skip
    _, check = validate_file(folder / "lorr_output.json", path, time_limit=time_limit)
    r = row(m, levers=levers)
    r["validates"] = check.ok
    r["validation_problems"] = list(check.problems[:5])
    r["kit_default"] = (kit or {}).get((r["instance"], r["steps"]))
    r["folder"] = str(folder)
    marker.write_text(json.dumps({"settings": settings, "row": r}, indent=2) + "\n")
    return r, False


def _slug(name: str) -> Path:
    """The run folder of an instance, relative to ``--out`` (``2024/warehouse_large_5000``)."""
    parts = Path(name).with_suffix("").parts
    return Path(*parts[-2:]) if len(parts) >= 2 else Path(parts[-1])


def run(
    *,
    instances: Sequence[str] = tuple(BEST_KNOWN),
    lever_sets: Sequence[str] = tuple(LEVER_SETS),
    steps: int | None = None,
    time_limit: float | None = 1.0,
    curves: bool = True,
    curve_steps: int = 1000,
    curve_levers: str = DEFAULT_LEVERS,
    quick: bool = False,
    out: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``fleetmind bench lorr``: score rows per instance and lever set, and the 2023 curves.

    Every run has a folder ``out/<edition>/<instance>/<lever set>/`` (see :func:`bench_run`);
    a rerun with the same ``out`` and settings skips the finished runs.

    Args:
        instances: short names or paths.
        lever_sets: names in :data:`LEVER_SETS`.
        steps: steps per run (default: each instance's best-known steps).
        time_limit: seconds per step (``None``: unlimited).
        curves: also run the 2023 team-size curves.
        curve_steps: steps of each 2023 run.
        curve_levers: the lever set of the 2023 runs.
        quick: the instances and steps of :data:`QUICK_STEPS` (those present) with the first
            lever set, 2023 curve points 10 and 50 for 200 steps (a smoke run).
        out: the run folders (default: a temporary folder, removed after).
        progress: called with a line of text as each run ends.

    Returns:
        ``rows``, ``curves``, ``time_limit_s``, ``reused`` (runs read back), ``missing``
        (curve points whose instance is absent), ``out``.
    """
    unknown = [s for s in (*lever_sets, curve_levers) if s not in LEVER_SETS]
    if unknown:
        raise ConfigError(f"unknown lever set {unknown[0]!r} (known: {', '.join(LEVER_SETS)})")
    if out is None:
        with tempfile.TemporaryDirectory(prefix="fleetmind-bench-lorr-") as tmp:
            result = run(
                instances=instances, lever_sets=lever_sets, steps=steps, time_limit=time_limit,
                curves=curves, curve_steps=curve_steps, curve_levers=curve_levers, quick=quick,
                out=Path(tmp), progress=progress,
            )  # fmt: skip
        return result | {"out": None}
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: a file, not a folder")
    plan: list[tuple[str, int | None]] = [(name, steps) for name in instances]
    if quick:
        plan = [(n, s) for n, s in QUICK_STEPS.items() if _exists(n)]
        lever_sets, curve_steps = (lever_sets[0],), 200
    kit = kit_defaults()
    reused = 0

    def one(name: str, n_steps: int | None, levers: str) -> dict[str, Any]:
        nonlocal reused
        r, again = bench_run(
            name, out / _slug(name) / levers, steps=n_steps, time_limit=time_limit,
            levers=levers, kit=kit,
        )  # fmt: skip
        reused += again
        if progress is not None:
            progress(format_row(r) + (" (finished before: read back)" if again else ""))
        return r

    rows = [one(name, n, lever_name) for name, n in plan for lever_name in lever_sets]
    curve_rows = []
    missing = []
    if curves:
        sizes = {"warehouse_small": (10, 50)} if quick else CURVES
        for domain, teams in sizes.items():
            for team in teams:
                name = f"2023/{domain}_{team}"
                if not _exists(name):
                    missing.append(name)
                    continue
                curve_rows.append(one(name, curve_steps, curve_levers))
    if missing and progress is not None:
        progress(f"skipped (instance not found): {', '.join(missing)}")
    return {
        "rows": rows,
        "curves": curve_rows,
        "time_limit_s": time_limit,
        "reused": reused,
        "missing": missing,
        "out": str(out),
    }


def _exists(name: str) -> bool:
    try:
        resolve(name)
    except ConfigError:
        return False
    return True


def format_table(result: dict[str, Any]) -> str:
    """The benchmark as plain text lines."""
    lines = [format_row(r) for r in result["rows"]]
    if result["curves"]:
        lines.append("2023 team-size curves (errands per step):")
        lines += [format_row(r) for r in result["curves"]]
    if result.get("missing"):
        lines.append(f"skipped (instance not found): {', '.join(result['missing'])}")
    if result.get("out"):
        lines.append(f"run folders: {result['out']} ({result.get('reused', 0)} read back)")
    return "\n".join(lines)
