"""One self-contained HTML report of a run, a comparison, or the demo (opens offline, no CDN).

Sections (``<h2 id=...>``): ``summary`` (the recommendation in plain words, derived from the
measured numbers), ``comparison`` (the KPI table; with confidence intervals for a comparison
folder), ``throughput`` (over time, fault windows shaded), ``rewards`` (per-agent cumulative
reward curves), ``latency`` (histograms per tier), ``shield`` (interventions over time),
``signals`` (recovery cost per fault, LLM cost per decision type), ``incidents`` (each
incident, who handled it, its recovery and the desk's conversation, docs/desk.md), ``doctor``
(non-stationarity, free riding, reward scale from :func:`fleetmind.rl.diagnostics.diagnose`;
LLM drift: fallback rate and latency of planner calls, first half against second half). Plots
are matplotlib PNGs inlined as base64 ``data:`` URIs.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from fleetmind.errors import ConfigError
from fleetmind.eval.compare import ROWS, format_cell, mean_interval, run_values
from fleetmind.eval.signals import deliveries_per_tick, signals, throughput_curve
from fleetmind.eval.store import (
    load_calls,
    load_episode,
    load_events,
    load_latency,
    load_metrics,
    other_folder,
)

log = logging.getLogger(__name__)

SECTIONS = (
    "summary",
    "comparison",
    "throughput",
    "rewards",
    "latency",
    "shield",
    "signals",
    "incidents",
    "doctor",
)
WINDOW = 50


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return (
        f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'
    )


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _esc(x: Any) -> str:
    return html.escape(str(x))


class _Run:
    """What the report needs of one run folder, loaded once."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self.metrics = load_metrics(path)
        self.events = load_events(path)
        self.calls = load_calls(path)
        self.episode = load_episode(path)
        self.latency = load_latency(path)
        self.signals = signals(path, window=WINDOW)
        self.steps = int(
            self.metrics.get("steps") or int(self.episode.column("tick").to_numpy().max()) + 1
        )
        self.faults: list[dict[str, Any]] = self.metrics.get("faults") or []


def _fig_throughput(runs: list[_Run]) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for run in runs:
        curve = throughput_curve(deliveries_per_tick(run.events, run.steps), WINDOW)
        ax.plot(curve, label=run.name)
    shaded = set()
    for run in runs:
        for f in run.faults:
            key = (f["start"], f["end"])
            if key in shaded:
                continue
            shaded.add(key)
            ax.axvspan(f["start"], max(f["end"], f["start"] + 1), color="red", alpha=0.15)
            ax.text(f["start"], ax.get_ylim()[1] * 0.95, str(f.get("spec", "")), fontsize=7)
    ax.set_xlabel("tick")
    ax.set_ylabel(f"tasks/tick ({WINDOW}-tick window)")
    ax.legend(fontsize=8)
    return _png(fig)


def _fig_rewards(run: _Run) -> str:
    plt = _plt()
    t = run.episode
    robot = t.column("robot").to_numpy()
    tick = t.column("tick").to_numpy()
    reward = t.column("reward").to_numpy().astype(np.float64)
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for r in np.unique(robot):
        m = robot == r
        ax.plot(tick[m], np.cumsum(reward[m]), label=f"robot_{int(r)}", linewidth=1)
    ax.set_title(f"{run.name}: cumulative reward per robot")
    ax.set_xlabel("tick")
    ax.legend(fontsize=6, ncol=4)
    return _png(fig)


def _fig_latency(run: _Run) -> str:
    plt = _plt()
    tiers: dict[str, np.ndarray[Any, Any]] = {}
    if run.latency is not None and run.latency.num_rows:
        for col in ("executor_ms", "shield_ms", "sim_ms", "step_ms"):
            tiers[col.removesuffix("_ms")] = run.latency.column(col).to_numpy()
    planner = [float(e["latency_ms"]) for e in run.events if e["kind"] == "plan"]
    if planner:
        tiers["planner"] = np.asarray(planner)
    if not tiers:
        return "<p>No latency samples recorded.</p>"
    fig, axes = plt.subplots(1, len(tiers), figsize=(2.4 * len(tiers), 2.6))
    for ax, (name, values) in zip(np.atleast_1d(axes), tiers.items(), strict=True):
        ax.hist(values, bins=30, color="steelblue")
        ax.set_title(f"{name} (p99 {np.percentile(values, 99):.2f} ms)", fontsize=8)
        ax.set_xlabel("ms", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(run.name, fontsize=9)
    return _png(fig)


def _fig_shield(runs: list[_Run]) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 2.8))
    for run in runs:
        t = run.episode
        tick = t.column("tick").to_numpy()
        over = t.column("shield_override").to_numpy(zero_copy_only=False).astype(np.float64)
        per_tick = np.bincount(tick, weights=over, minlength=run.steps)
        ax.plot(np.cumsum(per_tick), label=run.name)
    ax.set_xlabel("tick")
    ax.set_ylabel("shield interventions (cumulative)")
    ax.legend(fontsize=8)
    return _png(fig)


