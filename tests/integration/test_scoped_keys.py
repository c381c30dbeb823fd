"""Scoped API keys on the real stack: a key short of a scope gets 403 naming it, a collection or job outside the key
answers 404 like a missing one (over HTTP and MCP), an expired key gets 401, a limited key makes no keys, and a key
its owner deletes stops working at once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from mcp import Client

from tests.integration.conftest import own_collection, search, wait_job
from tests.integration.test_mcp_server import _http, _reason, _session

pytestmark = pytest.mark.integration

DOCS_A = [{"id": "a-1", "title": "Leave policy", "text": "The notice period is four weeks for every employee."}]
DOCS_B = [{"id": "b-1", "title": "Salaries", "text": "The board approved a salary band review for 2026."}]


def _same_as_missing(http: httpx.Client, path: str, ident: str) -> None:
    nobody = str(uuid.uuid4())
    theirs, missing = http.get(path), http.get(path.replace(ident, nobody))
    assert theirs.status_code == missing.status_code == 404, (path, theirs.text)
    assert theirs.json()["detail"].replace(ident, "ID") == missing.json()["detail"].replace(nobody, "ID")


@pytest.fixture(scope="module")
def two_collections(stack) -> dict[str, str]:
    """Two collections of the stack's user (names and ids), with a finished job over each."""
    names = {part: f"scoped-{part}-{uuid.uuid4().hex[:6]}" for part in ("a", "b")}
    with stack.http() as owner:
        ids = {part: own_collection(owner, names[part], docs) for part, docs in (("a", DOCS_A), ("b", DOCS_B))}
        jobs = {part: search(owner, ids[part], "notice period", agents=[], use_cache=False)["job_id"]
                for part in ids}
    return {**{f"{p}_name": n for p, n in names.items()}, **ids, **{f"{p}_job": j for p, j in jobs.items()}}


def test_a_search_key_of_one_collection_searches_it_and_sees_nothing_else(stack, two_collections):
    a, b, b_job = two_collections["a"], two_collections["b"], two_collections["b_job"]
    # Made by the operator's command, the collection by its name.
    key = stack.cli("users", "new-key", stack.user, "--label", "bot", "--scope", "search",
                    "--collection", two_collections["a_name"], "--expires", "30d").strip().splitlines()[-1]
    assert f"{key[:11]}...  live" in stack.cli("users", "list")
    with stack.http(key) as bot:
        me = bot.get("/v1/me").json()["key"]
        assert (me["scopes"], me["collections"], me["label"]) == (["search"], [a], "bot")
        left = datetime.fromisoformat(me["expires_at"]) - datetime.now(UTC)
        assert timedelta(days=30) - timedelta(minutes=1) < left <= timedelta(days=30)
        job = search(bot, a, "How long is the notice period?", agents=[], use_cache=False)
        assert job["status"] == "succeeded" and "four weeks" in job["response"]["answer"], job
        events = bot.get(f"/v1/jobs/{job['job_id']}/events")
        assert events.status_code == 200 and "event: done" in events.text
        assert [c["id"] for c in bot.get("/v1/collections").json()] == [a]
        listed = {j["job_id"] for j in bot.get("/v1/jobs", params={"limit": 200}).json()["items"]}
        assert job["job_id"] in listed and b_job not in listed and two_collections["a_job"] in listed
        # B and its job answer exactly like ids that do not exist.
        _same_as_missing(bot, f"/v1/collections/{b}", b)
        for path in (f"/v1/jobs/{b_job}", f"/v1/jobs/{b_job}/events", f"/v1/jobs/{b_job}/artifacts/summary.txt"):
            _same_as_missing(bot, path, b_job)
        assert bot.delete(f"/v1/jobs/{b_job}").status_code == 404
        assert bot.post("/v1/search", json={"collection_id": b, "query": "salary"}).status_code == 404
        named = bot.post("/v1/search", json={"collection_id": a, "query": "salary", "also_search": [b]})
        assert named.status_code == 422 and named.json()["detail"][0]["loc"] == ["body", "also_search", 0]
        # Beyond its scope: 403 naming the scope needed.
        written = bot.post(f"/v1/collections/{a}/documents", json={"documents": DOCS_B})
        assert written.status_code == 403 and "'write'" in written.json()["detail"]
        assert bot.get(f"/v1/collections/{a}/documents").status_code == 403
        assert bot.post("/v1/keys", json={"label": "wider"}).status_code == 403

    async def steps(client: Client):
        return [await client.call_tool("list_collections", {}),
                await client.call_tool("get_job", {"job_id": b_job}),
                await client.call_tool("search", {"collection": b, "query": "salary", "agents": []}),
                await client.call_tool("ingest_documents", {"collection": a, "documents": DOCS_B})]

    listed, their_job, their_search, planted = _session(_http(stack, {"Authorization": f"Bearer {key}"}), steps)
    assert [c["id"] for c in listed.structured_content["collections"]] == [a]
    assert _reason(their_job) == f"HTTP 404: job {b_job} not found"
    assert _reason(their_search) == f"HTTP 404: collection {b} not found"
    assert planted.is_error and _reason(planted).startswith("HTTP 403: ") and "'write'" in _reason(planted)
    assert stack.sql("SELECT count(*) FROM documents WHERE collection_id = %s AND external_id = 'b-1'", a) == [(0,)]


