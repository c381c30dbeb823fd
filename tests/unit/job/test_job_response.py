"""The typed hand-offs of a job: its search outcome (agentsearch.pipeline.retrieval.outcome), the translations the
search takes (agentsearch.pipeline.retrieval.translations) and its response (agentsearch.pipeline.records.job_response,
assembled by agentsearch.pipeline.job.assembly), each read and written back as the JSON it was, a stored job's included.
"""

from __future__ import annotations

import json

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.documents import Document, Source
from agentsearch.pipeline.job.assembly import cited_documents, job_response
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.records.agent_runs import AgentRun, ArtifactRef
from agentsearch.pipeline.records.job_response import InlinedArtifact, JobResponse, StoredArtifact
from agentsearch.pipeline.retrieval.outcome import SearchOutcome
from agentsearch.pipeline.retrieval.translations import Translations
from tests.support.previous_release.rows import captured

METRICS = {"embedding_ms": 1.2, "search_ms": 3.4, "strategy": "hybrid", "sources_found": 12, "returned": 5,
           "average_relevance": 0.71, "weights": {"semantic": 0.7, "keyword": 0.3}, "cache_hit": False}


def test_a_search_outcome_is_written_with_the_retrievers_keys_in_their_order_and_its_own_after():
    metadata: dict = {}
    SearchOutcome.of_collection(METRICS, "c1", warnings=["w"], suggestions=[]).write(metadata)
    assert list(metadata["search"]) == [*METRICS, "collection_id", "warnings"]
    search = SearchOutcome.read(metadata)
    search.attempts = 3
    search.write(metadata)
    assert list(metadata["search"])[-1] == "attempts" and metadata["search"]["weights"] == METRICS["weights"]
    assert SearchOutcome.read({}).dump() == {} and SearchOutcome.read({}).failure(found=0) is None


def test_a_stored_search_outcome_with_keys_no_release_names_now_reads_and_writes_back_unchanged():
    stored = {"degraded": False, "strategies": {"dense": {"hits": 1}}, "returned": 1}
    assert json.dumps(SearchOutcome.read({"search": stored}).dump()) == json.dumps(stored)


def test_the_merged_search_keeps_each_collections_outcome_and_prefixes_their_failures():
    found = SearchOutcome.of_collection({**METRICS, "sources_found": 2}, "a")
    failed = SearchOutcome.of_collection({"errors": ["semantic search failed: x"], "returned": 0}, "b")
    merged = SearchOutcome.merged({"a": found, "b": failed}, returned=2, duplicates=0, average_relevance=0.5)
    dumped = merged.dump()
    assert list(dumped) == ["collections", "sources_found", "returned", "duplicates_across_collections", "cache_hit",
                            "average_relevance", "errors"]
    assert dumped["collections"]["a"] == found.dump() and dumped["sources_found"] == 2
    assert merged.degraded_reasons() == ["collection b: semantic search failed: x"]
    assert merged.failure(found=2) is None and merged.failure(found=0) is not None


def test_the_translations_are_read_from_the_translators_record_only():
    metadata = {"original_query": "Wo wächst Tee?", "translated_from": "de", "translated_to": "en",
                "translation_method": "llm", "translations": {"en": "Where does tea grow?", "zh": "茶长在哪里？"}}
    translations = Translations.of_translator(metadata, "Where does tea grow? plantation")
    assert translations is not None and translations.original == "Wo wächst Tee?"
    assert translations.searched_beside("Wo wächst Tee?") == {"en": "Where does tea grow? plantation",
                                                             "zh": "茶长在哪里？"}
    assert Translations.of_translator({"original_query": "sollar"}, "solar") is None  # the spell checker's


def _state() -> JobState:
    return JobState(job_id="j1", collection_id="c1", query="Q4 revenue? (fourth quarter)", original_query="Q4 revenue?",
                    answer="Revenue reached $412 million [1].",
                    sources=[Source(document_id="d1", title="Q4", score=0.9)],
                    metadata={"search": {**METRICS, "collection_id": "c1"}},
                    agent_runs=[AgentRun(agent_id="language_detector", stage=Stage.PRE_SEARCH, success=True,
                                         status="ok", next_agent_id="translator")],
                    timings_ms={"core_search": 12.5}, stage_timeouts={"response": 60.0})