def _reward_curves(run: _Run, window: int = 25) -> dict[str, np.ndarray[Any, Any]]:
    from fleetmind.eval.offpolicy import reward_curves

    return reward_curves(run.episode, window)


def doctor(run: _Run) -> list[str]:
    """Plain-language findings for one run: the RL doctor and LLM drift."""
    from fleetmind.rl.diagnostics import diagnose

    out: list[str] = []
    try:
        findings = diagnose(_reward_curves(run))
        out += [f"{f.kind} ({', '.join(f.agents)}): {f.message}" for f in findings]
        if not findings:
            out.append(
                "reward curves: no non-stationarity, free riding or reward-scale problem found"
            )
    except ConfigError as exc:
        out.append(f"reward curves: not diagnosed ({exc})")
    plans = [e for e in run.events if e["kind"] == "plan" and int(e.get("calls", 0)) > 0]
    if len(plans) >= 4:
        half = len(plans) // 2
        a, b = plans[:half], plans[half:]
        fa = np.mean([bool(e.get("fallback")) for e in a])
        fb = np.mean([bool(e.get("fallback")) for e in b])
        la = np.median([float(e["latency_ms"]) for e in a])
        lb = np.median([float(e["latency_ms"]) for e in b])
        drift = abs(fb - fa) >= 0.2 or (la > 0 and lb / la >= 2)
        out.append(
            f"LLM drift: fallback rate {fa:.0%} then {fb:.0%}, median planner latency "
            f"{la:.0f} ms then {lb:.0f} ms (first half vs second half of {len(plans)} LLM plans)"
            + (": drifting, check the model and prompts" if drift else ": stable")
        )
    else:
        out.append("LLM drift: fewer than 4 LLM-planned decisions, nothing to compare")
    return out


def run_findings(run_dir: Path) -> list[str]:
    """:func:`doctor`'s findings for the recorded run in ``run_dir`` (``fleetmind doctor``)."""
    return doctor(_Run(run_dir.name, run_dir))


def recommend(runs: list[_Run], *, winner: bool = True) -> list[str]:
    """A short recommendation derived from the measured numbers of single runs.

    Args:
        runs: the runs (one seed each).
        winner: name the run with the highest throughput; a comparison leaves it to
            :func:`recommend_comparison`, which decides over every seed.
    """
    lines: list[str] = []
    by = {r.name: r for r in runs}
    thr = {r.name: float(r.metrics.get("throughput", 0.0)) for r in runs}
    best = max(thr, key=lambda k: thr[k])
    if winner:
        lines.append(
            f"Highest throughput: {best} at {thr[best]:.4f} tasks/tick"
            + (
                " (one seed each: no interval; `fleetmind compare --seeds 3` for one)."
                if len(runs) > 1
                else "."
            )
        )
        values = {r.name: run_values(r.metrics, None) for r in runs}
        lines += _trade_offs(
            {n: {k: v[k] for k, _, _ in TRADE_OFFS} for n, v in values.items()},
            best,
            [n for n in thr if n != best],
        )
    base = next((n for n in by if n.split(":")[0] in ("classical", "rl")), None)
    for r in runs:
        tokens = int(r.metrics.get("llm_tokens_prompt", 0)) + int(
            r.metrics.get("llm_tokens_completion", 0)
        )
        done = int(r.metrics.get("tasks_completed", 0))
        if winner and tokens and base is not None and base != r.name and thr[base] > 0:
            gain = (thr[r.name] - thr[base]) / thr[base] * 100
            per_order = tokens / done if done else float("inf")
            verb = "adds" if gain >= 0 else "loses"
            lines.append(
                f"{r.name} {verb} {abs(gain):.1f}% throughput against {base} at "
                f"{per_order:.0f} tokens per delivered order"
                + (
                    f"; its planner fell back to the solver "
                    f"{r.metrics.get('planner_fallbacks', 0)} times in "
                    f"{r.metrics.get('planner_calls', 0)} decisions."
                    if r.metrics.get("planner_fallbacks")
                    else "."
                )
            )
        if not r.metrics.get("shield", True) and r.metrics.get("collisions", 0):
            lines.append(
                f"{r.name} runs without the shield and executed {r.metrics['collisions']} "
                "collisions: keep the shield on."
            )
        for rec in r.signals["recovery"]:
            lines.append(f"{r.name}: {rec['text']}.")
        p99 = float((r.metrics.get("step_latency_ms") or {}).get("p99", 0.0))
        if p99 > 200:
            lines.append(
                f"{r.name}: step latency p99 is {p99:.0f} ms: inference cost may eat the gain."
            )
    return lines


