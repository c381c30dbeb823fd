"""The language detector, called directly (no runner, no Redis)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.language_detector import LanguageDetector

PRE = AgentContext(pipeline_stage=Stage.PRE_SEARCH)


@pytest.mark.parametrize(
    ("query", "language"),
    [
        ("Wie hoch war der Umsatz im vierten Quartal des letzten Jahres?", "de"),
        ("¿Cuáles fueron los ingresos del cuarto trimestre del año pasado?", "es"),
        ("What was the revenue in the fourth quarter of last year?", "en"),
        ("Quel a été le chiffre d'affaires du quatrième trimestre de l'année dernière ?", "fr"),
    ],
)
def test_language_detector_names_the_language_of_a_full_sentence(query, language):
    out = LanguageDetector().run(PreSearchInput(query=query), PRE)
    assert out.metadata["language"] == language
    assert 0.5 <= out.metadata["language_confidence"] <= 1.0
    assert out.query == query  # detection never rewrites the query
    assert not out.skip_search


def test_language_detector_is_deterministic():
    query = "Umsatzentwicklung der Solarsparte im vierten Quartal"
    results = {tuple(LanguageDetector().run(PreSearchInput(query=query), PRE).metadata.items()) for _ in range(5)}
    assert len(results) == 1


def test_language_detector_falls_back_when_the_query_has_no_letters():
    out = LanguageDetector({"fallback_language": "de"}).run(PreSearchInput(query="2025 / 2026 — 42 %"), PRE)
    assert out.metadata == {"language": "de", "language_confidence": 0.0}


def test_language_detector_falls_back_below_min_confidence():
    agent = LanguageDetector({"min_confidence": 1.0, "fallback_language": "nl"})
    # A mixed English/German query cannot be detected with certainty.
    out = agent.run(PreSearchInput(query="revenue Umsatz quarter Quartal"), PRE)
    assert out.metadata["language"] == "nl"
    assert out.metadata["language_confidence"] <= 1.0


@pytest.mark.parametrize("config", [{"min_confidence": 1.5}, {"fallback_language": "e"}, {"language": "de"}])
def test_language_detector_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        LanguageDetector(config)

