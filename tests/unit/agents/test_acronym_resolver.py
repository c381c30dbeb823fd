"""The acronym resolver, called directly (no runner, no Redis)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.agents.base import AgentContext, AgentSkipped, PreSearchInput, Stage
from pipeline.agents.builtin.acronym_resolver import AcronymResolver

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

