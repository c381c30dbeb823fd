"""Users and keys on the real stack: a user sees only its own rows; another user's id answers like a missing one."""

from __future__ import annotations

import uuid

import httpx

from tests.integration.conftest import search, use_agents


def _not_found_like_a_missing_id(http: httpx.Client, method: str, path: str, missing_id: str, **kwargs) -> None:
    their_id = path.split("/")[3]
    theirs = http.request(method, path, **kwargs)
    missing = http.request(method, path.replace(their_id, missing_id), **kwargs)
    assert theirs.status_code == 404, (path, theirs.text)
    assert missing.status_code == 404, (missing_id, missing.text)
    # The same words but for the id: nothing tells "exists, not yours" from "does not exist".
    assert theirs.json()["detail"].replace(their_id, "ID") == missing.json()["detail"].replace(missing_id, "ID")


def test_user_b_gets_404_on_user_as_job_collection_and_agent_config(stack, collection):
    with stack.http() as a:
        config = use_agents(a, collection, {"agent_id": "language_detector", "name": f"a-{uuid.uuid4().hex[:6]}"})[0]
        job = search(a, collection, "Which wind farms does Northwind operate?", use_cache=False)
    key_b = stack.create_user(f"tenant-b-{uuid.uuid4().hex[:6]}")
    nobody = str(uuid.uuid4())
    with stack.http(key_b) as b:
        _not_found_like_a_missing_id(b, "GET", f"/v1/collections/{collection}", nobody)
        _not_found_like_a_missing_id(b, "GET", f"/v1/agent-configs/{config['id']}", nobody)
        _not_found_like_a_missing_id(b, "GET", f"/v1/jobs/{job['job_id']}", nobody)
        _not_found_like_a_missing_id(b, "GET", f"/v1/jobs/{job['job_id']}/events", nobody)
        _not_found_like_a_missing_id(b, "GET", f"/v1/jobs/{job['job_id']}/artifacts/summary.txt", nobody)
        _not_found_like_a_missing_id(b, "DELETE", f"/v1/jobs/{job['job_id']}", nobody)
        _not_found_like_a_missing_id(b, "POST", f"/v1/collections/{collection}/documents", nobody,
                                     json={"documents": [{"id": "x", "title": "t", "text": "planted by B"}]})
        submitted = b.post("/v1/search", json={"collection_id": collection, "query": "wind farms"})
        assert submitted.status_code == 404, submitted.text
        linked = b.put(f"/v1/collections/{collection}/agents", json={"agents": []})
        assert linked.status_code == 404, linked.text
        # B's own listings hold nothing of A's.
        assert b.get("/v1/collections").json() == []
        assert b.get("/v1/agent-configs").json() == []
        assert b.get("/v1/jobs").json()["total"] == 0
        # B can still use the service: its own collection with the same name as A's is no clash.
        own = b.post("/v1/collections", json={"name": "it-corpus"})
        assert own.status_code == 201, own.text
    with stack.http() as a:
        # A's rows are untouched by B's attempts.
        assert a.get(f"/v1/jobs/{job['job_id']}").json()["status"] == "succeeded"
        assert a.get(f"/v1/collections/{collection}").json()["documents"]["pending"] == 0
    # In A's collection: other modules on this stack may hold an 'x' of their own.
    assert stack.sql("SELECT count(*) FROM documents WHERE external_id = 'x' AND collection_id = %s",
                     collection) == [(0,)]


def test_a_key_from_the_cli_works_at_once_and_requests_without_one_are_refused(stack):
    key = stack.create_user(f"cli-{uuid.uuid4().hex[:6]}")
    assert key.startswith("as_") and len(key) > 40
    with stack.http(key) as http:
        assert http.get("/v1/jobs").status_code == 200
    with httpx.Client(base_url=stack.api_url, timeout=10) as anonymous:
        assert anonymous.get("/v1/jobs").status_code == 401
        assert anonymous.get("/healthz").status_code == 200
        assert anonymous.get("/readyz").status_code == 200
    # Only the digest is in the database.
    assert stack.sql("SELECT count(*) FROM api_keys WHERE digest = %s OR prefix = %s", key, key) == [(0,)]
