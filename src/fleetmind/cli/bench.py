"""``fleetmind bench ...``: every benchmark, one command per module of :mod:`fleetmind.bench`."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from fleetmind.cli.common import (
    JsonFlag,
    LLMApiKey,
    LLMBaseUrl,
    LLMModel,
    RayAddress,
    err_console,
    print_json,
    progress_bar,
    show,
    sub_app,
)
from fleetmind.errors import range_message

bench_app = sub_app("bench", "The project's own benchmarks, as a table or JSON.")


def _progress(as_json: bool) -> Callable[[str], None] | None:
    """Progress lines on stderr for a table run; none when stdout carries JSON."""
    return None if as_json else lambda line: err_console.print(line, markup=False)


def _str_list(text: str) -> list[str]:
    """The non-empty items of a comma-separated list, stripped."""
    return [v.strip() for v in text.split(",") if v.strip()]


# Benchmarks whose only knob is --quick: (command and module, --quick help, summary).
_QUICK_ONLY = (
    (
        "sim",
        "Short timing windows (a smoke run).",
        "Simulator speed: env and agent steps/s, single and vector env, against rware.",
    ),
    (
        "learn",
        "Short runs (a smoke run, under a minute).",
        "Learners: samples/s of each neural learner; time for the nav policy to reach 95%.",
    ),
    (
        "llm",
        "Fewer prompts and calls (a smoke run).",
        "LLM runtime: overhead per call, embedded tokens/s, valid-JSON rate.",
    ),
)


def _quick_only(module: str, quick_help: str, summary: str) -> Callable[..., None]:
    """The command of a ``--quick``-only benchmark: run it, print its table or JSON."""

    def command(
        quick: bool = typer.Option(False, help=quick_help),
        as_json: JsonFlag = False,
    ) -> None:
        bench = importlib.import_module(f"fleetmind.bench.{module}")
        table = getattr(bench, "format_table", None)
        if "progress" not in inspect.signature(bench.run).parameters:
            show(bench.run(quick=quick), as_json=as_json, table=table)
            return
        # A bar with the time left, on stderr (the JSON on stdout stays clean).
        with progress_bar("cases") as bar:
            task = bar.add_task(module, total=None)

            def step(name: str, done: int, total: int) -> None:
                bar.update(task, description=f"{module}: {name}", completed=done, total=total)

            result = bench.run(quick=quick, progress=step)
        show(result, as_json=as_json, table=table)

    command.__doc__ = summary
    return command


for _name, _quick_help, _summary in _QUICK_ONLY:
    bench_app.command(_name)(_quick_only(_name, _quick_help, _summary))


@bench_app.command("llm-memory")
def bench_llm_memory(
    gguf: Annotated[
        str | None, typer.Option(help="A GGUF file. [default: the shipped SmolLM2-135M]")
    ] = None,
    prompts: Annotated[int, typer.Option(min=1, help="Distinct prompts sent.")] = 10,
    as_json: JsonFlag = False,
) -> None:
    """Embedded server memory over distinct prompts: bounded prompt cache vs llama-cpp-python's."""
    from fleetmind.bench import llm as bench

    if gguf is not None and not Path(gguf).is_file():
        err_console.print(f"error: --gguf {gguf}: no such file")
        raise typer.Exit(2)
    show(bench.run_memory(gguf, prompts=prompts), as_json=as_json, table=bench.format_memory)


