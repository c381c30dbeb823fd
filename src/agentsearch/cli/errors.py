"""How a command gives up: one line on stderr, exit status 2 (1 is left to a job that ran and did not succeed).

Usage::

    from agentsearch.cli.errors import fail

    if not path.is_file():
        fail(f"{path}: no such file")      # prints "error: ..." and exits 2
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click


def fail(message: str, status: int = 2) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(status)
