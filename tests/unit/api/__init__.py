"""Unit tests of api/: the HTTP API's validation, scopes, roles, downloads and the MCP server."""
