"""fleetmind.dispatch."""