@bench_app.command("dispatch")
def bench_dispatch(
    quick: Annotated[bool, typer.Option(help="Smoke-sized cases (about a minute).")] = False,
    llm: Annotated[
        bool, typer.Option("--llm/--no-llm", help="Include the embedded-LLM planners.")
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    """Dispatch targets: planners on text constraints, RL vs shortest path, latency, scaling."""
    from fleetmind.bench import dispatch as bench

    show(bench.run(quick=quick, llm=llm), as_json=as_json)


@bench_app.command("ray")
def bench_ray(
    quick: Annotated[bool, typer.Option(help="Smaller sweeps and rollouts.")] = False,
    ray_address: RayAddress = None,
    as_json: JsonFlag = False,
) -> None:
    """Ray scale-out: sweep wall time and rollout samples/s with 1 and 2 workers."""
    from fleetmind.bench import ray as bench

    show(bench.run(quick=quick, address=ray_address), as_json=as_json, table=bench.format_table)


@bench_app.command("rware")
def bench_rware(
    quick: Annotated[
        bool, typer.Option(help="500 verified steps, 0.5 s timings (a smoke run).")
    ] = False,
    steps: Annotated[
        int | None,
        typer.Option(min=1, help="Verified steps per env. [default: 10,000; 500 with --quick]"),
    ] = None,
    sizes: Annotated[str, typer.Option(help="Comma-separated rware sizes.")] = (
        "tiny,small,medium,large"
    ),
    agents: Annotated[str, typer.Option(help="Comma-separated agent counts (1..19).")] = (
        "1,2,4,19"
    ),
    num_envs: Annotated[int, typer.Option(min=1, help="Worlds of the twin's vector env.")] = 256,
    as_json: JsonFlag = False,
) -> None:
    """RWARE twin: step-by-step agreement with rware 2.0, agent steps/s against it."""
    from fleetmind.bench import rware as bench

    result = bench.run(
        quick=quick,
        steps=steps,
        sizes=_str_list(sizes),
        agents=_int_list(agents, "--agents"),
        num_envs=num_envs,
        progress=_progress(as_json),
    )
    show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("desk")
def bench_desk(
    quick: Annotated[
        bool, typer.Option(help="One seed, three incidents, no embedded model (a smoke run).")
    ] = False,
    seeds: Annotated[
        str | None, typer.Option(help="Comma-separated seeds. [default: 0,1,2; 0 with --quick]")
    ] = None,
    tick_period: Annotated[
        float, typer.Option(help="Seconds per tick of the embedded model's runs.")
    ] = 0.2,
    spacing: Annotated[
        int | None,
        typer.Option(
            help="Ticks between incidents, also the desk's deadline. [default: 60; 30 --quick]"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Keep every run's folder here (MODE-sSEED: calls, events, latencies)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Incident desk vs the rule handler on a fault suite (embedded and misbehaving model)."""
    from fleetmind.bench import desk as bench

    if spacing is not None and spacing < 1:
        err_console.print(f"error: {range_message('--spacing', spacing, low=1)}")
        raise typer.Exit(2)
    modes = ("off", "rules", "hostile") if quick else bench.MODES
    chosen = _int_list(seeds, "--seeds") if seeds is not None else None
    result = bench.run(
        quick=quick,
        seeds=chosen,
        modes=modes,
        tick_period_s=tick_period,
        spacing=spacing,
        out_dir=out,
    )
    show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("marl")
def bench_marl(
    quick: Annotated[
        bool, typer.Option(help="tiny-2ag, MAPPO, 30 s a run, 4 episodes, one seed.")
    ] = False,
    tasks: Annotated[
        str | None, typer.Option(help="Comma-separated rware -v2 ids (default: the three).")
    ] = None,
    algos: Annotated[
        str | None, typer.Option(help="Comma-separated learners. [default: mappo,ippo,mat]")
    ] = None,
    seeds: Annotated[
        str | None, typer.Option(help="Comma-separated training seeds. [default: 0,1,2]")
    ] = None,
    minutes: Annotated[
        float | None, typer.Option(help="Training minutes per run (15; quick 0.5).")
    ] = None,
    shaping: Annotated[
        float, typer.Option(help="Ablation: weight of the twin's dense guide (0: rware's reward).")
    ] = 0.0,
    eval_episodes: Annotated[
        int | None, typer.Option(help="Real-rware episodes per evaluation (100; quick 4).")
    ] = None,
    threads: Annotated[int, typer.Option(help="Torch threads per run.")] = 1,
    workers: Annotated[int, typer.Option(help="Runs at once, one process each.")] = 2,
    out: Annotated[
        Path, typer.Option(help="Run folders; finished runs there are kept (resumable).")
    ] = Path("runs/bench-marl"),
    as_json: JsonFlag = False,
) -> None:
    """MARL learners at equal wall time on rware's own reward, scored on the real rware."""
    from fleetmind.bench import marl as bench

    default_algos = "mappo" if quick else "mappo,ippo,mat"
    default_seeds = "0" if quick else "0,1,2"
    result = bench.run(
        quick=quick,
        tasks=_str_list(tasks) if tasks is not None else None,
        algos=_str_list(algos or default_algos),
        seeds=_int_list(seeds or default_seeds, "--seeds"),
        budget_s=minutes * 60 if minutes is not None else None,
        shaping=shaping,
        eval_episodes=eval_episodes,
        threads=threads,
        workers=workers,
        out_dir=out,
        progress=_progress(as_json),
    )
    show(result, as_json=as_json, table=bench.format_table)


def _int_list(text: str, option: str) -> list[int]:
    """Parse a comma-separated list of integers (``0,1,2``) given to ``option``."""
    from fleetmind.errors import ConfigError

    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(
            f"{option}: expected integers separated by commas, got {text!r}"
        ) from None


@bench_app.command("safety")
def bench_safety(
    robots: Annotated[str, typer.Option(help="Comma-separated fleet sizes.")] = "10,100,1000",
    height: Annotated[int, typer.Option(help="Grid rows.")] = 140,
    width: Annotated[int, typer.Option(help="Grid columns.")] = 500,
    ticks: Annotated[int, typer.Option(help="Ticks timed per fleet size.")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of placements, goals and tie-breaks.")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Shield: milliseconds per tick of conflict resolution for 10 to 1,000 robots."""
    from fleetmind.bench import safety as bench

    sizes = _int_list(robots, "--robots")
    result = bench.run(sizes, height=height, width=width, ticks=ticks, seed=seed)
    show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("free-riding")
def bench_free_riding(
    robots: Annotated[int, typer.Option(help="Fleet size.")] = 2,
    modes: Annotated[
        str, typer.Option(help="Comma-separated reward modes.")
    ] = "shared,individual,difference",
    seeds: Annotated[
        str, typer.Option(help="Comma-separated root seeds, one run each.")
    ] = "0,1,2,3,4",
    episodes: Annotated[
        int | None,
        typer.Option(help="Training episodes per run. [default: fleetmind train's budget]"),
    ] = None,
    episode_len: Annotated[
        int | None, typer.Option(help="Ticks per episode. [default: fleetmind train's, 500]")
    ] = None,
    order_rate: Annotated[
        float | None, typer.Option(help="Poisson orders per tick. [default: lifelong]")
    ] = None,
    eval_episodes: Annotated[
        int | None, typer.Option(help="Evaluation episodes after training. [default: 8]")
    ] = None,
    eps_start: Annotated[float, typer.Option(help="Exploration rate of the first episode.")] = 1.0,
    eps_min: Annotated[float, typer.Option(help="Exploration floor.")] = 0.05,
    eps_reach: Annotated[
        float, typer.Option(help="Share of training after which epsilon reaches the floor.")
    ] = 0.6,
    lam: Annotated[
        float | None,
        typer.Option(help="Q(lambda) trace decay; 0: one-step Q-learning. [default: train's, 0.9]"),
    ] = None,
    baseline: Annotated[float, typer.Option(help="Constant added to every learner reward.")] = 0.0,
    map_name: Annotated[str, typer.Option("--map", help="Map preset or file.")] = "warehouse-tiny",
    workers: Annotated[int, typer.Option(help="Processes running runs in parallel.")] = 1,
    out: Annotated[
        Path | None, typer.Option(help="Write metrics.json, curves.csv and curves.png here.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print metrics.json.")] = False,
) -> None:
    """Free-riding under reward modes on warehouse-tiny (FIELD-NOTES §5.2); -v shows progress.

    Every run is `fleetmind train --algo iql` with its defaults (budget, episode length, the §3.3
    rules, exploration), beside shortest-path robots on the same evaluation episodes.
    """
    from fleetmind.bench import free_riding as bench
    from fleetmind.rl import train as rl_train

    episode_len = episode_len or rl_train.WAREHOUSE_EPISODE_TICKS
    settings = bench.RunSettings(
        episodes=episodes or max(1, rl_train.DEFAULT_STEPS // episode_len),
        episode_len=episode_len,
        order_rate=order_rate,
        eval_episodes=eval_episodes or rl_train.WAREHOUSE_EVAL_EPISODES,
        eps_start=eps_start,
        eps_min=eps_min,
        eps_reach=eps_reach,
        lam=rl_train.WAREHOUSE_LAMBDA if lam is None else lam,
        baseline=baseline,
        map_name=map_name,
    )
    metrics = bench.free_riding(
        robots=robots,
        modes=_str_list(modes),
        seeds=_int_list(seeds, "--seeds"),
        settings=settings,
        out_dir=out,
        workers=workers,
    )
    if as_json:
        print_json(metrics)
    else:
        sys.stdout.write(bench.format_table(metrics) + "\n")


@bench_app.command("reward")
def bench_reward(
    quick: Annotated[bool, typer.Option(help="2,000 ticks, seed 0 (a smoke run).")] = False,
    seeds: Annotated[
        str | None, typer.Option(help="Comma-separated root seeds. [default: 0,1,2,3,4]")
    ] = None,
    steps: Annotated[int | None, typer.Option(help="Ticks per run. [default: 60000]")] = None,
    every: Annotated[int, typer.Option(help="Ticks between two LLM scores.")] = 50,
    weight: Annotated[float, typer.Option(help="The score's weight in llm-mixed.")] = 0.5,
    out: Annotated[Path, typer.Option(help="Folder of the run folders.")] = Path(
        "runs/bench-reward"
    ),
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    as_json: JsonFlag = False,
) -> None:
    """FIELD-NOTES §6: fixed reward vs an LLM score mixed in vs the LLM score alone (iql)."""
    from fleetmind.bench import reward as bench

    result = bench.run(
        quick=quick,
        seeds=_int_list(seeds, "--seeds") if seeds is not None else None,
        steps=steps,
        every=every,
        weight=weight,
        out_dir=out,
        base_url=llm_base_url,
        model=llm_model,
        api_key=llm_api_key,
    )
    if as_json:
        print_json(result)
    else:
        sys.stdout.write(bench.format_table(result) + "\n")


@bench_app.command("lorr")
def bench_lorr(
    instances: Annotated[
        str, typer.Option(help="Comma-separated instances.")
    ] = "2024/warehouse_large_5000,2024/sortation_large_2000",
    levers: Annotated[
        str, typer.Option(help="Comma-separated lever sets.")
    ] = "plain,highway,highway+task-length,highway+trade",
    steps: Annotated[int | None, typer.Option(help="Steps. [default: best-known's]")] = None,
    time_limit: Annotated[float, typer.Option(help="Seconds per step (0: none).")] = 1.0,
    curves: Annotated[bool, typer.Option(help="Also the 2023 team-size curves.")] = True,
    curve_steps: Annotated[int, typer.Option(help="Steps of each 2023 run.")] = 1000,
    quick: Annotated[bool, typer.Option(help="A 200-step smoke run.")] = False,
    rules: Annotated[
        str, typer.Option(help="2024 (instances, lever sets, curves) or 2026 (executors).")
    ] = "2024",
    executors: Annotated[
        str, typer.Option(help="2026: comma-separated executors.")
    ] = "rules,early,learned",
    problems: Annotated[
        str, typer.Option(help="2026: comma-separated problem stems. [default: all]")
    ] = "",
    out: Annotated[
        Path | None,
        typer.Option(help="Run folders, one a run (a rerun with the same settings skips them)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """LoRR: 2024 instances against their best-known results, per lever set; 2023 curves.

    Each run writes the start kit's output file, replayed by ``lorr validate``'s code (the
    "validates" column); ``--out DIR`` keeps the run folders and resumes.

    ``--rules 2026``: every 2026 problem in ../shared/data/lorr/2026 at its horizon (``--steps``
    caps it), delays off and on (3 seeds), per executor, the start kit's output beside.
    """
    from fleetmind.bench import lorr as bench
    from fleetmind.errors import ConfigError

    if rules == "2026":
        r26 = bench.run_2026_bench(
            problems=[s for s in problems.split(",") if s] or None,
            executors=[s for s in executors.split(",") if s],
            steps=steps,
            out=out,
            quick=quick,
            progress=_progress(as_json),
        )
        show(r26, as_json=as_json, table=bench.format_2026)
        return
    if rules != "2024":
        raise ConfigError(f"--rules: 2024 or 2026, got {rules!r}")
    from fleetmind.bench import lorr2024

    result = lorr2024.run(
        instances=[s for s in instances.split(",") if s],
        lever_sets=[s for s in levers.split(",") if s],
        steps=steps,
        time_limit=time_limit or None,
        curves=curves,
        curve_steps=curve_steps,
        quick=quick,
        out=out,
        progress=_progress(as_json),
    )
    show(result, as_json=as_json, table=lorr2024.format_table)


@bench_app.command("scale")
def bench_scale(
    robots: Annotated[str, typer.Option(help="Comma-separated fleet sizes.")] = "1000,10000",
    steps: Annotated[int, typer.Option(min=1, help="Ticks of each run.")] = 200,
    compare_ticks: Annotated[
        int, typer.Option(min=1, help="Ticks timing the per-robot reference beside the fast path.")
    ] = 30,
    quick: Annotated[bool, typer.Option(help="30 ticks, 10 compared (a smoke run).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """The control loop at scale: fleetmind run on warehouse_large.map, per tier, peak RSS."""
    from fleetmind.bench import scale as bench

    sizes = tuple(_int_list(robots, "--robots"))
    result = bench.run(robots=sizes, steps=steps, compare_ticks=compare_ticks, quick=quick)
    show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("faults")
def bench_faults(
    quick: Annotated[bool, typer.Option(help="A few cases of each family (a smoke run).")] = False,
    kill_trials: Annotated[
        int | None, typer.Option(min=0, help="kill -9 trials. [default: 13, 1 with --quick]")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Fault corpus: bad inputs, run folders, a hostile LLM server, kill -9, the dashboard."""
    from fleetmind.bench import faults as bench

    result = bench.run(
        quick=quick,
        kill_trials=kill_trials,
        progress=_progress(as_json),
    )
    show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("executors")
def bench_executors(
    quick: Annotated[
        bool, typer.Option(help="warehouse-small preset, 12 robots, 40 ticks (a smoke run).")
    ] = False,
    seeds: Annotated[str, typer.Option(help="Comma-separated root seeds, one run each.")] = "0,1,2",
    steps: Annotated[int, typer.Option(min=1, help="Ticks of each run.")] = 300,
    scale_robots: Annotated[
        int, typer.Option(min=0, help="Robots of the time-per-tick row (0: none).")
    ] = 1000,
    workers: Annotated[int, typer.Option(min=1, help="Processes running runs side by side.")] = 1,
    cases: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated map names: only the cases on these maps; 'layouts': the "
            "warehouse layouts no guide model was trained on. [default: the LoRR cases]"
        ),
    ] = None,
    executors: Annotated[
        str | None,
        typer.Option(help="Comma-separated executors to compare. [default: all]"),
    ] = None,
    guide: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="learned-guidance's guide model file. [default: the shipped one]",
        ),
    ] = None,
    learn: Annotated[
        bool,
        typer.Option(
            "--learn",
            help="Instead: continuous improvement on a held-out map (an executor learning "
            "while it runs, against the same runs without updates, and guidance).",
        ),
    ] = False,
    learn_executor: Annotated[
        str,
        typer.Option(help="--learn: the executor that learns (learned-guidance or rl-guided)."),
    ] = "learned-guidance",
    learn_steps: Annotated[int, typer.Option(min=10, help="--learn: ticks of each run.")] = 5000,
    learn_map: Annotated[
        str | None,
        typer.Option(
            help="--learn: one held-out map. [default: both of the bench's, warehouse-medium "
            "at 150 robots and the warehouse-small preset at 80]"
        ),
    ] = None,
    learn_robots: Annotated[
        int | None,
        typer.Option(min=1, help="--learn: robots. [default: each map's case, else 150]"),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Executors with the shield: RL against shortest path, PIBT order, congestion, guidance."""
    from fleetmind.bench import executors as bench

    seed_list = _int_list(seeds, "--seeds")
    if not seed_list:
        from fleetmind.errors import ConfigError

        raise ConfigError("--seeds: expected at least one seed")
    if learn:
        known = dict(bench.LEARN_CASES)
        held_out: tuple[tuple[str, int], ...]
        if quick:
            held_out, sizes = (("warehouse-small", 12),), {"steps": 300, "every": 30}
        else:
            sizes = {"steps": learn_steps}
            maps = [learn_map] if learn_map else list(known)
            held_out = tuple((m, learn_robots or known.get(m, 150)) for m in maps)
        found = bench.learning_cases(
            held_out,
            executor=learn_executor,
            **sizes,
            seeds=tuple(seed_list[:1] if quick else seed_list),
            workers=workers,
            progress=_progress(as_json),
        )
        show(found, as_json=as_json, table=bench.format_learning_cases)
        return
    chosen = bench.select(cases, executors)
    result = bench.run(
        quick=quick,
        seeds=tuple(seed_list),
        steps=steps,
        scale_robots=scale_robots,
        workers=workers,
        guide=str(guide) if guide else None,
        progress=_progress(as_json),
        **chosen,
    )
    show(result, as_json=as_json, table=bench.format_table)
