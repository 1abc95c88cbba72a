"""fleetmind.llm."""
