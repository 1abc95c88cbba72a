"""fleetmind.testing."""
