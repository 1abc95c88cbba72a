"""Smoke runs of every neural learner, checkpoint + resume, the train loop and the rware adapter."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fleetmind.envs import make_vector
from fleetmind.errors import ConfigError
from fleetmind.rl.neural import ALGOS, MODULES, ON_POLICY, base
from fleetmind.rl.neural.dqn import DQNConfig
from fleetmind.rl.neural.ppo import PPOConfig
from fleetmind.rl.train import train

torch.set_num_threads(1)

SMALL_PPO = PPOConfig(rollout_len=16, epochs=2, minibatches=2, hidden=(32, 32))
SMALL_DQN = DQNConfig(buffer_size=500, batch_size=16, learning_starts=32, hidden=(32, 32))


def tiny_env(seed: int = 0) -> base.BatchEnv:
    return make_vector("warehouse-tiny", 2, 2, seed=seed, max_steps=40)


def config_for(algo: str) -> Any:
    from fleetmind.rl.neural.maddpg import MADDPGConfig
    from fleetmind.rl.neural.mat import MATConfig

    small = {
        "maddpg": MADDPGConfig(buffer_size=500, batch_size=16, learning_starts=32, hidden=(32, 32)),
        "mat": MATConfig(rollout_len=16, epochs=2, minibatches=2, embed=32),
    }
    return small.get(algo, SMALL_PPO if algo in ON_POLICY else SMALL_DQN)


@pytest.mark.parametrize("algo", ALGOS)
def test_learner_smoke_checkpoint_and_resume(algo: str, tmp_path: Path) -> None:
    module = importlib.import_module(MODULES[algo])
    events: list[base.Event] = []
    result = module.train(
        tiny_env(),
        config_for(algo),
        seed=0,
        steps=200,
        out_dir=tmp_path,
        callbacks=[events.append],
        checkpoint_every=2,
    )
    assert result.steps >= 200
    assert result.updates > 0
    for name, values in result.losses.items():
        assert values, name
        assert all(math.isfinite(v) for v in values), name
    out = result.policy(torch.zeros(3, 2, tiny_env().obs_size))
    assert out.shape == (3, 2, 5)
    # 200 steps on 2 worlds with a 40-step limit: every world finished at least 2 episodes.
    assert set(result.returns) == {"robot_0", "robot_1"}
    assert len(result.returns["robot_0"]) >= 4
    assert {e.kind for e in events} >= {"episode", "checkpoint"}
    assert any("train/agent/robot_1/return" in e.scalars for e in events)
    assert (tmp_path / "checkpoint.pt").exists()

    resumed = module.train(
        tiny_env(), config_for(algo), seed=0, steps=400, out_dir=tmp_path, resume=True
    )
    assert resumed.steps >= 400
    assert resumed.steps_this_call == resumed.steps - result.steps
    assert resumed.updates > result.updates
    assert len(resumed.returns["robot_0"]) > len(result.returns["robot_0"])
    assert resumed.returns["robot_0"][: len(result.returns["robot_0"])] == result.returns["robot_0"]


def test_resume_refuses_another_algorithm(tmp_path: Path) -> None:
    from fleetmind.rl.neural import ippo, mappo

    ippo.train(tiny_env(), SMALL_PPO, seed=0, steps=64, out_dir=tmp_path)
    with pytest.raises(ConfigError, match="holds 'ippo'"):
        mappo.train(tiny_env(), SMALL_PPO, seed=0, steps=128, out_dir=tmp_path, resume=True)


def test_same_seed_same_training_different_seed_differs() -> None:
    from fleetmind.rl.neural import ippo

    a = ippo.train(tiny_env(), SMALL_PPO, seed=5, steps=128)
    b = ippo.train(tiny_env(), SMALL_PPO, seed=5, steps=128)
    c = ippo.train(tiny_env(), SMALL_PPO, seed=6, steps=128)
    assert a.losses == b.losses
    assert a.losses != c.losses


def test_hyper_rules_are_applied_and_recorded() -> None:
    from fleetmind.rl.neural import ippo, vdn

    env = make_vector("warehouse-tiny", 2, 2, seed=0, max_steps=50)
    res = ippo.train(env, PPOConfig(rollout_len=8, shared_reward=True), seed=0, steps=16)
    assert res.config["gamma"] == 0.95  # horizon 50 < 100
    assert res.config["lr"] == pytest.approx(1.5e-4)  # halved: two agents, one reward
    assert res.config["hyper"]["sources"]["gamma"].startswith("rule")
    res = vdn.train(tiny_env(), DQNConfig(learning_starts=10, gamma=0.5), seed=0, steps=16)
    assert res.config["gamma"] == 0.5
    assert res.config["hyper"]["sources"]["gamma"] == "override"


def test_train_writes_run_folder(tmp_path: Path) -> None:
    run = train(
        "warehouse-tiny",
        2,
        "mappo",
        steps=256,
        seed=0,
        out_dir=tmp_path,
        num_envs=2,
        max_steps=40,
        overrides={"rollout_len": 16, "hidden": [32, 32]},
        eval_ticks=30,
        checkpoint_every=1,
        progress=False,
    )
    for name in ("config.json", "metrics.json", "curves.csv", "curves.png", "policy.pt"):
        assert (tmp_path / name).exists(), name
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["per_agent_deliveries"]) == {"robot_0", "robot_1"}
    assert set(metrics["per_agent_reward"]) == {"robot_0", "robot_1"}
    assert metrics["throughput"] == pytest.approx(
        sum(metrics["per_agent_deliveries"].values()) / (30 * 4)
    )
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["resolved"]["rollout_len"] == 16
    assert config["resolved"]["hyper"]["sources"]["lr"].startswith("rule")
    header = (tmp_path / "curves.csv").read_text().splitlines()[0].split(",")
    for col in ("robot_0_return", "robot_1_return", "robot_0_deliveries", "robot_1_peak"):
        assert col in header
    assert metrics["diagnostics"] == [] or all("kind" in f for f in metrics["diagnostics"])
    events = b"".join(p.read_bytes() for p in (tmp_path / "tb").iterdir())
    for tag in (b"train/agent/robot_0/return", b"train/loss/value", b"eval/throughput"):
        assert tag in events
    assert run.metrics["steps"] >= 256
    resumed = train(
        "warehouse-tiny",
        2,
        "mappo",
        steps=512,
        out_dir=tmp_path,
        num_envs=2,
        max_steps=40,
        overrides={"rollout_len": 16, "hidden": [32, 32]},
        eval_ticks=10,
        resume=True,
        progress=False,
    )
    assert resumed.metrics["steps"] >= 512
    assert resumed.metrics["updates"] > run.metrics["updates"]


def test_train_tabular_paths(tmp_path: Path) -> None:
    q = train("gridworld-4x4", 1, "q", steps=30_000, out_dir=tmp_path / "q", progress=False)
    assert q.metrics["greedy_path_steps"] == 6
    race = train("race-4x4", 2, "ctde", steps=20_000, out_dir=tmp_path / "c", progress=False)
    assert (tmp_path / "c" / "policy.npz").exists()
    assert set(race.returns) == {"robot_0", "robot_1"}
    wh = train(
        "warehouse-tiny", 2, "iql", steps=400, max_steps=40, eval_ticks=20, eval_episodes=2,
        out_dir=tmp_path / "w", progress=False,
    )  # fmt: skip
    assert wh.metrics["eval_ticks"] == 40  # 2 episodes of 20 ticks
    assert wh.config["resolved"]["sources"]["alpha"].startswith("rule")
    # Exploration tied to the run's length; the figure stands next to shortest-path robots.
    assert wh.config["resolved"]["eps_start"] == 1.0
    assert wh.config["resolved"]["sources"]["exploration"].startswith("rule")
    assert wh.metrics["eval_policy"] == "epsilon-greedy 0.05"
    assert wh.metrics["shortest_path_tasks_completed"] >= 0
    assert "greedy_tasks_completed" in wh.metrics


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algo": "ippo", "backend": "ray"}, "ray backend is not built yet"),
        ({"algo": "ppo"}, "algo: expected one of"),
        ({"algo": "ctde"}, "race-4x4"),
        ({"algo": "q"}, "one robot"),
        ({"algo": "ippo", "overrides": {"learning_rate": 1.0}}, "unknown PPOConfig"),
        ({"algo": "iql", "resume": True}, "not resumable"),
    ],
)
def test_train_rejects_bad_input(kwargs: dict[str, object], message: str, tmp_path: Path) -> None:
    args: dict[str, object] = {"steps": 32, "out_dir": tmp_path, "progress": False, **kwargs}
    with pytest.raises(ConfigError, match=message):
        train("warehouse-tiny", 2, **args)  # type: ignore[arg-type]


def test_rware_batch_reports_final_observations() -> None:
    pytest.importorskip("rware")
    from fleetmind.rl.neural import mappo
    from fleetmind.rl.neural.adapters import rware_batch

    env = rware_batch("rware-tiny-2ag-v2", 2, seed=0, max_steps=5)
    obs, _ = env.reset()
    assert obs.shape == (2, 2, env.obs_size)
    assert env.global_state().shape == (2, 2 * env.obs_size)
    for _ in range(4):
        obs, _r, term, trunc, info = env.step(np.zeros((2, 2), dtype=np.int64))
        assert not trunc.any()
    obs, _r, term, trunc, info = env.step(np.ones((2, 2), dtype=np.int64))
    assert trunc.all()
    assert not term.any()
    assert info["final_obs"].shape == obs.shape
    assert "delivered" in info
    with pytest.raises(ConfigError, match="shape"):
        env.step(np.zeros((2, 3), dtype=np.int64))
    res = mappo.train(env, SMALL_PPO, seed=0, steps=64)
    assert len(res.returns["robot_0"]) >= 2
