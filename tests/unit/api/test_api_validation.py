"""The HTTP API refuses bad requests with FastAPI's 422 shape, and a refused request writes nothing.

One embedded app (``app`` and ``client`` in conftest.py) serves the whole module. No test here writes an agent
config or a job, so each test can check that those tables are still empty; collections get unique names per test.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from tests.support.api_checks import jobs_written, locs, new_collection

COLLECTION_MISSING = "6b0f9a52-1d4e-4c8a-9a55-0e1c2f3d4b5a"


@pytest.fixture
def collection_id(client) -> str:
    return new_collection(client, "annual reports")


def assert_nothing_written(client, app) -> None:
    response = client.get("/v1/agent-configs")
    assert response.status_code == 200
    assert response.json() == []
    assert jobs_written(app) == 0


# --- health ---------------------------------------------------------------------------------------------------


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_in_embedded_mode(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"] == {"database": "ok", "redis": "ok", "broker": "ok"}


# --- search ---------------------------------------------------------------------------------------------------


def test_search_in_an_unknown_collection_is_404(client, app):
    response = client.post("/v1/search", json={"collection_id": COLLECTION_MISSING, "query": "Q4 revenue"})
    assert response.status_code == 404
    assert COLLECTION_MISSING in response.json()["detail"]
    assert_nothing_written(client, app)


@pytest.mark.parametrize("query", ["", "   \n\t "])
def test_empty_query_is_422_on_query(client, app, collection_id, query):
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": query})
    assert response.status_code == 422
    assert locs(response) == [["body", "query"]]
    assert_nothing_written(client, app)


def test_query_over_the_limit_is_422_on_query(client, app, collection_id):
    query = ("What was the revenue of the solar segment in the fourth quarter? " * 40)[:2001]
    assert len(query.strip()) == 2001
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": query})
    assert response.status_code == 422
    assert locs(response) == [["body", "query"]]
    assert "2000" in response.json()["detail"][0]["msg"]
    assert_nothing_written(client, app)


def test_missing_query_is_422_on_query(client, app, collection_id):
    response = client.post("/v1/search", json={"collection_id": collection_id})
    assert response.status_code == 422
    assert ["body", "query"] in locs(response)
    assert_nothing_written(client, app)


@pytest.mark.parametrize(
    ("agents", "loc"),
    [
        (["sentiment_analyzer"], ["body", "agents", 0]),
        (["language_detector", "sentimnet_analyzer"], ["body", "agents", 1]),
    ],
)
def test_unknown_agent_id_is_422_naming_its_position(client, app, collection_id, agents, loc):
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "Q4 revenue", "agents": agents})
    assert response.status_code == 422
    assert locs(response) == [loc]
    assert agents[loc[-1]] in response.json()["detail"][0]["msg"]
    assert_nothing_written(client, app)


def test_an_agent_listed_twice_is_422(client, app, collection_id):
    body = {"collection_id": collection_id, "query": "Q4 revenue", "agents": ["deduplicator", "deduplicator"]}
    response = client.post("/v1/search", json=body)
    assert response.status_code == 422
    assert locs(response) == [["body", "agents"]]
    assert_nothing_written(client, app)


def test_unknown_request_field_is_422(client, app, collection_id):
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "Q4 revenue", "topk": 3})
    assert response.status_code == 422
    assert ["body", "topk"] in locs(response)
    assert_nothing_written(client, app)


@pytest.mark.parametrize("top_k", [0, 10_000])
def test_top_k_out_of_range_is_422_on_top_k(client, app, collection_id, top_k):
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "Q4 revenue", "top_k": top_k})
    assert response.status_code == 422
    assert locs(response) == [["body", "top_k"]]
    assert_nothing_written(client, app)


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"stage_timeouts": {"response": True}}, ["body", "stage_timeouts", "response"]),
        ({"stage_timeouts": {"pre_search": "5"}}, ["body", "stage_timeouts", "pre_search"]),
        ({"top_k": True}, ["body", "top_k"]),
        ({"top_k": "5"}, ["body", "top_k"]),
        ({"search": {"min_score": True}}, ["body", "search", "min_score"]),
        ({"search": {"candidates": "50"}}, ["body", "search", "candidates"]),
        ({"mode": "iterative", "iterative": {"target": True}}, ["body", "iterative", "target"]),
        ({"mode": "iterative", "iterative": {"thresholds": {"first": "4"}}},
         ["body", "iterative", "thresholds", "first"]),
        ({"mode": "iterative", "seen": {"window_days": True}}, ["body", "seen", "window_days"]),
        ({"mode": "iterative", "profiles": [{"name": "risks", "per_iteration": True}]},
         ["body", "profiles", 0, "per_iteration"]),
    ],
)
def test_a_number_field_takes_a_json_number_not_a_boolean_or_a_string(client, app, collection_id, fields, loc):
    """``true`` was read as 1 (a stage budget of 1 s, one result) and ``"5"`` as 5: a client's mistake became a
    setting instead of a 422 naming the field."""
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "Q4 revenue", **fields})
    assert response.status_code == 422, response.text
    assert locs(response) == [loc]
    assert_nothing_written(client, app)


def test_a_collections_stage_budget_takes_a_number_not_a_boolean(client):
    name = f"budgets {uuid.uuid4().hex[:8]}"
    refused = client.post("/v1/collections", json={"name": name, "stage_timeouts": {"response": True}})
    assert refused.status_code == 422, refused.text
    assert locs(refused) == [["body", "stage_timeouts", "response"]]
    assert client.get("/v1/collections", params={"name": name}).json() == []
    # A whole number is a number of seconds.
    created = client.post("/v1/collections", json={"name": name, "stage_timeouts": {"response": 5}})
    assert created.status_code == 201, created.text
    assert created.json()["stage_timeouts"] == {"response": 5.0}


# --- nesting --------------------------------------------------------------------------------------------------


def post_json_text(client, path: str, text: str):
    """A body written out by hand: ``json=`` cannot encode one nested this deep (json.dumps recurses too)."""
    return client.post(path, content=text.encode(), headers={"Content-Type": "application/json"})


def nested_objects(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def assert_refused_as_too_deep(response, loc: list) -> None:
    assert response.status_code == 422, response.text
    assert locs(response) == [loc]
    assert "nests deeper than 64 levels" in response.json()["detail"][0]["msg"]
    assert '{"a"' not in response.text and "[[" not in response.text  # nothing of the body comes back


@pytest.mark.parametrize("path", ["/v1/collections", "/v1/search", "/v1/agent-configs"])
def test_a_body_of_arrays_nested_a_thousand_deep_is_422_naming_the_body(client, app, path):
    """It was a 500: the parser (or pydantic after it) ran out of recursion."""
    assert_refused_as_too_deep(post_json_text(client, path, "[" * 1000 + "]" * 1000), ["body"])
    assert_nothing_written(client, app)


@pytest.mark.parametrize(("depth", "loc"), [(100, ["body", "documents", 0, "metadata"]), (3000, ["body"])])
def test_document_metadata_nested_past_the_limit_is_422(client, collection_id, depth, loc):
    """Nested past the limit the field is named; past what the parser takes (a few hundred levels further) the
    body is, as nothing of it was read."""
    body = f'{{"documents": [{{"id": "deep", "text": "A report.", "metadata": {nested_objects(depth)}}}]}}'
    assert_refused_as_too_deep(post_json_text(client, f"/v1/collections/{collection_id}/documents", body), loc)
    counts = client.get(f"/v1/collections/{collection_id}").json()["documents"]
    assert counts == {"pending": 0, "indexed": 0, "failed": 0}


@pytest.mark.parametrize(("depth", "loc"), [(100, ["body", "filter", "not", "not"]), (3000, ["body"])])
def test_a_filter_nested_past_the_limit_is_422(client, app, collection_id, depth, loc):
    deep_filter = '{"not": ' * depth + '{"exists": {"key": "region"}}' + "}" * depth
    body = f'{{"collection_id": "{collection_id}", "query": "Q4 revenue", "filter": {deep_filter}}}'
    assert_refused_as_too_deep(post_json_text(client, "/v1/search", body), loc)
    assert_nothing_written(client, app)


# --- agent configs --------------------------------------------------------------------------------------------


def test_agent_config_for_an_unknown_agent_is_422_on_agent_id(client, app):
    response = client.post("/v1/agent-configs", json={"agent_id": "sentiment_analyzer", "config": {}})
    assert response.status_code == 422
    assert locs(response) == [["body", "agent_id"]]
    assert "sentiment_analyzer" in response.json()["detail"][0]["msg"]
    assert_nothing_written(client, app)


def test_agent_config_with_an_invalid_value_is_422_on_that_config_field(client, app):
    response = client.post("/v1/agent-configs", json={"agent_id": "deduplicator", "config": {"threshold": 5}})
    assert response.status_code == 422
    assert locs(response) == [["body", "config", "threshold"]]
    assert_nothing_written(client, app)


def test_agent_config_with_an_unknown_key_is_422_on_that_key(client, app):
    body = {"agent_id": "deduplicator", "config": {"threshold": 0.7, "treshold": 0.7}}
    response = client.post("/v1/agent-configs", json=body)
    assert response.status_code == 422
    assert locs(response) == [["body", "config", "treshold"]]
    assert_nothing_written(client, app)


def test_agent_config_nested_errors_keep_their_path(client, app):
    body = {"agent_id": "acronym_resolver", "config": {"acronyms": {"PPA": ""}}}
    response = client.post("/v1/agent-configs", json=body)
    assert response.status_code == 422
    assert locs(response)[0][:3] == ["body", "config", "acronyms"]
    assert_nothing_written(client, app)


def test_agent_config_for_the_wrong_stage_is_422_on_trigger_stage(client, app):
    body = {"agent_id": "deduplicator", "config": {}, "trigger_stage": "pre_search"}
    response = client.post("/v1/agent-configs", json=body)
    assert response.status_code == 422
    assert locs(response) == [["body", "trigger_stage"]]
    assert_nothing_written(client, app)


def test_agent_config_with_an_invalid_runtime_limit_is_422(client, app):
    response = client.post("/v1/agent-configs", json={"agent_id": "deduplicator", "timeout_s": 0})
    assert response.status_code == 422
    assert locs(response) == [["body", "timeout_s"]]
    assert_nothing_written(client, app)


def test_a_valid_agent_config_is_saved_normalised_and_listed(client, app):
    """The control for the checks above: a config that passes validation does show up in the listing."""
    from agentsearch.pipeline.platform.tables.agents import AgentConfigRow

    response = client.post("/v1/agent-configs", json={"agent_id": "deduplicator", "config": {"threshold": 0.7}})
    try:
        assert response.status_code == 201, response.text
        saved = response.json()
        assert saved["config"] == {"threshold": 0.7, "shingle_size": 3}  # defaults filled in when saved
        assert saved["trigger_stage"] == "post_search"  # taken from the agent
        assert saved["name"] == "deduplicator"
        assert [c["id"] for c in client.get("/v1/agent-configs").json()] == [saved["id"]]
    finally:
        with app.state.services.db.session() as s:
            for row in s.scalars(select(AgentConfigRow)).all():
                s.delete(row)
    assert_nothing_written(client, app)


# --- collections ----------------------------------------------------------------------------------------------


def test_a_duplicate_collection_name_is_422_on_name(client):
    name = f"quarterly filings {uuid.uuid4().hex[:8]}"
    first = client.post("/v1/collections", json={"name": name, "description": "10-Q and 10-K filings"})
    assert first.status_code == 201, first.text
    assert first.json()["name"] == name
    second = client.post("/v1/collections", json={"name": name})
    assert second.status_code == 422
    assert locs(second) == [["body", "name"]]
    listed = client.get("/v1/collections", params={"name": name}).json()
    assert [c["id"] for c in listed] == [first.json()["id"]]


@pytest.mark.parametrize("name", ["", "reports/2025", "<script>"])
def test_a_collection_name_outside_the_allowed_characters_is_422(client, name):
    response = client.post("/v1/collections", json={"name": name})
    assert response.status_code == 422
    assert ["body", "name"] in locs(response)
    assert client.get("/v1/collections", params={"name": name}).json() == []


def test_unknown_collection_is_404_on_read(client):
    assert client.get(f"/v1/collections/{COLLECTION_MISSING}").status_code == 404


@pytest.mark.parametrize(
    "method, path",
    [("GET", "/v1/collections"), ("POST", "/v1/search"), ("GET", "/v1/jobs"), ("GET", "/v1/agents"),
     ("GET", "/v1/agent-configs"), ("GET", f"/v1/jobs/{COLLECTION_MISSING}/events")],
)
def test_every_route_needs_a_key(client, method, path):
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer as_not-a-real-key"}, {"X-API-Key": "nope"}):
        response = client.request(method, path, headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    assert "API key" in client.request(method, path, headers={"Authorization": ""}).json()["detail"]


def test_probes_need_no_key_and_the_key_may_come_in_its_own_header(client):
    for path in ("/healthz", "/readyz"):
        assert client.get(path, headers={"Authorization": ""}).status_code == 200
    key = client.headers["Authorization"].removeprefix("Bearer ")
    assert client.get("/v1/collections", headers={"Authorization": "", "X-API-Key": key}).status_code == 200


def test_two_different_keys_in_one_request_are_refused(client, app):
    """The key schemes read the first header of each name only: a second X-API-Key (or Authorization) header went
    unseen, and the request was served as whichever key came first."""
    from agentsearch.pipeline.security.users import UserStore

    key = client.headers["Authorization"].removeprefix("Bearer ")
    _, other = UserStore(app.state.services.db).create(f"other-{uuid.uuid4().hex[:8]}")
    for headers in (
        [("Authorization", ""), ("X-API-Key", key), ("X-API-Key", other)],
        [("Authorization", f"Bearer {key}"), ("Authorization", f"Bearer {other}")],
        [("Authorization", f"Bearer {key}"), ("X-API-Key", other)],
    ):
        response = client.get("/v1/collections", headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert "two different API keys" in response.json()["detail"]
        assert response.headers["www-authenticate"] == "Bearer"
    # The same key twice is one key.
    same = client.get("/v1/collections", headers=[("Authorization", f"Bearer {key}"), ("X-API-Key", key),
                                                  ("X-API-Key", key)])
    assert same.status_code == 200, same.text


def test_every_answer_says_nosniff(client):
    """A browser takes the stated content type of any answer, never one it guesses from the bytes."""
    for response in (client.get("/v1/collections"), client.get(f"/v1/collections/{COLLECTION_MISSING}"),
                     client.get("/v1/jobs", headers={"Authorization": ""}), client.get("/healthz")):
        assert response.headers["x-content-type-options"] == "nosniff", response.request.url
