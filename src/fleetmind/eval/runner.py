"""Build and run one strategy from a configuration: the engine behind ``fleetmind run``.

:class:`RunConfig` mirrors the command-line flags (and YAML config files). :func:`execute` builds
the world, planner, executor, shield and LLM client, runs the control loop, and records the run
folder (:mod:`fleetmind.eval.recorder`). The embedded LLM server is started only when a tier needs
an LLM and no ``--llm-base-url`` is set, and stopped at the end.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleetmind.dispatch.control import ControlLoop, LoopConfig
from fleetmind.dispatch.desk import WARMUP_CALLER as DESK_WARMUP
from fleetmind.dispatch.executors import (
    Executor,
    LLMDirectExecutor,
    RLExecutor,
    ShortestPathExecutor,
)
from fleetmind.dispatch.faults import Fault, FaultyClient, check_faults, parse_fault
from fleetmind.dispatch.incidents import DeskConfig
from fleetmind.dispatch.llm_planner import WARMUP_CALLER, LLMPlanner
from fleetmind.dispatch.notes.additive import WARMUP_CALLER as NOTES_WARMUP
from fleetmind.dispatch.notes.planner import NoteReaderPlanner
from fleetmind.dispatch.notes.readers import MODEL_READERS, READERS, make_reader
from fleetmind.dispatch.planners import AssignmentPlanner, GreedyPlanner, Planner
from fleetmind.dispatch.plans import Snapshot
from fleetmind.envs.warehouse import resolve_map
from fleetmind.errors import ConfigError, read_input
from fleetmind.eval.recorder import RunRecorder, check_out_dir
from fleetmind.llm.chat import ChatClient
from fleetmind.llm.record import CallRecorder, RecordingClient, ReplayClient
from fleetmind.llm.settings import LLMSettings
from fleetmind.llm.usage import CallLedger, LedgerClient
from fleetmind.sim.grid import GridMap
from fleetmind.sim.maps import require_tasks, task_area
from fleetmind.sim.notewriter import NoteConfig
from fleetmind.sim.orders import CAPABILITIES, OrderConfig, load_task_file
from fleetmind.sim.warehouse import Warehouse, WarehouseConfig, default_capabilities

if TYPE_CHECKING:
    from fleetmind.eval.guide_live import LiveGuideLearner

PlannerName = Literal["assignment", "greedy", "llm", "llm-notes", "oracle"]
ExecutorName = Literal[
    "rl",
    "rl-guided",
    "shortest-path",
    "shortest-path-random",
    "congestion",
    "guidance",
    "learned-guidance",
    "pibt",
    "llm-direct",
]
LLM_PLANNERS = ("llm", "llm-notes")
# The reader the hybrid strategy uses: the best on the hand-written sets (README, docs/notes.md).
DEFAULT_READER = "rules"
AUTO_TICK_PERIOD_S = 0.1
DESK_SLACK_TICKS = 10
"""Seconds per tick of a run whose model answers off the tick (as ``fleetmind demo`` paces)."""


class RunConfig(BaseModel):
    """One run, as flags or a YAML config file give it (flags override the file)."""

    model_config = ConfigDict(extra="forbid")

    map: str = "warehouse-small"
    robots: int = Field(8, ge=1)
    steps: int = Field(300, ge=1)
    planner: PlannerName = "assignment"
    executor: ExecutorName = "shortest-path"
    seed: int = Field(0, ge=0)
    shield: bool = True
    policy: str | None = None
    # rl-guided and learned-guidance: learn while running (one update every learn_every ticks;
    # with learn_lag, beside the loop, applied that many ticks later; an update that lowers
    # throughput by more than learn_guard rolled back), start from an untrained policy (the
    # guidance order; for learned-guidance the neutral model, guidance itself), write the
    # policy or model at the end. learn_lr: rl-guided's learning rate; for either, 0 records
    # the per-window curve and never updates (learned-guidance: CMA-ES on the run's own
    # orders, eval/guide_live.py).
    learn_every: int | None = Field(None, ge=1)
    learn_lag: int = Field(0, ge=0)
    learn_guard: float | None = Field(0.03, ge=0, lt=1)
    learn_lr: float = Field(2e-3, ge=0)
    fresh_policy: bool = False
    save_policy: str | None = None
    order_rate: float | None = Field(None, gt=0)
    text_share: float = Field(0.3, ge=0, le=1)
    note_reader: str = DEFAULT_READER
    note_style: Literal["template", "realistic"] = "realistic"
    zh_share: float = Field(0.3, ge=0, le=1)
    note_difficulty: Literal["easy", "normal", "hard"] = "normal"
    urgent_share: float = Field(0.2, ge=0, le=1)
    tasks: str | None = None
    faults: list[str] = Field(default_factory=list)
    # "auto": solver planners answer within a tick, so the loop waits for them (reproducible);
    # LLM planners run asynchronously (the loop never waits). Resolved at validation.
    planner_mode: Literal["auto", "async", "sync"] = "auto"
    # Seconds per tick; None: 0 (flat out), but AUTO_TICK_PERIOD_S where a live model answers
    # off the tick (the LLM planner in async mode, the LLM desk): flat out, 300 ticks pass in
    # about 2 s, before the embedded model's first answer (1-3 s a call). Resolved at validation.
    tick_period_s: float | None = Field(None, ge=0)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = Field(None, repr=False)
    llm_threads: int = Field(1, ge=1)
    llm_gguf: str | None = None
    # The LLM planner's decision deadline in seconds (None: from a warm-up call, see
    # dispatch/llm_planner.py) and, in async runs, in ticks (None: from the seconds and the tick
    # period; 20 in a run that is not paced).
    llm_deadline_s: float | None = Field(None, gt=0)
    llm_deadline_ticks: int | None = Field(None, ge=1)
    forbidden: list[tuple[int, int]] = Field(default_factory=list)
    replay_calls: str | None = None
    flush_every: int = Field(50, ge=1)
    snapshot_every: int = Field(100, ge=0)
    # The incident desk (dispatch/incidents/, dispatch/desk.py): off, rules, or the LLM pair
    # with the rules as fallback past either deadline.
    desk: Literal["off", "rules", "llm"] = "off"
    desk_deadline_s: float = Field(20.0, gt=0)
    # None: the seconds deadline in ticks, plus DESK_SLACK_TICKS, in a paced run (the rules take
    # over at whichever comes first); 100 in a run that is not paced.
    desk_deadline_ticks: int | None = Field(None, ge=1)
    # desk "rules": the rule handler acts this many ticks after each incident (a baseline).
    desk_rules_delay_ticks: int = Field(0, ge=0)

    @field_validator("learn_every", "learn_lag", "fresh_policy", "save_policy")
    @classmethod
    def _guided_only(cls, value: Any, info: ValidationInfo) -> Any:
        if value and info.data.get("executor") not in ("rl-guided", "learned-guidance"):
            raise ValueError("needs --executor rl-guided or learned-guidance (those that learn)")
        return value

    @model_validator(mode="after")
    def _resolve_mode(self) -> RunConfig:
        if self.note_reader not in READERS:
            raise ValueError(f"note_reader: expected one of {', '.join(READERS)}")
        slow = self.planner == "llm" or (
            self.planner == "llm-notes" and self.note_reader in MODEL_READERS
        )
        if self.planner_mode == "auto":
            self.planner_mode = "async" if slow else "sync"
        if self.tick_period_s is None:
            # A model reading notes off the tick answers in seconds too: a flat-out run would end
            # before its first reply (300 ticks, every call abandoned).
            live = self.replay_calls is None and (
                (slow and self.planner_mode == "async") or self.desk == "llm"
            )
            self.tick_period_s = AUTO_TICK_PERIOD_S if live else 0.0
        return self

    @property
    def period_s(self) -> float:
        """Seconds per tick, resolved (0: flat out)."""
        return self.tick_period_s or 0.0

    @property
    def desk_ticks(self) -> int:
        """The desk's deadline in ticks, resolved (see ``desk_deadline_ticks``)."""
        if self.desk_deadline_ticks is not None:
            return self.desk_deadline_ticks
        if self.period_s > 0:
            return math.ceil(self.desk_deadline_s / self.period_s) + DESK_SLACK_TICKS
        return 100

    def public(self) -> dict[str, Any]:
        """The config as recorded (never the API key)."""
        data = self.model_dump()
        data["llm_api_key"] = "***" if self.llm_api_key else None
        return data

    @property
    def needs_llm(self) -> bool:
        """Whether a tier calls an LLM."""
        return (
            self.planner == "llm"
            or (self.planner == "llm-notes" and self.note_reader in MODEL_READERS)
            or self.executor == "llm-direct"
            or self.desk == "llm"
        )


