"""The ``fleetmind`` command line.

Every command prints one clear line for bad input (file, field, what was expected) and exits with
a non-zero code; ``--debug`` shows the traceback instead. Exit codes: 0 success, 1 a run failed
its own checks, 2 bad input or configuration.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fleetmind.errors import FleetmindError

app = typer.Typer(
    name="fleetmind",
    help="Run a warehouse robot fleet with a planner, an executor and a shield.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
bench_app = typer.Typer(
    help="The project's own benchmarks, as a table or JSON.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")
notes_app = typer.Typer(
    help="Read order notes into constraints; score readers on a labelled set.",
    no_args_is_help=True,
)
app.add_typer(notes_app, name="notes")

console = Console()
err_console = Console(stderr=True)
_state: dict[str, bool] = {"debug": False}

EXIT_BAD_INPUT = 2

# Options several commands share, declared once.
LLMBaseUrl = Annotated[
    str | None, typer.Option(help="OpenAI-compatible base URL (default: the embedded model).")
]
LLMModel = Annotated[str | None, typer.Option(help="Model name to request.")]
LLMApiKey = Annotated[str | None, typer.Option(help="API key (never recorded).")]
RayAddress = Annotated[
    str | None, typer.Option(help="Ray cluster address (default: start a local Ray).")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
DEMO_OUT = Path("runs/demo")
TRAIN_OUT = Path("runs/train")


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level.")] = False,
) -> None:
    """fleetmind: planner (LLM or solver), executor (RL or shortest path), shield (rules)."""
    _state["debug"] = debug
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _show(result: Any, *, as_json: bool, table: Any = None) -> None:
    """Print a benchmark result: JSON for scripts, else its Rich table (or pretty JSON)."""
    if as_json:
        _print_json(result)
    elif table is not None:
        console.print(table(result))
    else:
        console.print_json(data=result, default=str)


def _progress_run(
    cfg: Any,
    out: Path | None,
    *,
    label: str,
    quiet: bool,
    client: Any = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run one strategy with a Rich progress bar (ETA) unless quiet."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from fleetmind.eval.runner import execute

    if quiet:
        return execute(cfg, out, client=client, overwrite=overwrite)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} ticks"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=cfg.steps)
        return execute(
            cfg,
            out,
            progress=lambda k: bar.update(task, completed=k),
            client=client,
            overwrite=overwrite,
        )


KPI_ROWS = (
    ("tasks_completed", "tasks completed"),
    ("throughput", "throughput (tasks/tick)"),
    ("on_time_rate", "on-time rate"),
    ("priority_weighted_throughput", "priority-weighted throughput"),
    ("constraint_violations", "constraint violations (structured/text)"),
    ("orders_stranded", "orders stranded (undelivered, past due)"),
    ("notes_needs_review", "notes sent to review"),
    ("collisions", "collisions executed"),
    ("shield_interventions", "shield interventions"),
    ("step_latency_ms", "step latency p50/p99 ms"),
    ("planner_calls", "planner calls"),
    ("llm_tokens", "LLM tokens (prompt+completion)"),
    ("planner_fallbacks", "planner fallbacks"),
)


def _kpi(m: dict[str, Any], key: str) -> str:
    if key not in m and key != "llm_tokens":
        return "-"
    if key == "constraint_violations":
        v = m[key]
        return f"{v['structured']}/{v['text_only']}"
    if key == "step_latency_ms":
        return f"{m[key]['p50']:.2f}/{m[key]['p99']:.2f}"
    if key == "llm_tokens":
        return str(m["llm_tokens_prompt"] + m["llm_tokens_completion"])
    value = m[key]
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def kpi_table(results: dict[str, dict[str, Any]], title: str = "KPIs") -> Table:
    """A Rich table of the headline KPIs, one column per run."""
    table = Table(title=title)
    table.add_column("metric")
    for name in results:
        table.add_column(name, justify="right")
    for key, label in KPI_ROWS:
        table.add_row(label, *(_kpi(m, key) for m in results.values()))
    return table


@app.command()
def run(
    map_name: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="Preset, text map file, MovingAI .map file or rware layout. "
            "[default: warehouse-small]",
        ),
    ] = None,
    robots: Annotated[int | None, typer.Option(help="Number of robots. [default: 8]")] = None,
    steps: Annotated[int | None, typer.Option(help="Ticks to run. [default: 300]")] = None,
    planner: Annotated[
        str | None,
        typer.Option(help="assignment, greedy, llm, llm-notes or oracle. [default: assignment]"),
    ] = None,
    note_reader: Annotated[
        str | None,
        typer.Option(
            help="Note reader of llm-notes: template, rules, rules-review, llm or rules+llm. "
            "[default: rules]"
        ),
    ] = None,
    note_style: Annotated[
        str | None,
        typer.Option(help="Notes of generated orders: realistic or template. [default: realistic]"),
    ] = None,
    zh_share: Annotated[
        float | None, typer.Option(help="Share of notes written in Chinese. [default: 0.3]")
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            help="rl, shortest-path, shortest-path-random (seeded ties) or llm-direct. "
            "[default: shortest-path]"
        ),
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="RL policy file (default: the shipped navigation policy).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Root seed. [default: 0]")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Run folder to write; one holding an earlier run is refused unless "
            "--overwrite. [default: runs/run-SEED, or runs/run-SEED-2... if that holds a run]"
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an earlier run in --out.")
    ] = False,
    shield: Annotated[
        bool | None, typer.Option("--shield/--no-shield", help="Run the shield. [default: on]")
    ] = None,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="Inject a fault: breakdown:ROBOT@T+K, llm-outage@T+K, malformed@T+K, "
            "surge@T:N (repeatable)."
        ),
    ] = None,
    order_rate: Annotated[
        float | None, typer.Option(help="Orders per tick (Poisson). [default: robots/40]")
    ] = None,
    text_share: Annotated[
        float | None,
        typer.Option(help="Share of orders with a text-only constraint. [default: 0.3]"),
    ] = None,
    tasks: Annotated[
        str | None, typer.Option(help="JSON-lines task file instead of the stream.")
    ] = None,
    planner_mode: Annotated[
        str | None,
        typer.Option(
            help="async (never wait for the planner), sync (wait; reproducible) or auto "
            "(sync for solver planners, async for LLM planners). [default: auto]"
        ),
    ] = None,
    tick_period: Annotated[
        float | None,
        typer.Option(help="Real-time pacing: seconds per tick (0: flat out). [default: 0]"),
    ] = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    llm_gguf: Annotated[
        str | None,
        typer.Option(help="GGUF model file for the embedded server (default: SmolLM2-135M)."),
    ] = None,
    llm_threads: Annotated[
        int | None, typer.Option(help="Threads of the embedded model. [default: 1]")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="YAML file with the same options; flags override it.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Run the fleet with one planner, executor and shield setting; record a run folder."""
    from fleetmind.eval.runner import load_config

    cfg = load_config(
        config,
        {
            "map": map_name,
            "robots": robots,
            "steps": steps,
            "planner": planner,
            "executor": executor,
            "policy": policy,
            "seed": seed,
            "shield": shield,
            "faults": fault or None,
            "order_rate": order_rate,
            "text_share": text_share,
            "note_reader": note_reader,
            "note_style": note_style,
            "zh_share": zh_share,
            "tasks": tasks,
            "planner_mode": planner_mode,
            "tick_period_s": tick_period,
            "llm_base_url": llm_base_url,
            "llm_model": llm_model,
            "llm_api_key": llm_api_key,
            "llm_gguf": llm_gguf,
            "llm_threads": llm_threads,
        },
    )
    from fleetmind.eval.recorder import next_free

    folder = out or next_free(Path("runs") / f"run-{cfg.seed}")
    m = _progress_run(
        cfg, folder, label=f"{cfg.planner}+{cfg.executor}", quiet=as_json, overwrite=overwrite
    )
    if as_json:
        _print_json(m)
        return
    console.print(kpi_table({f"{cfg.planner}+{cfg.executor}": m}))
    console.print(f"run folder: {folder}")


