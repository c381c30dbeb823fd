"""``agentsearch tools``: what a worker may start or call for a job, registered by an operator, never by the API.

Usage::

    agentsearch tools add make_outline --kind mcp --command "python -m my_tools.server" --env TOOLS_TOKEN=...
    agentsearch tools add crm --kind http --url "https://crm.example/{metadata.company_id}" --header "X-Api-Key: ..."
    agentsearch tools list [--json]              # env variables and headers by name, never their values
    agentsearch tools remove crm

A user's agent config then names the tool and sets only its arguments (docs/security.md).
"""

from __future__ import annotations

import json
import shlex

import click
from pydantic import ValidationError

from agentsearch.cli.database import operator_database
from agentsearch.cli.errors import fail

# Each command imports the tool store when it runs (SQLAlchemy: see src/agentsearch/cli/__init__.py).


@click.group()
def tools() -> None:
    """Tools agent configs may name: MCP servers (stdio or HTTP) and HTTP endpoints. Operators only."""


def _store():
    from agentsearch.pipeline.security.registered_tools import ToolStore

    return ToolStore(operator_database())


def _pairs(values: tuple[str, ...], separator: str, what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, found, rest = value.partition(separator)
        if not found or not key.strip():
            fail(f"{what} {value!r} is not KEY{separator}VALUE")
        pairs[key.strip()] = rest.strip() if separator == ":" else rest
    return pairs


@tools.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["mcp", "http"]), required=True,
              help="mcp: an MCP server (the mcp agent's context_forge_tool_id); http: an endpoint URL template "
                   "(the external_enricher's endpoint).")
@click.option("--command", "command", default=None,
              help='mcp over stdio: the server\'s command line, split like a shell would ("python -m my.server").')
@click.option("--env", "env", multiple=True, help="mcp over stdio: KEY=VALUE for the server's environment "
              "(besides PATH, HOME, LOGNAME, SHELL, TERM, USER; never the worker's own). Repeatable.")
@click.option("--cwd", default=None, help="mcp over stdio: the server's working directory (absolute).")
@click.option("--url", default=None, help="mcp: the streamable HTTP endpoint; http: the URL template with "
              "{document_id}, {query}, {metadata.<key>} placeholders.")
@click.option("--header", "headers", multiple=True, help='"Name: value" sent with every call. Repeatable.')
@click.option("--server-tool", default=None, help="mcp: the tool's name on the server, when not NAME.")
@click.option("--allow-internal", is_flag=True,
              help="Calls may reach the tool's own host although it is loopback or private (never cloud metadata).")
@click.option("--description", default="", help="What the tool is for.")
@click.option("--replace", is_flag=True, help="Replace the tool registered as NAME (e.g. to rotate its secrets).")
def tools_add(name: str, kind: str, command: str | None, env: tuple[str, ...], cwd: str | None, url: str | None,
              headers: tuple[str, ...], server_tool: str | None, allow_internal: bool, description: str,
              replace: bool) -> None:
    """Register a tool under NAME; agent configs then name it and set only its arguments."""
    from agentsearch.pipeline.security.registered_tools import RegisteredTool, ToolError

    try:
        tool = RegisteredTool(name=name, kind=kind, command=shlex.split(command) if command is not None else None,
                              env=_pairs(env, "=", "--env"), cwd=cwd, url=url,
                              headers=_pairs(headers, ":", "--header"), server_tool=server_tool,
                              allow_internal=allow_internal, description=description)
    except ValidationError as exc:
        fail("; ".join(f"{'.'.join(map(str, e['loc'])) or 'tool'}: {e['msg'].removeprefix('Value error, ')}"
                       for e in exc.errors()))
    except ValueError as exc:  # shlex: an unclosed quote
        fail(f"--command: {exc}")
    try:
        replaced = _store().add(tool, replace=replace)
    except ToolError as exc:
        fail(str(exc))
    click.echo(f"{'replaced' if replaced else 'registered'} {tool.kind} tool {tool.name} ({tool.transport}"
               + (", internal host allowed" if tool.allow_internal else "") + ")")


@tools.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per tool (env and header values left out).")
def tools_list(as_json: bool) -> None:
    """The registered tools (the names of env variables and headers, never their values)."""
    listed = _store().list()
    if as_json:
        click.echo(json.dumps([{**tool.listing(), "created_at": created.isoformat()} for tool, created in listed],
                              indent=2))
        return
    for tool, _created in listed:
        target = " ".join(tool.command) if tool.command is not None else tool.url
        extras = [f"server tool {tool.server_tool}"] if tool.server_tool else []
        extras += [f"env {','.join(sorted(tool.env))}"] if tool.env else []
        extras += [f"headers {','.join(sorted(tool.headers))}"] if tool.headers else []
        extras += ["internal host allowed"] if tool.allow_internal else []
        click.echo(f"{tool.name:<24} {tool.kind:<5} {tool.transport:<6} {target}"
                   + (f"  ({'; '.join(extras)})" if extras else ""))


@tools.command("remove")
@click.argument("name")
def tools_remove(name: str) -> None:
    """Remove a tool; configs naming it then fail when they run (the agent's error says so)."""
    if not _store().remove(name):
        fail(f"no tool named {name!r} is registered")
    click.echo(f"removed tool {name}")
