"""Unit tests of src/agentsearch/api/: the HTTP API's validation, scopes, roles, downloads and the MCP server."""
