"""The MCP server's tools over a fake API: arguments mapped to API requests, API answers and errors to tool results.

The tools run in the real SDK (``mcp.Client`` connected in process); the API behind the gateway is an
``httpx.MockTransport`` that records what the tools sent. The real stack's tests are in
``tests/integration/test_mcp_server.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import nullcontext
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError

from agentsearch.api.mcp_server.gateway import ApiGateway
from agentsearch.api.mcp_server.outcomes import job_outcome
from agentsearch.api.mcp_server.requests import MAX_WAIT_S, CollectionRef, search_body
from agentsearch.api.mcp_server.server import build_server

COLLECTION_ID = str(uuid.uuid4())
JOB_ID = str(uuid.uuid4())


def _job_view(status: str, **response: Any) -> dict[str, Any]:
    finished = status in ("succeeded", "failed")
    return {
        "job_id": JOB_ID, "collection_id": COLLECTION_ID, "query": "notice period", "status": status,
        "stage": "done" if finished else "core_search", "error": None, "cached": False,
        "response": ({"answer": "Thirty days [1].", "degraded": False, "degraded_reasons": [],
                      "sources": [{"document_id": "hr-1", "title": "Handbook", "score": 0.91}],
                      "agent_artifacts": [{"agent_id": "pdf_report", "type": "pdf", "data": "JVBERi0=",
                                           "filename": "report.pdf", "content_type": "application/pdf",
                                           "size": 5, "metadata": {},
                                           "url": f"/v1/jobs/{JOB_ID}/artifacts/report.pdf"}],
                      **response} if finished else None),
    }


class FakeApi:
    """One user's API: a collection ``docs``, one job that ends after ``running_reads`` reads."""

    def __init__(self, running_reads: int = 0) -> None:
        self.requests: list[httpx.Request] = []
        self.running_reads = running_reads
        self.collections = {COLLECTION_ID: {"id": COLLECTION_ID, "name": "docs", "description": None,
                                            "documents": {"pending": 0, "indexed": 3, "failed": 0}}}
        self.pending_reads = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path, method = request.url.path, request.method
        if request.headers.get("authorization") != "Bearer as_good":
            return httpx.Response(401, json={"detail": "unknown or revoked API key"})
        if path == "/v1/collections" and method == "GET":
            name = request.url.params.get("name")
            return httpx.Response(200, json=[c for c in self.collections.values() if name in (None, c["name"])])
        if path == "/v1/collections" and method == "POST":
            created = {"id": str(uuid.uuid4()), "name": json.loads(request.content)["name"], "description": None,
                       "documents": {"pending": 0, "indexed": 0, "failed": 0}}
            self.collections[created["id"]] = created
            return httpx.Response(201, json=created)
        if path.startswith("/v1/collections/") and path.endswith("/documents"):
            collection = self.collections[path.split("/")[3]]
            documents = json.loads(request.content)["documents"]
            if len({d["id"] for d in documents}) < len(documents):
                return httpx.Response(422, json={"detail": [{"loc": ["body", "documents", 1, "id"],
                                                             "msg": "duplicate document id 'x' (also at 0)"}]})
            collection["documents"]["pending"] += len(documents)
            self.pending_reads = 2
            return httpx.Response(202, json={"collection_id": collection["id"], "accepted": len(documents)})
        if path.startswith("/v1/collections/"):
            collection = self.collections.get(path.split("/")[3])
            if collection is None:
                return httpx.Response(404, json={"detail": f"collection {path.split('/')[3]} not found"})
            if self.pending_reads:
                self.pending_reads -= 1
                if not self.pending_reads:
                    counts = collection["documents"]
                    counts["indexed"], counts["pending"] = counts["indexed"] + counts["pending"], 0
            return httpx.Response(200, json=collection)
        if path == "/v1/search":
            return httpx.Response(202, json={"job_id": JOB_ID, "status": "queued", "cached": False,
                                             "url": f"/v1/jobs/{JOB_ID}"})
        if path == f"/v1/jobs/{JOB_ID}/feedback":
            body = json.loads(request.content)
            return httpx.Response(201, json={"job_id": JOB_ID, "rating": body["rating"],
                                             "comment": body.get("comment"), "source": body.get("source")})
        if path == f"/v1/jobs/{JOB_ID}":
            if self.running_reads:
                self.running_reads -= 1
                return httpx.Response(200, json=_job_view("running"))
            return httpx.Response(200, json=_job_view("succeeded"))
        if path.startswith("/v1/jobs/"):
            return httpx.Response(404, json={"detail": f"job {path.split('/')[3]} not found"})
        return httpx.Response(404, json={"detail": "Not Found"})

    def sent(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]


