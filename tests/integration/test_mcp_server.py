"""agentsearch as an MCP server on the real stack, driven by the ``mcp`` client SDK: over stdio
(``agentsearch mcp`` spawned with the stack's AGENTSEARCH_API_URL and AGENTSEARCH_API_KEY) and over streamable HTTP
at the API's ``/mcp`` with a key."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.conftest import BIN, REPO, search, use_agents

pytestmark = pytest.mark.integration

QUERY = "What was Northwind Energy's revenue in Q4 2025?"
TOOLS = {"search", "get_job", "list_collections", "ingest_documents", "rate_answer"}
# Each search runs without agents and without the job cache: what is measured is a job this test submitted.
FRESH = {"agents": [], "use_cache": False, "wait_s": 60}


def _stdio(stack, **env: str) -> tuple[Any, Any]:
    errlog = tempfile.TemporaryFile("w+")  # noqa: SIM115 - it outlives this function: the caller reads it
    params = StdioServerParameters(command=str(BIN / "agentsearch"), args=["mcp"], env={**stack.env, **env},
                                   cwd=str(REPO))
    return stdio_client(params, errlog=errlog), errlog


def _http(stack, headers: dict[str, str]) -> Any:
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=150))
    return streamable_http_client(f"{stack.api_url}/mcp", http_client=http)


def _session(transport: Any, steps: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main():
        async with Client(transport, read_timeout_seconds=150) as client:
            return await steps(client)

    return asyncio.run(main())


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def _reason(result) -> str:
    """A tool error's text without the SDK's "Error executing tool NAME: " in front."""
    return _text(result).split(": ", 1)[1]


def _answered(outcome: dict[str, Any]) -> None:
    assert outcome["finished"] and outcome["status"] == "succeeded", outcome
    assert "$412 million" in outcome["answer"], outcome["answer"]
    assert "nw-2025-q4" in [s["document_id"] for s in outcome["sources"]]


def test_stdio_lists_the_tools_and_answers_a_search_from_the_sample_corpus(stack, collection):
    transport, _errlog = _stdio(stack)

    async def steps(client: Client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        searched = await client.call_tool("search", {"collection": collection, "query": QUERY, **FRESH})
        job = await client.call_tool("get_job", {"job_id": searched.structured_content["job_id"]})
        listed = await client.call_tool("list_collections", {})
        return tools, searched, job, listed

    tools, searched, job, listed = _session(transport, steps)
    assert set(tools) == TOOLS
    assert tools["search"].input_schema["required"] == ["collection", "query"]
    assert tools["search"].input_schema["properties"]["wait_s"]["maximum"] == 120
    assert tools["ingest_documents"].input_schema["$defs"]["DocumentIn"]["required"] == ["id", "text"]
    assert not searched.is_error, _text(searched)
    _answered(searched.structured_content)
    assert not job.is_error and job.structured_content == searched.structured_content
    assert {"id": collection, "name": "it-corpus"}.items() <= \
        next(c for c in listed.structured_content["collections"] if c["id"] == collection).items()
    # The job is the stack user's, as its key says.
    assert stack.sql("SELECT u.name FROM jobs j JOIN users u ON u.id = j.user_id WHERE j.id = %s",
                     searched.structured_content["job_id"]) == [(stack.user,)]


def test_http_endpoint_answers_a_search_by_collection_name_with_either_key_header(stack, collection):
    async def steps(client: Client):
        tools = (await client.list_tools()).tools
        searched = await client.call_tool("search", {"collection": "it-corpus", "query": QUERY, **FRESH})
        job = await client.call_tool("get_job", {"job_id": searched.structured_content["job_id"]})
        return tools, searched, job

    tools, searched, job = _session(_http(stack, {"Authorization": f"Bearer {stack.api_key}"}), steps)
    assert {t.name for t in tools} == TOOLS
    assert not searched.is_error, _text(searched)
    _answered(searched.structured_content)
    assert searched.structured_content["job_id"] != ""
    assert job.structured_content["answer"] == searched.structured_content["answer"]

    async def listed(client: Client):
        return await client.call_tool("list_collections", {})

    by_header = _session(_http(stack, {"X-API-Key": stack.api_key}), listed)
    assert collection in [c["id"] for c in by_header.structured_content["collections"]]


def test_a_search_past_its_bound_answers_the_job_id_and_get_job_gives_the_answer_later(stack, collection):
    # The collection's agent set holds the job at a gate until the search has answered: a job of no agents may end
    # before the tool's first read of it.
    gate = stack.call_logs / f"gate-{uuid.uuid4().hex}"
    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "test_gated", "config": {"gate": str(gate)}})

    async def steps(client: Client):
        submitted = await client.call_tool("search", {"collection": collection, "query": QUERY, "use_cache": False,
                                                      "wait_s": 0})
        gate.touch()
        for _ in range(300):
            job = await client.call_tool("get_job", {"job_id": submitted.structured_content["job_id"]})
            if job.structured_content["finished"]:
                return submitted, job
            await asyncio.sleep(0.2)
        raise AssertionError(f"job never finished: {job.structured_content}")

    try:
        submitted, job = _session(_http(stack, {"Authorization": f"Bearer {stack.api_key}"}), steps)
    finally:
        gate.touch()
        with stack.http() as http:
            assert http.put(f"/v1/collections/{collection}/agents", json={"agents": []}).status_code == 200
    assert submitted.structured_content["finished"] is False
    assert "get_job" in submitted.structured_content["next_step"]
    _answered(job.structured_content)


def test_ingest_documents_then_a_search_finds_the_new_document(stack, collection):
    name = f"mcp-notes-{uuid.uuid4().hex[:8]}"
    document = {"id": "otter-1", "title": "Harbour otter census",
                "text": "The 2025 harbour census counted 47 sea otters near Brightwater Pier, up from 31.",
                "metadata": {"source": "census"}}

    async def steps(client: Client):
        ingested = await client.call_tool("ingest_documents", {"collection": name, "documents": [document],
                                                               "wait_s": 90})
        searched = await client.call_tool("search", {"collection": name, "query": "How many sea otters were counted "
                                                     "near Brightwater Pier?", **FRESH})
        # The same question narrowed to documents of another source: the filter reaches the job.
        narrowed = await client.call_tool("search", {"collection": name, "query": "How many sea otters were counted "
                                                     "near Brightwater Pier?", "filter": {"eq": {
                                                         "key": "source", "value": "survey"}}, **FRESH})
        return ingested, searched, narrowed

    ingested, searched, narrowed = _session(_http(stack, {"Authorization": f"Bearer {stack.api_key}"}), steps)
    assert not ingested.is_error, _text(ingested)
    assert ingested.structured_content["created"] and ingested.structured_content["indexed"]
    assert ingested.structured_content["documents"] == {"pending": 0, "indexed": 1, "failed": 0}
    assert not searched.is_error, _text(searched)
    outcome = searched.structured_content
    assert outcome["status"] == "succeeded" and [s["document_id"] for s in outcome["sources"]] == ["otter-1"]
    assert "47" in outcome["answer"]
    assert not narrowed.is_error, _text(narrowed)
    assert narrowed.structured_content["status"] == "succeeded" and narrowed.structured_content["sources"] == []


def test_a_bad_document_is_refused_naming_the_field_and_nothing_is_written(stack, collection):
    async def steps(client: Client):
        return await client.call_tool("ingest_documents", {"collection": collection, "documents": [
            {"id": "dup", "text": "first"}, {"id": "dup", "text": "second"}]})

    before = stack.sql("SELECT count(*) FROM documents")
    refused = _session(_http(stack, {"Authorization": f"Bearer {stack.api_key}"}), steps)
    assert refused.is_error and "HTTP 422: body.documents.1.id: duplicate document id 'dup'" in _text(refused)
    assert stack.sql("SELECT count(*) FROM documents") == before


def test_without_a_valid_key_the_endpoint_answers_401_before_any_mcp_message(stack):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "it", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=stack.api_url, timeout=10) as http:
        for sent in ({}, {"Authorization": "Bearer as_not-a-key"}, {"X-API-Key": "as_not-a-key"}):
            response = http.post("/mcp", json=initialize, headers={**headers, **sent})
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"] == "Bearer"
            assert "API key" in response.json()["detail"]
        # The same key refusals as the routes: two different keys at once are refused too.
        both = http.post("/mcp", json=initialize,
                         headers={**headers, "Authorization": f"Bearer {stack.api_key}", "X-API-Key": "as_other"})
        assert both.status_code == 401 and "two different API keys" in both.json()["detail"]
        # With the key, the same message is served.
        served = http.post("/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {stack.api_key}"})
        assert served.status_code == 200, served.text

    with pytest.raises(Exception):  # noqa: B017 - the client SDK raises its own error for the refused session
        _session(_http(stack, {"Authorization": "Bearer as_not-a-key"}), lambda client: client.list_tools())


def test_stdio_with_a_bad_key_ends_with_a_clear_error(stack):
    env = {**stack.env, "AGENTSEARCH_API_KEY": "as_not-a-key"}
    done = subprocess.run([str(BIN / "agentsearch"), "mcp"], cwd=REPO, env=env, input="", capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: the API at {stack.api_url} refused the key in AGENTSEARCH_API_KEY "
        "(HTTP 401: unknown or revoked API key)")

    transport, errlog = _stdio(stack, AGENTSEARCH_API_KEY="as_not-a-key")
    with pytest.raises(Exception):  # noqa: B017 - the server exits before the handshake: the SDK's error
        _session(transport, lambda client: client.list_tools())
    errlog.seek(0)
    assert "refused the key in AGENTSEARCH_API_KEY" in errlog.read()


def test_another_users_job_and_collection_answer_like_missing_ones(stack, collection):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=[], use_cache=False)
    key_b = stack.create_user(f"mcp-b-{uuid.uuid4().hex[:6]}")
    nobody = str(uuid.uuid4())

    async def steps(client: Client):
        return [await client.call_tool("get_job", {"job_id": job["job_id"]}),
                await client.call_tool("get_job", {"job_id": nobody}),
                await client.call_tool("search", {"collection": collection, "query": QUERY}),
                await client.call_tool("search", {"collection": nobody, "query": QUERY}),
                await client.call_tool("ingest_documents", {"collection": collection,
                                                            "documents": [{"id": "x", "text": "planted by B"}]}),
                await client.call_tool("list_collections", {})]

    theirs_job, missing_job, theirs_search, missing_search, planted, listed = \
        _session(_http(stack, {"Authorization": f"Bearer {key_b}"}), steps)
    # The same words but for the id: nothing tells "exists, not yours" from "does not exist".
    for theirs, missing, ident in ((theirs_job, missing_job, job["job_id"]),
                                   (theirs_search, missing_search, collection),
                                   (planted, missing_search, collection)):
        assert theirs.is_error and missing.is_error
        assert _reason(theirs).startswith("HTTP 404: ") and _reason(theirs).endswith(" not found")
        assert _reason(theirs).replace(ident, "ID") == _reason(missing).replace(nobody, "ID")
    assert listed.structured_content == {"collections": []}
    # In A's collection: other modules on this stack may hold an 'x' of their own.
    assert stack.sql("SELECT count(*) FROM documents WHERE external_id = 'x' AND collection_id = %s",
                     collection) == [(0,)]
    # Over stdio, B's key is B's too.
    transport, _ = _stdio(stack, AGENTSEARCH_API_KEY=key_b)
    over_stdio = _session(transport, lambda client: client.call_tool("get_job", {"job_id": job["job_id"]}))
    assert over_stdio.is_error and _text(over_stdio).endswith(f"HTTP 404: job {job['job_id']} not found")
