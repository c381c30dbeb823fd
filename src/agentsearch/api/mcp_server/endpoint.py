"""The MCP server over streamable HTTP, routed at ``/mcp`` of the API and authenticated like every route.

A request without a valid key (``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, checked by the routes' own
``agentsearch.api.auth.current_user``) is answered 401 before any MCP message is read. The tools then call the API in
process with that request's key (``ApiGateway.in_process``), so each call acts as the user the key belongs to.

Stateless: every POST is a whole exchange with a fresh server session (no ``Mcp-Session-Id``), so any API replica
behind a load balancer can answer any request and nothing is held between them. The SDK's session manager needs
a running task group: ``running(app)`` is entered in the API's lifespan, and makes a new manager each time (a
manager runs only once, an application's lifespan may run again).

Usage (``mount.McpMount`` makes it on the first request to ``/mcp``)::

    mcp_endpoint = McpEndpoint(max_request_bytes=settings.max_request_bytes)
    async with mcp_endpoint.running(app): ...                  # in a task group the lifespan holds open
    await mcp_endpoint(scope, receive, send)
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from agentsearch.api.auth import api_key_header, bearer, current_user
from agentsearch.api.mcp_server.gateway import ApiGateway
from agentsearch.api.mcp_server.server import build_server

# Where the authenticated caller rides along with the request to the tools (``request.state``).
CALLER_STATE = "mcp_caller"


@dataclass(frozen=True)
class Caller:
    user_id: uuid.UUID
    api_key: str


class McpEndpoint:
    def __init__(self, max_request_bytes: int) -> None:
        self.max_request_bytes = max_request_bytes
        self.server = build_server(self._gateway)
        self._app: Any = None
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self, app: Any) -> AsyncIterator[None]:
        """Serve MCP requests for ``app`` (the API whose routes the tools call) while the block lasts."""
        self.server.streamable_http_app(
            stateless_http=True,
            max_request_body_size=self.max_request_bytes,
            # The SDK guards a server on localhost against DNS rebinding by the Host header; every request here
            # carries an API key, which a page on a rebound name does not have, and the API answers on any name.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        async with manager.run():
            self._app, self._manager = app, manager
            try:
                yield
            finally:
                self._app, self._manager = None, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            caller = await self._authenticate(request)
        except HTTPException as exc:
            await JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)(
                scope, receive, send)
            return
        if self._manager is None:
            await JSONResponse({"detail": "the MCP endpoint is not running"}, status_code=503)(scope, receive, send)
            return
        setattr(request.state, CALLER_STATE, caller)
        await self._manager.handle_request(scope, receive, send)

    async def _authenticate(self, request: Request) -> Caller:
        credentials = await bearer(request)
        header_key = await api_key_header(request)
        # The routes' own check (one indexed read of the key's digest, on a worker thread as a sync route's is).
        user_id = await run_in_threadpool(current_user, request, credentials, header_key)
        api_key = credentials.credentials if credentials is not None else header_key
        if not api_key:
            # The console's session cookie passed the check above; the tools call the API with the caller's key.
            raise HTTPException(401, "an API key is required: send 'Authorization: Bearer <key>' or "
                                     "'X-API-Key: <key>'", headers={"WWW-Authenticate": "Bearer"})
        return Caller(user_id=user_id, api_key=api_key)

    @asynccontextmanager
    async def _gateway(self, ctx: Context) -> AsyncIterator[ApiGateway]:
        request = ctx.request_context.request
        caller = getattr(getattr(request, "state", None), CALLER_STATE, None)
        if request is None or caller is None or self._app is None:
            raise ToolError("this call carries no authenticated caller")
        client = (request.client.host, request.client.port) if request.client else ("127.0.0.1", 0)
        api = ApiGateway.in_process(self._app, caller.api_key, str(request.base_url), client=client)
        try:
            yield api
        finally:
            await api.aclose()

