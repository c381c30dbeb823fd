"""Fallback and critical agents on the real stack: a failing critical agent replaced by its fallback, a job failed by
a critical agent whose fallback failed too, and a bad fallback refused naming the field with nothing written."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.integration.conftest import search

pytestmark = pytest.mark.integration


def _config(http: httpx.Client, agent_id: str, **extra) -> str:
    created = http.post("/v1/agent-configs",
                        json={"agent_id": agent_id, "name": f"fb-{agent_id}-{uuid.uuid4().hex[:6]}", **extra})
    assert created.status_code == 201, created.text
    return created.json()["id"]


@pytest.fixture(scope="module")
def own_collection(stack, collection) -> str:
    """A small collection of this module's own, whose agent set the tests replace; the shared ``collection``
    fixture is asked for first so the workers are warm."""
    return stack.ingest(f"fallbacks-{uuid.uuid4().hex[:6]}", [
        {"id": "solar", "title": "Solar output", "text": "Solar output in 2025 rose by a fifth across the fleet."},
        {"id": "wind", "title": "Wind farms", "text": "Northwind operates three wind farms on the northern coast."},
    ])


def _set(http: httpx.Client, collection_id: str, *entries: dict) -> httpx.Response:
    return http.put(f"/v1/collections/{collection_id}/agents", json={"agents": list(entries)})


def test_a_failing_critical_agent_is_replaced_by_its_fallback(stack, own_collection):
    with stack.http() as http:
        exploding, counting = _config(http, "test_exploding"), _config(http, "test_counting")
        linked = _set(http, own_collection,
                      {"agent_config_id": exploding, "critical": True, "fallback_agent_config_id": counting})
        assert linked.status_code == 200, linked.text
        assert stack.sql(f"SELECT critical, fallback_agent_config_id::text FROM collection_agents "
                         f"WHERE collection_id = '{own_collection}'") == [(True, counting)]
        job = search(http, own_collection, "solar output in 2025", use_cache=False)
    assert job["status"] == "succeeded", job
    runs = [(r["agent_id"], r["status"], r.get("stood_in_for")) for r in job["response"]["agents"]]
    assert runs[:2] == [("test_exploding", "error", None), ("test_counting", "ok", "test_exploding")]
    # The fallback's output is the step's: what it wrote into the job's metadata is there.
    recorded = {r["agent_id"]: r for r in job["agents"]}
    assert recorded["test_counting"]["stood_in_for"] == "test_exploding"
    assert recorded["test_counting"]["metadata"] == {"counted_by": "default"}
    assert "boom" in recorded["test_exploding"]["errors"][0]


def test_a_critical_agent_whose_fallback_fails_too_fails_the_job(stack, own_collection):
    with stack.http() as http:
        exploding, flaky = _config(http, "test_exploding"), _config(http, "test_flaky")
        linked = _set(http, own_collection,
                      {"agent_config_id": exploding, "critical": True, "fallback_agent_config_id": flaky})
        assert linked.status_code == 200, linked.text
        job = search(http, own_collection, "wind farms", use_cache=False)
        assert job["status"] == "failed", job
        assert "critical agent test_exploding failed" in job["error"]
        assert "test_flaky ended error: ConnectionError: flaky upstream is down" in job["error"]
        # Without critical the same failures are skipped as before, and the job succeeds.
        _set(http, own_collection, {"agent_config_id": exploding, "fallback_agent_config_id": flaky})
        job = search(http, own_collection, "wind farms", use_cache=False)
    assert job["status"] == "succeeded", job
    assert [r["status"] for r in job["response"]["agents"][:2]] == ["error", "error"]


def test_bad_fallbacks_are_refused_naming_the_field_with_nothing_written(stack, own_collection):
    with stack.http() as http:
        spell, counting = _config(http, "spell_checker"), _config(http, "test_counting")
        other_stage = _config(http, "test_exploding_responder")
        before = stack.sql(f"SELECT agent_config_id::text, critical FROM collection_agents "
                           f"WHERE collection_id = '{own_collection}' ORDER BY 1")
        key_b = stack.create_user(f"fallback-b-{uuid.uuid4().hex[:6]}")
        with stack.http(key_b) as b:
            theirs = _config(b, "test_counting")
        said = {}
        for name, bad in (("stage", other_stage), ("theirs", theirs), ("itself", spell),
                          ("missing", str(uuid.uuid4()))):
            refused = _set(http, own_collection, {"agent_config_id": counting},
                           {"agent_config_id": spell, "critical": True, "fallback_agent_config_id": bad})
            assert refused.status_code == 422, refused.text
            assert [d["loc"] for d in refused.json()["detail"]] == [
                ["body", "agents", 1, "fallback_agent_config_id"]], refused.text
            said[name] = refused.json()["detail"][0]["msg"].replace(bad, "ID")
        # Another user's config reads exactly like a missing one; the others say what is wrong.
        assert said["theirs"] == said["missing"]
        assert "stage" in said["stage"] and "own fallback" in said["itself"]
        assert stack.sql(f"SELECT agent_config_id::text, critical FROM collection_agents "
                         f"WHERE collection_id = '{own_collection}' ORDER BY 1") == before


def test_response_agents_stand_in_and_a_critical_one_fails_the_job_at_assembly(stack, own_collection):
    with stack.http() as http:
        broken, summary = _config(http, "test_exploding_responder"), _config(http, "executive_summary")
        _set(http, own_collection,
             {"agent_config_id": broken, "critical": True, "fallback_agent_config_id": summary})
        job = search(http, own_collection, "Which wind farms does Northwind operate?", use_cache=False)
        assert job["status"] == "succeeded", job
        runs = [(r["agent_id"], r["status"], r.get("stood_in_for")) for r in job["response"]["agents"]]
        assert runs[-2:] == [("test_exploding_responder", "error", None),
                             ("executive_summary", "ok", "test_exploding_responder")]
        assert [a["agent_id"] for a in job["response"]["agent_artifacts"]] == ["executive_summary"]
        # Critical without a fallback: the chord completes, and assembly fails the job with the reason.
        _set(http, own_collection, {"agent_config_id": broken, "critical": True})
        job = search(http, own_collection, "Which wind farms does Northwind operate?", use_cache=False)
    assert job["status"] == "failed", job
    assert job["error"] == ("critical agent test_exploding_responder failed "
                            "(test_exploding_responder ended error: ValueError: renderer crashed)")
    assert job["response"] is None
