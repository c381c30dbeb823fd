"""Refused requests get a clear 4xx naming what was wrong, and write nothing."""

from __future__ import annotations

import uuid

import pytest


def counts(stack) -> tuple[int, int, int]:
    (jobs, configs, collections), = stack.sql(
        "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM agent_configs), (SELECT count(*) FROM collections)"
    )
    return jobs, configs, collections


def locs(response) -> list[list]:
    return [d["loc"] for d in response.json()["detail"]]


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"query": ""}, ["body", "query"]),
        ({"query": "   "}, ["body", "query"]),
        ({"query": "x" * 2001}, ["body", "query"]),
        ({"query": "solar", "agents": ["language_detector", "no_such_agent"]}, ["body", "agents", 1]),
        ({"query": "solar", "top_k": 0}, ["body", "top_k"]),
        ({"query": "solar", "colour": "blue"}, ["body", "colour"]),
    ],
)
def test_search_refuses_bad_requests_and_writes_nothing(stack, collection, body, loc):
    before = counts(stack)
    with stack.http() as http:
        response = http.post("/v1/search", json={"collection_id": collection, **body})
    assert response.status_code == 422, response.text
    assert loc in locs(response)
    assert counts(stack) == before


def test_unknown_collection_is_404(stack, collection):
    before = counts(stack)
    with stack.http() as http:
        response = http.post("/v1/search", json={"collection_id": str(uuid.uuid4()), "query": "solar"})
        assert response.status_code == 404 and "not found" in response.json()["detail"]
        assert http.get(f"/v1/jobs/{uuid.uuid4()}").status_code == 404
        assert http.post(f"/v1/collections/{uuid.uuid4()}/documents",
                         json={"documents": [{"id": "a", "text": "b"}]}).status_code == 404
    assert counts(stack) == before


@pytest.mark.parametrize(
    "body, loc",
    [
        ({"agent_id": "no_such_agent"}, ["body", "agent_id"]),
        ({"agent_id": "deduplicator", "config": {"threshold": 5}}, ["body", "config", "threshold"]),
        ({"agent_id": "deduplicator", "config": {"treshold": 0.5}}, ["body", "config", "treshold"]),
        ({"agent_id": "executive_summary", "config": {"max_words": "many"}}, ["body", "config", "max_words"]),
        ({"agent_id": "deduplicator", "trigger_stage": "response"}, ["body", "trigger_stage"]),
        ({"agent_id": "deduplicator", "timeout_s": -1}, ["body", "timeout_s"]),
    ],
)
def test_agent_config_refuses_invalid_config_and_writes_nothing(stack, body, loc):
    before = counts(stack)
    with stack.http() as http:
        response = http.post("/v1/agent-configs", json=body)
    assert response.status_code == 422, response.text
    assert loc in locs(response)
    assert counts(stack) == before


def test_ingest_refuses_a_bad_document_and_writes_nothing(stack, collection):
    (before,), = stack.sql("SELECT count(*) FROM documents")
    with stack.http() as http:
        response = http.post(
            f"/v1/collections/{collection}/documents",
            json={"documents": [{"id": "ok-1", "text": "fine"}, {"id": "bad", "text": "   "}]},
        )
    assert response.status_code == 422
    assert ["body", "documents", 1, "text"] in locs(response)
    assert stack.sql("SELECT count(*) FROM documents") == [(before,)]


def test_a_nul_character_is_refused_as_bad_input_and_nothing_is_written(stack, collection):
    # PostgreSQL cannot store NUL in text: found by the OpenAPI fuzzing as a 500.
    with stack.http() as http:
        listed = http.get("/v1/collections", params={"name": "bad\x00name"})
        created = http.post("/v1/collections", json={"name": "bad\u0000name"})
        added = http.post(f"/v1/collections/{collection}/documents",
                          json={"documents": [{"id": "nul-doc", "title": "t", "text": "a\u0000b"}]})
    assert created.status_code == 422, created.text  # refused where the body enters, before the database
    assert listed.status_code == 422, listed.text
    assert "cannot be stored" in listed.json()["detail"]  # a query parameter: the database's refusal, as 422
    assert added.status_code == 422, added.text
    assert ["body", "documents", 0, "text"] in locs(added)
    assert stack.sql("SELECT count(*) FROM documents WHERE external_id = 'nul-doc'") == [(0,)]
    assert stack.sql("SELECT count(*) FROM collections WHERE name LIKE 'bad%%'") == [(0,)]
