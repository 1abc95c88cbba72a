"""The goal-conditioned navigation policy: the RL executor of the dispatch tier.

A small MLP, shared by every robot, that maps one robot's local observation to logits over the
5 actions (wait, up, down, left, right). The observation is that of
:class:`fleetmind.sim.observe.LocalObserver` with radius 2 and the shortest-path heuristic on
(``4 * 5 * 5 + 6 + 5 = 111`` floats: walls, robots, shelves, own target in a 5x5 window; carrying,
has-task, direction to the target; the DHC heuristic value of each action). There is no agent
id in the input, so one policy serves any fleet size; the dispatch tier sets each robot's target
and the shield turns the rankings into a collision-free joint move.

- :meth:`NavPolicy.rank` ``(N, D) -> (N, 5)`` int rankings, best first; :meth:`NavPolicy.logits`.
- :meth:`NavPolicy.save` / :meth:`NavPolicy.load`: ``policy.pt`` (weights, loaded with
  ``weights_only=True``) beside ``policy.json`` (obs layout, radius, training run, version).
- :func:`default_policy_path`: the policy shipped in ``fleetmind/data/nav_policy.pt``.
- :func:`train_nav`: trains one with IPPO or MAPPO on ``make_vector`` (lifelong tasks), or on
  :class:`FallbackVectorEnv` (failed moves fall back down a heuristic ranking, as the shield
  executes the policy in dispatch), optionally starting from a policy (``init``).
- :func:`evaluate` / :func:`shortest_path_actions`: deliveries per robot per tick of a policy and
  of the shortest-path baseline (always the action with the best heuristic value).

The shipped policy was made in two stages (dense LoRR traffic, then the small preset)::

    python -m fleetmind.rl.nav --train --fallback --map /work/shared/maps/lorr/warehouse_small.map \
        --robots 100 --num-envs 8 --steps 60000 --seed 0 --out stage1.pt
    python -m fleetmind.rl.nav --train --fallback --map warehouse-small --robots 16 \
        --steps 150000 --seed 0 --init stage1.pt --ent-coef 0.005 \
        --out src/fleetmind/data/nav_policy.pt
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray

import fleetmind
from fleetmind.envs import make_vector
from fleetmind.envs.vector import BatchStep
from fleetmind.errors import ConfigError, read_input
from fleetmind.rl.neural import base
from fleetmind.rl.neural.ppo import Actor, PPOConfig, env_horizon, resolve_hyper, split_seed
from fleetmind.sim import observe
from fleetmind.sim.distances import DistanceOracle
from fleetmind.sim.dynamics import resolve_moves
from fleetmind.sim.grid import WAIT, GridMap

log = logging.getLogger(__name__)

RADIUS = 2
N_ACTIONS = 5
NAV_ENT_COEF = 0.03
"""Entropy bonus at the start of nav training. With a constant 0.01 some seeds collapse to
waiting (a wait never pays the -0.5 conflict penalty and deliveries are rare early on): seed 1
delivered nothing after 400k steps; with 0.03 it delivered from 100k steps on."""
NAV_ENT_COEF_FINAL = 0.0
"""Entropy bonus at the end (linear anneal): a constant 0.03 left the greedy policy less sharp
(0.0175 deliveries per robot per tick on warehouse-small, 4 robots, against 0.0213 annealed)."""
FORMAT = "fleetmind-nav-policy-v1"
OBS_LAYOUT = (
    "LocalObserver radius 2, heuristic on: 4 channels x 5 x 5 window (walls, robots, shelves, "
    "own target; channel-major), 6 scalars (carrying, has_task, dr/H, dc/W, sign dr, sign dc), "
    "5 heuristic values (wait, up, down, left, right: -1 closer, 0, +1 farther, 2 blocked)"
)


def default_policy_path() -> Path:
    """The navigation policy shipped with fleetmind (``fleetmind/data/nav_policy.pt``)."""
    return Path(str(importlib.resources.files("fleetmind") / "data" / "nav_policy.pt"))


class NavPolicy:
    """A shared goal-conditioned navigation policy (see the module docstring).

    Args:
        actor: the network, ``(..., D) -> (..., 5)`` logits, without agent id.
        metadata: what :meth:`save` writes beside the weights.
    """

    def __init__(self, actor: Actor, metadata: dict[str, Any] | None = None) -> None:
        if actor.agent_id:
            raise ConfigError("a navigation policy must not take an agent id (any fleet size)")
        self.actor = actor.eval()
        self.radius = int((metadata or {}).get("radius", RADIUS))
        self.obs_size = actor.obs_size
        self.metadata: dict[str, Any] = {
            "format": FORMAT,
            "obs_layout": OBS_LAYOUT,
            "obs_size": actor.obs_size,
            "radius": self.radius,
            "heuristic": True,
            "n_actions": actor.n_actions,
            "hidden": list(actor.hidden),
            "fleetmind_version": fleetmind.__version__,
            **(metadata or {}),
        }

    def _check(self, obs: NDArray[np.floating]) -> NDArray[np.float32]:
        x = np.asarray(obs, dtype=np.float32)
        if x.ndim < 1 or x.shape[-1] != self.obs_size:
            raise ConfigError(
                f"nav policy: observations must end in {self.obs_size} features "
                f"(LocalObserver radius {self.radius}, heuristic on), got shape {x.shape}"
            )
        return x

    def logits(self, obs: NDArray[np.floating]) -> NDArray[np.float32]:
        """``(..., D)`` observations -> ``(..., 5)`` logits."""
        x = self._check(obs)
        with torch.no_grad():
            out: NDArray[np.float32] = self.actor.net(torch.from_numpy(x)).numpy()
        return out

    def rank(self, obs: NDArray[np.floating]) -> NDArray[np.int64]:
        """``(N, D)`` observations -> ``(N, 5)`` actions, best first (ties: lower action id)."""
        ranking: NDArray[np.int64] = np.argsort(-self.logits(obs), axis=-1, kind="stable")
        return ranking.astype(np.int64)

    def act(self, obs: NDArray[np.floating]) -> NDArray[np.int64]:
        """Greedy action of every row."""
        return self.rank(obs)[..., 0]

    def observer(self, grid: GridMap) -> observe.LocalObserver:
        """A :class:`~fleetmind.sim.observe.LocalObserver` producing this policy's input."""
        return observe.LocalObserver(
            grid.blocked,
            grid.pickups,
            self.radius,
            oracle=DistanceOracle(grid),
            task_cells=grid.pickups | grid.stations,
        )

    def save(self, path: str | Path) -> Path:
        """Write weights to ``path`` and metadata to ``path`` with suffix ``.json``."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": FORMAT, "state_dict": self.actor.state_dict()}, p)
        p.with_suffix(".json").write_text(json.dumps(self.metadata, indent=2, sort_keys=True))
        return p

    @classmethod
    def load(cls, path: str | Path) -> NavPolicy:
        """Load a policy written by :meth:`save`.

        Raises:
            ConfigError: naming the file, when a file is missing or not a navigation policy.
        """
        p = Path(path)
        meta_path = p.with_suffix(".json")
        if not p.exists():
            raise ConfigError(f"{p}: no such navigation policy file")
        if not meta_path.exists():
            raise ConfigError(f"{meta_path}: metadata of {p.name} is missing")
        try:
            meta = json.loads(read_input(meta_path, what="policy metadata", limit=1 << 20))
        except json.JSONDecodeError as error:
            raise ConfigError(f"{meta_path}:{error.lineno}: not valid JSON ({error.msg})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ConfigError(f"{meta_path}: field 'format' must be {FORMAT!r}")
        try:
            blob = torch.load(p, weights_only=True)
        except Exception as error:  # torch raises several types for a bad file
            raise ConfigError(f"{p}: cannot read weights ({error})") from None
        try:
            expected = observe.local_size(int(meta["radius"]), heuristic=True)
            if int(meta["obs_size"]) != expected:
                raise ConfigError(f"{meta_path}: field 'obs_size' {meta['obs_size']} != {expected}")
            actor = Actor(int(meta["obs_size"]), int(meta["n_actions"]), 1, meta["hidden"], False)
            actor.load_state_dict(blob["state_dict"])
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            # A missing field, or weights of another shape (torch raises RuntimeError).
            raise ConfigError(
                f"{p}: not a navigation policy ({type(error).__name__}: "
                f"{str(error).splitlines()[0][:160] if str(error) else ''})"
            ) from None
        return cls(actor, meta)


# --------------------------------------------------------------------------- baseline and eval


def shortest_path_actions(obs: NDArray[np.floating]) -> NDArray[np.int64]:
    """The baseline: the action with the best (lowest) heuristic value, first on ties."""
    out: NDArray[np.int64] = np.argmin(np.asarray(obs)[..., -observe.N_HEURISTIC :], axis=-1)
    return out.astype(np.int64)


def evaluate(
    act: Callable[[NDArray[np.float32]], NDArray[np.int64]],
    map: str | GridMap = "warehouse-small",
    robots: int = 4,
    *,
    seeds: Sequence[int] = (0, 1),
    num_envs: int = 8,
    ticks: int = 500,
) -> dict[str, float]:
    """Deliveries and collision attempts per robot per tick of ``act`` on lifelong tasks.

    No shield runs: a move into another robot fails and counts as a collision attempt (the env's
    ``conflict`` flag). The same seeds give the same starts and task streams to every policy.

    Args:
        act: ``(B, N, D)`` observations -> ``(B, N)`` actions.
        map: the map.
        robots: robots per world.
        seeds: one batch of ``num_envs`` worlds per seed.
        num_envs: worlds per batch.
        ticks: ticks per world.

    Returns:
        ``deliveries_per_robot_tick``, ``collision_attempts_per_robot_tick``, ``deliveries``.
    """
    delivered = conflicts = 0
    for seed in seeds:
        env = make_vector(map, robots, num_envs, seed=seed, max_steps=ticks + 1)
        obs, _ = env.reset()
        for _ in range(ticks):
            obs, _r, _te, _tr, info = env.step(act(obs))
            delivered += int(info["delivered"].sum())
            conflicts += int(info["conflict"].sum())
    denom = len(seeds) * num_envs * robots * ticks
    return {
        "deliveries_per_robot_tick": delivered / denom,
        "collision_attempts_per_robot_tick": conflicts / denom,
        "deliveries": float(delivered),
    }


# --------------------------------------------------------------------------- training


class FallbackVectorEnv:
    """The vector env as the dispatch tier runs the policy: fallbacks instead of failed moves.

    In dispatch the policy's action ranks first, the other four follow by the shortest-path
    heuristic, and the shield executes the first safe one. The plain env instead makes a move
    into a wall or another robot fail (the robot waits, and pays the conflict penalty), so a
    policy trained there learns to side-step pre-emptively, which costs moves once the shield
    resolves conflicts. Here each robot's ranking is the sampled action, then the others by
    heuristic value (ties: lower action id); every robot whose move fails moves down its ranking
    and the joint move is resolved again (at most 5 rounds, :func:`resolve_moves` each time),
    then the executed moves go to the env, which sees no conflict.

    Rewards: the env's reward (no conflict penalty arises) plus ``override_penalty`` for every
    robot whose sampled move was not executed, plus ``progress`` times the distance gained
    toward the target by the executed move (-1 .. +1 from the heuristic channels).

    Args:
        map: the map (a preset name, map file or GridMap).
        robots: robots per world.
        num_envs: worlds.
        seed: root seed of the wrapped env.
        max_steps: episode length of a world.
        radius: observation radius.
        override_penalty: reward when the sampled move is replaced by a fallback (<= 0).
        progress: reward per cell of shortest-path distance gained (>= 0).
    """

    def __init__(
        self,
        map: str | GridMap,
        robots: int,
        num_envs: int,
        *,
        seed: int | None = None,
        max_steps: int = 256,
        radius: int = RADIUS,
        override_penalty: float = 0.0,
        progress: float = 0.0,
    ) -> None:
        if override_penalty > 0 or progress < 0:
            raise ConfigError(
                f"FallbackVectorEnv: override_penalty must be <= 0 and progress >= 0, got "
                f"{override_penalty} and {progress}"
            )
        self.env = make_vector(map, robots, num_envs, seed=seed, max_steps=max_steps, radius=radius)
        self.sim = self.env.sim
        self.num_envs = num_envs
        self.n_robots = robots
        self.obs_size = self.env.obs_size
        self.n_actions = self.env.n_actions
        self.override_penalty = float(override_penalty)
        self.progress = float(progress)
        self._obs: NDArray[np.float32] | None = None

    def reset(self, seed: int | None = None) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset every world."""
        obs, info = self.env.reset(seed)
        self._obs = obs
        return obs, info

    def global_state(self) -> NDArray[np.float32]:
        """``(B, S)`` global state of the wrapped env."""
        return self.env.global_state()

    def executed(self, actions: NDArray[np.integer]) -> NDArray[np.int64]:
        """``(B, N)`` moves executed for sampled ``actions`` under heuristic fallbacks."""
        if self._obs is None:
            raise ConfigError("FallbackVectorEnv: call reset() before step()")
        acts = np.asarray(actions, dtype=np.int64)
        heur = self._obs[..., -observe.N_HEURISTIC :]
        key = heur.astype(np.float64) * 10.0
        np.put_along_axis(key, acts[..., None], -np.inf, axis=-1)
        ranking = np.argsort(key, axis=-1, kind="stable")  # (B, N, 5), sampled first
        tried = np.zeros(acts.shape, dtype=np.int64)
        sim = self.sim
        for _ in range(N_ACTIONS):
            cur = np.take_along_axis(ranking, tried[..., None], axis=-1)[..., 0]
            res = resolve_moves(sim.pos, cur, sim.grid.blocked, tick=sim.tick)
            failed = (res.conflict | res.wall_bump) & (cur != WAIT)
            if not failed.any():
                break
            tried = np.minimum(tried + failed, N_ACTIONS - 1)
        out: NDArray[np.int64] = np.where(res.moved, cur, WAIT).astype(np.int64)
        return out

    def step(self, actions: NDArray[np.integer]) -> BatchStep:
        """Step every world with sampled ``(B, N)`` actions (see the class docstring)."""
        if self._obs is None:
            raise ConfigError("FallbackVectorEnv: call reset() before step()")
        prev = self._obs
        acts = np.asarray(actions, dtype=np.int64)
        moves = self.executed(acts)
        obs, rewards, term, trunc, info = self.env.step(moves)
        overridden = moves != acts
        gained = -np.take_along_axis(prev[..., -observe.N_HEURISTIC :], moves[..., None], -1)
        rewards = (
            rewards
            + self.override_penalty * overridden
            + self.progress * gained[..., 0].clip(-1.0, 1.0)
        ).astype(np.float32)
        info["overridden"] = overridden
        self._obs = obs
        return obs, rewards, term, trunc, info