@app.command()
def demo(
    map_name: Annotated[
        str, typer.Option("--map", help="Preset, map file or rware layout.")
    ] = "warehouse-small",
    robots: Annotated[int, typer.Option(help="Number of robots.")] = 8,
    steps: Annotated[int, typer.Option(help="Ticks per strategy.")] = 300,
    seed: Annotated[int, typer.Option(help="Root seed.")] = 0,
    tick_period: Annotated[
        float, typer.Option(help="Seconds per control tick (the LLM plans while robots move).")
    ] = 0.1,
    out: Annotated[Path, typer.Option(help="Folder for the run folders and the report.")] = Path(
        "runs/demo"
    ),
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    llm_gguf: Annotated[
        str | None,
        typer.Option(help="GGUF model file for the embedded server (default: SmolLM2-135M)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the KPIs as JSON.")] = False,
) -> None:
    """The main job: hybrid strategies (note reader + RL executor + shield) vs the baselines.

    Starts the embedded LLM (SmolLM2-135M, no key, no network) unless --llm-base-url is given,
    runs hybrid, hybrid-llm, classical and oracle on the same map, orders, notes and seed in real
    time (the control loop never waits for the LLM), prints a KPI table and writes the run
    folders and an HTML report.
    """
    from fleetmind.eval.runner import llm_client, load_config, prepare
    from fleetmind.eval.strategies import strategy

    started = time.perf_counter()
    common = {
        "map": map_name,
        "robots": robots,
        "steps": steps,
        "seed": seed,
        "tick_period_s": tick_period,
        "llm_base_url": llm_base_url,
        "llm_model": llm_model,
        "llm_api_key": llm_api_key,
        "llm_gguf": llm_gguf,
    }
    names = ("hybrid", "hybrid-llm", "classical", "oracle")
    configs = {name: load_config(None, {**common, **strategy(name)}) for name in names}
    for cfg in configs.values():
        prepare(cfg)  # every check before the model loads and any folder is touched
    if not as_json:
        console.print(
            f"[bold]fleetmind demo[/bold]: {robots} robots on {map_name}, {steps} ticks at "
            f"{tick_period:g} s/tick, seed {seed}\n"
            "  hybrid     = note-reading planner (rules reader) + RL executor + shield\n"
            "  hybrid-llm = the same, the LLM judging what no rule decides + RL + shield\n"
            "  classical  = assignment solver (blind to notes) + shortest-path executor + shield\n"
            "  oracle     = the solver told what every note means (evaluation only)"
        )
    results: dict[str, dict[str, Any]] = {}
    with llm_client(configs["hybrid-llm"], None) as client:
        if not as_json:
            console.print(f"LLM: {client.model if client else '-'} (ready)")
        for name in names:
            # The demo's own folders: a rerun replaces them (README, run folder).
            results[name] = _progress_run(
                configs[name], out / name, label=name, quiet=as_json, client=client, overwrite=True
            )
    elapsed = time.perf_counter() - started
    report = _try_report(out, results)
    if as_json:
        _print_json({"results": results, "elapsed_s": elapsed, "report": report})
        return
    console.print(kpi_table(results, title=f"fleetmind demo ({elapsed:.0f} s)"))
    console.print(f"run folders: {', '.join(str(out / n) for n in names)}")
    if report:
        console.print(f"report: {report}")


