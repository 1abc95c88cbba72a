"""``fleetmind notes ...``: read order notes into constraints and score readers."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fleetmind.cli.common import (
    JsonFlag,
    LLMApiKey,
    LLMBaseUrl,
    LLMModel,
    console,
    err_console,
    print_json,
    sub_app,
)

notes_app = sub_app("notes", "Read order notes into constraints; score readers on a labelled set.")


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


@notes_app.command("generate")
def notes_generate(
    out: Annotated[Path, typer.Option(help="Write the labelled set here (JSON lines).")],
    difficulty: Annotated[str, typer.Option(help="easy, normal or hard.")] = "normal",
    n: Annotated[int, typer.Option(min=1, help="Notes to write (a third plain).")] = 600,
    seed: Annotated[int, typer.Option(min=0, help="Root seed.")] = 1,
) -> None:
    """A labelled set written by the note generator (not a test set), for ``notes eval``."""
    from fleetmind.eval.notes import generated

    items = generated(difficulty=difficulty, n=n, seed=seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "".join(json.dumps(i.model_dump(), ensure_ascii=False) + "\n" for i in items),
        encoding="utf-8",
    )
    err_console.print(f"{len(items)} notes: {out}")


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
        (
            "questions answered/abstained/timed out",
            lambda r: (
                f"{r['questions']['answered']}/{r['questions']['abstained']}/"
                f"{r['questions']['timed_out']}"
            ),
        ),
        ("constraints the model added", lambda r: str(r["questions"]["added"])),
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
            help="Reader to score, repeatable to score side by side: template, rules, "
            "rules-review, llm or rules+llm (default: rules).",
        ),
    ] = None,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Score only the first N notes (short model runs).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Exact-match accuracy, per kind and language precision/recall, false constraints, cost."""
    from fleetmind.eval.notes import evaluate, set_role
    from fleetmind.sim.notes import load_labelled

    items = load_labelled(file)[:limit]
    role = set_role(file)
    with _reader_clients(list(reader or []), llm_base_url, llm_model, llm_api_key) as readers:
        results = [evaluate(r, items)[0] for r in readers]
    if as_json:
        print_json({"file": str(file), "set": role, "limit": limit, "readers": results})
        return
    console.print(role_line(file, role), soft_wrap=True)
    if limit is not None:
        console.print(f"first {len(items)} notes only (--limit {limit})")
    console.print(notes_table(results))


def role_line(file: Path, role: dict[str, Any]) -> str:
    """One line saying whether the set is development or held-out data, and its first contact."""
    if role["role"] == "unknown":
        return f"set {file.name}: role unknown (no sets.json beside it)"
    if role["role"] == "development":
        line = f"set {file.name}: development (rules were changed against it: a training score)"
    elif role["listed"]:
        line = f"set {file.name}: held-out (its first-contact score is the figure)"
    else:
        line = f"set {file.name}: held-out (not listed in sets.json: treated as held out)"
    first = role["first_contact"]
    if first:
        parts = [f"exact {_pct(first['exact'])}"]
        parts += [
            f"{label} {_pct(first[key])}"
            for key, label in (
                ("exact_en", "EN"),
                ("exact_zh", "ZH"),
                ("precision", "precision"),
                ("false_constraint_rate", "false constraints"),
            )
            if first.get(key) is not None
        ]
        line += f"; first contact (rules): {', '.join(parts)}"
    return line


@notes_app.command("calibrate")
def notes_calibrate(
    files: Annotated[
        list[Path], typer.Argument(help="Development sets (a held-out set is refused).")
    ],
    limit: Annotated[
        int | None, typer.Option(min=1, help="Use only the first N notes of each set.")
    ] = None,
    target: Annotated[
        float, typer.Option(min=0.5, max=1.0, help="Precision the model's additions must reach.")
    ] = 0.97,
    out: Annotated[
        Path | None, typer.Option(help="Write the whole record (one line per question) here.")
    ] = None,
    save: Annotated[
        bool, typer.Option(help="Store the margins for this model in fleetmind/data.")
    ] = False,
    llm_base_url: LLMBaseUrl = None,
    llm_model: LLMModel = None,
    llm_api_key: LLMApiKey = None,
    as_json: JsonFlag = False,
) -> None:
    """Calibrate the ``rules+llm`` reader's abstention margin on development sets."""
    from fleetmind.dispatch.notes.additive import AdditiveReader, Calibration
    from fleetmind.eval.notes import calibrate, save_margins, set_role
    from fleetmind.sim.notes import load_labelled

    for f in files:
        role = set_role(f)["role"]
        if role != "development":
            err_console.print(f"{f}: a {role} set; calibrate only on development sets")
            raise typer.Exit(2)
    sets = {f.name: load_labelled(f)[:limit] for f in files}
    with _reader_clients(["rules+llm"], llm_base_url, llm_model, llm_api_key) as (cached,):
        reader = AdditiveReader(cached.inner.client, calibration=Calibration())
        record = calibrate(reader, sets, target=target)
    gguf = os.environ.get("FLEETMIND_LLM_GGUF")
    record["command"] = " ".join(
        [
            *([f"FLEETMIND_LLM_GGUF={gguf}"] if gguf and not llm_base_url else []),
            "fleetmind notes calibrate",
            *(str(f) for f in files),
            *([f"--limit {limit}"] if limit else []),
            *(["--save"] if save else []),
        ]
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if save:
        err_console.print(f"margins of {record['model']!r}: {save_margins(record)}")
    summary = {k: v for k, v in record.items() if k != "records"}
    if as_json:
        print_json(summary)
        return
    q = summary["questions"]
    console.print(
        f"model {summary['model']}: {q['asked']} questions, {q['answered']} answered, "
        f"{q['timed_out']} timed out; {q['proposals']} constraints proposed "
        f"({q['proposals_correct']} correct); add margin {summary['add_margin']} "
        f"({q['accepted_correct']}/{q['accepted']} accepted correct); review margin "
        f"{summary['review_margin']} ({q['review_caught']} rules errors caught); "
        f"latency p50 {summary['latency_s']['p50']}, deadline {summary['latency_s']['deadline']}",
        soft_wrap=True,
    )