def train_nav(
    map: str = "warehouse-small",
    robots: int = 4,
    *,
    algo: Literal["ippo", "mappo"] = "ippo",
    steps: int = 600_000,
    seed: int = 0,
    num_envs: int = 16,
    max_steps: int = 256,
    config: PPOConfig | None = None,
    callbacks: Sequence[base.Callback] = (),
    fallback: bool = False,
    override_penalty: float = 0.0,
    progress: float = 0.0,
    init: NavPolicy | None = None,
) -> tuple[NavPolicy, base.TrainResult]:
    """Train a navigation policy with IPPO or MAPPO on lifelong tasks.

    Args:
        map: training map (a preset name or map file).
        robots: robots per world.
        algo: ``"ippo"`` or ``"mappo"``.
        steps: world steps.
        seed: root seed.
        num_envs: worlds stepped together.
        max_steps: episode length of a world.
        config: PPO hyperparameters (default: no agent id, 128x128 hidden layers, entropy
            bonus annealed from :data:`NAV_ENT_COEF` to :data:`NAV_ENT_COEF_FINAL`).
        callbacks: receive training events.
        fallback: train in :class:`FallbackVectorEnv` (moves as the dispatch tier executes them)
            instead of the plain vector env.
        override_penalty: with ``fallback``, reward for a sampled move that was replaced.
        progress: with ``fallback``, reward per cell of distance gained toward the target.
        init: start the actor from this policy (IPPO only; same hidden layers and obs size);
            the critic, the optimiser and the seeded streams start as in a fresh run.

    Returns:
        The policy and the training result.
    """
    from fleetmind.rl.neural import ippo, mappo

    cfg = config or PPOConfig(
        agent_id=False,
        hidden=(128, 128),
        ent_coef=NAV_ENT_COEF,
        ent_coef_final=NAV_ENT_COEF_FINAL,
    )
    if cfg.agent_id:
        raise ConfigError("train_nav: config.agent_id must be False (the policy serves any N)")
    env: base.BatchEnv
    if fallback:
        env = FallbackVectorEnv(
            map,
            robots,
            num_envs,
            seed=seed,
            max_steps=max_steps,
            override_penalty=override_penalty,
            progress=progress,
        )
    elif override_penalty or progress:
        raise ConfigError("train_nav: override_penalty and progress need fallback=True")
    else:
        env = make_vector(map, robots, num_envs, seed=seed, max_steps=max_steps, radius=RADIUS)
    learner = {"ippo": ippo, "mappo": mappo}.get(algo)
    if learner is None:
        raise ConfigError(f"algo: expected 'ippo' or 'mappo', got {algo!r}")
    if init is None:
        result = learner.train(env, cfg, seed=seed, steps=steps, callbacks=callbacks)
    else:
        with tempfile.TemporaryDirectory(prefix="fleetmind-nav-") as tmp:
            _warm_start(Path(tmp), init, env, cfg, algo, seed)
            result = learner.train(
                env,
                cfg,
                seed=seed,
                steps=steps,
                callbacks=callbacks,
                out_dir=Path(tmp),
                resume=True,
            )
    actor = result.policy
    assert isinstance(actor, Actor)
    meta = {
        "algo": algo,
        "train_ent_coef": cfg.ent_coef,
        "train_ent_coef_final": cfg.ent_coef_final,
        "train_map": map,
        "train_robots": robots,
        "train_steps": result.steps,
        "train_seed": seed,
        "train_num_envs": num_envs,
        "train_max_steps": max_steps,
        "train_wall_s": round(result.wall_s, 1),
        "train_env": "fallback" if fallback else "plain",
        "train_override_penalty": override_penalty,
        "train_progress": progress,
    }
    if init is not None:
        meta["train_init"] = {
            k: v for k, v in init.metadata.items() if k.startswith("train_") or k == "algo"
        }
    return NavPolicy(actor, meta), result


