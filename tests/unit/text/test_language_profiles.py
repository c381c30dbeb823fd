"""pipeline/text/language_profiles.py: the sparse profiles detect as langdetect's own, probability for probability.

The same texts (questions in a dozen languages and scripts, the sample corpus's documents, strings with no letters)
go to both, each detector seeded as the language detector seeds them; every language and probability reported, and
every refusal, is the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langdetect import DetectorFactory, LangDetectException
from langdetect.detector_factory import PROFILES_DIRECTORY

from pipeline.text.language_profiles import load_profiles

SAMPLE_CORPUS = Path(__file__).resolve().parents[3] / "examples" / "sample_corpus.jsonl"
QUESTIONS = [
    "¿Cuáles son los ingresos del cuarto trimestre?", "What was Northwind Energy's revenue in Q4 2025?",
    "Wie hoch war der Umsatz im vierten Quartal?", "Quel est le chiffre d'affaires du quatrième trimestre ?",
    "Qual è stato il fatturato dell'anno?", "Какова была выручка компании?", "Hoeveel omzet had het bedrijf?",
    "Jaki był przychód w czwartym kwartale?", "ما هي إيرادات الربع الرابع؟", "מה היו ההכנסות ברבעון?",
    "Πόσα ήταν τα έσοδα;", "Mikä oli liikevaihto?", "Hur stor var omsättningen?", "ok", "Northwind Q4",
    "東京の天気はどうですか", "2025 Q4 %", "",
]


def _texts() -> list[str]:
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    return QUESTIONS + [document["text"][:400] for document in documents]


def _found(factory, text: str) -> list[tuple[str, float]] | str:
    detector = factory.create()
    detector.append(text)
    try:
        return [(language.lang, language.prob) for language in detector.get_probabilities()]
    except LangDetectException as exc:
        return f"refused: {exc}"


@pytest.fixture(scope="module")
def both():
    seed = DetectorFactory.seed
    DetectorFactory.seed = 0  # as pipeline.agents.builtin.language_detector sets it
    plain = DetectorFactory()
    plain.load_profile(PROFILES_DIRECTORY)
    yield plain, load_profiles()
    DetectorFactory.seed = seed


def test_the_same_languages_and_ngrams(both):
    plain, sparse = both
    assert sparse.get_lang_list() == plain.get_lang_list()
    assert sparse.word_lang_prob_map.keys() == plain.word_lang_prob_map.keys()
    for word, probabilities in list(plain.word_lang_prob_map.items())[::97]:
        widened = [0.0] * len(probabilities)
        pairs = sparse.word_lang_prob_map[word]
        for index, value in zip(pairs[::2], pairs[1::2], strict=True):
            widened[index] = value
        assert widened == probabilities, word


def test_every_text_detects_as_langdetect(both):
    plain, sparse = both
    for text in _texts():
        assert _found(sparse, text) == _found(plain, text), text
