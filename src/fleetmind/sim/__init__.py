"""fleetmind.sim."""