def _call(api: FakeApi, tool: str, arguments: dict[str, Any] | None = None, key: str = "as_good"):
    async def main():
        gateway = ApiGateway(httpx.AsyncClient(transport=httpx.MockTransport(api), base_url="http://api.test",
                                               headers={"Authorization": f"Bearer {key}"}), "http://api.test")
        try:
            async with Client(build_server(lambda _ctx: nullcontext(gateway))) as client:
                if tool == "":
                    return await client.list_tools()
                return await client.call_tool(tool, arguments or {})
        finally:
            await gateway.aclose()

    return asyncio.run(main())


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def _reason(result) -> str:
    return _text(result).split("invalid arguments: ", 1)[1]


# -- arguments to API requests -------------------------------------------------------------------------------

def test_search_body_sends_only_what_was_set_and_merges_the_strategy_into_the_search_overrides():
    cid, other = uuid.uuid4(), uuid.uuid4()
    assert search_body(cid, "q") == {"collection_id": str(cid), "query": "q", "mode": "single", "use_cache": True}
    body = search_body(cid, "q", top_k=3, strategy="keyword", search={"min_score": 0.2}, agents=[],
                       also_search=[other], mode="iterative", use_cache=False)
    assert body == {"collection_id": str(cid), "query": "q", "mode": "iterative", "use_cache": False, "top_k": 3,
                    "search": {"min_score": 0.2, "strategy": "keyword"}, "agents": [], "also_search": [str(other)]}
    where = {"eq": {"key": "region", "value": "emea"}}
    assert search_body(cid, "q", metadata_filter=where)["filter"] == where
    assert search_body(cid, "q", stage_timeouts={"response": 5.0})["stage_timeouts"] == {"response": 5.0}
    # The same strategy twice is no conflict; two different ones are refused, not silently chosen between.
    assert search_body(cid, "q", strategy="hybrid", search={"strategy": "hybrid"})["search"] == {"strategy": "hybrid"}
    with pytest.raises(ToolError, match="strategy is given twice"):
        search_body(cid, "q", strategy="keyword", search={"strategy": "semantic"})


def test_a_collection_is_named_by_id_or_by_name():
    cid = uuid.uuid4()
    assert CollectionRef.parse(f" {cid} ") == CollectionRef(id=cid)
    assert CollectionRef.parse("handbook") == CollectionRef(name="handbook")
    with pytest.raises(ToolError, match="collection id or name"):
        CollectionRef.parse("   ")


def test_job_outcome_links_artifacts_instead_of_inlining_them_and_says_what_to_poll():
    done = job_outcome(_job_view("succeeded"), "https://search.example.org/")
    assert done.finished and done.answer == "Thirty days [1]." and done.next_step is None
    assert [s.document_id for s in done.sources] == ["hr-1"]
    assert done.artifacts[0].url == f"https://search.example.org/v1/jobs/{JOB_ID}/artifacts/report.pdf"
    assert "data" not in done.artifacts[0].model_dump()
    running = job_outcome(_job_view("running"), "https://search.example.org")
    assert not running.finished and running.answer is None and JOB_ID in running.next_step


# -- the tools through the SDK ------------------------------------------------------------------------------

