"""Run, demo, compare, replay and report: the commands that make and read run folders."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fleetmind.cli.common import (
    JsonFlag,
    LLMApiKey,
    LLMBaseUrl,
    LLMGguf,
    LLMModel,
    MapName,
    OrderRate,
    RayAddress,
    Robots,
    app,
    console,
    kpi_table,
    print_json,
    progress_bar,
    progress_run,
    ray_runner,
)
from fleetmind.eval.strategies import STRATEGIES


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
            help="rl, shortest-path, shortest-path-random (seeded ties), congestion "
            "(shortest path + traffic costs), guidance (congestion on crisscross highways), "
            "pibt (PIBT's own order), rl-guided (a learned residual over guidance), "
            "learned-guidance (guidance on a learned cost map, `fleetmind nav guide`) or "
            "llm-direct. [default: shortest-path]"
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="RL policy file (default: the shipped navigation policy); for "
            "learned-guidance, a guide model file (default: the shipped one)."
        ),
    ] = None,
    learn_every: Annotated[
        int | None,
        typer.Option(
            help="rl-guided, learned-guidance: keep learning while the fleet runs, an update every "
            "N ticks (rl-guided: PPO on the run's own moves, actions sampled; learned-guidance: "
            "a CMA-ES generation scored by replaying the run's own orders). The curve goes to "
            "metrics.json. [default: off]"
        ),
    ] = None,
    learn_guard: Annotated[
        float | None,
        typer.Option(
            help="Learning: roll back an update when the next window's deliveries "
            "fall by more than this share. [default: 0.03]"
        ),
    ] = None,
    learn_lr: Annotated[
        float | None,
        typer.Option(
            help="Learning: rl-guided's Adam step size; 0 for either: record the curve, never "
            "update. [default: 0.002]"
        ),
    ] = None,
    learn_lag: Annotated[
        int | None,
        typer.Option(
            help="Learning: run each update beside the loop and apply its result N "
            "ticks after its window (0 < N < --learn-every; the loop never stalls on an "
            "update). [default: 0, inside the tick]"
        ),
    ] = None,
    fresh_policy: Annotated[
        bool,
        typer.Option(
            "--fresh-policy",
            help="rl-guided: start from an untrained residual; learned-guidance: from the "
            "neutral model (both: guidance itself).",
        ),
    ] = False,
    save_policy: Annotated[
        str | None,
        typer.Option(help="rl-guided, learned-guidance: write the policy or model at the end."),
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
            "surge@T:N, block:R1,C1-R2,C2@T+K, block:busy@T+K (the aisle where work waits), "
            "battery:ROBOT@T (ROBOT: id, index or busy; "
            "repeatable)."
        ),
    ] = None,
    desk: Annotated[
        str | None,
        typer.Option(
            help="Incident desk: off, rules (the rule handler) or llm (coordinator + executor "
            "with tools, rules as fallback). [default: off]"
        ),
    ] = None,
    desk_deadline: Annotated[
        float | None,
        typer.Option(help="Seconds the LLM desk has per incident. [default: 20]"),
    ] = None,
    desk_deadline_ticks: Annotated[
        int | None,
        typer.Option(
            help="Ticks after an incident by which the desk must decide. [default: the "
            "seconds deadline in ticks + 10 in a paced run, else 100]"
        ),
    ] = None,
    order_rate: OrderRate = None,
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
        typer.Option(
            help="Real-time pacing: seconds per tick (0: flat out). [default: 0.1 with an "
            "async LLM planner or the LLM desk, else 0]"
        ),
    ] = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    llm_gguf: LLMGguf = None,
    llm_threads: Annotated[
        int | None, typer.Option(help="Threads of the embedded model. [default: 1]")
    ] = None,
    llm_deadline: Annotated[
        float | None,
        typer.Option(
            help="Seconds per LLM planner decision. [default: 3 times a warm-up call, 2-20 s]"
        ),
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
            "learn_every": learn_every,
            "learn_guard": learn_guard,
            "learn_lr": learn_lr,
            "learn_lag": learn_lag,
            "fresh_policy": fresh_policy or None,
            "save_policy": save_policy,
            "seed": seed,
            "shield": shield,
            "faults": fault or None,
            "desk": desk,
            "desk_deadline_s": desk_deadline,
            "desk_deadline_ticks": desk_deadline_ticks,
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
            "llm_deadline_s": llm_deadline,
        },
    )
    from fleetmind.eval.recorder import next_free

    folder = out or next_free(Path("runs") / f"run-{cfg.seed}")
    m = progress_run(
        cfg, folder, label=f"{cfg.planner}+{cfg.executor}", quiet=as_json, overwrite=overwrite
    )
    if as_json:
        print_json(m)
        return
    console.print(kpi_table({f"{cfg.planner}+{cfg.executor}": m}))
    console.print(f"run folder: {folder}")


@app.command()
def demo(
    map_name: MapName = "warehouse-small",
    robots: Robots = 8,
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
    llm_gguf: LLMGguf = None,
    desk: Annotated[
        str,
        typer.Option(help="Incident desk of every strategy: off, rules or llm. [default: off]"),
    ] = "off",
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
        "desk": desk,
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
            results[name] = progress_run(
                configs[name], out / name, label=name, quiet=as_json, client=client, overwrite=True
            )
    elapsed = time.perf_counter() - started
    report = _try_report(out, results)
    if as_json:
        print_json({"results": results, "elapsed_s": elapsed, "report": report})
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
            help=f"Comma-separated strategies: {', '.join(STRATEGIES)} "
            "(append :noshield to drop the shield)."
        ),
    ] = "classical,rl,classical:noshield",
    map_name: MapName = "warehouse-small",
    robots: Robots = 8,
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
    order_rate: OrderRate = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    desk: Annotated[
        str | None,
        typer.Option(
            help="Incident desk of every strategy (off, rules or llm); a strategy's own "
            "suffix (classical:desk-llm) wins. [default: off]"
        ),
    ] = None,
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Write OUT/report.html.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print comparison.json.")] = False,
) -> None:
    """Run strategies on identical maps, order streams and seeds; table with 95% CIs."""
    from fleetmind.eval.compare import compare as run_compare
    from fleetmind.eval.compare import earlier_comparison
    from fleetmind.eval.recorder import next_free

    if out is None:
        out = next_free(Path("runs/compare"), holds=earlier_comparison)
    names = [s for s in strategies.split(",") if s.strip()]
    common = {
        k: v
        for k, v in {
            "faults": fault or None,
            "desk": desk,
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
        kwargs["run_many"] = ray_runner(ray_address, max_retries, workers)
    if as_json:
        result = run_compare(names, **kwargs)
    else:
        with progress_bar("runs") as bar:
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
        print_json({**result, "report": report_path})
        return
    console.print(comparison_table(result))
    console.print(f"comparison: {out / 'comparison.json'}")
    if report_path:
        console.print(f"report: {report_path}")


def comparison_table(comparison: dict[str, Any]) -> Table:
    """A comparison's table: every row in ``ROWS`` order, mean ± 95% interval over its seeds."""
    from fleetmind.eval.compare import ROWS, format_cell

    seeds = ", ".join(str(s) for s in comparison["seeds"])
    table = Table(
        title=f"compare: {comparison['map']}, {comparison['robots']} robots, "
        f"{comparison['steps']} ticks, mean ± 95% interval over seeds {seeds}"
    )
    table.add_column("metric")
    names = comparison["strategies"]
    for name in names:
        table.add_column(name, justify="right")
    for key, label in ROWS:
        if key in comparison["rows"]:
            table.add_row(label, *(format_cell(comparison["table"][n][key]) for n in names))
    return table