def load_config(path: str | Path | None, overrides: dict[str, Any]) -> RunConfig:
    """A RunConfig from a YAML file (optional) with flag overrides on top.

    Raises:
        ConfigError: naming the file and field at fault.
    """
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        text = read_input(p, what="config file")
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{p}{where}: not valid YAML") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{p}: expected a mapping of option names to values")
        data = {str(k).replace("-", "_"): v for k, v in (loaded or {}).items()}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        source = f"{path}: " if path else ""
        raise ConfigError(f"{source}option {field!r}: {err['msg']}") from None


@contextlib.contextmanager
def llm_client(cfg: RunConfig, calls_path: Path | None) -> Iterator[ChatClient | None]:
    """The chat client a run needs (None if no tier uses an LLM), recorded to ``calls_path``."""
    with base_client(cfg) as base:
        if base is None or calls_path is None:
            yield base
            return
        with recorded(base, calls_path, secrets=_secrets(cfg)) as client:
            yield client


def _secrets(cfg: RunConfig) -> list[str]:
    settings = LLMSettings.from_env(
        base_url=cfg.llm_base_url, model=cfg.llm_model, api_key=cfg.llm_api_key
    )
    return [settings.api_key] if settings.api_key else []


@contextlib.contextmanager
def base_client(cfg: RunConfig) -> Iterator[ChatClient | None]:
    """The chat client a run needs, faults injected, not recorded (None if no tier uses one).

    Starts the embedded server when no base URL is set (stopped on exit).
    """
    if not cfg.needs_llm:
        yield None
        return
    faults = [parse_fault(f) for f in cfg.faults]
    with contextlib.ExitStack() as stack:
        base: ChatClient
        if cfg.replay_calls is not None:
            base = ReplayClient(cfg.replay_calls)
        else:
            settings = LLMSettings.from_env(
                base_url=cfg.llm_base_url, model=cfg.llm_model, api_key=cfg.llm_api_key
            )
            if settings.base_url is None:
                import os

                from fleetmind.llm.embedded import EmbeddedServer

                gguf = cfg.llm_gguf or os.environ.get("FLEETMIND_LLM_GGUF") or None
                server = stack.enter_context(
                    EmbeddedServer.beside_loop(gguf, n_threads=cfg.llm_threads)
                )
                base = server.client()
            else:
                from fleetmind.llm.client import OpenAICompatClient

                base = stack.enter_context(OpenAICompatClient.from_settings(settings))
        # A replayed recording already holds the faults' effects (errors, garbled replies):
        # injecting them again would fail calls the recording answers.
        yield FaultyClient(base, faults) if faults and cfg.replay_calls is None else base


