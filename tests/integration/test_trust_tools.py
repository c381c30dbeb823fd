"""What a key holder's agent config may make a worker do, on the real stack (findings 1-3 of the security issue).

1. No config starts a process of its own choosing: ``command``/``env``/``cwd`` are refused when saved; only a tool an
   operator registered (``agentsearch tools add``) runs, with the environment the operator gave, and a tool removed
   after a config was saved does not run.
2. No config points a worker at an internal host: raw URLs are refused when saved, and a registered endpoint on
   127.0.0.1 is refused at connect time unless the operator allowed it.
3. No config reads another user's collection: a foreign ``trusted_collection_id`` is refused when saved, in the words
   used for a missing one, and again when the job runs (a row that slipped through).
"""

from __future__ import annotations

import base64
import json
import shlex
import sys
import uuid

import pytest

from agentsearch.devstack import ingest_through_api
from agentsearch.pipeline.text import split_sentences
from tests.integration.conftest import REPO, SAMPLE_CORPUS, runs_by_agent, search, use_agents
from tests.support.json_server import JsonServer

MCP_SERVER = shlex.join([sys.executable, "-m", "tests.support.mcp_server"])
OPERATORS = "operators register tools (`agentsearch tools add`)"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def config_count(stack) -> int:
    return stack.sql("SELECT count(*) FROM agent_configs")[0][0]


def refusal(response) -> tuple[list, str]:
    """The single 422 error of a refused config: its loc and message."""
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    return error["loc"], error["msg"]


def artifact_json(job: dict, tool: str) -> dict:
    """The JSON artifact the named MCP tool made (by its metadata: file names may be made unique per job)."""
    found = [a for a in job["response"]["agent_artifacts"] if a["metadata"].get("tool") == tool]
    assert len(found) == 1, ([a["metadata"] for a in job["response"]["agent_artifacts"]], job["response"]["agents"])
    return json.loads(base64.b64decode(found[0]["data"]))


def job_state(stack, job_id: str) -> dict:
    (row,) = stack.sql("SELECT state FROM jobs WHERE id = %s", job_id)
    return row[0] or {}


def insert_config(stack, user_id, agent_id: str, stage: str, config: dict) -> str:
    """An agent config row written straight into the database: one that slipped past the API's checks."""
    ((config_id,),) = stack.sql(
        "INSERT INTO agent_configs (id, user_id, agent_id, name, config, enabled, trigger_stage, priority, "
        "created_at, updated_at) VALUES (%s, %s, %s, %s, %s::jsonb, true, %s, 50, now(), now()) RETURNING id",
        str(uuid.uuid4()), str(user_id), agent_id, unique("slipped"), json.dumps(config), stage)
    return str(config_id)


def set_agents(http, collection_id: str, *config_ids: str) -> None:
    response = http.put(f"/v1/collections/{collection_id}/agents",
                        json={"agents": [{"agent_config_id": c} for c in config_ids]})
    assert response.status_code == 200, response.text


# --- finding 1: commands -------------------------------------------------------------------------------------------


