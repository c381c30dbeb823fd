"""``python -m agentsearch``: the ``agentsearch`` command without its installed script."""

from agentsearch.cli import main

main(prog_name="python -m agentsearch")
