from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fleetmind.errors import ConfigError
from fleetmind.scale.backend import RemoteRunError, check_backend, map_runs


def square(x: int) -> int:
    return x * x


def reject_odd(x: int) -> int:
    if x % 2:
        raise ConfigError(f"item {x}: odd")
    return x


def slow_or_die(item: tuple[int, str]) -> dict[str, Any]:
    """Item 1 parks (pid in a file) on its first attempt, to be killed; the rest just sleep."""
    i, folder = item
    d = Path(folder)
    pid_file = d / f"pid-{i}"
    if i == 1 and not pid_file.exists():
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)
    time.sleep(0.2)
    (d / f"done-{i}").write_text(str(os.getpid()))
    return {"item": i, "pid": os.getpid()}


# --------------------------------------------------------------------------- local


def test_local_runs_in_order_and_reports_progress() -> None:
    seen: list[tuple[int, int]] = []
    assert map_runs(square, [3, 1, 2], progress=lambda d, t: seen.append((d, t))) == [9, 1, 4]
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert map_runs(square, []) == []


def test_local_process_pool_matches_in_process() -> None:
    items = [5, 9, 12, 3]
    assert map_runs(math.factorial, items, workers=2) == [math.factorial(x) for x in items]


def test_local_keeps_the_error_type() -> None:
    with pytest.raises(ConfigError, match="item 3: odd"):
        map_runs(reject_odd, [2, 3, 4])


def test_bad_backend_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="expected one of local, ray"):
        map_runs(square, [1], backend="dask")
    with pytest.raises(ConfigError, match="only used with --backend ray"):
        check_backend("local", "127.0.0.1:6379")
    with pytest.raises(ConfigError, match="workers"):
        map_runs(square, [1], workers=0)


def test_local_backend_never_imports_ray() -> None:
    code = (
        "import sys, math\n"
        "from fleetmind.scale import backend, jobs, rollout\n"
        "from fleetmind.scale.backend import map_runs\n"
        "assert map_runs(math.factorial, [3, 4]) == [6, 24]\n"
        "assert map_runs(math.factorial, [3, 4], workers=2) == [6, 24]\n"
        "env = rollout.ShardedVectorEnv('warehouse-tiny', 2, 4, workers=2, seed=0)\n"
        "env.reset(); env.close()\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- ray


def test_ray_results_in_item_order(ray_instance: Any) -> None:
    from tests.scale.conftest import by_value

    by_value(__name__)
    items = list(range(7))
    assert map_runs(square, items, backend="ray") == [x * x for x in items]
    assert map_runs(square, items, backend="ray", workers=1) == [x * x for x in items]


def test_ray_keeps_the_error_type(ray_instance: Any) -> None:
    from tests.scale.conftest import by_value

    by_value(__name__)
    with pytest.raises(ConfigError, match="item 3: odd"):
        map_runs(reject_odd, [2, 3, 4], backend="ray")


def _kill_when_parked(folder: Path, killed: list[int]) -> None:
    deadline = time.monotonic() + 60
    pid_file = folder / "pid-1"
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text():
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.05)


@pytest.mark.timeout(120)
def test_ray_retries_a_killed_worker_and_the_sweep_completes(
    ray_instance: Any, tmp_path: Path
) -> None:
    from tests.scale.conftest import by_value

    by_value(__name__)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_parked, args=(tmp_path, killed))
    killer.start()
    items = [(i, str(tmp_path)) for i in range(4)]
    results = map_runs(slow_or_die, items, backend="ray", max_retries=2)
    killer.join()
    assert len(killed) == 1, "the parked worker was never seen"
    assert [r["item"] for r in results] == [0, 1, 2, 3]
    # Item 1 finished in another process than the one that was killed.
    assert results[1]["pid"] != killed[0]
    assert sorted(p.name for p in tmp_path.glob("done-*")) == [f"done-{i}" for i in range(4)]


@pytest.mark.timeout(120)
def test_ray_without_retries_reports_the_dead_worker(ray_instance: Any, tmp_path: Path) -> None:
    from tests.scale.conftest import by_value

    by_value(__name__)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_parked, args=(tmp_path, killed))
    killer.start()
    with pytest.raises(RemoteRunError, match=r"item 0: .*max_retries=0"):
        map_runs(slow_or_die, [(1, str(tmp_path))], backend="ray", max_retries=0)
    killer.join()
    assert len(killed) == 1
