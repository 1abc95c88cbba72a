"""The training loop behind ``fleetmind train``: one entry point for every learner.

:func:`train` resolves the map and the algorithm, applies the §3.3 hyperparameter rules
(:mod:`fleetmind.rl.hyper`), trains, evaluates the greedy policy and writes a run folder::

    out_dir/
      config.json      resolved hyperparameters (with the rule behind each), map, robots, seed
      policy.pt        neural: weights + config;  policy.npz: tabular Q-tables
      checkpoint.pt    neural: every ``checkpoint_every`` updates and at the end (resume=True)
      curves.csv       per agent and episode: return, deliveries, peak |r| trained on
      curves.png       the same, one line per agent (never only the team total, §3.3)
      metrics.json     per_agent_deliveries, throughput, per_agent_reward, diagnostics, speed;
                       with a scored reward also llm_reward (calls, cache_hits, parse_fallbacks,
                       variance_fallbacks, tokens, ...)
      calls.jsonl      with an LLM reward: every model call (written by the caller's recorder)
      tb/              TensorBoard scalars: train/..., eval/..., train/agent/robot_i/return

``reward`` (``fleetmind train --reward``) is ``env`` or an LLM score mixed in every K ticks
(:mod:`fleetmind.rl.reward`); the scorer itself comes from the caller, since this tier imports
no LLM code. A scored run's curves.csv adds each agent's environment and score parts of its
return (``<agent>_env``, ``<agent>_llm``), and the diagnostics check them for reward drift.

Algorithms: tabular ``q`` (one robot), ``iql``, ``ctde`` (the race ``race-4x4``: the joint
table needs a small global state) run :mod:`fleetmind.rl.tabular` / :mod:`fleetmind.rl.ctde`
on ``make_parallel(..., obs="tabular")`` (``make_race`` / ``make_gridworld`` for the §3 grids);
neural ``ippo``, ``mappo``, ``iql-dqn``, ``vdn``, ``qmix`` run :mod:`fleetmind.rl.neural` on
``make_vector`` (or, for a map named like ``rware-tiny-2ag-v2``, on real rware envs).

Only ``backend="local"`` exists; ``"ray"`` raises ConfigError.

One job a module: :mod:`.run` (:func:`train`: the checks, then one of the loops),
:mod:`.request` (the learners, the defaults, :class:`TrainRun`, the request both loops take),
:mod:`.tabular_loop` (the tabular loop, its exploration rule, the shortest-path reference),
:mod:`.neural_loop` (the neural loop and its warehouse evaluation), :mod:`.rware` (rware ids:
each learner's defaults there, :class:`RwareCurve`), :mod:`.output` (the run folder's files,
plots, the progress bar). Callers import from here.
"""

from __future__ import annotations

from fleetmind.rl.train.request import (
    ALGOS,
    BACKENDS,
    DEFAULT_STEPS,
    NEURAL_ALGOS,
    TABULAR_ALGOS,
    WAREHOUSE_EPISODE_TICKS,
    WAREHOUSE_EVAL_EPISODES,
    TrainRun,
    reward_bound,
)
from fleetmind.rl.train.run import train
from fleetmind.rl.train.rware import (
    RWARE_ID,
    RWARE_MAT,
    RWARE_MINUTES,
    RWARE_PPO,
    RWARE_WORLDS,
    RwareCurve,
    rware_defaults,
    rware_robots,
)
from fleetmind.rl.train.tabular_loop import (
    EXPLORE_AT,
    EXPLORE_MIN,
    EXPLORE_START,
    TASK_HORIZON,
    WAREHOUSE_LAMBDA,
    warehouse_exploration,
)

__all__ = [
    "ALGOS",
    "BACKENDS",
    "DEFAULT_STEPS",
    "EXPLORE_AT",
    "EXPLORE_MIN",
    "EXPLORE_START",
    "NEURAL_ALGOS",
    "RWARE_ID",
    "RWARE_MAT",
    "RWARE_MINUTES",
    "RWARE_PPO",
    "RWARE_WORLDS",
    "TABULAR_ALGOS",
    "TASK_HORIZON",
    "WAREHOUSE_EPISODE_TICKS",
    "WAREHOUSE_EVAL_EPISODES",
    "WAREHOUSE_LAMBDA",
    "RwareCurve",
    "TrainRun",
    "reward_bound",
    "rware_defaults",
    "rware_robots",
    "train",
    "warehouse_exploration",
]
