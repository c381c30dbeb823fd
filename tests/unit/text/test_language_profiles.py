"""src/agentsearch/pipeline/text/language_profiles.py: the sparse profiles detect as langdetect's own, probability for
probability.

The same texts (questions in a dozen languages and scripts, the sample corpus's documents, strings with no letters)
go to both, each detector seeded as the language detector seeds them; every language and probability reported, and
every refusal, is the same.
"""

from __future__ import annotations

import pytest
from langdetect import DetectorFactory, LangDetectException
from langdetect.detector_factory import PROFILES_DIRECTORY

from agentsearch.pipeline.text.language_profiles import load_profiles
from tests.support.language_texts import QUESTIONS, sample_documents


def _texts() -> list[str]:
    return QUESTIONS + [text[:400] for text in sample_documents()]


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
    DetectorFactory.seed = 0  # as agentsearch.pipeline.agents.builtin.language_detector sets it
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
