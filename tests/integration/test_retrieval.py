"""The retrieval engine on the real stack: strategies, several collections, re-ingest and delete, fallbacks."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.embedder import Embedder
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.vector_store import SchemaMismatch, VectorStore
from tests.integration.conftest import BIN, REPO, search

QUERY = "What was Northwind Energy's revenue in Q4 2025?"


def ingest(http, collection_id: str, documents: list[dict]) -> dict:
    assert http.post(f"/v1/collections/{collection_id}/documents", json={"documents": documents}).status_code == 202
    deadline = time.monotonic() + 60
    while (collection := http.get(f"/v1/collections/{collection_id}").json())["documents"]["pending"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return collection


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid", "adaptive"])
def test_every_strategy_answers_and_reports_its_metrics(stack, collection, strategy):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=[], search={"strategy": strategy})
    assert job["status"] == "succeeded", job["error"]
    metrics = job["response"]["metadata"]["search"]
    assert metrics["strategy"] == strategy and metrics["strategy_used"] in ("semantic", "keyword", "hybrid")
    assert metrics["returned"] == len(job["response"]["sources"]) > 0
    assert metrics["sources_found"] >= metrics["returned"]
    for key in ("processing_ms", "search_ms", "dedup_removed", "average_relevance", "cache_hit"):
        assert key in metrics
    assert "nw-2025-q4" in [s["document_id"] for s in job["response"]["sources"]]


def test_repeated_search_hits_the_search_cache(stack, collection):
    query = f"battery storage hours {uuid.uuid4().hex[:6]}"
    with stack.http() as http:
        first = search(http, collection, query, agents=[], use_cache=False)["response"]["metadata"]["search"]
        second = search(http, collection, query, agents=[], use_cache=False)["response"]["metadata"]["search"]
    assert (first["cache_hit"], second["cache_hit"]) == (False, True)


def test_several_collections_are_searched_in_parallel_and_merged(stack, collection):
    with stack.http() as http:
        other = http.post("/v1/collections", json={"name": f"memos-{uuid.uuid4().hex[:6]}"}).json()["id"]
        ingest(http, other, [
            # Same id as a corpus document: the merge keeps one, the better-scored.
            {"id": "nw-2025-q4", "title": "Board memo on Q4 2025", "text": "Q4 2025 revenue was $412 million."},
            {"id": "memo-q4-guidance", "title": "Northwind Energy Q4 2025 revenue memo",
             "text": "The board noted that Northwind Energy's Q4 2025 revenue of $412 million beat guidance."},
        ])
        job = search(http, collection, QUERY, agents=[], also_search=[other], top_k=8)
    assert job["status"] == "succeeded", job["error"]
    sources = [s["document_id"] for s in job["response"]["sources"]]
    assert "memo-q4-guidance" in sources and "nw-2025-q4" in sources
    assert len(sources) == len(set(sources))
    scores = [s["score"] for s in job["response"]["sources"]]
    assert scores == sorted(scores, reverse=True)
    merged = job["response"]["metadata"]["search"]
    assert set(merged["collections"]) == {collection, other}
    assert merged["duplicates_across_collections"] >= 1


def test_reingest_replaces_and_delete_removes(stack):
    with stack.http() as http:
        cid = http.post("/v1/collections", json={"name": f"replace-{uuid.uuid4().hex[:6]}"}).json()["id"]
        first = ingest(http, cid,
                       [{"id": "policy", "title": "Travel policy", "text": "Trains are booked in second class."}])
        second = ingest(http, cid,
                        [{"id": "policy", "title": "Travel policy", "text": "Flights are booked in economy."}])
        assert second["index_epoch"] > first["index_epoch"]
        job = search(http, cid, "How are flights booked?", agents=[])
        assert job["response"]["answer"].startswith("Flights are booked in economy")
        assert "Trains" not in job["response"]["answer"] and len(job["response"]["sources"]) == 1
        assert http.delete(f"/v1/collections/{cid}/documents/policy").status_code == 202
        assert http.delete(f"/v1/collections/{cid}/documents/policy").status_code == 404
        deadline = time.monotonic() + 60
        while True:
            job = search(http, cid, "How are flights booked?", agents=[], use_cache=False)
            if not job["response"]["sources"] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
    assert job["response"]["sources"] == []
    assert job["response"]["metadata"]["search"]["suggestions"]


def test_unreachable_threshold_is_relaxed_once_with_a_warning(stack, collection):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=[], search={"min_score": 5.0})
    metrics = job["response"]["metadata"]["search"]
    assert metrics["relaxed_threshold"] is True and job["response"]["sources"]
    assert any("min_score" in w for w in metrics["warnings"])


def test_collection_indexed_with_another_model_is_refused(stack, collection):
    with stack.http() as http:
        cid = http.post("/v1/collections", json={"name": f"other-model-{uuid.uuid4().hex[:6]}"}).json()["id"]
        stack.sql("UPDATE collections SET embedding_model = 'bge-base-en' WHERE id = %s RETURNING id", cid)
        response = http.post("/v1/search", json={"collection_id": cid, "query": "solar"})
    assert response.status_code == 409 and "bge-base-en" in response.json()["detail"]


def test_malformed_jsonl_names_the_line_and_ingests_nothing(stack, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": "also fine"}\n{"id": "c", "text": \n')
    name = f"bad-{uuid.uuid4().hex[:6]}"
    done = subprocess.run([str(BIN / "agentsearch"), "ingest", str(path), "--collection", name], cwd=REPO,
                          env=stack.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "line 3" in done.stderr and "not valid JSON" in done.stderr
    with stack.http() as http:
        assert http.get("/v1/collections", params={"name": name}).json() == []


# --- fallbacks, on the stack's real Milvus server --------------------------------------------------------------


class FlakyStore(VectorStore):
    """The real store, with faults injected per retriever."""

    def __init__(self, uri: str, fail_first: int = 0, always_fail: bool = False, keyword_delay_s: float = 0.0):
        super().__init__(uri)
        self.fail_first, self.always_fail, self.keyword_delay_s = fail_first, always_fail, keyword_delay_s
        self.calls = 0

    def dense_search(self, name, vector, limit):
        self.calls += 1
        if self.always_fail or self.calls <= self.fail_first:
            raise ConnectionError("milvus: connection refused")
        return super().dense_search(name, vector, limit)

    def keyword_search(self, name, analyzed_query, limit):
        time.sleep(self.keyword_delay_s)
        if self.always_fail:
            raise ConnectionError("milvus: connection refused")
        return super().keyword_search(name, analyzed_query, limit)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder("all-MiniLM-L6-v2")


def test_embedding_failure_falls_back_to_keyword_search(stack, collection):
    def broken(texts):
        raise RuntimeError("embedding backend out of memory")

    store = VectorStore(stack.env["AGENTSEARCH_MILVUS_URI"])
    result = Retriever(broken, store, KeywordAnalyzer()).search(
        milvus_collection_name(collection), QUERY, SearchConfig(strategy="hybrid", top_k=5)
    )
    assert result.metrics["fallback"] == "keyword_only"
    assert "embedding backend out of memory" in result.metrics["errors"][0]
    assert result.documents and result.metrics["weights"]["semantic"] == 0.0


def test_milvus_errors_are_retried_then_reported(stack, collection, embedder):
    name = milvus_collection_name(collection)
    recovering = FlakyStore(stack.env["AGENTSEARCH_MILVUS_URI"], fail_first=2)
    retriever = Retriever(embedder.embed, recovering, KeywordAnalyzer())
    result = retriever.search(name, QUERY, SearchConfig(strategy="semantic"))
    assert recovering.calls == 3 and result.documents and "errors" not in result.metrics

    down = FlakyStore(stack.env["AGENTSEARCH_MILVUS_URI"], always_fail=True)
    result = Retriever(embedder.embed, down, KeywordAnalyzer()).search(name, QUERY, SearchConfig(strategy="hybrid"))
    assert down.calls == 5  # five attempts with backoff
    assert result.documents == []
    assert sorted(e.split(" search")[0] for e in result.metrics["errors"]) == ["keyword", "semantic"]


def test_stage_deadline_keeps_the_partial_results(stack, collection, embedder):
    slow = FlakyStore(stack.env["AGENTSEARCH_MILVUS_URI"], keyword_delay_s=60.0)
    started = time.monotonic()
    result = Retriever(embedder.embed, slow, KeywordAnalyzer()).search(
        milvus_collection_name(collection), QUERY, SearchConfig(strategy="hybrid", timeout_s=3.0)
    )
    assert time.monotonic() - started < 30  # the 3 s deadline, not the keyword search's minute
    assert result.metrics["timed_out"] == ["keyword"]
    assert result.documents and any("deadline" in w for w in result.warnings)


def test_dimension_mismatch_is_a_clear_error(stack, collection):
    store = VectorStore(stack.env["AGENTSEARCH_MILVUS_URI"])
    with pytest.raises(SchemaMismatch, match="384-dimensional vectors but the embedding model makes 768"):
        store.ensure_collection(milvus_collection_name(collection), 768)


def test_expansion_uses_terms_of_the_found_documents():
    retriever = Retriever(lambda t: [], None, KeywordAnalyzer())
    docs = [Document(id="a", title="Turbine upkeep", text="Gearbox inspections prevent gearbox failures.")]
    expanded = retriever.expand_query("turbine maintenance", docs)
    assert expanded.startswith("turbine maintenance ") and "gearbox" in expanded