def _try_report(out: Path, results: dict[str, dict[str, Any]]) -> str | None:
    """Write the comparison report if the report module is available."""
    try:
        from fleetmind.eval import report
    except ImportError:
        return None
    path: Path = report.build_demo(out, results)
    return str(path)


@app.command()
def compare(
    strategies: Annotated[
        str,
        typer.Option(
            help="Comma-separated strategies: classical, rl, llm, hybrid, hybrid-direct, "
            "oracle, greedy (append :noshield to drop the shield)."
        ),
    ] = "classical,rl,classical:noshield",
    map_name: Annotated[
        str, typer.Option("--map", help="Preset, map file or rware layout.")
    ] = "warehouse-small",
    robots: Annotated[int, typer.Option(help="Number of robots.")] = 8,
    steps: Annotated[int, typer.Option(help="Ticks per run.")] = 300,
    seeds: Annotated[int, typer.Option(help="Seeds per strategy (confidence intervals).")] = 3,
    seed: Annotated[int, typer.Option(help="First seed.")] = 0,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Comparison folder (run folders, comparison.json, report); one holding an "
            "earlier comparison is refused unless --overwrite. [default: runs/compare, or "
            "runs/compare-2... if that holds one]"
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an earlier comparison in --out.")
    ] = False,
    backend: Annotated[
        str, typer.Option(help="local (process pool) or ray (one Ray task per run).")
    ] = "local",
    ray_address: RayAddress = None,
    max_retries: Annotated[int, typer.Option(help="Ray: retries of a run whose worker died.")] = 3,
    workers: Annotated[int, typer.Option(help="Processes (or Ray tasks) in flight.")] = 2,
    fault: Annotated[
        list[str] | None,
        typer.Option(help="Inject a fault in every run (same specs as `fleetmind run`)."),
    ] = None,
    order_rate: Annotated[
        float | None, typer.Option(help="Orders per tick (Poisson). [default: robots/40]")
    ] = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Write OUT/report.html.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print comparison.json.")] = False,
) -> None:
    """Run strategies on identical maps, order streams and seeds; table with 95% CIs."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from fleetmind.eval.compare import compare as run_compare
    from fleetmind.eval.compare import earlier_comparison, format_cell
    from fleetmind.eval.recorder import next_free

    if out is None:
        out = next_free(Path("runs/compare"), holds=earlier_comparison)
    names = [s for s in strategies.split(",") if s.strip()]
    common = {
        k: v
        for k, v in {
            "faults": fault or None,
            "order_rate": order_rate,
            "llm_base_url": llm_base_url,
            "llm_model": llm_model,
            "llm_api_key": llm_api_key,
        }.items()
        if v is not None
    }
    kwargs: dict[str, Any] = {
        "map_name": map_name,
        "robots": robots,
        "steps": steps,
        "seeds": seeds,
        "seed": seed,
        "out": out,
        "backend": backend,
        "workers": workers,
        "common": common,
        "overwrite": overwrite,
    }
    if backend == "ray":
        kwargs["run_many"] = _ray_runner(ray_address, max_retries, workers)
    if as_json:
        result = run_compare(names, **kwargs)
    else:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} runs"),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
        ) as bar:
            task = bar.add_task("compare", total=len(names) * seeds)
            result = run_compare(
                names,
                progress=lambda label, k, n: bar.update(task, completed=k, description=label),
                **kwargs,
            )
    report_path = None
    if report:
        from fleetmind.eval.report import build_report

        report_path = str(build_report(out))
    if as_json:
        _print_json({**result, "report": report_path})
        return
    table = Table(title=f"compare: {map_name}, {robots} robots, {steps} ticks, seeds {seeds}")
    table.add_column("metric")
    for name in result["strategies"]:
        table.add_column(name, justify="right")
    for key, label in result["rows"].items():
        table.add_row(label, *(format_cell(result["table"][n][key]) for n in result["strategies"]))
    console.print(table)
    console.print(f"comparison: {out / 'comparison.json'}")
    if report_path:
        console.print(f"report: {report_path}")


@app.command()
def replay(
    run_dir: Annotated[Path, typer.Argument(help="A recorded run folder.")],
    planner: Annotated[
        str | None,
        typer.Option(help="Planner to replay each decision with. [default: the recorded one]"),
    ] = None,
    horizon: Annotated[int, typer.Option(help="Counterfactual ticks per decision (0: off).")] = 50,
    continuation: Annotated[
        str, typer.Option(help="Who decides later in the horizon: assignment, greedy or none.")
    ] = "assignment",
    limit: Annotated[
        int | None, typer.Option(help="Replay at most this many decisions (evenly spaced).")
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            help="Re-run from the recorded LLM calls (no network) and check the run is "
            "reproduced bit for bit (needs a run recorded with --planner-mode sync)."
        ),
    ] = False,
    rl: Annotated[
        bool, typer.Option("--rl/--no-rl", help="Batch RL replay on the recorded transitions.")
    ] = True,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for the strict replay run; one holding a run is refused unless "
            "--overwrite. [default: DIR-replay, replaced on each strict replay]"
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an earlier run in --out.")
    ] = False,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    backend: Annotated[
        str,
        typer.Option(help="local, or ray (decision replay and RL replay as two Ray tasks)."),
    ] = "local",
    ray_address: RayAddress = None,
    as_json: JsonFlag = False,
) -> None:
    """Offline replay of a recorded run.

    Replays every planner decision (agreement, counterfactual gain, latency) and trains RL in
    batch on the recorded transitions; --strict instead re-runs from the recorded LLM calls and
    checks the run is reproduced bit for bit.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from fleetmind.eval import replay as rp

    result: dict[str, Any] = {}
    if strict:
        target = out or run_dir.with_name(run_dir.name + "-replay")
        # DIR-replay is the replay's own folder (rebuilt from DIR at will): a rerun replaces it.
        res = rp.strict_replay(run_dir, target, overwrite=overwrite or out is None)
        result["strict"] = {
            "identical": res.identical,
            "episode_rows": res.episode_rows,
            "events": res.events,
            "mismatches": list(res.mismatches),
            "out_dir": res.out_dir,
        }
    elif backend != "local":
        from fleetmind.scale.backend import check_backend
        from fleetmind.scale.replay import replay_parts

        check_backend(backend, ray_address)
        options = {
            "planner": planner,
            "horizon": horizon,
            "continuation": continuation,
            "limit": limit,
            "llm_base_url": llm_base_url,
            "llm_model": llm_model,
        }
        result.update(
            replay_parts(str(run_dir), options, rl=rl, backend=backend, address=ray_address)
        )
    else:
        client = None
        if llm_base_url is not None:
            from fleetmind.llm.client import OpenAICompatClient
            from fleetmind.llm.settings import LLMSettings

            client = OpenAICompatClient.from_settings(
                LLMSettings.from_env(base_url=llm_base_url, model=llm_model, api_key=None)
            )
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} decisions"),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
            disable=as_json,
        ) as bar:
            task = bar.add_task("replay", total=None)
            result["decisions"] = rp.decision_replay(
                run_dir,
                planner=planner,
                horizon=horizon,
                continuation=continuation,
                client=client,
                limit=limit,
                progress=lambda k, n: bar.update(task, completed=k, total=n),
            )
        if rl:
            result["rl"] = rp.rl_replay(run_dir)
    if as_json:
        _print_json(result)
        return
    if "strict" in result:
        s = result["strict"]
        verdict = "[green]identical[/green]" if s["identical"] else "[red]differs[/red]"
        console.print(
            f"strict replay: {verdict} ({s['episode_rows']} episode rows, {s['events']} events) "
            f"-> {s['out_dir']}"
        )
        for line in s["mismatches"]:
            console.print(f"  {line}")
        if not s["identical"]:
            raise typer.Exit(1)
        return
    summ = result["decisions"]["summary"]
    table = Table(title=f"decision replay: {summ['recorded_planner']} -> {summ['planner']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in ("decisions", "agreement_mean", "exact_rate", "gain_mean", "gain_total"):
        v = summ[key]
        table.add_row(key, "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)))
    table.add_row("better / same / worse", f"{summ['better']} / {summ['same']} / {summ['worse']}")
    table.add_row(
        "replay latency p50/p99 ms",
        f"{summ['latency_ms']['p50']:.2f}/{summ['latency_ms']['p99']:.2f}",
    )
    console.print(table)
    if "rl" in result:
        pooled = result["rl"]["pooled"]
        console.print(
            f"batch RL: {pooled['transitions']} transitions, FQE value {pooled['fqe_value']:.3f} "
            f"vs behaviour {pooled['fqe_behaviour_value']:.3f}; WIS {pooled['wis']['value']:.3f} "
            f"(ESS {pooled['wis']['ess']:.1f}); agreement with behaviour "
            f"{pooled['agreement_with_behaviour']:.2f}"
        )
        for f in result["rl"]["findings"]:
            console.print(f"  doctor: {f['kind']}: {f['message']}")


@app.command()
def report(
    path: Annotated[Path, typer.Argument(help="A run folder or a comparison folder.")],
    out: Annotated[
        Path | None, typer.Option(help="HTML file to write. [default: PATH/report.html]")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the path and metrics.json summaries as JSON.")
    ] = False,
) -> None:
    """One self-contained HTML report (plots inlined, opens offline) of a run or comparison."""
    from fleetmind.eval.report import build_report
    from fleetmind.eval.store import load_metrics

    html_path = build_report(path, out)
    comp = path / "comparison.json"
    if comp.exists():
        runs = {k: v[0] for k, v in json.loads(comp.read_text())["runs"].items() if v}
    else:
        runs = {path.name: str(path)}
    summaries = {name: load_metrics(p) for name, p in runs.items()}
    if as_json:
        _print_json({"report": str(html_path), "metrics": summaries})
        return
    console.print(kpi_table({k: m for k, m in summaries.items() if m}, title="metrics.json"))
    console.print(f"report: {html_path}")


def _ray_runner(address: str | None, max_retries: int, workers: int) -> Any:
    """A ``run_many`` for :func:`fleetmind.eval.compare.compare` on Ray."""
    from fleetmind.scale.backend import check_backend
    from fleetmind.scale.jobs import dispatch_job, run_jobs

    check_backend("ray", address)

    def run_many(pairs: list[tuple[Any, Path]]) -> list[dict[str, Any]]:
        jobs = [dispatch_job(cfg, path) for cfg, path in pairs]
        results: list[dict[str, Any]] = run_jobs(
            jobs, backend="ray", address=address, max_retries=max_retries, workers=workers
        )
        return results

    return run_many


@app.command()
def train(
    map_name: Annotated[
        str, typer.Option("--map", help="Preset, map file, rware layout, or an rware env id.")
    ] = "warehouse-tiny",
    robots: Annotated[int, typer.Option(help="Number of robots (agents).")] = 2,
    algo: Annotated[
        str, typer.Option(help="q, iql, ctde, ippo, mappo, iql-dqn, vdn or qmix.")
    ] = "iql",
    reward_mode: Annotated[
        str, typer.Option(help="individual, shared, mixed(W) or difference.")
    ] = "individual",
    steps: Annotated[int, typer.Option(help="Environment steps to train.")] = 100_000,
    seed: Annotated[int, typer.Option(help="Root seed.")] = 0,
    out: Annotated[Path, typer.Option(help="Run folder to write.")] = TRAIN_OUT,
    resume: Annotated[
        bool, typer.Option(help="Continue from the last checkpoint in --out.")
    ] = False,
    backend: Annotated[
        str, typer.Option(help="local or ray (each seed a Ray task; see --seeds).")
    ] = "local",
    seeds: Annotated[int, typer.Option(help="Train seeds seed..seed+K-1, each in OUT/seed-S.")] = 1,
    ray_address: RayAddress = None,
    checkpoint_every: Annotated[int, typer.Option(help="Updates between checkpoints.")] = 10,
    num_envs: Annotated[int, typer.Option(help="Batched worlds (neural algorithms).")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Train a learner; writes the policy, config, per-agent curves (CSV, PNG) and metrics."""
    from fleetmind.rl.train import train as run_train

    if seeds > 1 or backend != "local":
        _train_many(
            map_name,
            robots,
            algo,
            reward_mode=reward_mode,
            steps=steps,
            seed=seed,
            seeds=seeds,
            out=out,
            backend=backend,
            address=ray_address,
            num_envs=num_envs,
            as_json=as_json,
        )
        return
    result = run_train(
        map_name,
        robots,
        algo,
        reward_mode=reward_mode,
        steps=steps,
        seed=seed,
        out_dir=out,
        resume=resume,
        backend=backend,
        checkpoint_every=checkpoint_every,
        num_envs=num_envs,
        progress=not as_json,
    )
    if as_json:
        _print_json(result.metrics)
        return
    m = result.metrics
    table = Table(title=f"train {algo} on {map_name} ({robots} robots)")
    table.add_column("agent")
    table.add_column("deliveries", justify="right")
    table.add_column("reward", justify="right")
    for agent, d in m.get("per_agent_deliveries", {}).items():
        table.add_row(agent, str(d), f"{m.get('per_agent_reward', {}).get(agent, 0.0):.3f}")
    console.print(table)
    console.print(f"throughput {m.get('throughput', 0.0):.4f}; run folder: {result.out_dir}")
    for finding in m.get("diagnostics", []):
        console.print(f"[yellow]doctor[/yellow] {finding['kind']}: {finding['message']}")


def _train_many(
    map_name: str,
    robots: int,
    algo: str,
    *,
    reward_mode: str,
    steps: int,
    seed: int,
    seeds: int,
    out: Path,
    backend: str,
    address: str | None,
    num_envs: int,
    as_json: bool,
) -> None:
    """Several seeds as jobs on the local or Ray backend; a per-seed summary table."""
    from fleetmind.scale.backend import check_backend
    from fleetmind.scale.jobs import run_jobs, train_job

    check_backend(backend, address)
    jobs = [
        train_job(
            out / f"seed-{s}",
            map=map_name,
            robots=robots,
            algo=algo,
            reward_mode=reward_mode,
            steps=steps,
            seed=s,
            num_envs=num_envs,
        )
        for s in range(seed, seed + seeds)
    ]
    runs = run_jobs(jobs, backend=backend, address=address, workers=min(2, len(jobs)))
    rows = {
        f"seed-{s}": {"throughput": r.metrics.get("throughput"), "out_dir": str(r.out_dir)}
        for s, r in zip(range(seed, seed + seeds), runs, strict=True)
    }
    if as_json:
        _print_json(rows)
        return
    table = Table(title=f"train {algo} x {seeds} seeds ({backend})")
    table.add_column("seed")
    table.add_column("throughput", justify="right")
    table.add_column("run folder")
    for name, row in rows.items():
        table.add_row(name, f"{row['throughput'] or 0.0:.4f}", row["out_dir"])
    console.print(table)


@app.command()
def doctor(
    run_dir: Annotated[Path, typer.Argument(help="A training run folder (with curves.csv).")],
    solo: Annotated[
        Path | None,
        typer.Option(help="A run folder of the same agents trained alone (for non-stationarity)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
) -> None:
    """Diagnose a training log: non-stationarity, free-riding, reward scale (FIELD-NOTES §5)."""
    from fleetmind.rl.diagnostics import diagnose

    curves = _read_curves(run_dir)
    solo_curves = _read_curves(solo) if solo is not None else None
    # Episode returns sum many steps, so they say nothing about the per-step reward scale;
    # the scale check runs only on per-step peaks, which `train` logs as `<agent>_peak`.
    peaks = _read_curves(run_dir, suffix="_peak", required=False)
    findings = diagnose(curves, solo=solo_curves, step_rewards=peaks or {a: [0.0] for a in curves})
    rows = [
        {"kind": f.kind, "agents": list(f.agents), "evidence": f.evidence, "message": f.message}
        for f in findings
    ]
    if as_json:
        _print_json(rows)
        return
    if not rows:
        console.print("doctor: no finding (per-agent curves look healthy)")
    for r in rows:
        console.print(f"[yellow]{r['kind']}[/yellow] ({', '.join(r['agents'])}): {r['message']}")


def _read_curves(
    run_dir: Path, *, suffix: str = "_return", required: bool = True
) -> dict[str, list[float]]:
    """Per-agent curves (columns ``<agent><suffix>``) from a run folder's ``curves.csv``."""
    import csv

    from fleetmind.errors import ConfigError

    path = run_dir / "curves.csv"
    if not path.is_file():
        raise ConfigError(f"{path}: no curves.csv (expected a `fleetmind train` run folder)")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ConfigError(f"{path}: no episodes recorded")
    agents = [k.removesuffix(suffix) for k in rows[0] if k.endswith(suffix)]
    if not agents and required:
        raise ConfigError(f"{path}: no '<agent>{suffix}' columns")
    try:
        return {a: [float(r[f"{a}{suffix}"]) for r in rows] for a in agents}
    except ValueError as exc:
        raise ConfigError(f"{path}: a return is not a number ({exc})") from None


@bench_app.command("sim")
def bench_sim(
    quick: Annotated[bool, typer.Option(help="Short timing windows (a smoke run).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Simulator speed: env and agent steps/s, single and vector env, against rware."""
    from fleetmind.bench import sim as bench

    result = bench.run(quick=quick)
    _show(result, as_json=as_json, table=bench.format_table)


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

    result = bench.run(quick=quick, llm=llm)
    _show(result, as_json=as_json)


@bench_app.command("learn")
def bench_learn(
    quick: Annotated[bool, typer.Option(help="Short runs (a smoke run, under a minute).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Learners: samples/s of each neural learner; time for the nav policy to reach 95%."""
    from fleetmind.bench import learn as bench

    result = bench.run(quick=quick)
    _show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("ray")
def bench_ray(
    quick: Annotated[bool, typer.Option(help="Smaller sweeps and rollouts.")] = False,
    ray_address: RayAddress = None,
    as_json: JsonFlag = False,
) -> None:
    """Ray scale-out: sweep wall time and rollout samples/s with 1 and 2 workers."""
    from fleetmind.bench import ray as bench

    result = bench.run(quick=quick, address=ray_address)
    _show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("llm")
def bench_llm(
    quick: Annotated[bool, typer.Option(help="Fewer prompts and calls (a smoke run).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """LLM runtime: overhead per call, embedded tokens/s, valid-JSON rate."""
    from fleetmind.bench import llm as bench

    result = bench.run(quick=quick)
    _show(result, as_json=as_json)


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
    _show(result, as_json=as_json, table=bench.format_table)


@bench_app.command("free-riding")
def bench_free_riding(
    robots: Annotated[int, typer.Option(help="Fleet size.")] = 2,
    modes: Annotated[
        str, typer.Option(help="Comma-separated reward modes.")
    ] = "shared,individual,mixed(0.5),difference",
    seeds: Annotated[str, typer.Option(help="Comma-separated root seeds, one run each.")] = "0,1,2",
    episodes: Annotated[int, typer.Option(help="Training episodes per run.")] = 1000,
    episode_len: Annotated[int, typer.Option(help="Ticks per episode.")] = 200,
    order_rate: Annotated[
        float | None, typer.Option(help="Poisson orders per tick. [default: lifelong]")
    ] = None,
    eval_episodes: Annotated[int, typer.Option(help="Greedy episodes after training.")] = 5,
    eps_start: Annotated[float, typer.Option(help="Exploration rate of the first episode.")] = 1.0,
    eps_min: Annotated[float, typer.Option(help="Exploration floor.")] = 0.05,
    eps_reach: Annotated[
        float, typer.Option(help="Share of training after which epsilon reaches the floor.")
    ] = 0.6,
    baseline: Annotated[float, typer.Option(help="Constant added to every learner reward.")] = 0.0,
    map_name: Annotated[str, typer.Option("--map", help="Map preset or file.")] = "warehouse-tiny",
    workers: Annotated[int, typer.Option(help="Processes running runs in parallel.")] = 1,
    out: Annotated[
        Path | None, typer.Option(help="Write metrics.json, curves.csv and curves.png here.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print metrics.json.")] = False,
) -> None:
    """Free-riding under reward modes on warehouse-tiny (FIELD-NOTES §5.2); -v shows progress."""
    from fleetmind.bench import free_riding as bench

    metrics = bench.free_riding(
        robots=robots,
        modes=[m.strip() for m in modes.split(",") if m.strip()],
        seeds=_int_list(seeds, "--seeds"),
        episodes=episodes,
        episode_len=episode_len,
        order_rate=order_rate,
        out_dir=out,
        eval_episodes=eval_episodes,
        eps_start=eps_start,
        eps_min=eps_min,
        eps_reach=eps_reach,
        baseline=baseline,
        map_name=map_name,
        workers=workers,
    )
    if as_json:
        _print_json(metrics)
    else:
        sys.stdout.write(bench.format_table(metrics) + "\n")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    root: Annotated[
        Path, typer.Option(help="Folder of run and comparison folders to serve (nothing outside).")
    ] = Path("runs"),
    live: Annotated[
        bool, typer.Option("--live/--no-live", help="Run a live simulation on the page.")
    ] = True,
    map_name: Annotated[
        str | None, typer.Option("--map", help="Live map. [default: warehouse-small]")
    ] = None,
    robots: Annotated[int | None, typer.Option(help="Live robots. [default: 8]")] = None,
    steps: Annotated[
        int | None, typer.Option(help="Ticks of a live episode. [default: 1000]")
    ] = None,
    planner: Annotated[str | None, typer.Option(help="Live planner. [default: assignment]")] = None,
    executor: Annotated[
        str | None, typer.Option(help="Live executor. [default: shortest-path]")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Live root seed. [default: 0]")] = None,
    speed: Annotated[float, typer.Option(help="Live ticks per second at start.")] = 10.0,
    record: Annotated[
        bool, typer.Option("--record/--no-record", help="Record live episodes under ROOT/live/.")
    ] = True,
    config: Annotated[
        Path | None, typer.Option(help="YAML run config for the live view; flags override it.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="FLEETMIND_DASHBOARD_TOKEN",
            help="Token the live controls need (off loopback one is generated when not given).",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(help="Another Host header value to accept (a DNS name of this machine)."),
    ] = None,
) -> None:
    """Serve the dashboard: live view, replays of run folders under --root, comparisons."""
    from fleetmind.eval.runner import load_config
    from fleetmind.web.server import access
    from fleetmind.web.server import serve as run_server

    live_cfg = None
    if live:
        live_cfg = load_config(
            config,
            {
                "map": map_name,
                "robots": robots,
                "steps": steps if steps is not None or config is not None else 1000,
                "planner": planner,
                "executor": executor,
                "seed": seed,
            },
        )
    grant = access(host, token=token, allowed_hosts=allowed_host or ())
    console.print(f"fleetmind dashboard: {grant.url(host, port)}  (root {root}; Ctrl+C stops)")
    if grant.generated:
        console.print(f"live controls token (generated): {grant.token}")
    run_server(
        root, host=host, port=port, live=live_cfg, record_live=record, speed=speed, grant=grant
    )


NoteReaderOption = Annotated[
    str | None,
    typer.Option(
        "--reader", help="template, rules, rules-review, llm or rules+llm. [default: rules]"
    ),
]


@contextlib.contextmanager
def _reader_clients(
    names: list[str], base_url: str | None, model: str | None, api_key: str | None
) -> Iterator[list[Any]]:
    """The readers named, sharing one LLM client (the embedded server unless a URL is given)."""
    from fleetmind.dispatch.notes.readers import MODEL_READERS, make_reader
    from fleetmind.eval.runner import DEFAULT_READER, RunConfig, llm_client

    names = names or [DEFAULT_READER]
    model_reader = next((n for n in names if n in MODEL_READERS), names[0])
    cfg = RunConfig(
        planner="llm-notes",
        note_reader=model_reader,
        llm_base_url=base_url,
        llm_model=model,
        llm_api_key=api_key,
    )
    with llm_client(cfg, None) as client:
        yield [make_reader(n, client) for n in names]


@notes_app.command("read")
def notes_read(
    file: Annotated[Path, typer.Argument(help="JSON lines: note, arrival_tick, robots.")],
    reader: NoteReaderOption = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the predictions here (default: stdout).")
    ] = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
) -> None:
    """One prediction line per input note, in order: constraints, status, latency_ms."""
    from fleetmind.sim.notes import load_inputs

    items = load_inputs(file)
    with _reader_clients([reader] if reader else [], llm_base_url, llm_model, llm_api_key) as (
        chosen,
    ):
        lines = [
            json.dumps(
                chosen.read(i.note, arrival_tick=i.arrival_tick, robots=i.robots).as_line(),
                ensure_ascii=False,
            )
            for i in items
        ]
    text = "\n".join(lines) + ("\n" if lines else "")
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        err_console.print(f"{len(lines)} predictions: {out}")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def notes_table(results: list[dict[str, Any]]) -> Table:
    """Readers side by side: accuracy, precision/recall per kind and language, cost."""
    table = Table(title=f"note readers on {results[0]['notes']} notes")
    table.add_column("metric")
    for r in results:
        table.add_column(r["reader"], justify="right")
    rows: list[tuple[str, Any]] = [
        ("exact accuracy", lambda r: _pct(r["exact_accuracy"])),
        *(
            (
                f"exact accuracy ({lang})",
                lambda r, lang=lang: _pct(r["per_lang"].get(lang, {}).get("exact_accuracy")),
            )
            for lang in ("en", "zh")
        ),
        ("precision", lambda r: _pct(r["precision"])),
        ("recall", lambda r: _pct(r["recall"])),
        *(
            (
                f"{kind} P/R",
                lambda r, kind=kind: (
                    f"{_pct(r['per_kind'][kind]['precision'])}/"
                    f"{_pct(r['per_kind'][kind]['recall'])}"
                ),
            )
            for kind in ("only_robot", "not_robot", "deadline", "hold")
        ),
        ("false constraints (plain notes)", lambda r: _pct(r["false_constraint_rate"])),
        ("review rate", lambda r: _pct(r["review_rate"])),
        (
            "latency p50/p95 ms",
            lambda r: f"{r['latency_ms']['p50']:.2f}/{r['latency_ms']['p95']:.2f}",
        ),
        ("model calls", lambda r: str(r["calls"])),
        ("tokens", lambda r: str(r["tokens"])),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in results))
    return table


@notes_app.command("eval")
def notes_eval(
    file: Annotated[
        Path, typer.Argument(help="A labelled set (note, arrival_tick, robots, lang, constraints).")
    ],
    reader: Annotated[
        list[str] | None,
        typer.Option(
            "--reader",
            help="Reader to score (repeatable: side by side). [default: rules]",
        ),
    ] = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    as_json: JsonFlag = False,
) -> None:
    """Exact-match accuracy, per kind and language precision/recall, false constraints, cost."""
    from fleetmind.eval.notes import evaluate
    from fleetmind.sim.notes import load_labelled

    items = load_labelled(file)
    with _reader_clients(list(reader or []), llm_base_url, llm_model, llm_api_key) as readers:
        results = [evaluate(r, items)[0] for r in readers]
    if as_json:
        _print_json({"file": str(file), "readers": results})
        return
    console.print(notes_table(results))


lorr_app = typer.Typer(
    help="League of Robot Runners: their instances, their rules, their score.",
    no_args_is_help=True,
)
app.add_typer(lorr_app, name="lorr")


@lorr_app.command("run")
def lorr_run(
    instance: Annotated[
        str, typer.Argument(help="Instance .json, or a name such as 2024/warehouse_large_5000.")
    ],
    steps: Annotated[
        int | None, typer.Option(help="Steps. [default: the best-known result's, else 5000]")
    ] = None,
    time_limit: Annotated[
        float, typer.Option(help="Seconds per step; over-running makes the robots wait (0: none).")
    ] = 1.0,
    out: Annotated[Path | None, typer.Option(help="Run folder to write.")] = None,
    levers: Annotated[
        str | None, typer.Option(help="Planner lever set (fleetmind.bench.lorr.LEVER_SETS).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the planner's tie-breaks.")] = 0,
    team_size: Annotated[int | None, typer.Option(help="Robots to use.")] = None,
    episode: Annotated[bool, typer.Option(help="Write episode.parquet/.")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the LoRR planner on one instance; print tasks finished, planning time, conflicts."""
    from fleetmind.bench import lorr as bench
    from fleetmind.errors import ConfigError

    name = levers or bench.DEFAULT_LEVERS
    if name not in bench.LEVER_SETS:
        raise ConfigError(f"--levers: unknown {name!r} (known: {', '.join(bench.LEVER_SETS)})")
    start = time.perf_counter()

    def progress(step: int, finished: int) -> None:
        if not quiet and step % 500 == 0:
            err_console.print(
                f"step {step}: {finished:,} finished ({time.perf_counter() - start:.0f} s)"
            )

    m = bench.run_instance(
        instance,
        steps=steps,
        time_limit=time_limit or None,
        out=out,
        levers=bench.LEVER_SETS[name],
        seed=seed,
        team_size=team_size,
        episode=episode,
        progress=progress,
    )
    if as_json:
        _print_json({k: v for k, v in m.items() if k != "per_agent_reward"})
    else:
        console.print(bench.format_row(bench.row(m, levers=name)), soft_wrap=True, markup=False)
        if out is not None:
            console.print(f"run folder: {out} (lorr_output.json in the start kit's layout)")
    if m["collisions"] or not m["lorr"]["validated"]:
        raise typer.Exit(1)


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
    as_json: JsonFlag = False,
) -> None:
    """LoRR: 2024 instances against their best-known results, per lever set; 2023 curves."""
    from fleetmind.bench import lorr as bench

    result = bench.run(
        instances=[s for s in instances.split(",") if s],
        lever_sets=[s for s in levers.split(",") if s],
        steps=steps,
        time_limit=time_limit or None,
        curves=curves,
        curve_steps=curve_steps,
        quick=quick,
        progress=None if as_json else lambda line: err_console.print(line, markup=False),
    )
    _show(result, as_json=as_json, table=bench.format_table)


def main() -> None:
    """Entry point of the ``fleetmind`` command: one-line errors unless ``--debug``."""
    try:
        app()
    except FleetmindError as exc:
        if _state["debug"]:
            raise
        # One line, never wrapped: scripts and people grep for it.
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(EXIT_BAD_INPUT) from None


if __name__ == "__main__":
    main()
