"""fleetmind.web."""
