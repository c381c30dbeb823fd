"""``agentsearch mcp``: the MCP server on stdio, for an MCP client that starts it as a command.

It talks to the API at AGENTSEARCH_API_URL with AGENTSEARCH_API_KEY, as ``search`` and ``ingest`` do; with the
URL unset it starts one in this process and acts as the local user. The key is checked before the first MCP
message: a key the API refuses ends the command with that error on stderr (exit status 2), so an MCP client
reports a server that failed to start, not tools that fail one by one. stdout carries the protocol alone; logs go
to stderr.

Usage::

    AGENTSEARCH_API_URL=http://127.0.0.1:8000 AGENTSEARCH_API_KEY=as_... agentsearch mcp
"""

from __future__ import annotations

import click

from agentsearch.cli.errors import fail
from agentsearch.pipeline.platform.settings import get_settings


@click.command("mcp")
def mcp_server() -> None:
    """Serve agentsearch's tools (search, get_job, list_collections, ingest_documents) to an MCP client on stdio."""
    # Imported here: the MCP SDK and the API client take a second to load, which no other command needs.
    import anyio

    from agentsearch.cli.session import local_server
    from agentsearch.pipeline.observability.logs import configure_logging

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)  # stderr: stdout is the protocol's
    if settings.api_url:
        if not settings.api_key:
            fail("AGENTSEARCH_API_URL is set but AGENTSEARCH_API_KEY is not: create a key with "
                 "`agentsearch users create NAME`")
        problem = anyio.run(_serve, settings.api_url, settings.api_key)
    else:
        with local_server() as (url, key):
            problem = anyio.run(_serve, url, key)
    if problem:
        fail(problem)


async def _serve(url: str, api_key: str) -> str | None:
    """Serve until the client closes stdin; what stopped the server from starting, or None."""
    from contextlib import nullcontext

    from mcp.server.mcpserver.exceptions import ToolError

    from agentsearch.api.mcp_server.gateway import ApiGateway
    from agentsearch.api.mcp_server.server import build_server

    api = ApiGateway.remote(url, api_key)
    try:
        try:
            await api.check_key()
        except ToolError as exc:
            if str(exc).startswith("HTTP 401"):
                return f"the API at {url} refused the key in AGENTSEARCH_API_KEY ({exc})"
            return str(exc)
        await build_server(lambda _ctx: nullcontext(api)).run_stdio_async()
    finally:
        await api.aclose()
    return None