@contextlib.contextmanager
def recorded(
    client: ChatClient, calls_path: Path, *, secrets: list[str] | None = None
) -> Iterator[ChatClient]:
    """``client`` with every call recorded to ``calls_path`` (closed on exit)."""
    recorder = CallRecorder(calls_path, secrets=secrets or [])
    try:
        yield RecordingClient(client, recorder)
    finally:
        recorder.close()


def make_planner(cfg: RunConfig, grid: GridMap, client: ChatClient | None) -> Planner:
    """The planner tier named by the config."""
    if cfg.planner == "assignment":
        return AssignmentPlanner(grid)
    if cfg.planner == "oracle":
        return AssignmentPlanner(grid, use_hidden=True)
    if cfg.planner == "greedy":
        return GreedyPlanner(grid)
    if cfg.planner == "llm-notes":
        return NoteReaderPlanner(
            make_reader(cfg.note_reader, client), grid, background=cfg.planner_mode != "sync"
        )
    assert client is not None
    ticks = cfg.llm_deadline_ticks
    if ticks is None and cfg.period_s == 0:
        ticks = 20  # not paced: ticks say nothing of the model's seconds
    return LLMPlanner(
        client,
        grid,
        background=cfg.planner_mode != "sync",
        deadline_s=cfg.llm_deadline_s,
        deadline_ticks=ticks,
        tick_period_s=cfg.period_s,
        end_tick=cfg.steps,
    )


