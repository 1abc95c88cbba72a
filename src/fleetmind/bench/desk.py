"""``fleetmind bench desk``: the incident desk against the rule handler on a fault suite.

The suite: per seed, one run on ``warehouse-small`` with 8 robots and seven injected incidents
(breakdowns of loaded robots, aisles closed where work waits, low batteries, a small surge), plus
the deadlock reports that come up on their own. Three seeds give at least 21 injected incidents.
Each seed runs with:

- ``off``: nobody handles incidents (the step-latency baseline and the no-handler recovery);
- ``rules``: the rule-based incident handler (the baseline);
- ``llm``: the desk with the embedded model (SmolLM2-135M on 127.0.0.1), rules as fallback;
- ``hostile``: the desk with the scripted misbehaving model (:mod:`fleetmind.testing.desk_server`);
- ``follower``: the desk with the scripted model that behaves (it takes the rule proposal): the
  desk's own machinery (queue, checks at the tick boundary, deadlines) without a model's latency;
- ``rules-delayed``: the rule handler acting as late as the desk did: each incident's rules act
  the ``llm`` run's median desk latency (ticks from an incident to the desk's first applied
  action, same seed) after it. What the desk adds over the rules is what it does better than
  this, not better than rules that act at once.

"Resolved by the desk" counts incidents the desk acted on (an action of its applied) that then
recovered; one where it chose to wait and the incident cleared by itself is not. The ``llm``
mode also gives the desk's deviation rate: of the coordinator's decisions, how many chose
something other than the rule handler's proposal on the same view.

The embedded model's runs tick in real time (``tick_period_s``, 0.2 s) so that the desk's
seconds turn into ticks as on a real floor, ``off`` (the step-latency baseline) at the same
period, the scripted model's at a quarter of it, ``rules`` as fast as it goes (the step latency
counts the loop's own work, never the pacing sleep). Per incident kind the table gives:
incidents, resolved by the desk / by the rules / unresolved, recovery ticks (p50, max), and per
mode the orders late or stranded, desk tokens, collisions, lost orders and step latency p99 (over
every tick of every seed) with the desk on against off. Seeds run one after another, each through
every mode, so that the desk-off baseline and the desk runs share the machine's minutes.
Timings come from whatever machine runs it (ours: 2 cores shared by several sessions).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.dispatch.desk import NOTHING_TO_CHOOSE
from fleetmind.eval.runner import RunConfig, execute
from fleetmind.eval.store import load_latency
from fleetmind.llm.chat import ChatClient

MODES = ("off", "rules", "llm", "rules-delayed", "hostile", "follower")
KINDS = ("breakdown", "block", "battery", "surge", "deadlock")


FIRST = 40
"""Tick of a seed's first incident (give or take the seed): robots are carrying loads by then."""


def suite(seed: int, *, quick: bool = False, spacing: int = 60) -> list[str]:
    """The fault specs of one seed's run (seven incidents; three with ``quick``).

    The incidents the desk is for: robots that break down or run low while carrying a load
    (``busy`` picks a loaded robot), aisles closed where work waits (``block:busy``: around
    the pickup a robot is heading for), a surge.
    """
    first = FIRST + 5 * (seed % 3)
    specs = [
        f"breakdown:busy@{first}+{4 * spacing}",
        f"block:busy@{first + spacing}+{2 * spacing}",
        f"battery:busy@{first + 2 * spacing}",
        f"surge@{first + 3 * spacing}:4",
        f"breakdown:busy@{first + 4 * spacing}+{2 * spacing}",
        f"block:busy@{first + 5 * spacing}+{spacing}",
        f"battery:busy@{first + 6 * spacing}",
    ]
    return specs[:3] if quick else specs


def steps_of(*, quick: bool = False, spacing: int = 60) -> int:
    """Ticks of one seed's run: the incidents and at least two spacings after the last.

    An incident counts as resolved once its orders move again; the last block opens a spacing
    after it closed, so a run that ended sooner would count incidents as unresolved that had no
    time to be (before 2026-12-02 the runs ended 70-80 ticks after the last incident: 480).
    """
    return FIRST + (3 if quick else 8) * spacing + 20


