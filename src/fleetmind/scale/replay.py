"""Offline replay as independent work items, so ``fleetmind replay --backend ray`` can spread it.

A replay has two independent parts, the decision replay (re-ask a planner at every recorded
decision, counterfactual gain) and the batch RL replay; :func:`replay_parts` runs them as two
items of :func:`fleetmind.scale.backend.map_runs`, locally or as Ray tasks. The run folder must be
readable where the task runs (a shared file system on a cluster).
"""

from __future__ import annotations

from typing import Any

from fleetmind.scale.backend import map_runs


def replay_part(item: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """Run one part: ``("decisions" | "rl", run_dir, options)``."""
    from fleetmind.eval.decisions import decision_replay
    from fleetmind.eval.offpolicy import rl_replay

    kind, run_dir, options = item
    if kind == "rl":
        result: dict[str, Any] = rl_replay(run_dir)
        return result
    client = None
    if options.get("llm_base_url"):
        from fleetmind.llm.client import OpenAICompatClient
        from fleetmind.llm.settings import LLMSettings

        client = OpenAICompatClient.from_settings(
            LLMSettings.from_env(
                base_url=options["llm_base_url"], model=options.get("llm_model"), api_key=None
            )
        )
    decisions: dict[str, Any] = decision_replay(
        run_dir,
        planner=options.get("planner"),
        horizon=int(options.get("horizon", 50)),
        continuation=str(options.get("continuation", "assignment")),
        client=client,
        limit=options.get("limit"),
    )
    return decisions


def replay_parts(
    run_dir: str,
    options: dict[str, Any],
    *,
    rl: bool,
    backend: str,
    address: str | None = None,
    max_retries: int = 3,
) -> dict[str, Any]:
    """The decision replay and (optionally) the RL replay, each an item on ``backend``."""
    items: list[tuple[str, str, dict[str, Any]]] = [("decisions", run_dir, options)]
    if rl:
        items.append(("rl", run_dir, {}))
    results = map_runs(
        replay_part, items, backend=backend, address=address, max_retries=max_retries, workers=2
    )
    return {kind: res for (kind, _, _), res in zip(items, results, strict=True)}
