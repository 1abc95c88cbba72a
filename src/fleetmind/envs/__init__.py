"""fleetmind.envs."""
