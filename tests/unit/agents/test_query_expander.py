"""The query expander on real text: pseudo-relevance feedback from a BM25 keyword pass of the fake toolbox of
``pre_search_fakes``, configured synonyms, and an LLM over HTTP."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped, PreSearchInput
from agentsearch.pipeline.agents.builtin.query_expander import QueryExpander
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.text import words
from tests.unit.agents.pre_search_fakes import ANALYZER, COLLECTION, CORPUS, PLAIN, FakeTools, ctx_with, inp


def test_query_expander_adds_terms_from_the_top_documents_of_a_keyword_pass(keyword_tools):
    query = "offshore foundations"
    agent = QueryExpander({"mode": "offline", "max_terms": 4, "feedback_docs": 3})
    out = agent.run(inp(query), ctx_with(keyword_tools))
    terms = out.metadata["expansion_terms"]
    assert len(terms) == 4 and {"monopiles", "floating"} & set(terms)
    assert out.query == f"{query} {' '.join(terms)}"
    assert ("search", COLLECTION, query, 3, "keyword") in keyword_tools.calls
    feedback = [d for d in CORPUS if d["id"] in out.metadata["feedback_documents"]]
    assert feedback and feedback[0]["id"] == "offshore-wind-foundations"
    for term in terms:  # every term comes from the feedback documents, none is a query word
        assert any(term in words(f"{d['title']} {d['text']}") for d in feedback)
        assert term not in words(query)
    assert set(out.metadata["expansion_sources"].values()) == {"feedback"}


def test_query_expander_does_not_add_the_query_terms_again_in_another_form(keyword_tools):
    agent = QueryExpander({"mode": "offline", "max_terms": 10})
    out = agent.run(inp("turbine maintenance"), ctx_with(keyword_tools))
    terms = out.metadata["expansion_terms"]
    assert terms
    assert not {"turbine", "turbines", "maintenance", "maintain"} & set(terms)
    assert len({ANALYZER.terms(t)[0] for t in terms}) == len(terms)  # one form per stem


def test_query_expander_prefers_terms_rare_in_the_collection(keyword_tools):
    out = QueryExpander({"mode": "offline", "max_terms": 5}).run(inp("safety injuries"), ctx_with(keyword_tools))
    terms = out.metadata["expansion_terms"]
    assert terms[0] == "recordable"  # "total recordable injury rate": rare in the collection, in every feedback doc
    # "northwind" and "energy" are in every feedback document too, but everywhere else as well.
    feedback = [d for d in CORPUS if d["id"] in out.metadata["feedback_documents"]]
    assert all({"northwind", "energy"} <= set(words(f"{d['title']} {d['text']}")) for d in feedback)
    assert not {"northwind", "energy"} & set(terms)
    # A stricter lift keeps only the terms that stand out most.
    strict = QueryExpander({"mode": "offline", "max_terms": 5, "min_lift": 5}).run(inp("safety injuries"),
                                                                                 ctx_with(keyword_tools))
    assert "recordable" in strict.metadata["expansion_terms"] and "company" not in strict.metadata["expansion_terms"]
    assert "company" in terms


def test_query_expander_adds_configured_synonyms():
    agent = QueryExpander({"synonyms": {"revenue": ["sales", "turnover"], "parental leave": ["maternity leave"],
                                        "EBITDA": ["operating profit"]}})
    out = agent.run(inp("Revenue and parental leave at Northwind"), PLAIN)
    assert out.query == "Revenue and parental leave at Northwind sales turnover maternity leave"
    assert out.metadata["expansion_terms"] == ["sales", "turnover", "maternity leave"]
    assert out.metadata["expansion_sources"] == {"sales": "synonym", "turnover": "synonym",
                                                 "maternity leave": "synonym"}
    # Whole words only: "leave" alone does not trigger "parental leave", "revenues" does not trigger "revenue".
    assert agent.run(inp("annual leave and revenues"), PLAIN).metadata["expansion_terms"] == []


def test_query_expander_synonyms_come_on_top_of_feedback_terms(keyword_tools):
    agent = QueryExpander({"mode": "offline", "max_terms": 2, "synonyms": {"battery": ["energy storage system"]}})
    out = agent.run(inp("Kestrel Point battery"), ctx_with(keyword_tools))
    sources = out.metadata["expansion_sources"]
    assert next(iter(sources.items())) == ("energy storage system", "synonym")
    assert list(sources.values()).count("feedback") == 2


def test_query_expander_skips_without_synonyms_or_a_collection():
    with pytest.raises(AgentSkipped, match="no synonyms"):
        QueryExpander().run(PreSearchInput(query="solar output"), PLAIN)


def test_query_expander_llm_variant(fake_llm, keyword_tools):
    fake_llm.script('```json\n{"terms": ["sales", "Revenue", "turnover", "Income Statement"]}\n```')
    keyword_tools.llm = LLMClient(base_url=fake_llm.base_url, model="fake")
    out = QueryExpander({"mode": "llm", "max_terms": 3}).run(inp("revenue 2025"), ctx_with(keyword_tools))
    assert out.query == "revenue 2025 sales turnover Income Statement"  # "Revenue" is the query's own word
    assert out.metadata["expansion_method"] == "llm"
    request = fake_llm.requests[0]
    assert request["model"] == "fake" and request["messages"][-1]["content"] == "revenue 2025"
    assert "up to 3" in request["messages"][0]["content"]
    assert not [c for c in keyword_tools.calls if c[0] == "search"]  # no feedback pass when the LLM answered


def test_query_expander_auto_falls_back_to_feedback_when_the_llm_fails(fake_llm, keyword_tools):
    fake_llm.script("I cannot help with that.")
    keyword_tools.llm = LLMClient(base_url=fake_llm.base_url, model="fake")
    out = QueryExpander({"max_terms": 3}).run(inp("offshore foundations"), ctx_with(keyword_tools))
    assert out.metadata["expansion_method"] == "pseudo_relevance" and len(out.metadata["expansion_terms"]) == 3
    assert "not JSON" in out.metadata["expansion_warning"]
    with pytest.raises(AgentSkipped, match="no LLM"):
        QueryExpander({"mode": "llm"}).run(inp("offshore foundations"), ctx_with(FakeTools(CORPUS)))


@pytest.mark.parametrize(
    "config", [{"max_terms": 0}, {"feedback_docs": 0}, {"mode": "magic"}, {"synonyms": {"revenue": []}},
               {"synonyms": {" ": ["sales"]}}, {"terms": 3}]
)
def test_query_expander_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        QueryExpander(config)
