"""``python -m cli``: the ``agentsearch`` command without its installed script (``python -m cli agents list``)."""

from agentsearch.cli import main

main()
