"""Scoring note readers on a labelled set (the engine behind ``fleetmind notes eval``).

Per reader: exact-match accuracy of the constraint set (a ``needs_review`` reading never
matches: it answered nothing), per kind precision and recall, the same per language, the
false-constraint rate on notes that state none, the review rate, latency p50/p95 and tokens.
Every rate is over all notes of the set.

A labelled set's role comes from the manifest ``sets.json`` beside it (:func:`set_role`):
``development`` (rules were written against it: a training score) or ``held-out`` (scored once,
never used to change a rule; a file the manifest does not list is held out), with the figures
of its first contact when they were recorded.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from fleetmind.dispatch.notes.additive import MARGINS
from fleetmind.dispatch.notes.additive import PROMPT_VERSION as PROMPT_VERSION_CLOSED
from fleetmind.dispatch.notes.readers import NoteReader, Reading, ground
from fleetmind.errors import TaskFileError, read_input
from fleetmind.sim.notes import KINDS, Constraint, ConstraintModel, LabelledNote
from fleetmind.sim.notewriter import NoteConfig, NoteWriter

MANIFEST = "sets.json"
SetRole = Literal["development", "held-out"]


class FirstContact(BaseModel):
    """The ``rules`` reader's figures the first time it read a set (rates in [0, 1])."""

    model_config = ConfigDict(extra="forbid")
    exact: float
    exact_en: float | None = None
    exact_zh: float | None = None
    precision: float | None = None
    false_constraint_rate: float | None = None


class SetEntry(BaseModel):
    """One labelled set in the manifest."""

    model_config = ConfigDict(extra="forbid")
    role: SetRole
    notes: int | None = None
    origin: str | None = None
    first_contact: FirstContact | None = None


class Manifest(BaseModel):
    """``sets.json``: the role of each labelled set beside it."""

    model_config = ConfigDict(extra="forbid")
    about: str = ""
    sets: dict[str, SetEntry]


