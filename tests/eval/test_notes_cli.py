"""`fleetmind notes read` and `notes eval` as a user runs them, the real embedded model included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FLEETMIND = [sys.executable, "-m", "fleetmind.cli"]
DEV = Path(__file__).resolve().parents[1] / "data" / "notes" / "dev.jsonl"
FLEET = [f"robot_{i}" for i in range(6)]


def _inputs(tmp_path: Path, notes: list[tuple[str, int]]) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(
            json.dumps({"note": n, "arrival_tick": t, "robots": FLEET, "extra": 1}) + "\n"
            for n, t in notes
        ),
        encoding="utf-8",
    )
    return path


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEETMIND, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_notes_read_writes_one_line_per_note_in_order(tmp_path: Path) -> None:
    src = _inputs(
        tmp_path,
        [("standard restock", 0), ("只能由3号机器人搬", 5), ("within 30 ticks", 100)],
    )
    out = tmp_path / "out.jsonl"
    proc = _run("notes", "read", str(src), "--reader", "rules", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [set(x) for x in lines] == [{"constraints", "status", "latency_ms"}] * 3
    assert lines[0]["constraints"] == []
    assert lines[1]["constraints"] == [{"kind": "only_robot", "robot": "robot_3", "tick": None}]
    assert lines[2]["constraints"] == [{"kind": "deadline", "robot": None, "tick": 130}]
    assert all(x["status"] == "ok" for x in lines)


def test_notes_eval_puts_readers_side_by_side() -> None:
    proc = _run("notes", "eval", str(DEV), "--reader", "template", "--reader", "rules", "--json")
    assert proc.returncode == 0, proc.stderr
    readers = {r["reader"]: r for r in json.loads(proc.stdout)["readers"]}
    assert readers["rules"]["exact_accuracy"] > readers["template"]["exact_accuracy"] + 0.4
    for key in ("per_kind", "per_lang", "false_constraint_rate", "review_rate", "latency_ms"):
        assert key in readers["rules"]
    assert set(readers["rules"]["per_lang"]) == {"en", "zh"}
    table = _run("notes", "eval", str(DEV), "--reader", "rules")
    assert "exact accuracy (zh)" in table.stdout


def test_notes_eval_says_whether_a_set_is_development_or_held_out(tmp_path: Path) -> None:
    proc = _run("notes", "eval", str(DEV.parent / "holdout3.jsonl"), "--reader", "rules")
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "holdout3.jsonl: development" in first
    assert "first contact (rules): exact 76.3%" in first
    # A set the manifest does not list is held out; a file with no manifest has no role.
    lines = DEV.read_text(encoding="utf-8").splitlines()[:5]
    (tmp_path / "new.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "sets.json").write_text(
        json.dumps({"sets": {"old.jsonl": {"role": "development"}}}), encoding="utf-8"
    )
    proc = _run("notes", "eval", str(tmp_path / "new.jsonl"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["set"]["role"] == "held-out"
    (tmp_path / "sets.json").write_text('{"sets": {"new.jsonl": {"role": "dev"}}}', "utf-8")
    proc = _run("notes", "eval", str(tmp_path / "new.jsonl"))
    assert proc.returncode == 2
    assert "sets.json: field 'sets.new.jsonl.role'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_manifest_keeps_the_old_sets_first_contact() -> None:
    manifest = json.loads((DEV.parent / "sets.json").read_text(encoding="utf-8"))["sets"]
    firsts = {k: v["first_contact"]["exact"] for k, v in manifest.items() if "first_contact" in v}
    for name, exact in {
        "holdout.jsonl": 0.897,
        "holdout2.jsonl": 0.856,
        "holdout3.jsonl": 0.763,
    }.items():
        assert firsts[name] == exact
        assert manifest[name]["role"] == "development"  # folded in after first contact
    # Written apart from the code, scored once: held out, with their first-contact figures.
    for name in ("holdout4.jsonl", "holdout5.jsonl"):
        assert manifest[name]["role"] == "held-out"
        assert 0.0 < firsts[name] <= 1.0
    proc = _run("notes", "eval", str(DEV.parent / "holdout5.jsonl"), "--reader", "template")
    assert proc.stdout.splitlines()[0].startswith("set holdout5.jsonl: held-out")


def test_notes_generate_writes_a_labelled_set_the_rules_read(tmp_path: Path) -> None:
    out = tmp_path / "gen.jsonl"
    proc = _run("notes", "generate", "--difficulty", "hard", "--n", "60", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    proc = _run("notes", "eval", str(out), "--reader", "template", "--reader", "rules", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["set"]["role"] == "unknown"  # no manifest beside a generated set
    readers = {r["reader"]: r for r in report["readers"]}
    assert readers["rules"]["notes"] == 60
    assert readers["rules"]["exact_accuracy"] > readers["template"]["exact_accuracy"] + 0.3
    assert _run("notes", "generate", "--difficulty", "odd", "--out", str(out)).returncode == 2


def test_bad_note_files_get_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"note": "ok", "arrival_tick": 0}\n{"note": 5}\n', encoding="utf-8")
    proc = _run("notes", "read", str(bad))
    assert proc.returncode == 2
    assert "bad.jsonl:2: field 'note'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _run("notes", "eval", str(bad))  # no labels: named, one line
    assert proc.returncode == 2
    assert "bad.jsonl:1: field" in proc.stderr
    proc = _run("notes", "read", str(tmp_path / "in.jsonl"), "--reader", "magic")
    assert proc.returncode == 2


@pytest.mark.llm
def test_notes_read_with_the_embedded_model(tmp_path: Path) -> None:
    from fleetmind.llm.embedded import find_model_path

    try:
        find_model_path()
    except Exception:
        pytest.skip("embedded model not installed")
    src = _inputs(tmp_path, [("standard restock", 0), ("robot_2 only, before tick 300", 10)])
    proc = _run("notes", "read", str(src), "--reader", "llm", timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == 2
    assert lines[0] == {"constraints": [], "status": "ok", "latency_ms": lines[0]["latency_ms"]}
    # The 135M model may misjudge, but every constraint it keeps is grounded in the note.
    for c in lines[1]["constraints"]:
        assert c["robot"] in (None, "robot_2")
        assert c["tick"] in (None, 300)
    assert lines[1]["latency_ms"] > 0