# What a user weighs against throughput, in the order they read it: (key, label, lower is better).
TRADE_OFFS: tuple[tuple[str, str, bool], ...] = (
    ("on_time_rate", "on-time rate", False),
    ("violations_structured", "structured violations", True),
    ("violations_text_only", "text-only violations", True),
    ("collisions", "collisions executed", True),
    ("llm_tokens", "LLM tokens", True),
    ("step_latency_p99_ms", "step latency p99 (ms)", True),
)


def _per_seed(comparison: dict[str, Any], name: str, key: str) -> list[float]:
    """``key`` of every recorded seed of strategy ``name`` (from its run folders' metrics)."""
    out = []
    for folder in comparison["runs"].get(name, []):
        metrics = load_metrics(folder)
        if metrics:
            out.append(run_values(metrics, None)[key])
    return out


def _paired_interval(a: list[float], b: list[float]) -> tuple[float, float, float] | None:
    """Mean of ``a - b`` over paired seeds with its 95% t-interval; None below two pairs."""
    if len(a) != len(b) or len(a) < 2:
        return None
    mean, half = mean_interval([x - y for x, y in zip(a, b, strict=True)])
    return mean, mean - half, mean + half


def recommend_comparison(comparison: dict[str, Any]) -> list[str]:
    """The recommendation of a comparison, over every seed it ran.

    Throughput first: a strategy is named the winner only where the 95% interval of its
    difference from every other strategy, paired by seed (the same seed gives every strategy the
    same orders and faults), excludes zero. Then what each other strategy trades against the
    throughput leader (on-time rate, violations, collisions, tokens, latency), where it differs.
    """
    names: list[str] = list(comparison["strategies"])
    table = comparison["table"]
    seeds = ", ".join(str(s) for s in comparison["seeds"])
    thr = {n: table[n]["throughput"] for n in names}
    order = sorted(names, key=lambda n: -(thr[n]["mean"] or 0.0))
    lines = [
        f"Throughput over seeds {seeds} (mean ± 95% interval, tasks/tick): "
        + ", ".join(f"{n} {format_cell(thr[n])}" for n in order)
        + "."
    ]
    leader = order[0]
    if len(order) > 1:
        lead = _per_seed(comparison, leader, "throughput")
        ties = []
        for other in order[1:]:
            diff = _paired_interval(lead, _per_seed(comparison, other, "throughput"))
            if diff is None or diff[1] <= 0.0:
                ties.append((other, diff))
        if not ties:
            lines.append(
                f"{leader} has the highest throughput: ahead of every other strategy with the "
                "95% interval of the paired difference above zero."
            )
        else:
            why = "; ".join(
                f"{o}: one seed, no interval"
                if d is None
                else f"{o}: difference {d[0]:+.4f}, 95% interval [{d[1]:+.4f}, {d[2]:+.4f}]"
                for o, d in ties
            )
            lines.append(
                f"No throughput winner: {leader} leads, but not beyond noise ({why}). "
                "More seeds, or choose on what the strategies trade below."
            )
    means = {n: {k: table[n][k]["mean"] for k, _, _ in TRADE_OFFS} for n in names}
    return lines + _trade_offs(means, leader, order[1:])


def _trade_offs(
    values: dict[str, dict[str, float | None]], leader: str, others: list[str]
) -> list[str]:
    """What each of ``others`` trades against ``leader`` on :data:`TRADE_OFFS`, where it differs."""
    lines = []
    for other in others:
        traded = []
        for key, label, lower in TRADE_OFFS:
            a, b = values[leader].get(key), values[other].get(key)
            if a is None or b is None or not (np.isfinite(a) and np.isfinite(b)) or a == b:
                continue
            better = (b < a) == lower
            # Three figures: at two a 0.996 ratio printed "1x", a tie, beside "worse".
            ratio = f" ({b / a:.3g}x)" if a > 0 and b > 0 else ""
            traded.append(f"{label} {a:.4g} -> {b:.4g}{ratio}, {'better' if better else 'worse'}")
        if traded:
            lines.append(f"{other} against {leader}: " + "; ".join(traded) + ".")
    return lines