def set_role(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Whether the labelled set at ``path`` is development or held-out data, from the manifest.

    Returns:
        ``{"role", "listed", "first_contact", "manifest"}``: ``role`` is ``development``,
        ``held-out`` (listed so, or not listed in a manifest that exists) or ``unknown`` (no
        manifest beside the file).

    Raises:
        TaskFileError: the manifest is not valid (naming the file and field).
    """
    file = Path(path)
    manifest = file.parent / MANIFEST
    if not manifest.is_file():
        return {"role": "unknown", "listed": False, "first_contact": None, "manifest": None}
    text = read_input(manifest, what="set manifest", error=TaskFileError)
    try:
        parsed = Manifest.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{manifest}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "<file>"
        raise TaskFileError(f"{manifest}: field {field!r}: {err['msg']}") from None
    entry = parsed.sets.get(file.name)
    if entry is None:
        return {
            "role": "held-out",
            "listed": False,
            "first_contact": None,
            "manifest": str(manifest),
        }
    first = entry.first_contact.model_dump() if entry.first_contact else None
    return {"role": entry.role, "listed": True, "first_contact": first, "manifest": str(manifest)}


def generated(
    *, difficulty: str = "normal", n: int = 600, seed: int = 1, robots: int = 8
) -> list[LabelledNote]:
    """A labelled set written by the note generator (a third plain), for ``notes eval``.

    Not a test set: the rules were improved against the generator too. Orders arrive at ticks
    drawn from ``[0, 2000)``, due 200 ticks later, 20 cells from the station; the first five
    robots are capable.

    Raises:
        ConfigError: an unknown difficulty.
    """
    ss = np.random.SeedSequence(seed)
    writer_seq, ticks_seq = ss.spawn(2)
    writer = NoteWriter(
        NoteConfig(style="realistic", difficulty=difficulty),  # type: ignore[arg-type]
        np.random.default_rng(writer_seq),
    )
    rng = np.random.default_rng(ticks_seq)
    fleet = [f"robot_{i}" for i in range(robots)]
    out = []
    for k in range(n):
        tick = int(rng.integers(0, 2000))
        truth: tuple[Constraint, ...]
        if k % 3 == 0:
            note, truth = writer.plain(tick=tick, robots=fleet), ()
        else:
            note, truth = writer.constrained(
                tick=tick, due=tick + 200, distance=20, capable=fleet[:5], robots=fleet
            )
        lang = "zh" if re.search(r"[\u3400-\u9fff]", note) else "en"
        out.append(
            LabelledNote(
                note=note,
                arrival_tick=tick,
                robots=fleet,
                lang=lang,
                constraints=[ConstraintModel(**c.as_dict()) for c in truth],
            )
        )
    return out


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def score(items: Sequence[LabelledNote], readings: Sequence[Reading]) -> dict[str, Any]:
    """The scores of ``readings`` (one per item, same order) against the labels."""
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    exact = reviews = plain = false_plain = 0
    for item, r in zip(items, readings, strict=True):
        truth = set(item.truth())
        got = set(r.constraints) if r.status == "ok" else set()
        exact += r.status == "ok" and got == truth
        reviews += r.status == "needs_review"
        if not truth:
            plain += 1
            false_plain += bool(got)
        for c in got & truth:
            tp[c.kind] += 1
        for c in got - truth:
            fp[c.kind] += 1
        for c in truth - got:
            fn[c.kind] += 1
    emitted = sum(tp.values()) + sum(fp.values())
    lat = [r.latency_ms for r in readings if not r.cached]
    return {
        "notes": len(items),
        "exact_accuracy": _rate(exact, len(items)),
        "precision": _rate(sum(tp.values()), emitted),
        "recall": _rate(sum(tp.values()), sum(tp.values()) + sum(fn.values())),
        "false_constraint_rate": _rate(false_plain, plain),
        "review_rate": _rate(reviews, len(items)),
        "per_kind": {
            k: {
                "precision": _rate(tp[k], tp[k] + fp[k]),
                "recall": _rate(tp[k], tp[k] + fn[k]),
                "support": tp[k] + fn[k],
            }
            for k in KINDS
        },
        "latency_ms": {
            "p50": float(np.percentile(lat, 50)) if lat else 0.0,
            "p95": float(np.percentile(lat, 95)) if lat else 0.0,
        },
        "calls": sum(r.calls for r in readings),
        "tokens": sum(r.tokens_prompt + r.tokens_completion for r in readings),
        "questions": {
            "asked": sum(r.questions for r in readings),
            "answered": sum(r.answered for r in readings),
            "abstained": sum(r.answered - r.added for r in readings),
            "timed_out": sum(r.timed_out for r in readings),
            "added": sum(r.added for r in readings),
        },
    }


def evaluate(
    reader: NoteReader,
    items: Sequence[LabelledNote],
    *,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[Reading]]:
    """Read every labelled note with ``reader``; scores overall and per language."""
    readings = []
    for k, item in enumerate(items):
        readings.append(reader.read(item.note, arrival_tick=item.arrival_tick, robots=item.robots))
        if progress is not None:
            progress(k + 1)
    result = score(items, readings)
    result["reader"] = reader.name
    result["per_lang"] = {}
    for lang in ("en", "zh"):
        idx = [i for i, it in enumerate(items) if it.lang == lang]
        if idx:
            sub = score([items[i] for i in idx], [readings[i] for i in idx])
            result["per_lang"][lang] = {
                k: sub[k]
                for k in ("notes", "exact_accuracy", "precision", "recall", "false_constraint_rate")
            }
    return result, readings


def choose_margin(proposals: Sequence[tuple[float, bool]], target: float) -> float | None:
    """The lowest margin at which the accepted proposals reach ``target`` precision.

    Args:
        proposals: (margin, correct) of each constraint the model proposed.
        target: the precision the accepted proposals must reach.

    Returns:
        The margin (accept at or above it), or None when no margin reaches the target.
    """
    ranked = sorted(proposals, key=lambda p: -p[0])
    chosen = None
    tp = 0
    for i, (margin, correct) in enumerate(ranked):
        tp += correct
        if i + 1 < len(ranked) and ranked[i + 1][0] == margin:
            continue  # a threshold cannot split equal margins
        if tp / (i + 1) >= target:
            chosen = margin
    return chosen


def _on_mention(c: Constraint, k: Constraint) -> bool:
    """Whether truth ``c`` speaks of the same robot or tick as proposal ``k``."""
    return (k.robot is not None and c.robot == k.robot) or (k.tick is not None and c.tick == k.tick)


def calibrate(
    reader: Any,
    sets: Mapping[str, Sequence[LabelledNote]],
    *,
    target: float = 0.97,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Ask the ``rules+llm`` reader's closed questions on development sets; choose its margins.

    Every mention the rules leave unconstrained is asked about (whatever the margin), and each
    proposal is marked correct when the labels hold it. ``add_margin`` is the lowest margin at
    which the proposals at or above it reach ``target`` precision (None: none does; the model
    then never adds). ``review_margin``: a confident disagreement below ``add_margin`` sends
    the note to review only where that measured to help: at or above it, no note the rules read
    exactly would be sent to review and at least one the rules read wrongly would (None: never).

    Args:
        reader: an :class:`~fleetmind.dispatch.notes.additive.AdditiveReader` (not cached).
        sets: development sets by name (never a held-out set: the caller checks the roles).
        target: the precision the accepted additions must reach on these sets.
        progress: called with the number of notes done.

    Returns:
        The calibration record: margins, counts, latency, one line per question.
    """
    records: list[dict[str, Any]] = []
    done = 0
    for name, items in sets.items():
        for idx, item in enumerate(items):
            base = reader.rules.read(item.note, arrival_tick=item.arrival_tick, robots=item.robots)
            truth = set(item.truth())
            rules_exact = base.status == "ok" and set(base.constraints) == truth
            missed = truth - set(base.constraints)
            for q in reader.questions(
                item.note, arrival_tick=item.arrival_tick, robots=item.robots, reading=base
            ):
                v = reader.ask(item.note, q)
                k = reader.proposal(q, v, item.arrival_tick)
                grounded = (
                    k is not None and ground(k, item.note, item.arrival_tick, item.robots) is None
                )
                records.append(
                    {
                        "set": name,
                        "index": idx,
                        "about": getattr(q.mention, "robot", None) or str(q.mention.value),
                        "prior_certain": q.prior.certain,
                        "best": v.best,
                        "margin": None if v.best is None else round(v.margin, 4),
                        "scores": {a: round(s, 4) for a, s in v.scores.items()},
                        "proposal": k.as_dict() if grounded and k is not None else None,
                        "correct": bool(grounded and k in truth),
                        "rules_missed": k is not None and any(_on_mention(c, k) for c in missed),
                        "rules_exact": rules_exact,
                        "latency_s": round(v.latency_s, 3),
                        "error": v.error,
                    }
                )
            done += 1
            if progress is not None:
                progress(done)
    proposals = [r for r in records if r["proposal"] is not None]
    add = choose_margin([(r["margin"], r["correct"]) for r in proposals], target)
    accepted = [r for r in proposals if add is not None and r["margin"] >= add]
    below = sorted(
        (r for r in proposals if add is None or r["margin"] < add), key=lambda r: -r["margin"]
    )
    review_margin = None
    caught = 0
    for r in below:
        if r["rules_exact"]:
            break  # reviewing at or below this margin would lose a note the rules read
        caught += not r["rules_exact"]
        review_margin = r["margin"]
    answered = [r for r in records if r["error"] is None]
    lat = [r["latency_s"] for r in answered]
    return {
        "model": reader.client.model,
        "prompt_version": PROMPT_VERSION_CLOSED,
        "target_precision": target,
        "sets": {name: len(items) for name, items in sets.items()},
        "add_margin": add,
        "review_margin": review_margin,
        "questions": {
            "asked": len(records),
            "answered": len(answered),
            "timed_out": len(records) - len(answered),
            "proposals": len(proposals),
            "proposals_correct": sum(r["correct"] for r in proposals),
            "accepted": len(accepted),
            "accepted_correct": sum(r["correct"] for r in accepted),
            "review_caught": caught,
        },
        "latency_s": {
            "warmup": reader.warmup_s,
            "question": reader.question_s,
            "deadline": reader.deadline_s,
            "p50": float(np.percentile(lat, 50)) if lat else None,
            "p95": float(np.percentile(lat, 95)) if lat else None,
        },
        "records": records,
    }


def save_margins(record: dict[str, Any]) -> Path:
    """Store a calibration's margins for its model in ``fleetmind/data`` (other models kept).

    Returns:
        The data file written.
    """
    import importlib.resources

    path = Path(str(importlib.resources.files("fleetmind") / "data" / MARGINS))
    data: dict[str, Any] = {"about": MARGINS_ABOUT, "models": {}}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
    data["models"][record["model"]] = {
        k: record[k]
        for k in ("add_margin", "review_margin", "target_precision", "prompt_version", "sets")
        if k in record
    } | {"questions": record["questions"], "command": record.get("command")}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


MARGINS_ABOUT = (
    "Abstention margins of the rules+llm note reader per model (the name the server answers "
    "to), calibrated on development sets only by the command recorded with each entry. "
    "add_margin: the model's proposed constraint is added when its best answer's log-probability "
    "beats the second's by at least this (null: never). review_margin: a proposal at or above it "
    "but below add_margin sends the note to review (null: never)."
)