def _warm_start(
    out_dir: Path, init: NavPolicy, env: base.BatchEnv, cfg: PPOConfig, algo: str, seed: int
) -> None:
    """Write a step-0 checkpoint holding ``init``'s actor, for ``train(..., resume=True)``."""
    from fleetmind.rl.neural import ippo

    if algo != "ippo":
        raise ConfigError(f"train_nav: init needs algo 'ippo', got {algo!r}")
    if init.obs_size != env.obs_size or tuple(init.actor.hidden) != tuple(cfg.hidden):
        raise ConfigError(
            f"train_nav: init has obs size {init.obs_size} and hidden {list(init.actor.hidden)}, "
            f"the run needs {env.obs_size} and {list(cfg.hidden)}"
        )
    n, d = env.n_robots, env.obs_size
    _, lr = resolve_hyper(cfg, n, env_horizon(env))
    _, _, critic_seq, sample_seq, shuffle_seq = split_seed(seed)
    critic = base.build_seeded(critic_seq, lambda: ippo.LocalCritic(d, n, cfg.hidden, False))
    actor = Actor(d, env.n_actions, n, cfg.hidden, False)
    actor.load_state_dict(init.actor.state_dict())
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=lr, eps=1e-5)
    agents = [f"robot_{i}" for i in range(n)]
    base.save_checkpoint(
        out_dir,
        {
            "algo": algo,
            "actor": actor.state_dict(),
            "critic": critic.state_dict(),
            "optimizer": optimizer.state_dict(),
            "g_sample": base.torch_generator(sample_seq).get_state(),
            "g_shuffle": base.torch_generator(shuffle_seq).get_state(),
            "tracker": base.EpisodeTracker(env.num_envs, agents).state_dict(),
            "losses": {"policy": [], "value": [], "entropy": [], "approx_kl": []},
            "steps": 0,
            "updates": 0,
            "config": {},
        },
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fleetmind.rl.nav --train ...`` or ``--eval PATH``."""
    parser = argparse.ArgumentParser(prog="python -m fleetmind.rl.nav", description=__doc__)
    parser.add_argument("--train", action="store_true", help="train a policy and save it")
    parser.add_argument("--eval", metavar="PATH", help="evaluate a saved policy vs the baseline")
    parser.add_argument("--map", default="warehouse-small")
    parser.add_argument("--robots", type=int, default=4)
    parser.add_argument("--algo", choices=("ippo", "mappo"), default="ippo")
    parser.add_argument("--steps", type=int, default=600_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--ent-coef", type=float, default=NAV_ENT_COEF, help="entropy bonus")
    parser.add_argument(
        "--ent-coef-final",
        type=float,
        default=NAV_ENT_COEF_FINAL,
        help="anneal the bonus linearly to this value",
    )
    parser.add_argument(
        "--fallback",
        action="store_true",
        help="train with heuristic fallbacks for failed moves, as the dispatch tier runs it",
    )
    parser.add_argument("--override-penalty", type=float, default=0.0)
    parser.add_argument("--progress", type=float, default=0.0)
    parser.add_argument("--init", metavar="PATH", help="start from this policy (fine-tune)")
    parser.add_argument("--out", default="nav_policy.pt")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.train:
        t0 = time.perf_counter()

        def report(event: base.Event) -> None:
            if event.kind == "update" and int(event.scalars["train/updates"]) % 20 == 0:
                log.info("step %d: %s", event.step, event.scalars)

        policy, _ = train_nav(
            args.map,
            args.robots,
            algo=args.algo,
            steps=args.steps,
            seed=args.seed,
            num_envs=args.num_envs,
            config=PPOConfig(
                agent_id=False,
                hidden=(128, 128),
                ent_coef=args.ent_coef,
                ent_coef_final=args.ent_coef_final,
            ),
            callbacks=[report],
            fallback=args.fallback,
            override_penalty=args.override_penalty,
            progress=args.progress,
            init=NavPolicy.load(args.init) if args.init else None,
        )
        policy.metadata["eval"] = evaluate(policy.act, args.map, args.robots)
        policy.metadata["eval_baseline"] = evaluate(shortest_path_actions, args.map, args.robots)
        policy.save(args.out)
        log.info("saved %s after %.0f s: %s", args.out, time.perf_counter() - t0, policy.metadata)
    if args.eval:
        policy = NavPolicy.load(args.eval)
        log.info("policy:   %s", evaluate(policy.act, args.map, args.robots))
        log.info("baseline: %s", evaluate(shortest_path_actions, args.map, args.robots))
    if not (args.train or args.eval):
        parser.error("give --train or --eval PATH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
