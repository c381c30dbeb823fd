"""A small MCP server for tests (``mcp`` SDK's ``MCPServer``), over stdio or streamable HTTP.

Tools:

- ``make_outline(title, max_slides, language="", sources=None)``: echoes its arguments as structured content and
  writes a one-line outline as text, so a test sees exactly what reached the tool;
- ``make_file(name, content)``: returns the content as an embedded binary resource (``text/markdown``);
- ``fail(message)``: a tool error (``is_error``);
- ``environment()``: the names of the server's environment variables and its working directory, so a test sees
  what a registered stdio server was started with.

Usage::

    python -m tests.support.mcp_server                 # stdio (what a registered tool's command starts)
    python -m tests.support.mcp_server http 8765       # streamable HTTP at http://127.0.0.1:8765/mcp

    app = build_server().streamable_http_app()         # or serve the ASGI app in a test's own uvicorn thread
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import BlobResourceContents, EmbeddedResource


def build_server() -> MCPServer:
    server = MCPServer("agentsearch-test-tools")

    @server.tool(description="Plans a slide outline; echoes the arguments it received.", structured_output=True)
    def make_outline(title: str, max_slides: int, language: str = "",
                     sources: list[Any] | None = None) -> dict[str, Any]:
        return {
            "received": {"title": title, "max_slides": max_slides, "language": language, "sources": sources},
            "outline": f"{title}: {max_slides} slides" + (f" ({language})" if language else ""),
        }

    @server.tool(description="Returns the content as a file.")
    def make_file(name: str, content: str) -> EmbeddedResource:
        return EmbeddedResource(
            resource=BlobResourceContents(uri=f"file:///{name}", mime_type="text/markdown",
                                          blob=base64.b64encode(content.encode()).decode()),
        )

    @server.tool(description="Always fails.")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="The server's environment variable names and working directory.", structured_output=True)
    def environment() -> dict[str, Any]:
        return {"variables": sorted(os.environ), "cwd": os.getcwd()}

    return server


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        build_server().run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        build_server().run("stdio")