def test_the_tools_and_their_schemas():
    tools = {t.name: t for t in _call(FakeApi(), "").tools}
    assert set(tools) == {"search", "get_job", "list_collections", "ingest_documents", "rate_answer"}
    assert tools["rate_answer"].input_schema["required"] == ["job_id", "rating"]
    search = tools["search"].input_schema
    assert search["required"] == ["collection", "query"]
    assert search["properties"]["wait_s"]["maximum"] == MAX_WAIT_S
    assert search["properties"]["strategy"]["anyOf"][0]["enum"] == ["semantic", "keyword", "hybrid", "adaptive"]
    assert "ctx" not in search["properties"]
    assert "stage_timeouts" in search["properties"] and "stage_timeouts" not in search.get("required", [])
    assert tools["get_job"].input_schema["properties"]["job_id"]["format"] == "uuid"
    documents = tools["ingest_documents"].input_schema
    assert documents["$defs"]["DocumentIn"]["required"] == ["id", "text"]
    assert documents["properties"]["documents"]["maxItems"] == 1000
    assert "answer" in tools["search"].output_schema["properties"]


def test_search_by_name_submits_waits_with_the_api_then_polls_to_the_end():
    api = FakeApi(running_reads=2)
    result = _call(api, "search", {"collection": "docs", "query": "notice period", "strategy": "keyword",
                                   "agents": [], "wait_s": 5})
    assert not result.is_error, _text(result)
    outcome = result.structured_content
    assert outcome["status"] == "succeeded" and outcome["answer"] == "Thirty days [1]."
    assert outcome["sources"][0]["document_id"] == "hr-1"
    assert outcome["artifacts"][0]["url"] == f"http://api.test/v1/jobs/{JOB_ID}/artifacts/report.pdf"
    [submit] = api.sent("POST", "/v1/search")
    assert submit.url.params["wait"] == "5.0"
    assert json.loads(submit.content) == {"collection_id": COLLECTION_ID, "query": "notice period", "mode": "single",
                                          "use_cache": True, "search": {"strategy": "keyword"}, "agents": []}
    assert len(api.sent("GET", f"/v1/jobs/{JOB_ID}")) == 3


def test_search_past_its_bound_answers_the_job_id_to_poll():
    api = FakeApi(running_reads=100)
    result = _call(api, "search", {"collection": COLLECTION_ID, "query": "notice period", "wait_s": 0})
    outcome = result.structured_content
    assert not result.is_error and outcome["finished"] is False and outcome["job_id"] == JOB_ID
    assert "get_job" in outcome["next_step"]
    assert "wait" not in api.sent("POST", "/v1/search")[0].url.params


def test_bad_arguments_and_api_refusals_are_tool_errors_with_the_reason():
    api = FakeApi()
    too_long = _call(api, "search", {"collection": "docs", "query": "q", "wait_s": MAX_WAIT_S + 1})
    assert too_long.is_error and _text(too_long) == (
        "Error executing tool search: invalid arguments: wait_s: Input should be less than or equal to 120")
    missing = _call(api, "search", {"collection": "nope", "query": "q"})
    assert missing.is_error and "collection nope not found" in _text(missing)
    other = str(uuid.uuid4())
    job = _call(api, "get_job", {"job_id": other})
    assert job.is_error and _text(job).endswith(f": HTTP 404: job {other} not found")
    not_a_uuid = _call(api, "get_job", {"job_id": "12"})
    assert not_a_uuid.is_error and _reason(not_a_uuid).startswith("job_id: Input should be a valid UUID")
    unnamed = _call(api, "search", {"query": "q"})
    assert unnamed.is_error and _reason(unnamed) == "collection: Field required"
    assert not api.sent("POST", "/v1/search")  # nothing was submitted for any of them
    refused = _call(FakeApi(), "list_collections", key="as_revoked")
    assert refused.is_error and _text(refused).endswith(": HTTP 401: unknown or revoked API key")


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"stage_timeouts": {"response": True}}, "stage_timeouts.response: Input should be a valid number"),
        ({"stage_timeouts": {"response": "5"}}, "stage_timeouts.response: Input should be a valid number"),
        ({"top_k": True}, "top_k: Input should be a valid integer"),
    ],
)
def test_a_number_argument_takes_a_number_not_a_boolean(arguments, reason):
    """The arguments were validated laxly before the API saw them: ``true`` reached it as 1.0, a stage budget of
    one second that the API's own strict check could no longer tell from one sent on purpose."""
    api = FakeApi()
    result = _call(api, "search", {"collection": "docs", "query": "q", **arguments})
    assert result.is_error and _reason(result) == reason
    assert not api.sent("POST", "/v1/search")
    sent = _call(api, "search", {"collection": "docs", "query": "q", "top_k": 3, "stage_timeouts": {"response": 5}})
    assert not sent.is_error, _text(sent)
    assert json.loads(api.sent("POST", "/v1/search")[0].content)["stage_timeouts"] == {"response": 5.0}


