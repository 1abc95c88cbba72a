"""``python -m fleetmind.cli``: the ``fleetmind`` command."""

from fleetmind.cli import main

main()
