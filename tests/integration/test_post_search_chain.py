"""Post-search agents as a chain on the real stack: reranker -> pii_redactor -> relevance_filter.

The documents the search found flow through each agent in priority order (each a Celery task in a prefork worker),
and what the last one hands on is what the answer is made from.
"""

from __future__ import annotations

import json
from datetime import date, timedelta

from tests.integration.conftest import SAMPLE_CORPUS, runs_by_agent, search, use_agents

QUERY = "When did the Harrow Ridge solar farm enter commercial operation?"
REFERENCE_DATE, MAX_AGE_DAYS = date(2025, 6, 30), 365
PUBLISHED = {d["id"]: date.fromisoformat(d["metadata"]["published"])
             for d in map(json.loads, SAMPLE_CORPUS.read_text().splitlines()) if d}


def test_reranker_then_pii_redactor_then_relevance_filter(stack, collection):
    with stack.http() as http:
        use_agents(
            http,
            collection,
            # Out of order on purpose: the chain follows priority.
            {"agent_id": "relevance_filter", "priority": 20,
             "config": {"max_age_days": MAX_AGE_DAYS, "reference_date": REFERENCE_DATE.isoformat(), "min_words": 20}},
            {"agent_id": "pii_redactor", "priority": 10, "config": {"names": ["Harrow Ridge"]}},
            {"agent_id": "reranker", "priority": 0},
        )
        job = search(http, collection, QUERY, top_k=8)
    assert job["status"] == "succeeded", job["error"]
    response = job["response"]

    assert [(r["stage"], r["agent_id"], r["status"]) for r in response["agents"]] == [
        ("post_search", "reranker", "ok"),
        ("post_search", "pii_redactor", "ok"),
        ("post_search", "relevance_filter", "ok"),
    ], response["agents"]
    runs = runs_by_agent(job)
    assert all(not r["cache_hit"] for r in runs.values())
    metadata = response["metadata"]

    # reranker: ran with dense similarity (the worker's toolbox embeds) and re-sorted the 8 documents.
    rerank = metadata["rerank"]
    assert rerank["method"] == "offline" and rerank["dense"] == "ok"
    assert len(rerank["order"]) == 8
    answering = {"nw-2024-q3", "nw-press-harrow-ridge-a", "nw-press-harrow-ridge-b"}
    assert rerank["order"][0] in answering

    # relevance_filter: exactly the documents published before the window went, each with its reason.
    cutoff = REFERENCE_DATE - timedelta(days=MAX_AGE_DAYS)
    too_old = [i for i in rerank["order"] if PUBLISHED[i] < cutoff]
    assert too_old, "the search should have found an early Harrow Ridge document (e.g. nw-2024-q1)"
    assert [(f["document_id"], f["reason"]) for f in metadata["filtered"]] == [(i, "too_old") for i in too_old]

    # What reached the answer: the reranked order minus the filtered, with the reranker's scores.
    sources = response["sources"]
    assert [s["document_id"] for s in sources] == [i for i in rerank["order"] if i not in too_old]
    scores = [s["score"] for s in sources]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)

    # pii_redactor: the configured name is gone from titles and from the answer built after it.
    assert metadata["pii_redacted"]["name"] >= 3
    assert all("Harrow Ridge" not in s["title"] for s in sources)
    assert any("[NAME]" in s["title"] for s in sources)
    assert "Harrow Ridge" not in response["answer"] and "[NAME]" in response["answer"]
    assert "September 2024" in response["answer"]
