"""The HTTP API of the agentic modes: iterative search requests and profile sets are validated field by field, and a
user sees only its own profile sets. One embedded app (``app`` and ``client`` in conftest.py) serves the module."""

from __future__ import annotations

import uuid

import pytest

from tests.support.api_checks import jobs_written, locs, new_collection

MISSING = "6b0f9a52-1d4e-4c8a-9a55-0e1c2f3d4b5a"


@pytest.fixture(scope="module")
def collection_id(client) -> str:
    return new_collection(client, "briefings")


@pytest.mark.parametrize("body, loc", [
    ({"iterative": {"target": 2}}, ["body", "iterative"]),
    ({"mode": "iterative", "iterative": {"target": 0}}, ["body", "iterative", "target"]),
    ({"mode": "iterative", "iterative": {"thresholds": {"first": 6}}}, ["body", "iterative", "thresholds", "first"]),
    ({"mode": "iterative", "profiles": [{"name": "total"}]}, ["body", "profiles", 0, "name"]),
    ({"mode": "iterative", "profiles": [{"name": "a", "collections": [MISSING]}]},
     ["body", "profiles", 0, "collections", 0]),
    ({"mode": "iterative", "seen": {"window_days": -1}}, ["body", "seen", "window_days"]),
])
def test_bad_agentic_requests_are_422_on_the_field_and_write_no_job(client, app, collection_id, body, loc):
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "solar output", **body})
    assert response.status_code == 422, response.text
    assert locs(response)[0] == loc
    assert jobs_written(app) == 0


def test_profile_sets_are_validated_listed_and_private(client, app, collection_id):
    from fastapi.testclient import TestClient

    from agentsearch.pipeline.security.users import UserStore

    bad = client.post("/v1/profile-sets", json={"name": "x", "collection_id": collection_id,
                                                "profiles": [{"name": "a"}, {"name": "a"}]})
    assert bad.status_code == 422 and "unique" in bad.text
    too_often = client.post("/v1/profile-sets", json={"name": "x", "collection_id": collection_id, "schedule_s": 5,
                                                      "profiles": [{"name": "a"}]})
    assert too_often.status_code == 422 and locs(too_often) == [["body", "schedule_s"]]
    missing = client.post("/v1/profile-sets", json={"name": "x", "collection_id": MISSING, "profiles": [{"name": "a"}]})
    assert missing.status_code == 404

    body = {"name": "morning", "collection_id": collection_id, "query": "solar", "schedule_s": 3600,
            "profiles": [{"name": "research", "query_template": "{query} studies", "target": 2}]}
    created = client.post("/v1/profile-sets", json=body)
    assert created.status_code == 201, created.text
    set_id = created.json()["id"]
    assert created.json()["next_run_at"] is not None and created.json()["profiles"][0]["target"] == 2
    assert client.post("/v1/profile-sets", json=body).status_code == 409
    assert [s["id"] for s in client.get("/v1/profile-sets").json()] == [set_id]
    assert client.get(f"/v1/profile-sets/{set_id}/runs").json() == {"items": [], "total": 0, "limit": 20, "offset": 0}

    _, other_key = UserStore(app.state.services.db).create(f"other-{uuid.uuid4().hex[:8]}")
    # Not entered: the module's client already runs the app's lifespan (and its worker).
    other = TestClient(app, headers={"Authorization": f"Bearer {other_key}"})
    assert other.get(f"/v1/profile-sets/{set_id}").status_code == 404
    assert other.delete(f"/v1/profile-sets/{set_id}").status_code == 404
    assert other.post(f"/v1/profile-sets/{set_id}/runs").status_code == 404
    assert other.get("/v1/profile-sets").json() == []
    assert client.delete(f"/v1/profile-sets/{set_id}").status_code == 204
    assert client.get(f"/v1/profile-sets/{set_id}").status_code == 404


@pytest.mark.parametrize("agents, loc", [
    ([{"agent_id": "no_such_agent"}], ["body", "agents", 0, "agent_id"]),
    ([{"agent_id": "query_expander"}], ["body", "agents", 0, "agent_id"]),  # not a response agent
    ([{"agent_id": "pdf_report"}, {"agent_id": "email_draft", "config": {"subject_prefix": 5}}],
     ["body", "agents", 1, "config", "subject_prefix"]),
    ([{"agent_id": "pdf_report"}, {"agent_id": "pdf_report"}], ["body", "agents", 1, "agent_id"]),
    (["pdf_report"], ["body", "agents", 0]),
])
def test_a_briefing_s_agents_are_422_on_the_field(client, collection_id, agents, loc):
    response = client.post("/v1/profile-sets", json={"name": f"b-{uuid.uuid4().hex[:6]}", "agents": agents,
                                                     "collection_id": collection_id, "profiles": [{"name": "a"}]})
    assert response.status_code == 422, response.text
    assert locs(response)[0] == loc


def test_a_briefing_s_agents_are_kept_with_their_configs(client, collection_id):
    created = client.post("/v1/profile-sets", json={
        "name": f"b-{uuid.uuid4().hex[:6]}", "collection_id": collection_id, "profiles": [{"name": "a"}],
        "agents": [{"agent_id": "pdf_report"}, {"agent_id": "email_draft", "config": {"subject_prefix": "Daily"}}]})
    assert created.status_code == 201, created.text
    assert created.json()["agents"] == [{"agent_id": "pdf_report", "config": {}},
                                        {"agent_id": "email_draft", "config": {"subject_prefix": "Daily"}}]
    assert client.get(f"/v1/profile-sets/{created.json()['id']}").json()["agents"] == created.json()["agents"]