def test_the_response_is_built_once_with_the_keys_a_job_always_stored():
    summary = AgentRun(agent_id="executive_summary", stage=Stage.RESPONSE, success=True, status="ok",
                       artifact=ArtifactRef(id="a1", agent_id="executive_summary", type="summary",
                                            filename="summary.md", content_type="text/markdown", size=5))
    stored = job_response(_state(), [summary]).dump()
    assert list(stored) == ["job_id", "complete", "degraded", "degraded_reasons", "query", "search_query", "answer",
                            "sources", "cot_steps", "citations", "agent_artifacts", "agents", "skipped", "metadata",
                            "timings_ms", "stage_timeouts"]
    assert stored["complete"] is True and stored["cot_steps"] is None and stored["skipped"] == []
    assert stored["sources"] == [{"document_id": "d1", "title": "Q4", "score": 0.9, "location": None, "url": None}]
    assert stored["agents"][0]["next_agent_id"] == "translator" and "stood_in_for" not in stored["agents"][0]
    assert "next_agent_id" not in stored["agents"][1] and stored["agents"][1]["stage"] == "response"
    assert stored["agent_artifacts"] == [summary.artifact.model_dump(mode="json")]
    assert stored["metadata"]["search"] == {**METRICS, "collection_id": "c1"}
    assert json.dumps(JobResponse.load(json.loads(json.dumps(stored))).dump()) == json.dumps(stored)


def test_a_response_the_previous_release_stored_is_served_as_it_was_stored():
    stored = captured()["response"]
    copied = {**stored, "job_id": "copy", "cached": True, "cached_from": stored["job_id"]}  # a whole-job cache hit
    for response in (stored, copied):
        assert json.dumps(JobResponse.load(response).dump()) == json.dumps(response)


def test_the_api_serves_the_artifacts_inlined_and_the_mcp_tools_and_webhooks_read_the_same_model():
    stored = JobResponse.load(captured()["response"])
    assert isinstance(stored.agent_artifacts[0], StoredArtifact) and stored.artifact_filenames() == [
        "executive_summary.md"]
    served = stored.with_artifacts_inlined({"a1": b"# Q4"}, "j2").dump()
    assert list(served) == list(captured()["response"])  # the artifacts in their place
    assert served["agent_artifacts"] == [{
        "agent_id": "executive_summary", "type": "summary", "data": "IyBRNA==", "filename": "executive_summary.md",
        "content_type": "text/markdown", "size": 64, "metadata": {},
        "url": "/v1/jobs/j2/artifacts/executive_summary.md"}]
    read = JobResponse.load(served)
    assert isinstance(read.agent_artifacts[0], InlinedArtifact) and read.dump() == served
    # An artifact whose bytes are gone is left out; a response without artifacts is served with none.
    assert stored.with_artifacts_inlined({}, "j2").dump()["agent_artifacts"] == []
    assert JobResponse.load({"answer": "a"}).with_artifacts_inlined({}, "j").dump() == {"answer": "a",
                                                                                        "agent_artifacts": []}


def test_the_response_keeps_the_version_of_each_cited_document_the_search_found_in_a_collection():
    first, second = "5c6f3a1e-8f6b-4a59-9a51-2a3c6f1b0d11", "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
    state = _state().model_copy(update={
        "collection_id": first,
        "sources": [Source(document_id="d1", title="Q4", score=0.9), Source(document_id="d2", title="Q3", score=0.8),
                    Source(document_id="web", title="A page", score=0.5)],
        "documents": [Document(id="d1", text="t", metadata={"chunk_id": "d1#3fa4c1d2e0-0"}),
                      Document(id="d2", text="t", metadata={"chunk_id": "d2#0123456789-4", "collection_id": second}),
                      Document(id="web", text="t", metadata={"url": "https://example.org"})]})
    cited = cited_documents(state)
    assert [(str(c.collection_id), c.document_id, c.version) for c in cited] == [
        (first, "d1", "3fa4c1d2e0"), (second, "d2", "0123456789")]  # an agent's own passage is no document's
    stored = job_response(state, []).dump()
    assert stored["document_versions"] == {"d1": "3fa4c1d2e0", "d2": "0123456789"}
    assert "document_versions" not in job_response(_state(), []).dump()  # none found in a collection: no key
