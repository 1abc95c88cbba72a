from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.planners import AssignmentPlanner
from fleetmind.envs import make_parallel
from fleetmind.errors import ConfigError
from fleetmind.eval.runner import RunConfig, make_world
from fleetmind.sim.maps import load_map

pytest.importorskip("ray.rllib")

from fleetmind.scale.rllib import RLlibExecutor, env_creator


def test_env_creator_wraps_make_parallel_with_per_copy_seeds() -> None:
    class Ctx(dict[str, Any]):
        worker_index = 1
        vector_index = 0

    cfg = {"map": "warehouse-tiny", "robots": 2, "seed": 5, "max_steps": 30}
    env = env_creator(Ctx(cfg))
    obs, _ = env.reset()
    ref_obs, _ = make_parallel("warehouse-tiny", 2, seed=1005, max_steps=30).reset()
    assert sorted(obs) == ["robot_0", "robot_1"]
    np.testing.assert_array_equal(obs["robot_0"], ref_obs["robot_0"])
    _, rew, term, trunc, _ = env.step({"robot_0": 1, "robot_1": 0})
    assert set(rew) == {"robot_0", "robot_1"}
    assert term["__all__"] is False
    assert trunc["__all__"] is False


@pytest.fixture(scope="module")
def rllib_run(ray_instance: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two iterations through `fleetmind rllib train`, on the session's Ray instance."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from fleetmind.cli import app

    out = tmp_path_factory.mktemp("rllib")
    args = ["rllib", "train", "--map", "warehouse-tiny", "--robots", "2", "--iterations", "2"]
    args += ["--max-steps", "50", "--seed", "0", "--out", str(out), "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    return SimpleNamespace(
        out_dir=Path(data["out_dir"]),
        module_dir=Path(data["module_dir"]),
        iterations=data["iterations"],
    )


@pytest.mark.timeout(300)
def test_rllib_ppo_trains_on_make_parallel(rllib_run: Any) -> None:
    its = rllib_run.iterations
    assert [r["env_steps"] for r in its] == [400.0, 800.0]
    assert np.isfinite(its[-1]["episode_return_mean"])  # 50-step episodes finished
    summary = json.loads((rllib_run.out_dir / "rllib.json").read_text())
    assert summary["observation"] == {"radius": 2, "heuristic": True}
    assert (rllib_run.module_dir).is_dir()


@pytest.mark.timeout(300)
def test_rllib_policy_runs_as_a_fleetmind_executor(rllib_run: Any) -> None:
    grid = load_map("warehouse-tiny")
    ex = RLlibExecutor(grid, rllib_run.out_dir)
    # Rankings follow the module's logits on the env's own observations.
    env = make_parallel("warehouse-tiny", 2, seed=3)
    obs, _ = env.reset()
    w = env.world
    ranking = ex.rank(w.pos, w.goal, np.array([True, False]), w.carrying)
    logits = ex.logits(np.stack([obs["robot_0"]]))
    # The module's best action first; the fallbacks follow the heuristic (PolicyExecutor).
    assert ranking[0, 0] == int(np.argmax(logits[0]))
    assert sorted(ranking[0].tolist()) == [0, 1, 2, 3, 4]
    assert ranking[1].tolist() == [0, 1, 2, 3, 4]  # idle robot waits first
    ex.fallback = "policy"
    ranking = ex.rank(w.pos, w.goal, np.array([True, False]), w.carrying)
    assert ranking[0].tolist() == np.argsort(-logits[0], kind="stable").tolist()
    ex.fallback = "heuristic"
    # And it drives a fleet through the control loop, the shield keeping it collision-free.
    cfg = RunConfig(map="warehouse-tiny", robots=3, steps=80, planner_mode="sync", seed=1)
    loop = ControlLoop(
        make_world(cfg, grid),
        AssignmentPlanner(grid),
        ex,
        config=LoopConfig(shield=True, planner_mode="sync"),
    )
    metrics = loop.run(cfg.steps)
    assert metrics["steps"] == 80
    assert metrics["collisions"] == 0
    assert metrics["executor"] == "rllib"


def test_executor_refuses_a_missing_or_mismatched_module(rllib_run: Any, tmp_path: Path) -> None:
    grid = load_map("warehouse-tiny")
    with pytest.raises(ConfigError, match="no RLlib module"):
        RLlibExecutor(grid, tmp_path / "nothing")
    with pytest.raises(ConfigError, match="module takes observations of shape"):
        RLlibExecutor(grid, rllib_run.module_dir, radius=3)
