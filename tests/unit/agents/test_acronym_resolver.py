"""The acronym resolver, called directly (no runner, no Redis): with configured acronyms, and with the definitions
mined from the collection by the fake toolbox of ``pre_search_fakes``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.acronym_resolver import AcronymResolver
from tests.unit.agents.pre_search_fakes import COLLECTION, CORPUS, FakeTools, ctx_with, inp

PRE = AgentContext(pipeline_stage=Stage.PRE_SEARCH)


ACRONYMS = {"PPA": "power purchase agreement", "Q4": "fourth quarter",
            "EBITDA": "earnings before interest, taxes, depreciation and amortization"}


def test_acronym_resolver_keeps_the_acronym_and_adds_its_expansion():
    out = AcronymResolver({"acronyms": ACRONYMS}).run(PreSearchInput(query="PPA prices and EBITDA in Q4"), PRE)
    assert out.query == (
        "PPA (power purchase agreement) prices and "
        "EBITDA (earnings before interest, taxes, depreciation and amortization) in Q4 (fourth quarter)"
    )
    assert out.metadata["acronyms_resolved"] == ACRONYMS


def test_acronym_resolver_matches_whole_words_and_case_by_default():
    out = AcronymResolver({"acronyms": ACRONYMS}).run(PreSearchInput(query="ppa appendix and PPAs signed in Q45"), PRE)
    assert out.query == "ppa appendix and PPAs signed in Q45"
    assert out.metadata["acronyms_resolved"] == {}


def test_acronym_resolver_can_ignore_case():
    out = AcronymResolver({"acronyms": ACRONYMS, "case_sensitive": False}).run(PreSearchInput(query="ppa terms"), PRE)
    assert out.query == "ppa (power purchase agreement) terms"


def test_acronym_resolver_treats_acronyms_as_literal_text_not_patterns():
    agent = AcronymResolver({"acronyms": {"R.D": "research and development"}})
    assert agent.run(PreSearchInput(query="RXD budget"), PRE).query == "RXD budget"
    assert agent.run(PreSearchInput(query="R.D budget"), PRE).query == "R.D (research and development) budget"


def test_acronym_resolver_skips_when_the_dictionary_is_empty():
    with pytest.raises(AgentSkipped, match="no acronyms"):
        AcronymResolver().run(PreSearchInput(query="PPA prices"), PRE)


@pytest.mark.parametrize("acronyms", [{"PPA": ""}, {"PPA": "   "}, {"": "power purchase agreement"}])
def test_acronym_resolver_refuses_empty_names_or_expansions(acronyms):
    with pytest.raises(ValidationError, match="non-empty"):
        AcronymResolver({"acronyms": acronyms})


def test_acronym_resolver_prefers_the_longest_acronym():
    agent = AcronymResolver({"acronyms": {"EU": "European Union", "EU ETS": "EU Emissions Trading System"}})
    out = agent.run(PreSearchInput(query="EU ETS carbon prices"), PRE)
    assert out.query == "EU ETS (EU Emissions Trading System) carbon prices"


# --- acronym_resolver with mined definitions ------------------------------------------------------------------


def test_acronym_resolver_expands_q4_with_the_definition_mined_from_the_corpus(keyword_tools):
    out = AcronymResolver().run(inp("Electrolyser construction start in Q4"), ctx_with(keyword_tools))
    assert out.query == "Electrolyser construction start in Q4 (fourth quarter)"
    assert out.metadata["acronyms_resolved"] == {"Q4": "fourth quarter"}
    assert out.metadata["acronym_sources"] == {"Q4": "mined"}
    assert ("acronyms", COLLECTION) in keyword_tools.calls


def test_acronym_resolver_uses_definitions_of_the_sample_corpus(keyword_tools):
    out = AcronymResolver().run(inp("typical LCOE of a PPA"), ctx_with(keyword_tools))
    assert out.query == "typical LCOE (levelized cost of energy) of a PPA (power purchase agreement)"


def test_acronym_resolver_config_wins_over_mined_definitions(keyword_tools):
    agent = AcronymResolver({"acronyms": {"Q4": "October to December"}})
    out = agent.run(inp("PPA signed in Q4"), ctx_with(keyword_tools))
    assert out.query == "PPA (power purchase agreement) signed in Q4 (October to December)"
    assert out.metadata["acronym_sources"] == {"PPA": "mined", "Q4": "config"}


def test_acronym_resolver_does_not_repeat_an_expansion_the_query_spells_out(keyword_tools):
    out = AcronymResolver().run(inp("power purchase agreement (PPA) terms in Q4"), ctx_with(keyword_tools))
    assert out.query == "power purchase agreement (PPA) terms in Q4 (fourth quarter)"


def test_acronym_resolver_skips_only_when_both_sources_are_empty(keyword_tools):
    with pytest.raises(AgentSkipped, match="no acronyms configured or mined"):
        AcronymResolver({"use_mined": False}).run(inp("Q4 revenue"), ctx_with(keyword_tools))
    with pytest.raises(AgentSkipped):
        empty = FakeTools([{"id": "x", "title": "t", "text": "No definitions."}])
        AcronymResolver().run(inp("Q4 revenue"), ctx_with(empty))


def test_acronym_resolver_keeps_working_when_mining_fails():
    class Broken(FakeTools):
        def acronyms(self, collection_id):
            raise ConnectionError("database unavailable")

    out = AcronymResolver({"acronyms": {"Q4": "fourth quarter"}}).run(inp("Q4 results"), ctx_with(Broken(CORPUS)))
    assert out.query == "Q4 (fourth quarter) results"
    assert "database unavailable" in out.metadata["acronym_mining_error"]
