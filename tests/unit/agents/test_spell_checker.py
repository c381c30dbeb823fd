"""The spell checker on real text: the English dictionary, and the collection's own vocabulary from the fake toolbox
of ``pre_search_fakes``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped
from agentsearch.pipeline.agents.builtin.spell_checker import SpellChecker
from tests.unit.agents.pre_search_fakes import PLAIN, ctx_with, inp


def test_spell_checker_corrects_misspelt_words():
    out = SpellChecker().run(inp("reveune projecions"), PLAIN)
    assert out.query == "revenue projections"
    assert out.metadata["corrections"] == {"reveune": "revenue", "projecions": "projections"}


def test_spell_checker_keeps_domain_terms_found_only_in_the_collection(keyword_tools):
    query = "Northwind electrolyser reveune projecions"
    out = SpellChecker().run(inp(query), ctx_with(keyword_tools))
    assert out.query == "Northwind electrolyser revenue projections"
    assert set(out.metadata["corrections"]) == {"reveune", "projecions"}
    # Without the collection's vocabulary the same words would be "corrected" to English ones.
    blind = SpellChecker({"use_collection_vocabulary": False}).run(inp(query), ctx_with(keyword_tools))
    assert {"Northwind", "electrolyser"} <= set(blind.metadata["corrections"])
    assert "Northwind" not in blind.query and "electrolyser" not in blind.query


def test_spell_checker_corrects_towards_the_collections_spelling(keyword_tools):
    out = SpellChecker().run(inp("Nortwind hydrogen electrolyzer output"), ctx_with(keyword_tools))
    assert out.query == "Northwind hydrogen electrolyser output"
    assert out.metadata["corrections"] == {"Nortwind": "Northwind", "electrolyzer": "electrolyser"}


def test_spell_checker_builds_the_collections_dictionary_only_for_a_word_to_correct(keyword_tools, monkeypatch):
    from agentsearch.pipeline.agents.builtin import spell_checker

    built, real = [], spell_checker.domain_dictionary

    def counting(key, vocabulary):
        built.append(key)
        return real(key, vocabulary)

    monkeypatch.setattr(spell_checker, "domain_dictionary", counting)
    out = SpellChecker().run(inp("Northwind electrolyser revenue"), ctx_with(keyword_tools))  # every word known
    assert out.metadata["corrections"] == {} and built == []
    out = SpellChecker().run(inp("Nortwind electrolyser revenue"), ctx_with(keyword_tools))
    assert out.metadata["corrections"] == {"Nortwind": "Northwind"} and len(built) == 1


def test_spell_checker_leaves_numbers_acronyms_and_words_with_digits_alone(keyword_tools):
    out = SpellChecker().run(inp("EBITDA TWh Q4 2025 H2O 3.5GW reveune"), ctx_with(keyword_tools))
    assert out.query == "EBITDA TWh Q4 2025 H2O 3.5GW revenue"
    assert out.metadata["corrections"] == {"reveune": "revenue"}


def test_spell_checker_keeps_case_punctuation_and_configured_words():
    out = SpellChecker({"keep": ["projecions"]}).run(inp("Reveune, projecions?"), PLAIN)
    assert out.query == "Revenue, projecions?"
    assert out.metadata["corrections"] == {"Reveune": "Revenue"}


def test_spell_checker_skips_queries_in_a_language_it_has_no_dictionary_for():
    with pytest.raises(AgentSkipped, match="'es'"):
        SpellChecker().run(inp("ingresos del cuarto trimestre", language="es"), PLAIN)
    # After a translation into English the checker runs again.
    out = SpellChecker().run(inp("fourth quarter reveune", language="es", translated_to="en"), PLAIN)
    assert out.query == "fourth quarter revenue"


def test_spell_checker_loads_the_english_dictionary_once_per_process():
    SpellChecker().warm_up()
    assert SpellChecker().english.get() is SpellChecker({"max_edit_distance": 1}).english.get()
    assert SpellChecker.english.get().words["revenue"] > 1_000_000


@pytest.mark.parametrize("config",
                         [{"max_edit_distance": 3}, {"min_word_length": 1}, {"languages": []}, {"lang": "en"}])
def test_spell_checker_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        SpellChecker(config)
