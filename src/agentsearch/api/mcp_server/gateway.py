"""The API as one user sees it, for the MCP tools: every call goes through the HTTP API with that user's key.

So a tool checks, refuses and answers exactly as the route it stands for (the request guard, a collection or job
of another user answering 404 like a missing one, idempotency, the job cache, the waits' per-user share), and
nothing is written that the route would not write. The stdio server reaches a running API over the network; the
endpoint mounted in the API calls its own application in process (``httpx.ASGITransport``), with no socket. What
it costs: each tool call is a second request inside the first, so the key is looked up twice (one indexed read)
and the answer is encoded as JSON once more.

An API error becomes a ``ToolError``, which the SDK returns as a tool result with ``isError`` and this text.

Usage::

    api = ApiGateway.remote("http://127.0.0.1:8000", key)          # or ApiGateway.in_process(app, key, base_url)
    view = await api.search({"collection_id": ..., "query": "notice period"}, wait_s=30)
    await api.aclose()
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
import httpx
from mcp.server.mcpserver.exceptions import ToolError

from agentsearch.api.mcp_server.outcomes import TERMINAL
from agentsearch.api.mcp_server.requests import CollectionRef

# The API's own `?wait=` bound (src/agentsearch/api/routes/jobs.py); a tool's longer wait polls after it.
API_WAIT_LIMIT_S = 60.0
POLL_S = 0.5
TIMEOUT_S = 30.0


def describe(response: httpx.Response) -> str:
    """An API error in one line: the status and the API's own words, a 422's fields named as the API names them."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text[:500]
    if isinstance(detail, list):
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}" for d in detail)
    return f"HTTP {response.status_code}: {detail}"


class ApiGateway:
    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")

    @classmethod
    def remote(cls, url: str, api_key: str) -> ApiGateway:
        """A gateway to the API at ``url`` (the stdio server's: ``AGENTSEARCH_API_URL``)."""
        http = httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S, headers={"Authorization": f"Bearer {api_key}"})
        return cls(http, url)

    @classmethod
    def in_process(cls, app: Any, api_key: str, base_url: str,
                   client: tuple[str, int] = ("127.0.0.1", 0)) -> ApiGateway:
        """A gateway to ``app`` itself, called in this process; links are made on ``base_url``, where the caller
        reached the API. ``client`` is the caller's address, so the routes see who asked."""
        transport = httpx.ASGITransport(app=app, client=client)
        http = httpx.AsyncClient(transport=transport, base_url="http://agentsearch.internal", timeout=TIMEOUT_S,
                                 headers={"Authorization": f"Bearer {api_key}"})
        return cls(http, base_url)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ToolError(f"the agentsearch API at {self.base_url} could not be reached: "
                            f"{type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise ToolError(describe(response))
        return response

    async def check_key(self) -> None:
        """Raise ``ToolError`` when the API refuses the key (or cannot be reached): ``/v1/me`` takes any valid key,
        whatever its scopes (``agentsearch.api.scopes``)."""
        await self._call("GET", "/v1/me")

    # -- collections ------------------------------------------------------------------------------------------

    async def collections(self) -> list[dict[str, Any]]:
        return (await self._call("GET", "/v1/collections")).json()

    async def collection(self, ref: CollectionRef, create: bool = False) -> tuple[dict[str, Any], bool]:
        """The caller's collection named by ``ref`` and whether it was made now. By id: another user's answers
        the API's 404. By name: a missing one is made when ``create``, else refused in the API's words."""
        if ref.id is not None:
            return (await self._call("GET", f"/v1/collections/{ref.id}")).json(), False
        found = (await self._call("GET", "/v1/collections", params={"name": ref.name})).json()
        if len(found) > 1:  # a plain name no collection of the caller's has, but several of its teams' do
            named = ", ".join(f"{c['team']}/{c['name']}" for c in found)
            raise ToolError(f"HTTP 409: {len(found)} team collections are named {ref.name} ({named}); name one as "
                            "TEAM/NAME or by its id")
        if found:
            return found[0], False
        if not create:
            raise ToolError(f"HTTP 404: collection {ref.name} not found")
        return (await self._call("POST", "/v1/collections", json={"name": ref.name})).json(), True

    async def collection_id(self, ref: CollectionRef) -> str:
        """The id a request names the collection by: an id as given (the route it is sent to answers for it, 404
        for another user's), a name looked up among the caller's collections."""
        return str(ref.id) if ref.id is not None else (await self.collection(ref))[0]["id"]

    async def add_documents(self, collection_id: str, documents: list[dict[str, Any]]) -> int:
        response = await self._call("POST", f"/v1/collections/{collection_id}/documents",
                                    json={"documents": documents})
        return response.json()["accepted"]

    async def wait_indexed(self, collection_id: str, wait_s: float) -> dict[str, Any]:
        """The collection once nothing of it is pending, or as it is after ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            view = (await self._call("GET", f"/v1/collections/{collection_id}")).json()
            if view["documents"]["pending"] == 0 or time.monotonic() >= deadline:
                return view
            await anyio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))

    # -- jobs -------------------------------------------------------------------------------------------------

    async def job(self, job_id: uuid.UUID | str) -> dict[str, Any]:
        return (await self._call("GET", f"/v1/jobs/{job_id}")).json()

    async def feedback(self, job_id: uuid.UUID | str, body: dict[str, Any]) -> dict[str, Any]:
        """The caller's rating of the job's answer or of one of its sources (``POST /v1/jobs/{id}/feedback``)."""
        return (await self._call("POST", f"/v1/jobs/{job_id}/feedback", json=body)).json()

    async def search(self, body: dict[str, Any], wait_s: float) -> dict[str, Any]:
        """Submit a job and wait up to ``wait_s`` for it: the job's view, ended or as it stands at the bound."""
        deadline = time.monotonic() + wait_s
        first_wait = min(wait_s, API_WAIT_LIMIT_S)
        response = await self._call("POST", "/v1/search", params={"wait": first_wait} if first_wait else None,
                                    json=body, timeout=TIMEOUT_S + first_wait)
        view = response.json()
        # 200 with a whole view: the job ended within the wait. 200 or 202 with {job_id, status, ...}: an earlier
        # job answered, or the wait ran out (or the user's share of waits was taken): poll it to the bound.
        while view["status"] not in TERMINAL and time.monotonic() < deadline:
            await anyio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
            view = await self.job(view["job_id"])
        return view if "response" in view else await self.job(view["job_id"])