def _kpi_table(runs: list[_Run]) -> str:
    head = "".join(f"<th>{_esc(r.name)}</th>" for r in runs)
    values = [run_values(r.metrics, r.signals) for r in runs]
    body = ""
    for key, label in ROWS:
        cells = "".join(f"<td>{'-' if np.isnan(v[key]) else f'{v[key]:.4g}'}</td>" for v in values)
        body += f"<tr><td>{_esc(label)}</td>{cells}</tr>"
    return f"<table><tr><th>metric</th>{head}</tr>{body}</table>"


def _comparison_table(comparison: dict[str, Any]) -> str:
    names = comparison["strategies"]
    head = "".join(f"<th>{_esc(n)}</th>" for n in names)
    body = ""
    # ROWS' order (throughput first), not the JSON file's key order (alphabetical).
    for key, label in ROWS:
        if key not in comparison["rows"]:
            continue
        cells = "".join(f"<td>{_esc(format_cell(comparison['table'][n][key]))}</td>" for n in names)
        body += f"<tr><td>{_esc(label)}</td>{cells}</tr>"
    seeds = ", ".join(str(s) for s in comparison["seeds"])
    return (
        f"<p>Mean ± 95% confidence interval over seeds {seeds} ({comparison['map']}, "
        f"{comparison['robots']} robots, {comparison['steps']} ticks).</p>"
        f"<table><tr><th>metric</th>{head}</tr>{body}</table>"
    )


def _signals_html(runs: list[_Run]) -> str:
    parts = []
    for r in runs:
        rec = r.signals["recovery"]
        items = "".join(f"<li>{_esc(x['text'])}</li>" for x in rec) or "<li>no injected fault</li>"
        costs = r.signals["llm_costs"]["decision_type"]
        rows = "".join(
            f"<tr><td>{_esc(k)}</td><td>{v['calls']:.0f}</td><td>{v['tokens']:.0f}</td>"
            f"<td>{v['latency_s']:.2f}</td></tr>"
            for k, v in costs.items()
        )
        table = (
            "<table><tr><th>decision type</th><th>LLM calls</th><th>tokens</th>"
            f"<th>latency (s)</th></tr>{rows}</table>"
            if rows
            else "<p>No LLM calls.</p>"
        )
        lat = r.signals["tier_latency_ms"]
        lat_rows = "".join(
            f"<tr><td>{_esc(k)}</td><td>{v['p50']:.3f}</td><td>{v['p95']:.3f}</td>"
            f"<td>{v['p99']:.3f}</td></tr>"
            for k, v in lat.items()
        )
        parts.append(
            f"<h3>{_esc(r.name)}</h3><p>Recovery cost after each fault:</p><ul>{items}</ul>"
            f"<table><tr><th>tier</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th></tr>"
            f"{lat_rows}</table>{table}"
        )
    return "".join(parts)


CSS = """body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}
h2{border-bottom:1px solid #ddd}"""


def _incidents_html(runs: list[_Run]) -> str:
    """Each run's incidents: kind, handler, recovery, actions and the desk's messages."""
    parts = []
    for r in runs:
        log_ = r.metrics.get("incident_log") or []
        inc = r.metrics.get("incidents") or {}
        if not log_:
            parts.append(f"<p>{_esc(r.name)}: no incident.</p>")
            continue
        parts.append(
            f"<h3>{_esc(r.name)} (desk {_esc(r.metrics.get('desk', 'off'))}): "
            f"{inc.get('total', 0)} incidents, {inc.get('resolved_by_desk', 0)} resolved by the "
            f"desk, {inc.get('resolved_by_rules', 0)} by the rules, "
            f"{inc.get('unresolved', 0)} unresolved</h3>"
        )
        for i in log_:
            rec = i.get("recovery_ticks")
            head = (
                f"{_esc(i['id'])} {_esc(i['kind'])} at tick {i['tick']}: {_esc(i['summary'])}"
                f" &mdash; {_esc(i['handler'])}"
                + (f" (fallback: {_esc(i['fallback'])})" if i.get("fallback") else "")
                + (f", recovered in {rec} ticks" if rec is not None else ", unresolved")
            )
            lines = [
                f"<li><b>{_esc(m.get('role'))}</b> [{_esc(m.get('phase'))}] "
                f"{_esc(str(m.get('content', ''))[:300])}"
                + (f" &rarr; {_esc(str(m['feedback'])[:200])}" if m.get("feedback") else "")
                + "</li>"
                for m in i.get("conversation", [])
            ] + [
                f"<li>action {_esc(a['tool'])}({_esc(json.dumps(a['args']))}) by "
                f"{_esc(a['source'])}: {_esc(a['result'])}</li>"
                for a in i.get("actions", [])
            ]
            parts.append(
                f"<details class='incident'><summary>{head}</summary><ul>{''.join(lines)}</ul>"
                "</details>"
            )
    return "".join(parts)