def test_finding_1_a_config_carrying_a_command_is_refused_and_nothing_runs(stack, collection):
    marker = stack.tmp / f"{unique('pwned')}.txt"
    before = config_count(stack)
    with stack.http() as http:
        # The reproduction, as the tester sent it.
        response = http.post("/v1/agent-configs", json={
            "agent_id": "mcp", "trigger_stage": "response",
            "config": {"type": "mcp", "context_forge_tool_id": "t", "command": ["sh", "-c", f"id > {marker}"]}})
        loc, msg = refusal(response)
        assert loc == ["body", "config", "command"] and OPERATORS in msg
        # Its companions are refused by name too, whatever they hold.
        for field, value in (("env", {"LD_PRELOAD": "/tmp/x.so"}), ("cwd", "/"), ("headers", {"X": "y"}),
                             ("server_url", "http://127.0.0.1:6379/")):
            loc, msg = refusal(http.post("/v1/agent-configs", json={
                "agent_id": "mcp", "config": {"context_forge_tool_id": "t", field: value}}))
            assert loc == ["body", "config", field] and OPERATORS in msg
        assert config_count(stack) == before  # nothing written

        # What does run: a tool the operator registered, named by the config, with only its arguments set.
        outline, probe = unique("it-outline"), unique("it-env")
        stack.cli("tools", "add", outline, "--kind", "mcp", "--command", MCP_SERVER, "--cwd", str(REPO),
                  "--server-tool", "make_outline")
        stack.cli("tools", "add", probe, "--kind", "mcp", "--command", MCP_SERVER, "--cwd", str(REPO),
                  "--server-tool", "environment", "--env", "IT_TOOL_SETTING=from-the-operator")
        assert outline in stack.cli("tools", "list")
        use_agents(http, collection,
                   {"agent_id": "mcp", "priority": 0,
                    "config": {"context_forge_tool_id": outline, "argument_mapping": {"title": "query",
                                                                                        "max_slides": "config.n"},
                               "settings": {"n": 3}}},
                   {"agent_id": "mcp", "priority": 1, "config": {"context_forge_tool_id": probe}})
        query = "Which wind farms does Northwind operate?"
        job = search(http, collection, query, use_cache=False)
    assert job["status"] == "succeeded", job["error"]
    assert [r["status"] for r in job["response"]["agents"] if r["agent_id"] == "mcp"] == ["ok", "ok"], \
        job["response"]["agents"]
    received = artifact_json(job, "make_outline")["received"]
    assert received["title"] == query and received["max_slides"] == 3
    # The stdio server got the operator's environment on top of the SDK's safe set, not the worker's settings
    # (database URL, broker, Redis) nor anything else of its environment.
    variables = set(artifact_json(job, "environment")["variables"])
    assert "IT_TOOL_SETTING" in variables
    assert not any(v.startswith("AGENTSEARCH_") for v in variables), variables
    assert variables <= {"IT_TOOL_SETTING", "PATH", "HOME", "LOGNAME", "SHELL", "TERM", "USER", "LC_CTYPE"}
    assert not marker.exists()


def test_a_config_naming_an_unregistered_tool_is_refused(stack):
    before = config_count(stack)
    with stack.http() as http:
        loc, msg = refusal(http.post("/v1/agent-configs", json={
            "agent_id": "mcp", "config": {"context_forge_tool_id": "nobody-registered-this"}}))
    assert loc == ["body", "config", "context_forge_tool_id"]
    assert msg == f"no mcp tool named 'nobody-registered-this' is registered; {OPERATORS}"
    assert config_count(stack) == before


def test_a_tool_removed_after_the_config_was_saved_does_not_run(stack, collection):
    marker = stack.tmp / f"{unique('started')}.txt"
    name = unique("it-short-lived")
    # The registered command leaves a mark each time it is started, then becomes the test MCP server.
    command = f"sh -c {shlex.quote(f'touch {marker} && exec {MCP_SERVER}')}"
    stack.cli("tools", "add", name, "--kind", "mcp", "--command", command, "--cwd", str(REPO),
              "--server-tool", "make_outline")
    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "mcp", "config": {
            "context_forge_tool_id": name, "argument_mapping": {"title": "query", "max_slides": "config.n"},
            "settings": {"n": 2}}})
        first = search(http, collection, "Harrow Ridge solar farm", use_cache=False)
        assert runs_by_agent(first)["mcp"]["status"] == "ok", first["response"]["agents"]
        assert marker.exists()  # the mark works: a start is seen
        marker.unlink()

        assert f"removed tool {name}" in stack.cli("tools", "remove", name)
        second = search(http, collection, "Harrow Ridge solar farm", use_cache=False)
    run = runs_by_agent(second)["mcp"]
    assert run["status"] == "error"
    assert f"no mcp tool named '{name}' is registered" in run["errors"][0] and OPERATORS in run["errors"][0]
    assert second["response"]["agent_artifacts"] == []
    assert not marker.exists()  # nothing was started


