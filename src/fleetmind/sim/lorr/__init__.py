"""League of Robot Runners (LoRR) rules: instances, the simulator, the time limit, the validator.

The rule set of the LoRR start kit (MAPF-Competition/Start-Kit, 2023 and 2024 editions), on
their own instance files (``benchmarks/data/lorr/README.md`` gives the formats). The 2026
edition (v3.x: ticks, multi-tick actions, swept squares, delays, a planner called periodically
and an executor every tick) has its own loop, :mod:`~fleetmind.sim.lorr.world2026`, and its own
validator, :mod:`~fleetmind.sim.lorr.referee2026`; what follows is the 2023/2024 rule set.

State: each robot stands on a location ``row * W + col`` and faces one of four orientations,
``0`` east, ``1`` south, ``2`` west, ``3`` north; every robot starts facing east.

Actions (start-kit numbering): ``0`` FW forward one cell in the facing direction, ``1`` CR rotate
clockwise (east -> south), ``2`` CCR rotate counter-clockwise, ``3`` W wait. A joint action is
refused whole (every robot waits that step) at its first fault, robots in id order, and that one
fault is logged with the kit's text: ``unallowed move`` (a wall or off the map), ``vertex
conflict`` (two robots in one cell; the later robot first), ``edge conflict`` (two robots
trading cells), ``incorrect vector size`` (no answer). A robot may move into a cell another one
leaves in the same step, cycles included. Action ``t`` (0-based) lands at timestep ``t + 1``;
errors, events and schedules carry that timestep, as in the kit's output file.

Errands:

- 2023 (``taskAssignmentStrategy: roundrobin``): robot ``i``'s ``k``-th errand is task line
  ``(i + k * teamSize) mod M``; ``numTasksReveal`` errands are visible per robot; an errand is
  finished (and counted) when the robot stands on it after any step; one errand a robot a step.
  The kit numbers these tasks in the order it hands them out.
- 2024 (``version``): tasks are ordered errand lists. The open pool keeps
  ``int(numTasksReveal * teamSize)`` revealed, unfinished tasks, revealed in file order
  (wrapping). After each executed step the planner's proposed schedule (one task id or ``-1``
  per robot) is checked, robots in order: it is refused whole (the previous one stays) if it
  names a task outside the pool (``task already finished``), gives one task to two robots, or
  moves a robot off a task whose first errand it has reached. Then a robot's next errand is
  reached when it stands on it (one errand a robot a step, events count errands from 1); a task
  counts when its last errand is reached, and then leaves the pool. Steps the robots waited for
  a late planner change no task.

Time: with a per-step limit ``L``, a planner that answers after ``p > L`` seconds leaves every
robot waiting for ``ceil(p / L) - 1`` steps (the steps it ran over), then its answer is
executed; the steps used count against the run's length (2023: each such step is logged as an
empty answer). Without a limit the run is deterministic (sim time is the step counter).
Preprocessing (:meth:`LorrPlanner.initialize`) sees no task and may take at most
:data:`PREPROCESS_LIMIT_S` (30 minutes) unless told otherwise.

Maps are read by :func:`fleetmind.sim.maps.parse_movingai` (``@ O T W`` blocked; the start kit
blocks only ``@`` and ``T``, and no LoRR map has ``O`` or ``W``).

Modules: :mod:`~fleetmind.sim.lorr.rules` (actions, one-step transition, conflicts),
:mod:`~fleetmind.sim.lorr.instance` (readers), :mod:`~fleetmind.sim.lorr.world` (the simulator
and :func:`simulate`), :mod:`~fleetmind.sim.lorr.output` (:func:`result_json`: the start kit's
output file, the 2024 or the 2023 layout), :mod:`~fleetmind.sim.lorr.referee` (:func:`validate`:
replays any start-kit output file with code of its own and lists where it disagrees).
"""

from fleetmind.sim.lorr import referee
from fleetmind.sim.lorr.instance import (
    Instance,
    read_agents,
    read_instance,
    read_map,
    read_tasks,
    write_instance,
)
from fleetmind.sim.lorr.output import dumps, result_json, write_output
from fleetmind.sim.lorr.referee import Validation, validate
from fleetmind.sim.lorr.rules import (
    ACTION_CHARS,
    CCR,
    CR,
    FW,
    HEADING,
    ORIENT_CHARS,
    TIMEOUT,
    WAIT,
    Edition,
    conflicts,
    next_state,
)
from fleetmind.sim.lorr.world import (
    PREPROCESS_LIMIT_S,
    LorrPlanner,
    Plan,
    Record,
    RunResult,
    View,
    World,
    simulate,
)

__all__ = [
    "ACTION_CHARS",
    "CCR",
    "CR",
    "FW",
    "HEADING",
    "ORIENT_CHARS",
    "PREPROCESS_LIMIT_S",
    "TIMEOUT",
    "WAIT",
    "Edition",
    "Instance",
    "LorrPlanner",
    "Plan",
    "Record",
    "RunResult",
    "Validation",
    "View",
    "World",
    "conflicts",
    "dumps",
    "next_state",
    "read_agents",
    "read_instance",
    "read_map",
    "read_tasks",
    "referee",
    "result_json",
    "simulate",
    "validate",
    "write_instance",
    "write_output",
]
