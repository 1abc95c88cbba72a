"""fleetmind.rl."""
