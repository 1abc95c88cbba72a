"""fleetmind.safety."""
