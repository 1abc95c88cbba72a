"""``fleetmind lorr ...``: League of Robot Runners instances under their rules."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from fleetmind.cli.common import JsonFlag, console, err_console, print_json, sub_app

lorr_app = sub_app("lorr", "League of Robot Runners: their instances, their rules, their score.")


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
    delays: Annotated[
        bool, typer.Option(help="2026: draw the problem's delays (seeded, not the kit's draws).")
    ] = True,
    delay_seed: Annotated[
        int | None, typer.Option(help="2026: seed of the delays. [default: delayConfig.seed]")
    ] = None,
    comm_ticks: Annotated[int, typer.Option(help="2026: ticks between planner calls.")] = 10,
    executor: Annotated[
        str,
        typer.Option(
            help="2026: GO/STOP executor: rules (the kit default's), early (rules + GO early "
            "behind a leader leaving the same way), learned (the trained policy)."
        ),
    ] = "rules",
    weights: Annotated[
        Path | None,
        typer.Option(help="2026: learned executor weights. [default: the shipped file]"),
    ] = None,
    hold: Annotated[
        bool,
        typer.Option(
            help="2026: stage every plan, the robots with a backlog planned to wait (--no-hold: "
            "one robot's backlog skips the whole fleet's plan)."
        ),
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    """Run the LoRR planner on one instance; print tasks finished, planning time, conflicts.

    A 2026 problem is played under the 2026 rules (ticks, multi-tick actions, delays): the
    staged LoRR planner every ``--comm-ticks`` ticks and the ``--executor`` every tick.
    """
    from fleetmind.bench import lorr as bench
    from fleetmind.errors import ConfigError
    from fleetmind.sim.lorr import read_instance

    if levers is not None and levers not in bench.LEVER_SETS:
        raise ConfigError(f"--levers: unknown {levers!r} (known: {', '.join(bench.LEVER_SETS)})")
    start = time.perf_counter()
    if read_instance(bench.resolve(instance), team_size=team_size).edition == "2026":
        name = levers or bench.DEFAULT_LEVERS_2026
        if team_size is not None:
            raise ConfigError("--team-size: 2026 runs use the problem's teamSize")

        def tick_progress(tick: int, finished: int) -> None:
            if not quiet and tick % 500 == 0:
                err_console.print(
                    f"tick {tick}: {finished:,} finished ({time.perf_counter() - start:.0f} s)"
                )

        m26 = bench.run_2026(
            instance, executor=executor, weights=weights, ticks=steps or 1000,
            comm_ticks=comm_ticks, delays=delays, delay_seed=delay_seed,
            levers=bench.LEVER_SETS[name], seed=seed, hold=hold, out=out,
            progress=tick_progress,
        )  # fmt: skip
        if as_json:
            print_json(m26)
        else:
            ex, pl = m26["executor_ms"], m26["planner_ms"]
            verdict = "validates" if m26["validated"] else "DOES NOT VALIDATE"
            console.print(
                f"{m26['instance']} (2026 rules, {executor} executor, {m26['robots']} robots, "
                f"{m26['ticks']} ticks, delays {'on' if delays else 'off'}): "
                f"{m26['finished']:,} tasks finished; "
                f"{m26['refused_by_action_model']} moves refused by the action model; executor "
                f"p99 {ex['p99']:.2f} ms a tick, planner p50 {pl['p50']:.0f} / p99 "
                f"{pl['p99']:.0f} ms a call; {m26['collisions']} collisions; output {verdict}",
                soft_wrap=True,
                markup=False,
            )
            for line in m26["problems"]:
                console.print(line, soft_wrap=True, markup=False)
        if m26["collisions"] or not m26["validated"]:
            raise typer.Exit(1)
        return

    name = levers or bench.DEFAULT_LEVERS

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
        print_json({k: v for k, v in m.items() if k != "per_agent_reward"})
    else:
        console.print(bench.format_row(bench.row(m, levers=name)), soft_wrap=True, markup=False)
        if out is not None:
            console.print(f"run folder: {out} (lorr_output.json in the start kit's layout)")
    if m["collisions"] or not m["lorr"]["validated"]:
        raise typer.Exit(1)


@lorr_app.command("generated")
def lorr_generated(
    variants: Annotated[
        str,
        typer.Option(help="Comma-separated lever sets (2026: NAME:hold for the hold executor)."),
    ] = "highway,highway+unstick",
    rules: Annotated[str, typer.Option(help="2024 or 2026.")] = "2024",
    seed: Annotated[int, typer.Option(help="Root seed of the generated problems.")] = 1000,
    count: Annotated[int, typer.Option(help="Problems.")] = 5,
    steps: Annotated[int, typer.Option(help="Steps (2024) or ticks (2026) of each.")] = 1000,
    kind: Annotated[str, typer.Option(help="2024 maps: random or shelf.")] = "random",
    size: Annotated[int, typer.Option(help="2024 maps: cells a side.")] = 32,
    robots: Annotated[int, typer.Option(help="2024: robots.")] = 100,
    executor: Annotated[str, typer.Option(help="2026: GO/STOP executor.")] = "rules",
    as_json: JsonFlag = False,
) -> None:
    """Compare planner levers on generated problems (develop here; the benchmark is held out).

    2024: random-obstacle or shelf maps; 2026: the executor's training problems, delays off
    and on. Tasks finished per problem and in total, one line per variant.
    """
    from fleetmind.bench import lorr as bench

    result = bench.generated(
        rules=rules, variants=[v for v in variants.split(",") if v], seed=seed, count=count,
        steps=steps, kind=kind, size=size, robots=robots, executor=executor,
        progress=None if as_json else lambda line: err_console.print(line, markup=False),
    )  # fmt: skip
    if as_json:
        print_json(result)
    else:
        console.print(bench.format_generated(result), soft_wrap=True, markup=False)


@lorr_app.command("validate")
def lorr_validate(
    output: Annotated[Path, typer.Argument(help="A start-kit output file (the kit's or ours).")],
    instance: Annotated[
        str, typer.Option(help="The instance .json it was run on (or a short name).")
    ],
    time_limit: Annotated[
        float, typer.Option(help="The run's seconds per step, to check plannerTimes (0: skip).")
    ] = 1.0,
    as_json: JsonFlag = False,
) -> None:
    """Replay a start-kit output file under the LoRR rules; one line per disagreement.

    The team is the file's ``teamSize`` (the kit reads the first ``teamSize`` agents). Exits 1
    when the file disagrees with the rules anywhere.
    """
    from fleetmind.bench.lorr import validate_file

    inst, check = validate_file(output, instance, time_limit=time_limit or None)
    team = inst.team_size
    summary = {
        "output": str(output),
        "instance": str(inst.path),
        "edition": check.edition,
        "team_size": team,
        "steps": check.steps,
        "finished": check.finished,
        "claimed": check.claimed,
        "errors": len(check.errors),
        "schedule_errors": len(check.schedule_errors),
        "timeouts": check.timeouts,
        "ok": check.ok,
        "problems": list(check.problems),
    }
    if check.edition == "2026":
        summary |= {
            "collisions": check.executed_conflicts,
            "refused_by_action_model": check.refused,
            "delayed_robot_ticks": check.delayed,
            "notes": list(check.notes),
        }
    if as_json:
        print_json(summary)
    else:
        verdict = "agrees with the rules" if check.ok else f"{len(check.problems)} disagreements"
        console.print(
            f"{output}: {check.edition} rules, {team} robots, {check.steps} steps: "
            f"{check.finished:,} finished (file: {check.claimed:,}), {len(check.errors)} errors, "
            f"{len(check.schedule_errors)} schedule errors, {check.timeouts} timed-out steps; "
            f"{verdict}",
            soft_wrap=True,
            markup=False,
        )
        if check.edition == "2026":
            console.print(
                f"2026: {check.executed_conflicts} collisions, {check.refused} moves turned into "
                f"waits by the action model, {check.delayed} delayed robot-ticks, "
                f"{len(check.notes)} notes",
                soft_wrap=True,
                markup=False,
            )
            for line in check.notes:
                console.print(f"note: {line}", soft_wrap=True, markup=False)
        for line in check.problems:
            console.print(line, soft_wrap=True, markup=False)
    if not check.ok:
        raise typer.Exit(1)


@lorr_app.command("train-executor")
def lorr_train_executor(
    seed: Annotated[int, typer.Option(help="Root seed: training problems, delays, learner.")] = 0,
    generations: Annotated[int, typer.Option(min=1, help="Cross-entropy generations.")] = 15,
    population: Annotated[int, typer.Option(min=5, help="Candidates a generation.")] = 12,
    sigma: Annotated[float, typer.Option(min=0.01, help="Initial spread of the weights.")] = 0.25,
    problems: Annotated[int, typer.Option(min=1, help="Generated training problems.")] = 4,
    ticks: Annotated[int, typer.Option(min=10, help="Ticks of each training run.")] = 400,
    out: Annotated[
        Path | None, typer.Option(help="Weights file to write. [default: the shipped file]")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Train the 2026 GO/STOP executor (cross-entropy method, delays on, generated problems).

    Scores on fresh problems of the training kind (another seed) beside the rule executor and
    the early-GO rule; the 2026 examples are for ``fleetmind bench lorr --rules 2026`` only.
    One core (torch is not used; numpy runs single-threaded here).
    """
    from fleetmind.dispatch.lorr2026 import train_executor, validate_executor_weights
    from fleetmind.rl import lorr_executor

    start = time.perf_counter()

    def progress(g: int, incumbent: float, best: float) -> None:
        err_console.print(
            f"generation {g}: mean's tasks {incumbent:.0f}, best candidate {best:.0f} "
            f"({time.perf_counter() - start:.0f} s)"
        )

    weights, meta = train_executor(
        seed=seed, generations=generations, population=population, sigma=sigma, problems=problems,
        ticks=ticks, progress=None if as_json else progress,
    )  # fmt: skip
    check = validate_executor_weights(weights, seed=seed + 1000, problems=problems, ticks=ticks)
    meta |= {"validation": check, "train_s": round(time.perf_counter() - start, 1)}
    path = out or lorr_executor.WEIGHTS
    lorr_executor.save(path, weights, meta)
    if as_json:
        print_json({"weights": [float(w) for w in weights], **meta, "out": str(path)})
    else:
        console.print(
            "fresh training-kind problems (seed "
            f"{seed + 1000}, delays on): learned {check['learned']}, rules {check['rules']}, "
            f"early {check['early']} tasks; weights written to {path}",
            soft_wrap=True,
            markup=False,
        )