@app.command()
def replay(
    run_dir: Annotated[Path, typer.Argument(help="A recorded run folder.")],
    planner: Annotated[
        str | None,
        typer.Option(
            help="Planner to replay each decision with: assignment, greedy, oracle, llm or "
            "llm-notes (default: the recorded one)."
        ),
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
    from fleetmind.eval.decisions import decision_replay
    from fleetmind.eval.offpolicy import rl_replay
    from fleetmind.eval.replay import strict_replay

    result: dict[str, Any] = {}
    if strict:
        target = out or run_dir.with_name(run_dir.name + "-replay")
        # DIR-replay is the replay's own folder (rebuilt from DIR at will): a rerun replaces it.
        res = strict_replay(run_dir, target, overwrite=overwrite or out is None)
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
        with progress_bar("decisions", disable=as_json) as bar:
            task = bar.add_task("replay", total=None)
            result["decisions"] = decision_replay(
                run_dir,
                planner=planner,
                horizon=horizon,
                continuation=continuation,
                client=client,
                limit=limit,
                progress=lambda k, n: bar.update(task, completed=k, total=n),
            )
        if rl:
            result["rl"] = rl_replay(run_dir)
    if as_json:
        print_json(result)
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
    from fleetmind.eval.report import build_report, recommend_comparison
    from fleetmind.eval.store import load_metrics

    html_path = build_report(path, out)
    comp = path / "comparison.json"
    if comp.exists():
        # A comparison is reported over every seed it ran, never one seed's metrics.json.
        comparison = json.loads(comp.read_text())
        advice = recommend_comparison(comparison)
        if as_json:
            print_json({"report": str(html_path), "comparison": comparison, "summary": advice})
            return
        console.print(comparison_table(comparison))
        for line in advice:
            console.print(f"- {line}")
        console.print(f"report: {html_path}")
        return
    summaries = {path.name: load_metrics(path)}
    if as_json:
        print_json({"report": str(html_path), "metrics": summaries})
        return
    console.print(kpi_table({k: m for k, m in summaries.items() if m}, title="metrics.json"))
    console.print(f"report: {html_path}")
