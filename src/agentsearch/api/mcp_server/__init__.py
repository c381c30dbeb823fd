"""agentsearch as an MCP server: the API's search, jobs, collections and ingestion as MCP tools.

Two transports serve the same tools (``server.build_server``):

- stdio, ``agentsearch mcp`` (``src/agentsearch/cli/mcp.py``): the tools call the API at AGENTSEARCH_API_URL with
  AGENTSEARCH_API_KEY, or one the command serves in process;
- streamable HTTP at ``/mcp`` of the API (``endpoint.McpEndpoint``, made by the first request to ``mount.McpMount``,
  which ``src/agentsearch/api/app.py`` routes): a request is authenticated by its API key before any MCP message is
  read, and the tools call the API's own routes in process with that key.

The tools are a face of the HTTP API and act only through it (``gateway.ApiGateway``), so they live beside it: a
tool refuses, scopes to the caller and writes exactly as the route it stands for. Nothing here but ``endpoint``
imports FastAPI, so the stdio command loads no web framework beyond what the SDK brings.

Modules: ``requests`` (tool arguments to API bodies), ``outcomes`` (API views to tool results), ``gateway``,
``server``, ``endpoint``, ``mount``. docs/mcp.md has the client configuration and the tools' schemas.

Usage::

    from agentsearch.api.mcp_server.server import build_server      # the tools, over any ApiGateway
    from agentsearch.api.mcp_server.endpoint import McpEndpoint     # the HTTP mount
"""
