"""Pre-search agents on the real stack: the detector -> translator -> expander chain, and acronyms mined from
the ingested sample corpus. No LLM endpoint is configured for the stack, so the translator must report ``skipped``."""

from __future__ import annotations

import json

from tests.integration.conftest import SAMPLE_CORPUS, runs_by_agent, search, use_agents

SPANISH = "¿Cuáles fueron los ingresos de Northwind Energy en el cuarto trimestre de 2025?"
CORPUS = {d["id"]: d for d in (json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip())}


def test_detector_translator_expander_run_as_a_chain_without_an_llm(stack, collection):
    assert not stack.env.get("AGENTSEARCH_OPENAI_BASE_URL"), "this test needs a stack without an LLM endpoint"
    with stack.http() as http:
        # Given out of order on purpose: the priorities decide (detector 0, translator 10, expander 20).
        use_agents(
            http,
            collection,
            {"agent_id": "query_expander", "priority": 20},
            {"agent_id": "translator", "priority": 10},
            {"agent_id": "language_detector", "priority": 0},
        )
        job = search(http, collection, SPANISH)
    assert job["status"] == "succeeded", job.get("error")
    response = job["response"]
    assert [(r["agent_id"], r["status"]) for r in response["agents"]] == [
        ("language_detector", "ok"), ("translator", "skipped"), ("query_expander", "ok"),
    ]
    reason = runs_by_agent(job)["translator"]["errors"][0]
    assert reason.startswith("no LLM endpoint configured")
    skipped = {"agent_id": "translator", "stage": "pre_search", "status": "skipped", "reason": reason}
    assert skipped in response["skipped"]

    metadata = response["metadata"]
    assert metadata["language"] == "es" and "original_query" not in metadata
    # The expander fell back to pseudo-relevance feedback from the collection (mode "auto", no LLM).
    assert metadata["expansion_method"] == "pseudo_relevance"
    terms = metadata["expansion_terms"]
    assert 1 <= len(terms) <= 5
    assert response["query"] == SPANISH
    assert response["search_query"] == f"{SPANISH} {' '.join(terms)}"
    feedback = metadata["feedback_documents"]
    assert feedback and set(feedback) <= set(CORPUS)
    query_words = set(SPANISH.lower().replace("?", " ").replace("¿", " ").split())
    for term in terms:
        assert term not in query_words
        assert any(term in f"{CORPUS[d]['title']} {CORPUS[d]['text']}".lower() for d in feedback), term


def test_acronym_resolver_expands_acronyms_mined_from_the_sample_corpus(stack, collection):
    with stack.http() as http:
        use_agents(http, collection,
                   {"agent_id": "acronym_resolver", "config": {"acronyms": {"PPA": "power offtake deal"}}})
        job = search(http, collection, "How does the LCOE of a wind farm depend on its PPA?")
    assert job["status"] == "succeeded", job.get("error")
    response = job["response"]
    assert runs_by_agent(job)["acronym_resolver"]["status"] == "ok"
    # LCOE is defined only in the corpus ("The levelized cost of energy (LCOE) is ..."); PPA is configured, and
    # the configured expansion wins over the mined "power purchase agreement".
    assert response["search_query"] == (
        "How does the LCOE (levelized cost of energy) of a wind farm depend on its PPA (power offtake deal)?"
    )
    assert response["metadata"]["acronym_sources"] == {"LCOE": "mined", "PPA": "config"}
    assert "energy-finance-glossary" in [s["document_id"] for s in response["sources"]]
