"""What a search that met Milvus errors amounts to for its job: failed, degraded or whole
(agentsearch.pipeline.retrieval.outcome).

The pure parts, the retriever with a fake store, and the search task against a real job row: a search that failed
outright is searched again with backoff, then fails the job; one that failed in part makes a degraded response.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import fakeredis
import pytest
from celery.exceptions import Retry

from agentsearch.pipeline import services as services_module
from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.job.assembly import assemble_response
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.ledger import StepLedger
from agentsearch.pipeline.job.workflow import merge_search_step
from agentsearch.pipeline.platform.backoff import backoff_delay
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.outcome import SearchFailed, degraded_reasons, search_failure
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.stored_chunks import Hit
from agentsearch.worker import job_tasks
from tests.support.databases import migrated_sqlite
from tests.support.dict_cache import DictCache

RELEASED = "MilvusException: Collection 'c1' is in state 'released'; call load() before search/get/query"


def schedule(budget_s: float) -> list[float]:
    delays, retries = [], 0
    while (delay := backoff_delay(retries, budget_s)) is not None:
        delays.append(delay)
        retries += 1
    return delays


def test_backoff_doubles_to_30_s_and_the_waits_add_up_to_the_budget():
    assert schedule(60) == [1, 2, 4, 8, 16, 29]
    assert schedule(10) == [1, 2, 4, 3]
    assert schedule(300)[:7] == [1, 2, 4, 8, 16, 30, 30] and sum(schedule(300)) == 300
    assert schedule(0) == []


def test_nothing_found_with_errors_is_a_failure_not_no_documents():
    search = {"errors": [f"semantic search failed: {RELEASED}", f"keyword search failed: {RELEASED}"],
              "returned": 0}
    reason = search_failure(search, found=0)
    assert reason is not None and reason.startswith("search failed, nothing found: semantic search failed")
    assert search_failure(search, found=2) is None  # results stand, degraded
    assert degraded_reasons(search) == search["errors"]


def test_a_whole_search_that_found_nothing_is_just_that():
    assert search_failure({"returned": 0, "sources_found": 0}, found=0) is None
    assert degraded_reasons({"returned": 0}) == []


def test_a_retriever_left_behind_at_the_deadline_degrades_the_search():
    assert degraded_reasons({"timed_out": ["keyword"]}) == ["keyword search passed the stage deadline"]
    assert search_failure({"timed_out": ["keyword", "semantic"]}, found=0) is not None


class HalfDownStore:
    """Dense search works; keyword search meets Milvus errors every time."""

    def __init__(self) -> None:
        self.keyword_calls = 0

    def dense_search(self, name, vector, limit):
        return [Hit(id="d1#0", document_id="d1", title="Q4", text="Revenue reached $412 million.", score=0.8,
                    metadata={})]

    def keyword_search(self, name, analyzed, limit):
        self.keyword_calls += 1
        raise RuntimeError(RELEASED)

    def vectors(self, name, ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        return {}


def test_one_retriever_failing_keeps_the_others_results_degraded_and_uncached():
    store, cache = HalfDownStore(), DictCache()
    retriever = Retriever(lambda texts: [[0.1, 0.2] for _ in texts], store, KeywordAnalyzer(), cache=cache)
    result = retriever.search("c1", "Q4 revenue", SearchConfig(strategy="hybrid", top_k=3))
    assert [d.id for d in result.documents] == ["d1"] and store.keyword_calls == 5
    assert search_failure(result.metrics, found=len(result.documents)) is None
    assert degraded_reasons(result.metrics) == [f"keyword search failed: RuntimeError: {RELEASED}"]
    assert not any(key.startswith("search") for key in cache.stored)  # the next job searches again


class TimedStore:
    """Records when each search starts; the keyword search answers one document, the dense one another."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.keyword_started = threading.Event()

    def dense_search(self, name, vector, limit):
        self.started["semantic"] = time.monotonic()
        return [Hit(id="d1#0", document_id="d1", title="A", text="Dense.", score=0.9, metadata={})]

    def keyword_search(self, name, analyzed, limit):
        self.started["keyword"] = time.monotonic()
        self.keyword_started.set()
        return [Hit(id="d2#0", document_id="d2", title="B", text="Keyword.", score=3.0, metadata={})]

    def vectors(self, name, ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        return {}


def test_the_keyword_search_runs_while_the_query_is_embedded():
    store, embedded = TimedStore(), []

    def slow_embed(texts):
        # Embedding lasts until the keyword search has begun (10 s at most): that search runs meanwhile, or the
        # order asserted below is not met.
        store.keyword_started.wait(10)
        embedded.append(time.monotonic())
        return [[0.1, 0.2] for _ in texts]

    result = Retriever(slow_embed, store, KeywordAnalyzer()).search("c1", "Q4 revenue", SearchConfig(top_k=3))
    assert store.started["keyword"] < embedded[0] <= store.started["semantic"]
    assert {d.id for d in result.documents} == {"d1", "d2"} and "errors" not in result.metrics


def test_a_semantic_search_whose_embedding_fails_searches_by_keyword_instead():
    def broken(texts):
        raise RuntimeError("model away")

    result = Retriever(broken, TimedStore(), KeywordAnalyzer()).search("c1", "Q4 revenue",
                                                                       SearchConfig(strategy="semantic", top_k=3))
    assert [d.id for d in result.documents] == ["d2"] and result.metrics["fallback"] == "keyword_only"
    assert result.metrics["errors"] == ["embedding failed: RuntimeError: model away"]


def _state(documents: list[Document], search: dict, collection_id: str = "c1") -> JobState:
    return JobState(job_id=str(uuid.uuid4()), collection_id=collection_id, query="Q4 revenue?",
                    documents=documents, metadata={"search": {**search, "collection_id": collection_id}})


def test_a_degraded_response_says_why_and_is_not_complete():
    state = _state([Document(id="d1", title="Q4", text="Revenue reached $412 million.", score=0.8)],
                   {"errors": [f"keyword search failed: {RELEASED}"], "returned": 1})
    response = assemble_response(state, [])
    assert response["degraded"] is True and response["complete"] is False
    assert response["degraded_reasons"] == [f"keyword search failed: {RELEASED}"]
    whole = assemble_response(_state(state.documents, {"returned": 1}), [])
    assert whole["degraded"] is False and whole["degraded_reasons"] == [] and whole["complete"] is True


def test_one_collection_of_several_failing_degrades_the_merged_search_and_all_failing_fails_it():
    found = _state([Document(id="d1", title="Q4", text="Revenue.", score=0.8, metadata={"collection_id": "a"})],
                   {"returned": 1, "sources_found": 1}, collection_id="a")
    failed = _state([], {"errors": [f"semantic search failed: {RELEASED}"], "returned": 0}, collection_id="b")
    merged = merge_search_step([found, failed]).metadata["search"]
    assert set(merged["collections"]) == {"a", "b"}
    assert merged["errors"] == [f"collection b: semantic search failed: {RELEASED}"]
    assert search_failure(merged, found=1) is None and degraded_reasons(merged)
    nothing = merge_search_step([failed, _state([], {"errors": ["keyword search failed: x"]}, "c")])
    assert search_failure(nothing.metadata["search"], found=len(nothing.documents)) is not None


# --- the search task: retried with backoff, then the job fails --------------------------------------------------


class DownRetriever:
    def __init__(self) -> None:
        self.calls = 0

    def search(self, collection, query, config, epoch=0, model=""):
        from agentsearch.pipeline.retrieval.retriever import RetrievalResult

        self.calls += 1
        return RetrievalResult([], {"errors": [f"semantic search failed: {RELEASED}"], "returned": 0,
                                    "cache_hit": False})


@pytest.fixture
def services(tmp_path, monkeypatch, install_services):
    settings = Settings(data_dir=tmp_path, milvus_retry_s=10)
    migrated_sqlite(settings.database_url)
    services = services_module.Services(settings).use(retriever=DownRetriever())
    install_services(services)
    ledger = StepLedger(fakeredis.FakeRedis(server=fakeredis.FakeServer()), ttl_s=600)
    monkeypatch.setattr(job_tasks, "step_ledger", lambda: ledger)
    yield services
    services.close()


def new_job(services) -> JobState:
    collection_id = uuid.uuid4()
    with services.db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name="c", embedding_model="m"))
        s.flush()
        job = JobRow(user_id=DEFAULT_USER_ID, collection_id=collection_id, query="Q4 revenue?", status="queued",
                  deadline_at=utcnow() + timedelta(minutes=10))
        s.add(job)
        s.flush()
        return JobState(job_id=str(job.id), collection_id=str(collection_id), query="Q4 revenue?")


def run_search(state: JobState, retries: int, collection_id: str | None = None):
    job_tasks.core_search.push_request(retries=retries)
    try:
        return job_tasks.core_search.run(state.dump(), collection_id)
    finally:
        job_tasks.core_search.pop_request()


def test_a_search_that_failed_outright_is_searched_again_then_fails_the_job(services):
    state = new_job(services)
    with pytest.raises(Retry):
        run_search(state, retries=0)  # Milvus may be restarting: not handed on as "no documents"
    assert job_tasks.step_ledger().get(state.job_id, "core_search:") is None  # a redelivered copy searches again
    with pytest.raises(SearchFailed, match=r"semantic search failed.*released.*after 5 attempts"):
        run_search(state, retries=4)  # 1 + 2 + 4 + 3 s waited: MILVUS_RETRY_S=10 spent
    assert services.retriever.calls == 2


def test_one_collection_of_several_hands_its_failure_on_to_the_merge(services):
    state = new_job(services)
    handed_on = JobState.load(run_search(state, retries=4, collection_id=state.collection_id))
    assert handed_on.documents == [] and handed_on.metadata["search"]["attempts"] == 5
    with pytest.raises(SearchFailed):
        job_tasks.merge_search.run([handed_on.dump(), handed_on.dump()])