def make_executor(cfg: RunConfig, grid: GridMap, client: ChatClient | None) -> Executor:
    """The executor tier named by the config."""
    if cfg.executor == "shortest-path":
        return ShortestPathExecutor(grid)
    if cfg.executor == "shortest-path-random":
        from fleetmind.dispatch.executors import ShortestPathRandomExecutor

        return ShortestPathRandomExecutor(grid, seed=cfg.seed)
    if cfg.executor == "congestion":
        from fleetmind.dispatch.executors import CongestionExecutor

        return CongestionExecutor(grid, seed=cfg.seed)
    if cfg.executor == "guidance":
        from fleetmind.dispatch.executors import GuidanceExecutor

        return GuidanceExecutor(grid, seed=cfg.seed)
    if cfg.executor == "learned-guidance":
        from fleetmind.dispatch.executors import LearnedGuidanceExecutor

        # --policy names a guide model file here (default: the shipped one).
        if cfg.fresh_policy:
            from fleetmind.rl.guide import GuideModel

            if cfg.policy is not None:
                raise ConfigError("--fresh-policy: give a model file or fresh, not both")
            return LearnedGuidanceExecutor(
                grid, seed=cfg.seed, model=GuideModel.neutral(), robots=cfg.robots
            )
        return LearnedGuidanceExecutor(
            grid, seed=cfg.seed, model_path=cfg.policy, robots=cfg.robots
        )
    if cfg.executor == "pibt":
        from fleetmind.dispatch.executors import PibtOrderExecutor

        return PibtOrderExecutor(grid, seed=cfg.seed)
    if cfg.executor == "rl":
        return RLExecutor(grid, cfg.policy)
    if cfg.executor == "rl-guided":
        from fleetmind.dispatch.executors import GuidedRLExecutor
        from fleetmind.rl.nav_guided import LearnConfig

        learn = None
        if cfg.learn_every is not None:
            # The run's learn_* options are LearnConfig's fields of the same names.
            fields = {k: getattr(cfg, f"learn_{k}") for k in ("every", "guard", "lr", "lag")}
            learn = LearnConfig(**fields, seed=cfg.seed)
        return GuidedRLExecutor(
            grid, cfg.policy, seed=cfg.seed, learn=learn, fresh=cfg.fresh_policy
        )
    assert client is not None
    return LLMDirectExecutor(client, grid)


def live_learner(cfg: RunConfig, world: Warehouse, executor: Executor) -> LiveGuideLearner | None:
    """The learner of a learned-guidance run given ``--learn-every`` (None otherwise)."""
    from fleetmind.dispatch.executors import LearnedGuidanceExecutor

    if cfg.learn_every is None or not isinstance(executor, LearnedGuidanceExecutor):
        return None
    from fleetmind.eval.guide_live import LiveGuideLearner, LiveLearnConfig

    config = LiveLearnConfig(
        every=cfg.learn_every,
        lag=cfg.learn_lag,
        guard=cfg.learn_guard,
        seed=cfg.seed,
        updates=cfg.learn_lr > 0,
    )
    return LiveGuideLearner(cfg, world, executor, config, replay_tasks)


def replay_tasks(run: dict[str, Any], policy: str, seed: int, tasks: str) -> int:
    """Tasks one replay of a live learner delivers (``eval.guide_live.Replay``).

    A ``learned-guidance`` run of the guide model file ``policy`` on the recorded orders in
    ``tasks``, the fleet started from ``seed``, with the live run's ``run`` fields.

    Raises:
        AssertionError: the replay executed a collision with the shield on (never expected).
    """
    cfg = RunConfig(**run, executor="learned-guidance", policy=policy, seed=seed, tasks=tasks)
    metrics = execute(cfg, None)
    if int(metrics["collisions"]) != 0:
        raise AssertionError(f"a replay executed a collision with the shield on: {cfg}")
    return int(metrics["tasks_completed"])


def make_world(cfg: RunConfig, grid: GridMap) -> Warehouse:
    """The simulator for a run (the planner assigns, so auto-assignment is off)."""
    rate = cfg.order_rate if cfg.order_rate is not None else max(0.02, cfg.robots / 40)
    wcfg = WarehouseConfig(
        n_robots=cfg.robots,
        max_steps=cfg.steps,
        orders=OrderConfig(
            rate=rate,
            text_share=cfg.text_share,
            urgent_share=cfg.urgent_share,
            notes=NoteConfig(
                style=cfg.note_style, zh_share=cfg.zh_share, difficulty=cfg.note_difficulty
            ),
        ),
        auto_assign=False,
    )
    caps = wcfg.capabilities or default_capabilities(cfg.robots)
    robot_ids = [f"robot_{i}" for i in range(cfg.robots)]
    orders = (
        load_task_file(cfg.tasks, grid, robots=robot_ids, capabilities=caps) if cfg.tasks else None
    )
    return Warehouse(grid, wcfg, seed=cfg.seed, orders=orders)


