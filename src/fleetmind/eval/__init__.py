"""fleetmind.eval."""