def test_ingest_makes_a_new_named_collection_and_waits_for_the_indexing():
    api = FakeApi()
    result = _call(api, "ingest_documents", {"collection": "notes", "wait_s": 5, "documents": [
        {"id": "n-1", "title": "Note", "text": "Quarterly notice periods are thirty days.", "metadata": {"a": 1}},
        {"id": 2, "text": "An id given as a number is sent as text."}]})
    assert not result.is_error, _text(result)
    outcome = result.structured_content
    assert outcome["created"] and outcome["collection_name"] == "notes" and outcome["accepted"] == 2
    assert outcome["indexed"] and outcome["documents"] == {"pending": 0, "indexed": 2, "failed": 0}
    [sent] = [r for r in api.requests if r.url.path.endswith("/documents")]
    assert [d["id"] for d in json.loads(sent.content)["documents"]] == ["n-1", "2"]


def test_ingest_refusals_name_the_field_and_an_unknown_id_is_not_made():
    api = FakeApi()
    # Checked by the SDK with the API's own document model before anything is sent ...
    blank = _call(api, "ingest_documents", {"collection": "docs", "documents": [{"id": "x", "text": " "}]})
    assert blank.is_error and _reason(blank) == "documents.0.text: Value error, text must not be blank"
    assert not api.requests
    # ... then by the API, whose 422 names the field.
    twice = _call(api, "ingest_documents", {"collection": "docs", "documents": [{"id": "x", "text": "a"},
                                                                               {"id": "x", "text": "b"}]})
    assert twice.is_error and "HTTP 422: body.documents.1.id: duplicate document id 'x'" in _text(twice)
    empty = _call(api, "ingest_documents", {"collection": "docs", "documents": []})
    assert empty.is_error and "documents" in _text(empty)
    nobody = str(uuid.uuid4())
    missing = _call(api, "ingest_documents", {"collection": nobody, "documents": [{"id": "x", "text": "t"}]})
    assert missing.is_error and _text(missing).endswith(f": HTTP 404: collection {nobody} not found")
    assert not api.sent("POST", "/v1/collections")


def test_argument_errors_keep_each_field_and_reason_and_drop_the_values():
    from agentsearch.api.mcp_server.argument_errors import concise

    secret = "a confidential paragraph ], input_type=str] of the document"
    message = ("Error executing tool ingest_documents: 2 validation errors for ingest_documentsArguments\n"
               "documents.0.title\n"
               f"  String should have at most 2000 characters [type=string_too_long, input_value='{secret}', "
               "input_type=str]\n"
               "    For further information visit https://errors.pydantic.dev/2.14/v/string_too_long\n"
               "wait_s\n"
               "  Input should be a valid number [type=float_parsing, input_value='soon', input_type=str]\n")
    assert concise(message) == ("Error executing tool ingest_documents: invalid arguments: documents.0.title: String "
                                "should have at most 2000 characters; wait_s: Input should be a valid number")
    assert concise("HTTP 404: job 1 not found") == "HTTP 404: job 1 not found"


def test_an_unreachable_api_is_a_tool_error_not_a_crash():
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async def main():
        gateway = ApiGateway(httpx.AsyncClient(transport=httpx.MockTransport(down), base_url="http://api.test"),
                             "http://api.test")
        async with Client(build_server(lambda _ctx: nullcontext(gateway))) as client:
            return await client.call_tool("list_collections", {})

    result = asyncio.run(main())
    assert result.is_error and "the agentsearch API at http://api.test could not be reached" in _text(result)


# -- the endpoint in the embedded API ------------------------------------------------------------------------