@contextlib.contextmanager
def _client(mode: str) -> Iterator[ChatClient | None]:
    if mode == "llm":
        from fleetmind.llm.embedded import EmbeddedServer

        with EmbeddedServer.beside_loop(n_threads=1) as server:
            yield server.client()
    elif mode == "hostile":
        from fleetmind.testing.desk_server import misbehaving_desk
        from fleetmind.testing.fake_server import FakeChatServer

        with FakeChatServer(misbehaving_desk(slow_s=30.0)) as srv:
            yield srv.client(timeout_s=5.0)
    elif mode == "follower":
        from fleetmind.testing.desk_server import proposal_follower
        from fleetmind.testing.fake_server import FakeChatServer

        with FakeChatServer(proposal_follower()) as srv:
            yield srv.client(timeout_s=5.0)
    else:
        yield None


def run_mode(
    mode: str,
    seeds: list[int],
    *,
    quick: bool = False,
    tick_period_s: float = 0.2,
    spacing: int = 60,
    out_dir: str | Path | None = None,
    rules_delay_ticks: int = 0,
) -> list[dict[str, Any]]:
    """Run one mode over the seeds; returns each run's metrics.

    ``rules_delay_ticks``: the ``rules-delayed`` mode's delay.

    Each run is recorded (``out_dir/MODE-sSEED``, or a folder removed afterwards) so that its
    per-tick step latencies come back with the metrics (``step_ms``).
    """
    out = []
    keep = contextlib.nullcontext(out_dir) if out_dir is not None else tempfile.TemporaryDirectory()
    with _client(mode) as client, keep as root:
        for seed in seeds:
            steps = steps_of(quick=quick, spacing=spacing)
            cfg = RunConfig(
                map="warehouse-small",
                robots=8,
                steps=steps,
                seed=seed,
                order_rate=0.15,
                faults=suite(seed, quick=quick, spacing=spacing),
                desk="llm"
                if mode in ("llm", "hostile", "follower")
                else "rules"
                if mode == "rules-delayed"
                else mode,
                desk_deadline_s=20.0,
                desk_deadline_ticks=spacing,
                desk_rules_delay_ticks=rules_delay_ticks if mode == "rules-delayed" else 0,
                tick_period_s=tick_period_s,
            )
            folder = Path(root) / f"{mode}-s{seed}"
            t0 = time.perf_counter()
            m = execute(cfg, folder, client=client, overwrite=True)
            m["wall_s"] = time.perf_counter() - t0
            table = load_latency(folder)
            m["step_ms"] = [] if table is None else table.column("step_ms").to_pylist()
            out.append(m)
    return out


def _desk_acted(inc: dict[str, Any]) -> bool:
    """The desk kept the incident and an action of its was applied."""
    return (
        inc["handler"] == "desk"
        and inc["fallback"] is None
        and any(
            a.get("source") == "desk" and not str(a.get("result", "")).startswith("refused")
            for a in inc["actions"]
        )
    )


def desk_latency_ticks(runs: list[dict[str, Any]]) -> int | None:
    """Median ticks from an incident to the desk's first applied action (None: it never acted)."""
    ticks = [
        min(a["tick"] for a in i["actions"] if a.get("source") == "desk") - i["tick"]
        for m in runs
        for i in m["incident_log"]
        if _desk_acted(i)
    ]
    return int(np.median(ticks)) if ticks else None


