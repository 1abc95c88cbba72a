"""Named strategies: which planner, executor and shield setting make up each contender.

============= ============ ============= ======
strategy      planner      executor      shield
============= ============ ============= ======
classical     assignment   shortest-path on
rl            assignment   rl            on
llm           llm          llm-direct    on      (small maps: one LLM call per tick)
hybrid        llm-notes    rl            on      (note reader: rules; the solver assigns)
hybrid-llm    llm-notes    rl            on      (note reader: rules+llm, the LLM only adding to
                                                  the rules' reading)
hybrid-direct llm          rl            on      (the LLM writes the task queue itself)
oracle        oracle       shortest-path on      (evaluation only: knows what notes mean)
greedy        greedy       shortest-path on
guidance      assignment   guidance      on      (the strongest simple executor at density)
learned       assignment   learned-      on      (the guidance graph learned by evolution
                           guidance              strategies: docs/executors.md)
============= ============ ============= ======

``hybrid`` uses the best note reader on the hand-written labelled sets (``fleetmind notes eval``):
the ``rules`` reader. ``hybrid-llm`` adds to it only what the model answers above a margin
calibrated for that model on development sets (``fleetmind notes calibrate``): neither the
embedded 135M model nor a 0.5B Qwen reaches the 97% precision asked, so with either it reads as
``hybrid`` does; the model reading every note alone (reader ``llm``) gets about a third right.
docs/notes.md has the figures. ``hybrid-llm`` is there for a model that reads better.

Append ``:noshield`` to run any strategy without the shield (``classical:noshield``), which
shows the conflicts the shield removes, and ``:desk-rules`` or ``:desk-llm`` to give it the
incident desk (``classical:desk-llm``; docs/desk.md); suffixes combine
(``classical:noshield:desk-rules``).
"""

from __future__ import annotations

from typing import Any

from fleetmind.errors import ConfigError

STRATEGIES: dict[str, dict[str, Any]] = {
    "classical": {"planner": "assignment", "executor": "shortest-path"},
    "rl": {"planner": "assignment", "executor": "rl"},
    "llm": {"planner": "llm", "executor": "llm-direct"},
    "hybrid": {"planner": "llm-notes", "executor": "rl", "note_reader": "rules"},
    "hybrid-llm": {"planner": "llm-notes", "executor": "rl", "note_reader": "rules+llm"},
    "hybrid-direct": {"planner": "llm", "executor": "rl"},
    "oracle": {"planner": "oracle", "executor": "shortest-path"},
    "greedy": {"planner": "greedy", "executor": "shortest-path"},
    "guidance": {"planner": "assignment", "executor": "guidance"},
    "learned": {"planner": "assignment", "executor": "learned-guidance"},
}


def strategy(name: str) -> dict[str, Any]:
    """The RunConfig fields of a strategy name (suffixes ``:noshield``, ``:desk-rules``/``-llm``).

    Raises:
        ConfigError: for an unknown name, listing the known ones.
    """
    base, *suffixes = name.strip().split(":")
    known = ("noshield", "desk-off", "desk-rules", "desk-llm")
    if base not in STRATEGIES or any(s not in known for s in suffixes):
        raise ConfigError(
            f"strategy {name!r}: expected one of {', '.join(STRATEGIES)} "
            "(optionally with ':noshield', ':desk-rules' or ':desk-llm')"
        )
    out = {**STRATEGIES[base], "shield": "noshield" not in suffixes}
    for s in suffixes:
        if s.startswith("desk-"):
            out["desk"] = s.removeprefix("desk-")
    return out
