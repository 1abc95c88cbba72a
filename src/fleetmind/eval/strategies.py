"""Named strategies: which planner, executor and shield setting make up each contender.

============= ============ ============= ======
strategy      planner      executor      shield
============= ============ ============= ======
classical     assignment   shortest-path on
rl            assignment   rl            on
llm           llm          llm-direct    on      (small maps: one LLM call per tick)
hybrid        llm-notes    rl            on      (the LLM reads notes, the solver assigns)
hybrid-direct llm          rl            on      (the LLM writes the task queue itself)
oracle        oracle       shortest-path on      (evaluation only: knows what notes mean)
greedy        greedy       shortest-path on
============= ============ ============= ======

``hybrid`` uses the note-reading LLM planner because it measured better than the LLM writing the
task queue directly (``fleetmind bench dispatch``: it closed 77% of the assignment-to-oracle gap
in text-only violations against 20%, with no fallbacks and a third of the tokens, on the embedded
135M model).

Append ``:noshield`` to run any strategy without the shield (``classical:noshield``), which
shows the conflicts the shield removes.
"""

from __future__ import annotations

from typing import Any

from fleetmind.errors import ConfigError

STRATEGIES: dict[str, dict[str, Any]] = {
    "classical": {"planner": "assignment", "executor": "shortest-path"},
    "rl": {"planner": "assignment", "executor": "rl"},
    "llm": {"planner": "llm", "executor": "llm-direct"},
    "hybrid": {"planner": "llm-notes", "executor": "rl"},
    "hybrid-direct": {"planner": "llm", "executor": "rl"},
    "oracle": {"planner": "oracle", "executor": "shortest-path"},
    "greedy": {"planner": "greedy", "executor": "shortest-path"},
}


def strategy(name: str) -> dict[str, Any]:
    """The RunConfig fields of a strategy name (with an optional ``:noshield`` suffix).

    Raises:
        ConfigError: for an unknown name, listing the known ones.
    """
    base, _, suffix = name.strip().partition(":")
    if base not in STRATEGIES or suffix not in ("", "noshield"):
        raise ConfigError(
            f"strategy {name!r}: expected one of {', '.join(STRATEGIES)} "
            "(optionally with ':noshield')"
        )
    return {**STRATEGIES[base], "shield": suffix != "noshield"}
