"""fleetmind: a warehouse robot fleet run by a planner, an executor and a shield.

The planner (an LLM or a classical solver) decides which robot serves which order; the executor
(RL policies or a shortest-path baseline) moves every robot every tick; the shield (deterministic
rules) has the last word on every move. See DESIGN.md in the repository for the architecture.
"""

from __future__ import annotations

import sys

__version__ = "0.1.0"

if "gymnasium" in sys.modules:
    # gymnasium.make("fleetmind:fleetmind/rware-...-v2") imports this package to find the ids;
    # without gymnasium loaded, importing fleetmind stays free of it (the CLI starts faster).
    from fleetmind.envs import rware_gym

    rware_gym.register_ids()
