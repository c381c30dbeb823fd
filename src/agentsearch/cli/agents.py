"""``agentsearch agents list``: the registered agents, as ``GET /v1/agents`` shows them.

Usage::

    agentsearch agents list            # id, stage, version, description: one line each
    agentsearch agents list --json     # [{"id", "stage", "version", "config_schema", ...}]
"""

from __future__ import annotations

import json

import click

from agentsearch.pipeline.platform.settings import get_settings


@click.group()
def agents() -> None:
    """The agent registry."""


@agents.command("list")
@click.option("--json", "as_json", is_flag=True, help='Print [{"id", "stage", "version", "config_schema", ...}].')
def agents_list(as_json: bool) -> None:
    """Every registered agent (entry points and AGENTSEARCH_AGENT_MODULES), as GET /v1/agents shows them."""
    # The registry's own description, which GET /v1/agents shows too. Imported here: discovering the agents
    # imports every agent module (see src/agentsearch/cli/__init__.py).
    from agentsearch.pipeline.agents.registry import AgentRegistry

    described = AgentRegistry.discover(get_settings().agent_modules).describe()
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    for entry in described:
        click.echo(f"{entry['id']:<20} {entry['stage']:<12} v{entry['version']:<4} {entry['description']}")