def test_a_command_written_into_a_config_row_directly_is_refused_when_the_job_runs(stack, collection):
    marker = stack.tmp / f"{unique('pwned')}.txt"
    name = unique("it-outline")
    stack.cli("tools", "add", name, "--kind", "mcp", "--command", MCP_SERVER, "--cwd", str(REPO),
              "--server-tool", "make_outline")
    ((user_id,),) = stack.sql("SELECT user_id FROM collections WHERE id = %s", collection)
    config_id = insert_config(stack, user_id, "mcp", "response", {
        "type": "mcp", "context_forge_tool_id": name, "command": ["sh", "-c", f"id > {marker}"]})
    with stack.http() as http:
        set_agents(http, collection, config_id)
        job = search(http, collection, "Kestrel storage project", use_cache=False)
    run = runs_by_agent(job)["mcp"]
    assert run["status"] == "error" and "command cannot be set in an agent config" in run["errors"][0]
    assert not marker.exists()


# --- finding 2: internal hosts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:6379", "10.0.0.8", "169.254.169.254"])
def test_finding_2_raw_urls_are_refused_naming_the_field(stack, host):
    before = config_count(stack)
    with stack.http() as http:
        loc, msg = refusal(http.post("/v1/agent-configs", json={"agent_id": "external_enricher", "config": {
            "url_template": f"http://{host}/latest/{{document_id}}", "mapping": {"leak": "$"}}}))
        assert loc == ["body", "config", "url_template"] and OPERATORS in msg
        loc, msg = refusal(http.post("/v1/agent-configs", json={"agent_id": "mcp", "config": {
            "context_forge_tool_id": "t", "server_url": f"http://{host}/mcp"}}))
        assert loc == ["body", "config", "server_url"] and OPERATORS in msg
    assert config_count(stack) == before


@pytest.fixture
def endpoint():
    with JsonServer(reply=lambda path: {"source": "it-enricher", "path": path}) as running:
        yield running


def test_a_registered_endpoint_on_loopback_is_refused_at_connect_time_unless_the_operator_allows_it(
        stack, collection, endpoint):
    refused, allowed = unique("it-enrich"), unique("it-enrich-allowed")
    template = endpoint.url + "/enrich/{document_id}"
    stack.cli("tools", "add", refused, "--kind", "http", "--url", template)
    stack.cli("tools", "add", allowed, "--kind", "http", "--url", template, "--allow-internal")
    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "external_enricher",
                                      "config": {"endpoint": refused, "mapping": {"enriched_by": "$.source"}}})
        job = search(http, collection, "offshore wind foundations", use_cache=False)
        assert runs_by_agent(job)["external_enricher"]["status"] == "ok", job["response"]["agents"]
        summary = job["response"]["metadata"]["enrichment"]
        documents = job_state(stack, job["job_id"])["documents"]
        assert documents and summary["not_attempted"] == len(documents) and summary["enriched"] == 0, summary
        for doc in documents:
            assert doc["metadata"]["enrichment_error"].startswith("egress refused: 127.0.0.1 is a loopback address")
            assert "enriched_by" not in doc["metadata"]
        assert endpoint.paths() == []  # the endpoint never saw a request

        # The same endpoint registered with the operator's --allow-internal is called.
        use_agents(http, collection, {"agent_id": "external_enricher",
                                      "config": {"endpoint": allowed, "mapping": {"enriched_by": "$.source"}}})
        job = search(http, collection, "offshore wind foundations", use_cache=False)
    documents = job_state(stack, job["job_id"])["documents"]
    assert [d["metadata"].get("enriched_by") for d in documents] == ["it-enricher"] * len(documents)
    assert sorted(endpoint.paths()) == sorted(f"/enrich/{d['id']}" for d in documents)
    assert job["response"]["metadata"]["enrichment"]["endpoint"] == allowed  # the name, not the operator's URL