def test_read_keys_expiry_minting_and_revocation(stack, two_collections):
    a = two_collections["a"]
    with stack.http() as owner:
        made = owner.post("/v1/keys", json={"label": "reader", "scopes": ["read"], "expires_in_days": 1})
        assert made.status_code == 201, made.text
        reader = made.json()
        listed = {k["prefix"]: k for k in owner.get("/v1/keys").json()}
        assert listed[reader["prefix"]]["scopes"] == ["read"] and reader["key"] not in str(listed)
    with stack.http(reader["key"]) as http:
        refused = http.post(f"/v1/collections/{a}/documents", json={"documents": DOCS_B})
        assert refused.status_code == 403 and "'write'" in refused.json()["detail"], refused.text
        assert http.post("/v1/collections", json={"name": f"r-{uuid.uuid4().hex[:6]}"}).status_code == 403
        assert http.post("/v1/search", json={"collection_id": a, "query": "x"}).status_code == 403
        assert wait_job(http, two_collections["b_job"])["status"] == "succeeded"  # every collection, read only
        assert http.get(f"/v1/collections/{a}/documents").json()["total"] == len(DOCS_A)
        minted = http.post("/v1/keys", json={"label": "escalated", "scopes": ["read", "write"]})
        assert minted.status_code == 403 and "without limits" in minted.json()["detail"]
    assert stack.sql("SELECT count(*) FROM api_keys WHERE label = 'escalated'") == [(0,)]
    assert stack.sql("SELECT count(*) FROM documents WHERE collection_id = %s", a) == [(len(DOCS_A),)]
    # Past its expiry: 401 saying so, in every API process at once (the row is read on each request).
    stack.sql("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE prefix = %s RETURNING 1",
              reader["prefix"])
    with stack.http(reader["key"]) as http:
        expired = http.get("/v1/me")
        assert expired.status_code == 401 and "expired" in expired.json()["detail"], expired.text
    # Revoked by its owner: another user cannot, the owner can, and it stops at once.
    with stack.http() as owner:
        spare = owner.post("/v1/keys", json={"label": "spare"}).json()
    stranger = stack.create_user(f"stranger-{uuid.uuid4().hex[:6]}")
    with stack.http(stranger) as http:
        assert http.delete(f"/v1/keys/{spare['prefix']}").status_code == 404
    with stack.http(spare["key"]) as http:
        assert http.get("/v1/collections").status_code == 200
        assert http.delete(f"/v1/keys/{spare['prefix']}").status_code == 204  # a key without limits, itself
        assert http.get("/v1/collections").status_code == 401