def check_fleet(cfg: RunConfig, world: Warehouse) -> list[str]:
    """Refuse a fleet that can serve no order; warn of orders it will never serve.

    Raises:
        ConfigError: no robot starts where it can reach both a pickup and a station.
    """
    area = task_area(world.grid)
    if cfg.robots and not any(area[int(r), int(c)] for r, c in world.pos):
        raise ConfigError(
            f"--robots {cfg.robots}: no robot starts where it can reach a pickup and a station "
            f"on map {world.grid.name!r}"
        )
    warnings = []
    has = frozenset().union(*world.capabilities)
    missing = [c for c in CAPABILITIES if c not in has]
    if not cfg.tasks and missing:
        warnings.append(
            f"--robots {cfg.robots}: no robot has {', '.join(map(repr, missing))}; generated "
            "orders that need it will never be served (counted in orders_stranded)"
        )
    return warnings


@dataclass
class Prepared:
    """What a run is built from, checked before its folder is touched (see :func:`prepare`)."""

    grid: GridMap
    world: Warehouse
    faults: list[Fault]
    executor: Executor | None  # None: built later, it needs the LLM client
    warnings: list[str]


def prepare(cfg: RunConfig) -> Prepared:
    """Build and check everything a run needs that does not need the LLM client.

    Checked: the map and its tasks, the task file, robots against the map, forbidden cells,
    every fault against the world, the policy file, the recording to replay and the model file.

    Raises:
        ConfigError: (or another FleetmindError) naming the flag, file or field at fault.
    """
    grid = resolve_map(cfg.map)
    require_tasks(grid)
    faults: list[Fault] = [parse_fault(f) for f in cfg.faults]
    world = make_world(cfg, grid)
    warnings = check_faults(
        faults, robots=list(world.robot_ids), steps=cfg.steps, uses_llm=cfg.needs_llm, grid=grid
    )
    warnings += check_fleet(cfg, world)
    from fleetmind.safety.shield import Shield

    Shield(grid, forbidden=cfg.forbidden)  # off-grid forbidden cells raise here
    executor = make_executor(cfg, grid, None) if cfg.executor != "llm-direct" else None
    if cfg.needs_llm and cfg.replay_calls is not None:
        ReplayClient(cfg.replay_calls)  # a missing or malformed recording raises here
    gguf = cfg.llm_gguf
    if cfg.needs_llm and gguf is not None and cfg.replay_calls is None and not Path(gguf).is_file():
        raise ConfigError(f"--llm-gguf {cfg.llm_gguf}: no such model file")
    return Prepared(grid=grid, world=world, faults=faults, executor=executor, warnings=warnings)