def _rpc(http, method: str, params: dict[str, Any], **headers: str):
    """One JSON-RPC request to ``/mcp``: the response and, when it carries one, the message in its SSE stream."""
    response = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                         headers={"Accept": "application/json, text/event-stream",
                                  "MCP-Protocol-Version": "2025-06-18", **headers})
    data = [line[len("data: "):] for line in response.text.splitlines() if line.startswith("data: ")]
    return response, (json.loads(data[-1]) if data else None)


def test_the_api_serves_mcp_at_slash_mcp_to_a_key_and_refuses_one_without(app, client):
    from fastapi.testclient import TestClient

    anonymous = {"Authorization": ""}
    refused, message = _rpc(client, "tools/list", {}, **anonymous)
    assert refused.status_code == 401 and message is None
    assert refused.json()["detail"].startswith("an API key is required")
    wrong, _ = _rpc(client, "tools/list", {}, Authorization="Bearer as_wrong")
    assert wrong.status_code == 401 and wrong.json()["detail"] == "unknown or revoked API key"

    listed, message = _rpc(client, "tools/list", {})
    assert listed.status_code == 200 and {t["name"] for t in message["result"]["tools"]} == \
        {"search", "get_job", "list_collections", "ingest_documents", "rate_answer"}
    assert client.post("/v1/collections", json={"name": "mcp-unit"}).status_code == 201
    _, called = _rpc(client, "tools/call", {"name": "list_collections", "arguments": {}})
    assert [c["name"] for c in called["result"]["structuredContent"]["collections"]] == ["mcp-unit"]
    nobody = str(uuid.uuid4())
    _, missing = _rpc(client, "tools/call", {"name": "get_job", "arguments": {"job_id": nobody}})
    assert missing["result"]["isError"] and missing["result"]["content"][0]["text"].endswith(
        f"HTTP 404: job {nobody} not found")

    # The application's lifespan may run again (another server of the same app): the endpoint serves again.
    with TestClient(app) as again:
        _, message = _rpc(again, "tools/list", {}, Authorization=client.headers["Authorization"])
        assert len(message["result"]["tools"]) == 5


def test_mcp_refuses_a_console_session_without_a_key(app, client):
    # The console's session cookie signs in the console; an MCP client's calls go on with the key it sent.
    from agentsearch.pipeline.security.sessions import SessionStore
    from agentsearch.pipeline.security.users import UserStore

    services = app.state.services
    user_id, _ = UserStore(services.db).create(f"mcp-session-{uuid.uuid4().hex[:8]}")
    token = SessionStore(services.db).open(user_id, 600)
    cookies = {services.settings.session_cookie_name: token}
    refused = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                          headers={"Accept": "application/json, text/event-stream",
                                   "MCP-Protocol-Version": "2025-06-18", "Authorization": "",
                                   "X-CSRF-Token": SessionStore.csrf_token(token)}, cookies=cookies)
    assert refused.status_code == 401, refused.text[:300]
    assert refused.json()["detail"].startswith("an API key is required")


def test_rate_answer_posts_the_rating_and_a_stale_job_says_so():
    api = FakeApi()
    result = _call(api, "rate_answer", {"job_id": JOB_ID, "rating": "down", "comment": "old policy", "source": "hr-1"})
    assert not result.is_error, _text(result)
    assert result.structured_content == {"job_id": JOB_ID, "rating": "down", "comment": "old policy",
                                         "source": "hr-1"}
    [sent] = api.sent("POST", f"/v1/jobs/{JOB_ID}/feedback")
    assert json.loads(sent.content) == {"rating": "down", "comment": "old policy", "source": "hr-1"}
    bad = _call(api, "rate_answer", {"job_id": JOB_ID, "rating": "meh"})
    assert bad.is_error and _reason(bad).startswith("rating: Input should be 'up' or 'down'")
    other = str(uuid.uuid4())
    missing = _call(api, "rate_answer", {"job_id": other, "rating": "up"})
    assert missing.is_error and _text(missing).endswith(f": HTTP 404: job {other} not found")
    assert len(api.sent("POST", f"/v1/jobs/{JOB_ID}/feedback")) == 1
    stale = job_outcome({**_job_view("succeeded"), "stale": {"hr-1": "changed"}}, "http://api.test")
    assert stale.stale == {"hr-1": "changed"} and job_outcome(_job_view("succeeded"), "http://api.test").stale is None
