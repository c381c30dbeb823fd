"""Answers with a real LLM in the loop: llama-server with SmolLM2-135M-Instruct (a weak model that invents freely)
behind the stack's workers. Whatever the model writes, a job delivers only sentences a source supports (partly
supported ones marked), keeps every quote the offline answer would have given, and streams nothing unchecked.

The assertions hold for any reply the model gives: they are about what reaches the user, not what the model says.
"""

from __future__ import annotations

import json
import re

import pytest

from agentsearch.pipeline.job.answer import PARTIAL_MARK
from agentsearch.pipeline.job.answer.citations import numbers_in
from agentsearch.pipeline.text.spans import sentence_spans
from tests.integration.conftest import SAMPLE_CORPUS, own_collection, wait_job
from tests.support.events import read_events

pytestmark = pytest.mark.integration

QUESTIONS = [
    "What was Northwind Energy's revenue in Q4 2025?",
    "When did the Harrow Ridge solar farm enter commercial operation?",
]
# A weak model on a busy two-core machine writes slowly: the job's own LLM budget (60 s) bounds the answer.
JOB_TIMEOUT_S = 240
# Three sources keep the model's prompt near 800 tokens: about 15 s of reading for this model on one thread.
TOP_K = 3


def ingest(stack, name: str) -> str:
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    with stack.http() as http:
        return own_collection(http, name, documents, timeout_s=180)


@pytest.fixture(scope="module")
def llm_collection(llm_stack) -> str:
    return ingest(llm_stack, "llm-answers")


@pytest.fixture(scope="module")
def offline_collection(stack) -> str:
    return ingest(stack, "llm-answers-offline")


def ask(stack, collection_id: str, query: str, **extra) -> dict:
    with stack.http(timeout_s=30) as http:
        response = http.post("/v1/search", json={"collection_id": collection_id, "query": query, "agents": [],
                                                 "use_cache": False, "top_k": TOP_K, **extra})
        assert response.status_code == 202, response.text
        return wait_job(http, response.json()["job_id"], timeout_s=JOB_TIMEOUT_S)


def plain(sentence: str) -> str:
    """A sentence without its citation marks, its mark and its end mark, for comparing what was written."""
    return re.sub(r"\s*\[\d+\]", "", sentence.replace(PARTIAL_MARK, "")).strip().rstrip(".!?").strip()


def sentences_of(response: dict) -> dict[str, set[str]]:
    """Each delivered sentence (as written) with the statuses of its citations."""
    out: dict[str, set[str]] = {}
    for c in response["citations"]:
        out.setdefault(c["sentence"], set()).add(c["status"])
    return out


def source_numbers(stack, collection_id: str, response: dict) -> set[str]:
    with stack.http() as http:
        texts = [http.get(f"/v1/collections/{collection_id}/documents/{s['document_id']}").json()["text"]
                 for s in response["sources"]]
    return set().union(*(numbers_in(t) for t in texts), *(numbers_in(s["title"]) for s in response["sources"]))


def test_what_the_real_model_writes_reaches_the_user_only_as_the_sources_support_it(
        llm_stack, stack, llm_collection, offline_collection):
    query = QUESTIONS[0]
    job = ask(llm_stack, llm_collection, query)
    assert job["status"] == "succeeded", job.get("error")
    response = job["response"]
    answer, meta = response["answer"], response["metadata"]["answer"]
    assert answer.strip()
    if meta["method"] == "extractive":  # the model's draft had no supported sentence, or the model failed
        assert meta["fallback_reason"]
        assert meta.get("sentences") is not None or meta.get("degraded")
    else:
        assert meta["fallback_reason"] is None and any(s["delivered"] for s in meta["sentences"])
    # Every delivered sentence is checked: supported, or partly supported and marked as such.
    delivered = sentences_of(response)
    assert delivered, "the answer has no checked sentence"
    # Every sentence of the draft has a verdict, and none judged unsupported is delivered.
    said = {plain(sentence) for sentence in delivered}
    for s in meta.get("sentences") or []:
        assert s["status"] in ("supported", "partial", "unsupported")
        assert s["delivered"] == (meta["method"] == "llm" and s["status"] != "unsupported")
        if s["status"] == "unsupported":
            assert plain(s["text"]) not in said and s["reason"]
    for sentence, statuses in delivered.items():
        assert sentence in answer
        assert "supported" in statuses or ("partial" in statuses and PARTIAL_MARK in sentence), (sentence, statuses)
    # No number reaches the user that no source holds (the citation marks aside).
    stated = numbers_in(re.sub(r"\[\d+\]", "", answer))
    assert stated <= source_numbers(llm_stack, llm_collection, response)
    # The offline answer's quotes are all in the delivered answer: the model took nothing away.
    offline = ask(stack, offline_collection, query)["response"]
    assert [s["document_id"] for s in offline["sources"]] == [s["document_id"] for s in response["sources"]]
    for sentence in sentences_of(offline):
        assert sentence in answer, sentence


def test_the_stream_carries_only_checked_sentences_and_ends_with_the_answer(llm_stack, llm_collection):
    with llm_stack.http(timeout_s=JOB_TIMEOUT_S) as http:
        job_id = http.post("/v1/search", json={"collection_id": llm_collection, "query": QUESTIONS[1],
                                               "agents": [], "use_cache": False, "top_k": TOP_K}).json()["job_id"]
        events = read_events(http, job_id, timeout_s=JOB_TIMEOUT_S)
        job = wait_job(http, job_id)
    names = [name for _, name, _ in events]
    assert names[-1] == "done" and "answer" in names
    text = ""
    for _, name, data in events:
        if name == "answer.reset":
            text = ""
        elif name == "answer.delta":
            text += data["text"]
    final = next(data for _, name, data in events if name == "answer")
    assert text == final["text"] == job["response"]["answer"]
    shown = {plain(sentence.text) for _, name, data in events if name == "answer.delta"
             for sentence in sentence_spans(data["text"])}
    for s in job["response"]["metadata"]["answer"].get("sentences") or []:
        if s["status"] == "unsupported":  # never shown, not even for a moment
            assert plain(s["text"]) not in shown


def test_the_iterative_mode_with_the_real_model_ends_with_a_checked_answer(llm_stack, llm_collection):
    job = ask(llm_stack, llm_collection, QUESTIONS[1], mode="iterative")
    assert job["status"] == "succeeded", job.get("error")
    response = job["response"]
    assert response["answer"].strip() and response["citations"]
    for sentence, statuses in sentences_of(response).items():
        assert "supported" in statuses or ("partial" in statuses and PARTIAL_MARK in sentence)
