"""``/mcp`` of the API with the MCP SDK loaded by the first request to it, not by the API's start.

Importing the SDK and building the server with its tools takes about half a second of the API's start-up (about
a sixth of its imports); an API that no MCP client calls never pays it, and one whose clients do pays it once, on
the first call. The endpoint (``endpoint.McpEndpoint``) is made then and runs in a task group the lifespan holds
open, as it would have from the start.

Usage (``src/agentsearch/api/app.py``)::

    mcp = McpMount(max_request_bytes=settings.max_request_bytes)
    app.add_route("/mcp", mcp, include_in_schema=False)
    async with mcp.running(app): ...                 # in the lifespan
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from agentsearch.api.mcp_server.endpoint import McpEndpoint


class McpMount:
    def __init__(self, max_request_bytes: int) -> None:
        self.max_request_bytes = max_request_bytes
        self._app: Any = None
        self._group: TaskGroup | None = None
        self._endpoint: McpEndpoint | None = None
        self._starting = anyio.Lock()

    @property
    def started(self) -> bool:
        """Whether a request has made the endpoint (and imported the SDK) in this lifespan."""
        return self._endpoint is not None

    @asynccontextmanager
    async def running(self, app: Any) -> AsyncIterator[None]:
        """Serve MCP requests for ``app`` while the block lasts; the endpoint itself starts on the first one."""
        # A lifespan may run again, even inside another (a second server of the same app): each makes its own
        # endpoint (an SDK session manager runs once), and the one around it serves again once it ends.
        around = self._app, self._group, self._endpoint
        async with anyio.create_task_group() as group:
            self._app, self._group, self._endpoint = app, group, None
            try:
                yield
            finally:
                self._app, self._group, self._endpoint = around
                group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = await self._started()
        if endpoint is None:
            await JSONResponse({"detail": "the MCP endpoint is not running"}, status_code=503)(scope, receive, send)
            return
        await endpoint(scope, receive, send)

    async def _started(self) -> McpEndpoint | None:
        if self._endpoint is None:
            async with self._starting:
                if self._endpoint is None and self._group is not None:
                    from agentsearch.api.mcp_server.endpoint import McpEndpoint

                    endpoint = McpEndpoint(max_request_bytes=self.max_request_bytes)
                    await self._group.start(self._serve, endpoint)
                    self._endpoint = endpoint
        return self._endpoint

    async def _serve(self, endpoint: McpEndpoint, *, task_status: TaskStatus[None]) -> None:
        async with endpoint.running(self._app):
            task_status.started()
            await anyio.sleep_forever()
