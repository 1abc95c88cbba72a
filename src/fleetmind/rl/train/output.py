"""What a training run leaves behind: the run folder's files, the curves' plot, the progress bar."""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import ConfigError
from fleetmind.rl import diagnostics
from fleetmind.rl.train.request import TrainRun

log = logging.getLogger(__name__)


def finish(
    out: Path,
    config: dict[str, Any],
    metrics: dict[str, Any],
    returns: Mapping[str, Sequence[float]],
    deliveries: Mapping[str, Sequence[int]],
    end_steps: Sequence[int],
    writer: Any,
    *,
    peaks: Mapping[str, Sequence[float]] | None = None,
    parts: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> TrainRun:
    """Diagnose the curves, write the run folder's files and close ``writer``.

    Args:
        out: the run folder.
        config: the content of ``config.json``.
        metrics: the content of ``metrics.json`` (the diagnostics are added to it).
        returns: agent -> per-episode return.
        deliveries: agent -> per-episode deliveries.
        end_steps: the step at which each episode ended.
        writer: a TensorBoard writer, or None.
        peaks: agent -> per-episode peak ``|r|`` trained on (the §3.3 scale check).
        parts: a scored run's ``env`` and ``llm`` parts of each return.

    Returns:
        The run folder, its metrics, config and curves.
    """
    curves = {a: [float(x) for x in v] for a, v in returns.items()}
    parts = parts or {}
    # Episode returns sum many steps; the §3.3 scale check reads per-episode peaks of |r|.
    step_rewards = {a: list(v) for a, v in peaks.items()} if peaks else {a: [0.0] for a in curves}
    findings = []
    if all(len(v) >= 20 for v in curves.values()) and len(curves) > 1:
        try:
            findings = [
                {"kind": f.kind, "agents": list(f.agents), "message": f.message}
                for f in diagnostics.diagnose(
                    curves,
                    step_rewards=step_rewards,
                    llm_rewards=parts.get("llm"),
                    env_rewards=parts.get("env"),
                    scorer=metrics.get("llm_reward"),
                )
            ]
        except ConfigError as error:
            log.warning("diagnostics skipped: %s", error)
    metrics["diagnostics"] = findings
    metrics["episodes_recorded"] = min((len(v) for v in curves.values()), default=0)
    metrics["last_returns_mean"] = {
        a: float(np.mean(v[-10:])) if v else math.nan for a, v in curves.items()
    }
    _write_csv(out / "curves.csv", curves, deliveries, end_steps, peaks or {}, parts)
    _plot(out / "curves.png", curves, str(config["algo"]), str(config["map"]))
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str))
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    if writer is not None:
        step = int(metrics.get("steps", 0))
        writer.add_scalar("eval/throughput", float(metrics["throughput"]), step)
        for a, v in metrics["per_agent_deliveries"].items():
            writer.add_scalar(f"eval/agent/{a}/deliveries", float(v), step)
        for a, v in metrics["per_agent_reward"].items():
            writer.add_scalar(f"eval/agent/{a}/reward", float(v), step)
        writer.close()
    log.info("train: wrote %s (throughput %.4f)", out, metrics["throughput"])
    return TrainRun(out_dir=out, metrics=metrics, config=config, returns=curves)


def _write_csv(
    path: Path,
    curves: Mapping[str, Sequence[float]],
    deliveries: Mapping[str, Sequence[int]],
    end_steps: Sequence[int],
    peaks: Mapping[str, Sequence[float]],
    parts: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> None:
    """One row per episode: returns, deliveries and (when known) peak ``|r|`` of every agent.

    Scored runs add the environment and score parts of each return (``<agent>_env``, ``_llm``).
    """
    agents = list(curves)
    n = min((len(v) for v in curves.values()), default=0)
    peak_agents = [a for a in agents if len(peaks.get(a, ())) >= n] if peaks else []
    part_cols = [
        (f"{a}_{name}", part[a])
        for name, part in (parts or {}).items()
        for a in agents
        if len(part.get(a, ())) >= n
    ]

    def at(seq: Sequence[Any], i: int, default: Any = 0) -> Any:
        return seq[i] if i < len(seq) else default

    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["episode", "end_step", *(f"{a}_return" for a in agents),
             *(f"{a}_deliveries" for a in agents), *(f"{a}_peak" for a in peak_agents),
             *(name for name, _ in part_cols)]
        )  # fmt: skip
        for i in range(n):
            w.writerow(
                [i, at(end_steps, i, ""), *(curves[a][i] for a in agents),
                 *(at(deliveries.get(a, ()), i) for a in agents),
                 *(peaks[a][i] for a in peak_agents), *(col[i] for _, col in part_cols)]
            )  # fmt: skip


def _plot(path: Path, curves: Mapping[str, Sequence[float]], algo: str, map: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for a, v in curves.items():
        y = np.asarray(v, dtype=np.float64)
        if len(y) == 0:
            continue
        k = max(1, len(y) // 50)
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(k - 1, len(y)), smooth, label=a)
    ax.set_xlabel("episode")
    ax.set_ylabel("own return")
    ax.set_title(f"{algo} on {map}: per-agent returns")
    if curves:
        ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def tensorboard_writer(log_dir: Path) -> Any:
    """A TensorBoard ``SummaryWriter`` on ``log_dir``; None without tensorboard."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is an optional extra
        log.warning("tensorboard is not installed; no TensorBoard scalars")
        return None
    return SummaryWriter(log_dir=str(log_dir))


class ProgressBar:
    """Rich progress bar with an ETA (a no-op when ``enabled`` is False).

    Over environment steps, or, with a time budget (``seconds``), over training seconds read
    from ``clock`` (the step cap of a timed run is a safety bound, not an ETA).
    """

    def __init__(
        self,
        enabled: bool,
        algo: str,
        total: int,
        *,
        seconds: float | None = None,
        clock: Any = None,
    ) -> None:
        self.enabled = enabled
        self.algo = algo
        self.total = total
        self.seconds = seconds
        self.clock = clock
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return lambda step: None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        timed = self.seconds is not None and self.clock is not None
        count = TextColumn("{task.fields[steps]:,} steps") if timed else MofNCompleteColumn()
        self._progress = Progress(
            f"[bold]{self.algo}",
            BarColumn(),
            count,
            TimeElapsedColumn(),
            "ETA",
            TimeRemainingColumn(),
        )
        self._progress.start()
        total = self.seconds if timed else self.total
        self._task = self._progress.add_task(self.algo, total=total, steps=0)
        if timed:
            return lambda step: self._progress.update(
                self._task, completed=min(self.clock(), total), steps=step
            )
        return lambda step: self._progress.update(self._task, completed=min(step, self.total))

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