def render(
    runs: dict[str, Path], out: Path, *, title: str, comparison: dict[str, Any] | None = None
) -> Path:
    """Write the HTML report of ``runs`` (name -> run folder) to ``out``.

    Args:
        runs: the run folders to show, by display name.
        out: the HTML file to write.
        title: the page title.
        comparison: a ``comparison.json`` to show as the table (else one column per run).

    Returns:
        ``out``.
    """
    loaded = [_Run(name, Path(p)) for name, p in runs.items()]
    if not loaded:
        raise ConfigError("report: no run folder to report on")
    sec: dict[str, str] = {}
    # A run killed (or still running) has the metrics of its last flush: say so first.
    unfinished = [
        f"{r.name}: unfinished run, metrics as of tick {r.metrics.get('ticks_recorded', '?')} "
        f"of {r.metrics.get('steps', '?')} (the last flush)"
        for r in loaded
        if r.metrics.get("partial")
    ]
    sec["summary"] = (
        "<ul>"
        + "".join(f"<li><b>{_esc(x)}</b></li>" for x in unfinished)
        + "".join(
            f"<li>{_esc(x)}</li>"
            for x in (
                recommend_comparison(comparison) + recommend(loaded, winner=False)
                if comparison
                else recommend(loaded)
            )
        )
        + "</ul>"
    )
    sec["comparison"] = _comparison_table(comparison) if comparison else _kpi_table(loaded)
    sec["throughput"] = _fig_throughput(loaded)
    sec["rewards"] = "".join(_fig_rewards(r) for r in loaded)
    sec["latency"] = "".join(_fig_latency(r) for r in loaded)
    sec["shield"] = _fig_shield(loaded)
    sec["signals"] = _signals_html(loaded)
    sec["incidents"] = _incidents_html(loaded)
    sec["doctor"] = "".join(
        f"<h3>{_esc(r.name)}</h3><ul>" + "".join(f"<li>{_esc(x)}</li>" for x in doctor(r)) + "</ul>"
        for r in loaded
    )
    titles = {
        "summary": "Recommendation",
        "comparison": "Comparison",
        "throughput": "Throughput over time (fault windows shaded)",
        "rewards": "Per-agent reward curves",
        "latency": "Step latency per tier",
        "shield": "Shield interventions over time",
        "signals": "Online signals: recovery cost, latency, LLM cost",
        "incidents": "Incidents and the desk's conversations",
        "doctor": "Doctor's findings",
    }
    body = "".join(f'<h2 id="{k}">{titles[k]}</h2>\n{sec[k]}\n' for k in SECTIONS)
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{_esc(title)}</h1>\n{body}</body></html>"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def build_report(path: str | Path, out: str | Path | None = None) -> Path:
    """The report of a run folder or a comparison folder (``comparison.json``).

    Args:
        path: a run folder, or a folder written by ``fleetmind compare``.
        out: the HTML file (default ``PATH/report.html``).

    Raises:
        ConfigError: ``path`` is neither.
    """
    p = Path(path)
    target = Path(out) if out is not None else p / "report.html"
    comp_file = p / "comparison.json"
    if comp_file.exists():
        try:
            comparison = json.loads(comp_file.read_text())
        except ValueError as exc:
            raise ConfigError(f"{comp_file}: not valid JSON ({exc})") from None
        runs = {name: Path(folders[0]) for name, folders in comparison["runs"].items() if folders}
        return render(runs, target, title=f"fleetmind comparison: {p}", comparison=comparison)
    if not (p / "episode.parquet").is_dir():
        other = other_folder(p)
        if other is not None:
            raise ConfigError(
                f"{other}; report takes what `fleetmind run` or `fleetmind compare` wrote"
            )
        raise ConfigError(
            f"{p}: neither a run folder (episode.parquet/) nor a comparison (comparison.json)"
        )
    return render({p.name or str(p): p}, target, title=f"fleetmind run: {p}")


def build_demo(out_dir: str | Path, results: dict[str, dict[str, Any]]) -> Path:
    """The demo's report comparing ``OUT/hybrid`` and ``OUT/classical``; returns its path.

    Args:
        out_dir: the demo folder holding one run folder per strategy.
        results: strategy -> metrics, as the demo ran them (their keys name the run folders).
    """
    root = Path(out_dir)
    runs = {name: root / name for name in results if (root / name / "episode.parquet").is_dir()}
    return render(runs, root / "report.html", title="fleetmind demo: hybrid vs classical")