def _kind_rows(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        incs = [i for m in runs for i in m["incident_log"] if i["kind"] == kind]
        rec = [float(i["recovery_ticks"]) for i in incs if i["recovery_ticks"] is not None]
        rows[kind] = {
            "incidents": len(incs),
            "by_desk": sum(1 for i in incs if _desk_acted(i) and i["recovered_tick"] is not None),
            "by_rules": sum(
                1 for i in incs if i["handler"] == "rules" and i["recovered_tick"] is not None
            ),
            "unhandled": sum(
                1
                for i in incs
                if i["recovered_tick"] is not None
                and not (i["handler"] == "rules" or _desk_acted(i))
            ),
            "unresolved": sum(1 for i in incs if i["recovered_tick"] is None),
            "recovery_p50": float(np.percentile(rec, 50)) if rec else None,
            "recovery_max": max(rec) if rec else None,
            "tokens": sum(int(i["tokens"]) for i in incs),
        }
    return rows


def _reason(fallback: str) -> str:
    """A fallback's reason without its details (the kind of guard or deadline that fired)."""
    return fallback.split(" (")[0].split(":")[0]


def summarize(mode: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's figures over its runs."""
    orders = sum(int(m["orders_arrived"]) for m in runs)
    late = 0
    for m in runs:
        late += int(m["orders_stranded"])
    total = sum(int(m["incidents"]["total"]) for m in runs)
    by_desk = sum(int(m["incidents"]["resolved_by_desk"]) for m in runs)
    by_rules = sum(int(m["incidents"]["resolved_by_rules"]) for m in runs)
    unresolved = sum(int(m["incidents"]["unresolved"]) for m in runs)
    # Incidents where the desk had something to decide (with waiting the only option, the
    # desk makes no call and the rules' nothing stands).
    choices = sum(
        1
        for m in runs
        for i in m["incident_log"]
        if not (i["fallback"] or "").startswith(NOTHING_TO_CHOOSE)
    )
    # The fault suite's own incidents: those it injects; deadlock reports come up by themselves
    # (the monitor's), and most clear a tick or two after they open, before anyone decides.
    injected = [i for m in runs for i in m["incident_log"] if i["kind"] != "deadlock"]
    injected_by_desk = sum(
        1 for i in injected if _desk_acted(i) and i["recovered_tick"] is not None
    )
    decided = sum(int(m["desk_decisions"]["decided"]) for m in runs if "desk_decisions" in m)
    deviations = sum(int(m["desk_decisions"]["deviations"]) for m in runs if "desk_decisions" in m)
    outcomes = [m["llm_call_outcomes"] for m in runs if "llm_call_outcomes" in m]
    calls = sum(int(o["calls"]) for o in outcomes)
    return {
        "mode": mode,
        "runs": len(runs),
        "desk_decided": decided,
        "desk_deviations": deviations,
        "deviation_rate": deviations / decided if decided else None,
        "desk_latency_ticks": desk_latency_ticks(runs),
        "rules_delay_ticks": max((int(m.get("rules_delay_ticks", 0)) for m in runs), default=0),
        "llm_calls": calls,
        "llm_answered_rate": (sum(int(o["answered"]) for o in outcomes) / calls if calls else None),
        "resolved_after_desk_wait": sum(
            int(m["incidents"].get("resolved_after_desk_wait", 0)) for m in runs
        ),
        "suite_incidents": len(injected),
        "suite_resolved_by_desk": injected_by_desk,
        "desk_rate_suite": injected_by_desk / len(injected) if injected else 0.0,
        "incidents": total,
        "resolved_by_desk": by_desk,
        "resolved_by_rules": by_rules,
        "unresolved": unresolved,
        "desk_rate": by_desk / total if total else 0.0,
        "with_choice": choices,
        "desk_rate_of_choices": by_desk / choices if choices else 0.0,
        "handled_rate": (by_desk + by_rules) / total if total else 0.0,
        "fallbacks": sum(int(m["incidents"]["fallbacks"]) for m in runs),
        "fallback_reasons": dict(
            Counter(
                _reason(i["fallback"])
                for m in runs
                for i in m["incident_log"]
                if i["fallback"] is not None
            ).most_common()
        ),
        "orders": orders,
        "delivered": sum(int(m["tasks_completed"]) for m in runs),
        "stranded_rate": late / orders if orders else 0.0,
        "on_time_rate": float(np.mean([m["on_time_rate"] for m in runs])),
        "collisions": sum(int(m["collisions"]) for m in runs),
        "orders_lost": sum(int(m["orders_lost"]) for m in runs),
        "desk_calls": sum(int(m["desk_calls"]) for m in runs),
        "desk_tokens": sum(int(m["desk_tokens"]) for m in runs),
        # Over every tick of every seed: a run's own p99 is its 5th-slowest tick, too few to
        # tell a 10% difference from the machine's noise.
        "step_p99_ms": float(np.percentile([x for m in runs for x in m["step_ms"]] or [0.0], 99)),
        "wall_s": sum(float(m["wall_s"]) for m in runs),
        "kinds": _kind_rows(runs),
    }


def run(
    *,
    quick: bool = False,
    seeds: list[int] | None = None,
    modes: tuple[str, ...] = MODES,
    tick_period_s: float = 0.2,
    spacing: int | None = None,
    out_dir: str | Path | None = None,
) -> dict[str, Any]:
    """The benchmark: every mode over the seeds; the figures against the targets.

    Args:
        quick: one seed, three incidents.
        seeds: the seeds (default 0, 1, 2; 0 with ``quick``).
        modes: which of :data:`MODES` to run.
        tick_period_s: seconds per tick of the embedded model's runs.
        spacing: ticks between incidents, also the desk's deadline in ticks (default 60; 30
            with ``quick``).
        out_dir: keep every run's folder there (``MODE-sSEED``: calls, events, latencies).
    """
    seeds = seeds if seeds is not None else ([0] if quick else [0, 1, 2])
    spacing = spacing if spacing is not None else (30 if quick else 60)
    # Only the embedded model's runs need real time (its seconds become ticks); the scripted
    # model answers at once or hangs, so a faster clock tells the same; off and rules never wait.
    # The step-latency baseline (off) ticks like the embedded model's runs, so that the ratio
    # compares like with like (a loop flat out and a paced one load the machine differently).
    periods = {"llm": tick_period_s, "hostile": tick_period_s / 4, "off": tick_period_s}
    periods["rules"] = 0.0
    periods["rules-delayed"] = 0.0  # its delay is in ticks
    periods["follower"] = tick_period_s / 4
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    # Seed by seed, every mode in turn: the desk-off baseline and the desk runs see the machine
    # in the same minutes (its load moves the step latency more than the desk does).
    for seed in seeds:
        delay = 0
        for mode in modes:
            if mode == "rules-delayed":
                # As late as the desk of this seed (the embedded model's, else the scripted
                # follower's; all its seeds so far if it never acted on this one).
                desk_runs = runs.get("llm") or runs.get("follower") or []
                measured = desk_latency_ticks(desk_runs[-1:]) or desk_latency_ticks(desk_runs)
                delay = measured if measured is not None else spacing
            got = run_mode(
                mode,
                [seed],
                quick=quick,
                tick_period_s=periods[mode],
                spacing=spacing,
                out_dir=out_dir,
                rules_delay_ticks=delay,
            )
            for m in got:
                m["rules_delay_ticks"] = delay if mode == "rules-delayed" else 0
            runs[mode] += got
    results = {mode: summarize(mode, runs[mode]) for mode in modes}
    off = results.get("off")
    for mode in ("llm", "hostile", "follower", "rules"):
        r = results.get(mode)
        if r is not None and off is not None and off["step_p99_ms"] > 0:
            r["step_p99_vs_off"] = r["step_p99_ms"] / off["step_p99_ms"]
    return {
        "seeds": seeds,
        "spacing": spacing,
        "tick_period_s": tick_period_s,
        "modes": results,
        "targets": {
            "llm desk_rate >= 0.9 (the suite's injected incidents)": results.get("llm", {}).get(
                "desk_rate_suite"
            ),
            "llm desk_rate (deadlock reports too)": results.get("llm", {}).get("desk_rate"),
            "llm desk_rate over incidents with a choice": results.get("llm", {}).get(
                "desk_rate_of_choices"
            ),
            "follower desk_rate (scripted, behaves)": results.get("follower", {}).get("desk_rate"),
            "hostile handled_rate == 1.0": results.get("hostile", {}).get("handled_rate"),
            "collisions == 0": sum(r["collisions"] for r in results.values()),
            "orders_lost == 0": sum(r["orders_lost"] for r in results.values()),
            "llm step p99 vs off <= 1.1": results.get("llm", {}).get("step_p99_vs_off"),
            "llm model calls answered >= 0.8": results.get("llm", {}).get("llm_answered_rate"),
            "llm deviation rate (chose other than the rules' option)": results.get("llm", {}).get(
                "deviation_rate"
            ),
        },
    }


def format_table(result: dict[str, Any]) -> str:
    """The per-mode and per-kind tables as text."""
    lines = [
        f"seeds {', '.join(map(str, result['seeds']))}, tick period {result['tick_period_s']} s, "
        f"incidents every {result['spacing']} ticks (the desk's deadline)",
        "mode     incidents desk rules unresolved fallbacks delivered/orders stranded "
        "collisions lost tokens step_p99_ms vs_off with_choice desk_of_choices",
    ]
    for mode, r in result["modes"].items():
        ratio = r.get("step_p99_vs_off")
        lines.append(
            f"{mode:8} {r['incidents']:9} {r['resolved_by_desk']:4} {r['resolved_by_rules']:5} "
            f"{r['unresolved']:10} {r['fallbacks']:9} {r['delivered']:>7}/{r['orders']:<8} "
            f"{r['stranded_rate']:8.1%} {r['collisions']:10} {r['orders_lost']:4} "
            f"{r['desk_tokens']:6} {r['step_p99_ms']:11.2f} "
            + (f"{ratio:.2f}x" if ratio is not None else "-")
            + f" {r['with_choice']:11} {r['desk_rate_of_choices']:.0%}"
        )
    lines.append("")
    llm = result["modes"].get("llm")
    if llm is not None:
        rate = llm["deviation_rate"]
        lines.append(
            f"llm desk: {llm['desk_decided']} decisions, {llm['desk_deviations']} other than the "
            f"rules' option (deviation rate {'-' if rate is None else f'{rate:.0%}'}); "
            f"{llm['resolved_after_desk_wait']} cleared after the desk chose to wait; median "
            f"{llm['desk_latency_ticks']} ticks to its first action; model calls answered "
            + ("-" if llm["llm_answered_rate"] is None else f"{llm['llm_answered_rate']:.0%}")
            + f" of {llm['llm_calls']}"
        )
    delayed = result["modes"].get("rules-delayed")
    if delayed is not None:
        lines.append(f"rules-delayed: the rules acted {delayed['rules_delay_ticks']} ticks late")
    lines.append("")
    for mode, r in result["modes"].items():
        if r["fallback_reasons"]:
            why = ", ".join(f"{k} {v}" for k, v in r["fallback_reasons"].items())
            lines.append(f"{mode:8} fallbacks: {why}")
    lines.append("")
    for mode, r in result["modes"].items():
        lines.append(
            f"{mode:8} the suite's injected incidents (no deadlock reports): "
            f"{r['suite_resolved_by_desk']} of {r['suite_incidents']} by the desk"
        )
    lines.append("")
    lines.append("per kind: incidents desk/rules/unhandled/unresolved, recovery ticks p50/max")
    for mode, r in result["modes"].items():
        for kind, k in r["kinds"].items():
            if not k["incidents"]:
                continue
            p50 = "-" if k["recovery_p50"] is None else f"{k['recovery_p50']:.0f}"
            mx = "-" if k["recovery_max"] is None else f"{k['recovery_max']:.0f}"
            lines.append(
                f"{mode:8} {kind:9} {k['incidents']:3}  {k['by_desk']}/{k['by_rules']}/"
                f"{k['unhandled']}/{k['unresolved']}  recovery {p50}/{mx}  tokens {k['tokens']}"
            )
    lines.append("")
    for name, value in result["targets"].items():
        lines.append(f"target {name}: {value}")
    return "\n".join(lines)
