"""A live simulation for the dashboard: a control loop stepped on a worker thread.

:class:`LiveSession` builds the world, planner, executor and shield from a
:class:`~fleetmind.eval.runner.RunConfig` exactly as ``fleetmind run`` does, and steps the
:class:`~fleetmind.dispatch.control.ControlLoop` at a chosen speed (ticks per second) while the
page watches. Play, pause, single step, speed and reset come from the page. After every tick
the worker publishes an immutable frame (a plain dict); readers never take the stepping lock, so
a slow planner in ``sync`` mode never blocks the web server.

With ``record`` on (the default), each episode is recorded like a ``fleetmind run`` folder under
``ROOT/live/`` so it can be replayed, and its LLM calls read, from the dashboard afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.faults import parse_fault
from fleetmind.envs.warehouse import resolve_map
from fleetmind.errors import ConfigError, FleetmindError, check_range
from fleetmind.eval.recorder import RunRecorder
from fleetmind.eval.runner import (
    LLM_PLANNERS,
    RunConfig,
    llm_client,
    make_executor,
    make_planner,
    make_world,
)
from fleetmind.sim.maps import require_tasks
from fleetmind.web.paths import relative_name
from fleetmind.web.runs import grid_rows

logger = logging.getLogger(__name__)

State = Literal["starting", "running", "paused", "finished", "error", "stopped"]
Command = Literal["play", "pause", "step", "speed", "reset"]
MIN_SPEED = 0.5
MAX_SPEED = 500.0
HISTORY = 4000  # chart points kept per live episode


class _Sink:
    """Keeps the last tick's rows for the page and forwards everything to the recorder."""

    def __init__(self, recorder: RunRecorder | None) -> None:
        self.recorder = recorder
        self.last: dict[str, NDArray[Any]] = {}

    def on_tick(self, tick: int, columns: dict[str, NDArray[Any]]) -> None:
        self.last = {k: np.array(v, copy=True) for k, v in columns.items()}
        if self.recorder is not None:
            self.recorder.on_tick(tick, columns)

    def on_event(self, event: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder.on_event(event)

    def snapshot(self, tick: int, state: dict[str, Any], *, reason: str) -> Any:
        if self.recorder is not None:
            return self.recorder.snapshot(tick, state, reason=reason)
        return None


class LiveSession:
    """One live episode at a time, stepped on a worker thread.

    Args:
        config: the run to simulate (map, robots, steps, planner, executor, seed, ...).
        root: the dashboard root; recordings go to ``root/live/``.
        record: record each episode as a run folder.
        speed: ticks per second while playing.
        autoplay: start playing as soon as the episode is built.
    """

    def __init__(
        self,
        config: RunConfig,
        root: Path,
        *,
        record: bool = True,
        speed: float = 10.0,
        autoplay: bool = True,
    ) -> None:
        self.config = config
        self.root = root
        self.record = record
        self.speed = _clamp_speed(speed)
        self.playing = autoplay
        self.state: State = "starting"
        self.error: str | None = None
        self.run_name: str | None = None
        self.episode = 0
        self._frame: dict[str, Any] | None = None
        self._init: dict[str, Any] | None = None
        self._history: list[dict[str, Any]] = []
        self._wake = threading.Condition()
        self._steps_requested = 0
        self._reset = False
        self._stop = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ public face
    def start(self) -> None:
        """Start the worker thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="fleetmind-live", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop stepping, close the episode (flushing its recording) and join the worker."""
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def control(self, command: str, value: float | None = None) -> dict[str, Any]:
        """Apply a page command: play, pause, step, speed (``value``: ticks/s) or reset.

        Raises:
            ConfigError: an unknown command or a missing or non-positive speed.
        """
        with self._wake:
            if command == "play":
                self.playing = True
            elif command == "pause":
                self.playing = False
            elif command == "step":
                self.playing = False
                self._steps_requested += 1
            elif command == "speed":
                if value is None:
                    raise ConfigError("live control 'speed': a value (ticks/s) is required")
                check_range("speed", value, above=0, where="live control")
                self.speed = _clamp_speed(value)
            elif command == "reset":
                self._reset = True
            else:
                raise ConfigError(
                    f"live control: unknown command {command!r} "
                    "(expected play, pause, step, speed or reset)"
                )
            self._wake.notify_all()
        return self.status()

    def status(self) -> dict[str, Any]:
        """State, tick, speed and the recording folder of the live episode."""
        frame = self._frame
        return {
            "enabled": True,
            "state": self.state,
            "playing": self.playing,
            "speed": self.speed,
            "tick": frame["tick"] if frame else 0,
            "steps": self.config.steps,
            "episode": self.episode,
            "run": self.run_name,
            "error": self.error,
            "config": self.config.public(),
        }

    def init_message(self) -> dict[str, Any] | None:
        """The map and robot ids of the current episode (None until it is built)."""
        return self._init

    def history(self) -> list[dict[str, Any]]:
        """Chart points of the current episode so far: ``tick, reward, delivered, throughput``.

        At most about :data:`HISTORY` points: older ones are thinned as the episode grows.
        """
        return list(self._history)

    def frame(self) -> dict[str, Any] | None:
        """The latest published frame (None until the first one)."""
        return self._frame

    # ------------------------------------------------------------------ worker
    def _work(self) -> None:
        while True:
            with self._wake:
                if self._stop:
                    break
                self._reset = False
            try:
                self._episode()
            except FleetmindError as exc:
                self._fail(str(exc))
            except Exception as exc:  # a bug: keep the server up, show it on the page
                logger.exception("live episode failed")
                self._fail(f"{type(exc).__name__}: {exc}")
            with self._wake:
                while not (self._stop or self._reset):
                    self._wake.wait()
        self.state = "stopped"

    def _fail(self, message: str) -> None:
        self.state = "error"
        self.error = message

    def _episode(self) -> None:
        cfg = self.config
        self.state = "starting"
        self.error = None
        self.episode += 1
        grid = resolve_map(cfg.map)
        require_tasks(grid)
        faults = [parse_fault(f) for f in cfg.faults]
        world = make_world(cfg, grid)
        with contextlib.ExitStack() as stack:
            recorder = None
            if self.record:
                stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
                folder = self.root / "live" / f"{stamp}-seed{cfg.seed}-e{self.episode}"
                recorder = RunRecorder(
                    folder, flush_every=cfg.flush_every, snapshot_every=cfg.snapshot_every
                )
                recorder.write_config(cfg.public())
                self.run_name = relative_name(self.root, folder)
            calls_path = recorder.calls_path if recorder is not None else None
            client = stack.enter_context(llm_client(cfg, calls_path))
            sink = _Sink(recorder)
            loop = ControlLoop(
                world,
                make_planner(cfg, grid, client),
                make_executor(cfg, grid, client),
                config=LoopConfig(
                    shield=cfg.shield,
                    planner_mode="sync" if cfg.planner_mode == "sync" else "async",
                    snapshot_text=cfg.planner in LLM_PLANNERS,
                    snapshot_every=cfg.snapshot_every if recorder is not None else 0,
                ),
                faults=faults,
                sink=sink,
            )
            if recorder is not None:
                recorder.attach(world, faults=faults, stats=loop.stats)
            stack.callback(self._close, loop, recorder)
            self._history = []
            self._init = {
                "episode": self.episode,
                "map": grid_rows(grid),
                "robots": list(world.robot_ids),
                "steps": cfg.steps,
                "run": self.run_name,
            }
            self._publish(loop, sink)
            self._run(loop, sink, recorder)

    @staticmethod
    def _close(loop: ControlLoop, recorder: RunRecorder | None) -> None:
        loop.close()
        if recorder is not None:
            metrics = loop.metrics()
            recorder.close(metrics)

    def _run(self, loop: ControlLoop, sink: _Sink, recorder: RunRecorder | None) -> None:
        steps = self.config.steps
        next_at = time.perf_counter()
        while True:
            with self._wake:
                if self._stop or self._reset:
                    return
                done = loop.world.tick >= steps
                if done:
                    self.state = "finished"
                elif self.playing:
                    self.state = "running"
                else:
                    self.state = "paused"
                go = not done and (self.playing or self._steps_requested > 0)
                if not go:
                    self._wake.wait()
                    next_at = time.perf_counter()
                    continue
                delay = next_at - time.perf_counter()
                if self.playing and delay > 0:
                    self._wake.wait(delay)
                    continue
                if self._steps_requested > 0 and not self.playing:
                    self._steps_requested -= 1
            loop.step()
            next_at = max(next_at + 1.0 / self.speed, time.perf_counter() - 0.5)
            self._publish(loop, sink)
            if loop.world.tick >= steps and recorder is not None:
                recorder.close(loop.metrics())

    def _publish(self, loop: ControlLoop, sink: _Sink) -> None:
        w = loop.world
        n = len(w.robot_ids)
        last = sink.last

        def flags(name: str) -> list[Any]:
            value = last.get(name)
            return value.tolist() if value is not None else [False] * n

        m = w.metrics()
        point = {
            "tick": w.tick,
            "reward": [round(float(r), 6) for r in w.reward_sum],
            "delivered": int(m["tasks_completed"]),
            "throughput": float(m["throughput"]),
        }
        history = self._history
        if len(history) >= HISTORY:  # thin the older half: keep every other point
            half = len(history) // 2
            history = history[:half:2] + history[half:]
        self._history = [*history, point]  # a new list: readers may hold the old one
        self._frame = {
            "episode": self.episode,
            "tick": w.tick,
            "pos": w.pos.astype(int).tolist(),
            "target": [
                [int(w.goal[i, 0]), int(w.goal[i, 1])] if w.has_task[i] else None for i in range(n)
            ],
            "carrying": w.carrying.tolist(),
            "broken": w.broken.tolist(),
            "shield": flags("shield_override"),
            "conflict": flags("conflict"),
            "proposed": flags("proposed") if "proposed" in last else [0] * n,
            "executed": flags("executed") if "executed" in last else [0] * n,
            "order": [(o.id if (o := w.task_of(i)) is not None else "") for i in range(n)],
            "open": [[int(c) for c in w.records[k].order.pickup] for k in w.open],
            "reward": point["reward"],
            "delivered": point["delivered"],
            "throughput": point["throughput"],
            "shield_interventions": loop.stats.shield_interventions,
            "planner_calls": loop.stats.planner_calls,
            "collisions": loop.stats.collisions,
            "time": time.time(),
        }


def _clamp_speed(speed: float) -> float:
    return float(min(MAX_SPEED, max(MIN_SPEED, speed)))