# --- finding 3: another user's collection --------------------------------------------------------------------------

A_SENTENCES = [s for d in map(json.loads, SAMPLE_CORPUS.read_text().splitlines()) if d
               for s in split_sentences(d["text"]) if len(s) > 40]
B_TRUSTED = [{"id": "reservoir-survey", "title": "Reservoir survey 2025",
              "text": "The Zephyr Crest reservoir holds 4417 megalitres of water after the spring survey. "
                      "Its dam was inspected in March 2025."}]
B_DOCUMENTS = [
    {"id": "b-wire", "title": "Northwind results, as B's wire service told it",
     "text": "Northwind Energy said its fourth-quarter 2024 revenue came to $349 million, up 14% from a year before. "
             "Full-year 2024 revenue reached $1,226 million according to the company."},
    {"id": "b-reservoir", "title": "Water news",
     "text": "Officials said the Zephyr Crest reservoir holds 4417 megalitres of water this spring."},
]


def test_finding_3_another_users_collection_as_trusted_collection_is_refused(stack, collection):
    key_b = stack.create_user(unique("tenant-b"))
    nobody = str(uuid.uuid4())
    before = config_count(stack)
    with stack.http(key_b) as b:
        theirs = refusal(b.post("/v1/agent-configs", json={
            "agent_id": "fact_checker", "config": {"trusted_collection_id": collection}}))
        missing = refusal(b.post("/v1/agent-configs", json={
            "agent_id": "fact_checker", "config": {"trusted_collection_id": nobody}}))
    assert theirs[0] == missing[0] == ["body", "config", "trusted_collection_id"]
    # The same words but for the id: nothing tells "exists, not yours" from "does not exist".
    assert theirs[1].replace(collection, "ID") == missing[1].replace(nobody, "ID") == "collection ID not found"
    assert config_count(stack) == before


def test_finding_3_a_foreign_trusted_collection_that_slipped_through_is_refused_when_the_job_runs(stack, collection):
    name_b = unique("tenant-b")
    key_b = stack.create_user(name_b)
    ((user_b,),) = stack.sql("SELECT id FROM users WHERE name = %s", name_b)
    with stack.http(key_b) as b:
        searched = ingest_through_api(b, unique("b-news"), B_DOCUMENTS, timeout_s=120)
        trusted = ingest_through_api(b, unique("b-trusted"), B_TRUSTED, timeout_s=120)
        # B's own trusted collection is accepted: the control that shows what evidence looks like in B's job.
        own = b.post("/v1/agent-configs", json={"agent_id": "fact_checker", "priority": 0,
                                               "config": {"trusted_collection_id": trusted}})
        assert own.status_code == 201, own.text
        foreign = insert_config(stack, user_b, "fact_checker", "post_search", {"trusted_collection_id": collection})
        set_agents(b, searched, own.json()["id"], foreign)
        job = search(b, searched, "Northwind revenue and the Zephyr Crest reservoir", use_cache=False)
    assert job["status"] == "succeeded", job["error"]
    runs = {r["config_id"]: r for r in job["response"]["agents"]}
    assert runs[own.json()["id"]]["status"] == "ok"
    refused = runs[foreign]
    assert refused["status"] == "error"
    assert refused["errors"][0].endswith(f"trusted_collection_id: collection {collection} not found"), refused
    state = job_state(stack, job["job_id"])
    checked = {d["id"]: d["metadata"].get("fact_check") for d in state["documents"]}
    # The control: B's own trusted sentence came back as evidence for B's reservoir claim.
    evidence = [c.get("evidence", {}).get("sentence") for c in checked["b-reservoir"]["claims"]]
    assert any("4417 megalitres" in (e or "") for e in evidence), checked["b-reservoir"]
    # Nothing of A's collection reached B: no sentence of it anywhere in B's job or its saved state.
    seen_by_b = json.dumps(job) + json.dumps(state)
    leaked = [s for s in A_SENTENCES if s in seen_by_b]
    assert leaked == []
