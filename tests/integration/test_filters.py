"""Metadata filters on the real stack: every operator and some combinations in every strategy, checked against the
documents' own metadata; several collections and the iterative mode under a filter; values that try to break out
of the expression matched literally; malformed filters refused before any job is written.

The collection's documents all mention the query's words, so with ``top_k`` above the collection's size every
document a filter keeps must come back, and no other: the returned set is compared with
``MetadataFilter.matches`` over the metadata each document was ingested with.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest

from agentsearch.pipeline.retrieval.filters import MetadataFilter, filter_problems
from tests.integration.conftest import search, wait_job

pytestmark = pytest.mark.integration

QUERY = "solar inspection findings"
STRATEGIES = ["semantic", "keyword", "hybrid", "adaptive"]
INJECTION_DQ = 'x" or 1==1 or "'
INJECTION_SQ = "'x' || true"

DOCUMENTS = [
    ("f01", "Solar inspection in Seville", "The solar inspection at the Seville plant found cracked panels.",
     {"region": "emea", "tier": 1, "public": True, "tags": ["solar", "wind"], "published": "2024-03-01"}),
    ("f02", "Solar inspection in Osaka", "Inspectors reported inverter faults during the Osaka solar inspection.",
     {"region": "apac", "tier": 2, "public": False, "tags": ["solar"], "published": "2024-03-01T10:00:00Z"}),
    ("f03", "Solar inspection in Texas", "Hail damage dominated the Texas solar inspection this spring.",
     {"region": "amer", "tier": 3, "public": True, "tags": "wind", "published_date": "2023-06-15"}),
    ("f04", "Solar inspection in Lyon", "The Lyon rooftop solar inspection flagged loose wiring on two roofs.",
     {"region": "emea", "tier": 2.5, "date": "2022-01-10"}),
    ("f05", "Solar inspection by the hydro team", "A hydro engineer joined the solar inspection to review cooling.",
     {"tier": 5, "tags": ["hydro"]}),
    ("f06", "Solar inspection with an odd region", "The solar inspection log came from a misconfigured exporter.",
     {"region": INJECTION_DQ, "tier": 1}),
    ("f07", "Solar inspection with another odd region", "Another exporter wrote this solar inspection summary.",
     {"region": INJECTION_SQ, "tier": 1}),
    ("f08", "Solar inspection in Nairobi", "Dust on the Nairobi arrays lowered output before the solar inspection.",
     {"region": "emea", "tier": 4, "public": False, "published": "2025-01-01"}),
    ("f09", "Solar inspection in Perth", "Perth's solar inspection confirmed the tracker motors were replaced.",
     {"region": "apac", "tier": "3", "public": True, "published": "2023-12-31T23:59:59Z"}),
    ("f10", "Solar inspection in Bogota", "The Bogota solar inspection covered fencing, drainage and vegetation.",
     {"region": "amer", "tier": 7, "tags": ["solar", "storage"], "published": "2024-02-29"}),
]
METADATA = {doc_id: meta for doc_id, _, _, meta in DOCUMENTS}
TOP_K = 20  # above the collection's size: every document a filter keeps fits

FILTERS = {
    "eq": {"eq": {"key": "region", "value": "emea"}},
    "ne": {"ne": {"key": "region", "value": "emea"}},
    "in over scalars and lists": {"in": {"key": "tags", "values": ["wind", "storage"]}},
    "numeric range": {"range": {"key": "tier", "gte": 2, "lt": 5}},
    "date range on published": {"range": {"key": "published", "gt": "2023-12-31", "lte": "2024-03-01"}},
    "exists and not": {"and": [{"exists": {"key": "region"}}, {"not": {"eq": {"key": "public", "value": True}}}]},
    "and/or": {"or": [{"and": [{"eq": {"key": "public", "value": True}}, {"eq": {"key": "region", "value": "emea"}}]},
                      {"range": {"key": "tier", "gt": 4}}]},
    "booleans": {"eq": {"key": "public", "value": False}},
}


def ingest(http, collection_id: str, documents: list[tuple]) -> None:
    body = {"documents": [{"id": i, "title": t, "text": x, "metadata": m} for i, t, x, m in documents]}
    assert http.post(f"/v1/collections/{collection_id}/documents", json=body).status_code == 202
    deadline = time.monotonic() + 90
    while (counts := http.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        assert time.monotonic() < deadline, counts
        time.sleep(0.2)
    assert counts["failed"] == 0 and counts["indexed"] == len(documents)


@pytest.fixture(scope="module")
def filtered(stack) -> str:
    with stack.http() as http:
        collection_id = http.post("/v1/collections", json={"name": f"filters-{uuid.uuid4().hex[:6]}"}).json()["id"]
        ingest(http, collection_id, DOCUMENTS)
    return collection_id


def expected(raw: dict, metadata: dict[str, dict] = METADATA) -> set[str]:
    spec = MetadataFilter.model_validate(raw)
    return {doc_id for doc_id, meta in metadata.items() if spec.matches(meta)}


def returned(job: dict) -> set[str]:
    assert job["status"] == "succeeded", job.get("error")
    assert not job["response"]["degraded"], job["response"]["degraded_reasons"]
    return {s["document_id"] for s in job["response"]["sources"]}


def submit(http, body: dict) -> str:
    response = http.post("/v1/search", json=body)
    assert response.status_code == 202, response.text
    return response.json()["job_id"]


def test_every_operator_in_every_strategy_returns_exactly_what_the_metadata_allows(stack, filtered):
    # Near-duplicate removal off: these short reports are alike, and only the filter may decide what is left out.
    search_options = {"near_duplicate_threshold": None}
    with stack.http() as http:
        jobs = {
            (name, strategy): submit(http, {"collection_id": filtered, "query": QUERY, "agents": [], "top_k": TOP_K,
                                            "filter": raw, "search": {**search_options, "strategy": strategy}})
            for name, raw in FILTERS.items() for strategy in STRATEGIES
        }
        unfiltered = returned(search(http, filtered, QUERY, agents=[], top_k=TOP_K,
                                     search={**search_options, "strategy": "hybrid"}))
        results = {key: returned(wait_job(http, job_id, timeout_s=120)) for key, job_id in jobs.items()}
    assert unfiltered == set(METADATA)  # every document matches the query: what a filter drops, it dropped
    for (name, strategy), found in results.items():
        want = expected(FILTERS[name])
        assert want, name  # each filter keeps something, so an empty answer would fail
        assert found == want, f"{name} / {strategy}: got {sorted(found)}, the metadata allows {sorted(want)}"


def test_values_that_try_to_break_out_of_the_expression_are_matched_literally(stack, filtered):
    with stack.http() as http:
        double = search(http, filtered, QUERY, agents=[], top_k=TOP_K,
                        filter={"eq": {"key": "region", "value": INJECTION_DQ}})
        single = search(http, filtered, QUERY, agents=[], top_k=TOP_K,
                        filter={"eq": {"key": "region", "value": INJECTION_SQ}})
        listed = search(http, filtered, QUERY, agents=[], top_k=TOP_K, search={"strategy": "keyword"},
                        filter={"in": {"key": "region", "values": [INJECTION_DQ, "') or true or ('"]}})
    assert returned(double) == {"f06"}
    assert returned(single) == {"f07"}
    assert returned(listed) == {"f06"}


def test_also_search_applies_the_filter_to_every_collection(stack, filtered):
    other_docs = [
        ("g01", "Solar inspection memo for Madrid", "The Madrid solar inspection memo lists three open findings.",
         {"region": "emea", "tier": 2}),
        ("g02", "Solar inspection memo for Jakarta", "Jakarta's solar inspection memo closes every finding.",
         {"region": "apac", "tier": 2}),
    ]
    raw = {"eq": {"key": "region", "value": "emea"}}
    with stack.http() as http:
        other = http.post("/v1/collections", json={"name": f"filters-memos-{uuid.uuid4().hex[:6]}"}).json()["id"]
        ingest(http, other, other_docs)
        job = search(http, filtered, QUERY, agents=[], top_k=TOP_K, also_search=[other], filter=raw,
                     search={"near_duplicate_threshold": None})
    found = returned(job)
    assert found == expected(raw) | {"g01"}
    assert set(job["response"]["metadata"]["search"]["collections"]) == {filtered, other}


def test_the_iterative_mode_searches_only_inside_the_filter(stack, filtered):
    raw = {"eq": {"key": "region", "value": "apac"}}
    with stack.http() as http:
        job = search(http, filtered, QUERY, agents=[], mode="iterative", use_cache=False, filter=raw,
                     iterative={"target": 3, "per_iteration": 3, "max_iterations": 2, "sufficiency": False,
                                "thresholds": {"first": 1.0, "later": 1.0}}, timeout_s=120)
    found = returned(job)
    assert found and found <= expected(raw) == {"f02", "f09"}
    history = job["response"]["metadata"]["agentic"]["loop"]["history"]
    assert sum(h["evaluated"] for h in history) >= 1


def test_the_whole_job_cache_tells_filters_apart(stack, filtered):
    body = {"collection_id": filtered, "query": f"{QUERY} {uuid.uuid4().hex[:6]}", "agents": [], "top_k": TOP_K}
    with stack.http() as http:
        answers = [http.post("/v1/search", json={**body, "filter": {"eq": {"key": "region", "value": region}}})
                   for region in ("emea", "apac")]
        # A different filter is a different job: neither is answered from the other.
        assert [a.status_code for a in answers] == [202, 202] and not any(a.json()["cached"] for a in answers)
        emea, apac = (wait_job(http, a.json()["job_id"]) for a in answers)
        again = http.post("/v1/search", json={**body, "filter": {"eq": {"key": "region", "value": "apac"}}})
        assert again.status_code == 200 and again.json()["cached"] is True  # the same filter: the stored response
        repeated = wait_job(http, again.json()["job_id"])
    assert returned(emea) == expected({"eq": {"key": "region", "value": "emea"}})
    assert returned(apac) == returned(repeated) == {"f02", "f09"}


@pytest.mark.parametrize("raw, loc", [
    ({"and": [{"eq": {"key": "region", "value": "emea"}}, {"range": {"key": "tier", "gt": "high"}}]},
     ["body", "filter", "and", 1, "range", "gt"]),
    ({"range": {"key": "tier", "gt": 1, "lt": "2024-01-01"}}, ["body", "filter", "range", "lt"]),
    ({"range": {"key": "tier"}}, ["body", "filter", "range"]),
    ({"in": {"key": "tier", "values": []}}, ["body", "filter", "in", "values"]),
    ({"or": [{"like": {"key": "region", "value": "em%"}}]}, ["body", "filter", "or", 0, "like"]),
    ({"eq": {"key": 'region"] or true or metadata["x', "value": 1}}, ["body", "filter", "eq", "key"]),
])
def test_a_malformed_filter_is_refused_naming_its_path_and_no_job_is_written(stack, filtered, raw, loc):
    with stack.http() as http:
        before = http.get("/v1/jobs").json()["total"]
        response = http.post("/v1/search", json={"collection_id": filtered, "query": QUERY, "filter": raw})
        after = http.get("/v1/jobs").json()["total"]
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert after == before


def random_filter(rng: random.Random, depth: int = 0) -> dict:
    op = rng.choice(["eq", "ne", "in", "range", "exists", "and", "or", "not"])
    key = rng.choice(["a", "b-c", "published", "date", "absent"])
    def scalar():
        return rng.choice([True, False, 0, 1, -1, 1.5, 2, "", "a", "b", "2024-01-01", "2024-01-01T05:00:00Z"])

    if op in ("and", "or", "not") and depth >= 3:
        op = "exists"
    if op in ("and", "or"):
        return {op: [random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    if op == "not":
        return {op: random_filter(rng, depth + 1)}
    if op in ("eq", "ne"):
        return {op: {"key": key, "value": scalar()}}
    if op == "in":
        return {op: {"key": key, "values": [scalar() for _ in range(rng.randint(1, 3))]}}
    if op == "exists":
        return {op: {"key": key}}
    if rng.random() < 0.5:
        return {op: {"key": key, **{b: rng.choice([-1, 0, 1, 1.5, 2])
                                    for b in rng.sample(["gt", "lt"], rng.randint(1, 2))}}}
    return {op: {"key": key, **{b: rng.choice(["2023-12-31", "2024-01-01", "2024-01-02"])
                                for b in rng.sample(["gte", "lte"], rng.randint(1, 2))}}}


def test_random_filters_keep_in_milvus_exactly_what_the_python_rule_keeps(stack):
    """The compiler and ``MetadataFilter.matches`` against the Milvus engine itself, on metadata of every JSON type
    (missing keys, nulls, booleans, numbers, date strings, lists, objects): a seeded sample of filters."""
    from pymilvus import DataType, MilvusClient

    rng = random.Random(20241122)
    values = [None, True, False, 0, 1, -1, 1.5, 2, "", "a", "b", "2024-01-01", "2024-01-01T05:00:00Z", "2023-12-31",
              ["a", "b"], ["c"], [1, 2], {"x": 1}]
    documents = {f"d{i}": {k: rng.choice(values) for k in ("a", "b-c", "published", "published_date", "date")
                           if rng.random() < 0.6} for i in range(60)}
    # A connection of its own, closed with the client (a shared one would outlive the test in this process).
    client = MilvusClient(stack.env["AGENTSEARCH_MILVUS_URI"], dedicated=True)
    name = f"filters_{uuid.uuid4().hex[:8]}"
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=16)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    try:
        client.insert(name, [{"id": k, "metadata": m, "vector": [1.0, 0.5]} for k, m in documents.items()])
        client.flush(name)
        compared = 0
        while compared < 300:
            raw = random_filter(rng)
            if filter_problems(raw):
                continue
            spec = MetadataFilter.model_validate(raw)
            kept = {row["id"] for row in client.query(name, filter=spec.expression(), output_fields=["id"],
                                                      limit=1000, consistency_level="Strong")}
            assert kept == {k for k, m in documents.items() if spec.matches(m)}, raw
            compared += 1
    finally:
        client.drop_collection(name)
        client.close()