def execute(
    cfg: RunConfig,
    out_dir: str | Path | None,
    *,
    progress: Callable[[int], None] | None = None,
    client: ChatClient | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run one strategy and record it; returns the metrics.

    Everything that can be checked is checked before the run folder is touched (:func:`prepare`,
    the folder itself, the LLM client), so a bad input never costs an earlier run.

    Args:
        cfg: the run configuration.
        out_dir: the run folder (None: do not record).
        progress: called with the number of ticks done.
        client: an LLM client to use instead of building one (e.g. a shared embedded server).
        overwrite: replace an earlier run in ``out_dir`` (else such a folder is refused).

    Raises:
        ConfigError: bad input, or ``out_dir`` holds an earlier run and ``overwrite`` is off.
    """
    ready = prepare(cfg)
    grid, world, faults = ready.grid, ready.world, ready.faults
    if out_dir is not None:
        if cfg.replay_calls is not None and (
            Path(cfg.replay_calls).resolve().parent == Path(out_dir).resolve()
        ):
            raise ConfigError(
                f"--out {out_dir}: the run folder holds the recording being replayed "
                f"({cfg.replay_calls}); write the replay to another folder"
            )
        check_out_dir(out_dir, overwrite=overwrite)
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(base_client(cfg))
        elif cfg.needs_llm and faults:
            client = FaultyClient(client, faults)
        # Every check passed and the LLM is up: only now is the run folder touched.
        recorder = None
        if out_dir is not None:
            recorder = RunRecorder(
                out_dir,
                flush_every=cfg.flush_every,
                snapshot_every=cfg.snapshot_every,
                overwrite=overwrite,
            )
            recorder.write_config(cfg.public())
            if client is not None and cfg.needs_llm:
                client = stack.enter_context(
                    recorded(client, recorder.calls_path, secrets=_secrets(cfg))
                )
        if not cfg.needs_llm:
            client = None
        ledger = CallLedger()
        if client is not None:
            client = LedgerClient(client, ledger)
        planner = make_planner(cfg, grid, client)
        warm_up = getattr(planner, "warm_up", None)
        if callable(warm_up):
            # Before the first tick: the prompt cache filled, the deadline measured.
            warm_up(Snapshot.take(world, events=("start",), with_text=False))
        executor = ready.executor or make_executor(cfg, grid, client)
        desk_worker = None
        if cfg.desk == "llm":
            from fleetmind.dispatch.desk import LLMDesk

            assert client is not None
            desk_worker = LLMDesk(client, deadline_s=cfg.desk_deadline_s, seed=cfg.seed)
        if isinstance(planner, LLMPlanner):
            ledger.watch("dispatch.planner", planner.wanted)
        if desk_worker is not None:
            ledger.watch("dispatch.desk", desk_worker.wanted)
            desk_worker.warm_up()
        loop = ControlLoop(
            world,
            planner,
            executor,
            config=LoopConfig(
                shield=cfg.shield,
                planner_mode="sync" if cfg.planner_mode == "sync" else "async",
                snapshot_text=cfg.planner == "llm",
                tick_period_s=cfg.period_s,
                snapshot_every=cfg.snapshot_every,
                forbidden=tuple(cfg.forbidden),
            ),
            faults=faults,
            sink=recorder,
            desk=DeskConfig(
                mode=cfg.desk,
                deadline_s=cfg.desk_deadline_s,
                deadline_ticks=cfg.desk_ticks,
                rules_delay_ticks=cfg.desk_rules_delay_ticks,
            ),
            desk_worker=desk_worker,
        )
        if recorder is not None:
            recorder.attach(world, faults=faults, stats=loop.stats, metrics=loop.metrics)
        learner = live_learner(cfg, world, executor)
        tick_done = progress
        if learner is not None:
            stack.callback(learner.close)

            def tick_done(k: int) -> None:
                learner.after_tick(k)
                if progress is not None:
                    progress(k)

        try:
            metrics = loop.run(cfg.steps, progress=tick_done)
        finally:
            ledger.close()  # calls still in flight now are abandoned
            if recorder is not None:
                recorder.close(loop.metrics())
        if client is not None:
            metrics["llm_call_outcomes"] = ledger.report(
                exclude=(WARMUP_CALLER, DESK_WARMUP, NOTES_WARMUP)
            )
            if isinstance(planner, NoteReaderPlanner) and cfg.note_reader == "rules+llm":
                metrics["note_reader"] = planner.reader_counts()
            llm_planner = planner if isinstance(planner, LLMPlanner) else None
            if llm_planner is not None:
                metrics["llm_planner"] = {
                    "warmup_s": llm_planner.warmup_s,
                    "deadline_s": llm_planner.decision_deadline_s(),
                    "deadline_ticks": llm_planner.tick_deadline(),
                    "pairs_dropped": llm_planner.repaired,
                    "not_asked_at_end": llm_planner.not_asked_at_end,
                }
            if desk_worker is not None:
                metrics["llm_desk"] = {
                    "warmup_s": desk_worker.warmup_s,
                    "deadline_s": cfg.desk_deadline_s,
                    "deadline_ticks": cfg.desk_ticks,
                }
        if learner is not None:
            metrics["executor_stats"] = learner.stats()
    if cfg.save_policy is not None:
        # rl-guided's network, or learned-guidance's guide model.
        policy = getattr(executor, "policy", None) or getattr(executor, "model", None)
        if not hasattr(policy, "save"):
            raise ConfigError(f"--save-policy: executor {cfg.executor!r} has no policy to save")
        policy.save(cfg.save_policy)  # type: ignore[union-attr]
        metrics["policy_saved"] = str(cfg.save_policy)
    metrics["seed"] = cfg.seed
    metrics["map"] = grid.name
    if ready.warnings:
        metrics["warnings"] = list(ready.warnings)
    if recorder is not None:
        metrics["run_dir"] = str(recorder.dir)
        recorder.write_metrics(metrics)
    return metrics
