"""The search's sentence signal: the query's best cosine with a stored sentence of each leading document, beside
the fused score (``sentence_signal.with_best_sentences``, ``fusion.with_sentence_signal``,
``sentence_vectors.best_sentence_cosine``, ``Retriever``).

The store is a stand-in that answers both retrievers from fixed lists and reads sentence vectors packed as
ingestion packs them; the embedding model is a table of hand-made vectors, so which sentence is near the query is
decided here, in plain sight.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.fusion import with_sentence_signal
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.sentence_signal import SENTENCE_WINDOW
from agentsearch.pipeline.retrieval.sentence_vectors import best_sentence_cosine, chunk_units, pack, text_key, unpack
from agentsearch.pipeline.retrieval.stored_chunks import Hit

QUERY = "When did the Harrow Ridge farm open?"
SPANISH = "¿Cuándo abrió el parque eólico de Harrow Ridge?"
# Document a reads like the question as a whole; document b holds the one sentence that answers it.
A_TEXT = "Harrow Ridge wind farm news and farm updates. Turbine counts and farm staff are listed."
B_TEXT = "The annual report covers many sites. Harrow Ridge opened in March 2025."
VECTORS = {
    QUERY: [1.0, 0.0, 0.0],
    SPANISH: [1.0, 0.0, 0.0],
    "Harrow Ridge wind farm news and farm updates.": [0.6, 0.8, 0.0],
    "Turbine counts and farm staff are listed.": [0.5, 0.0, 0.866],
    "The annual report covers many sites.": [0.0, 1.0, 0.0],
    "Harrow Ridge opened in March 2025.": [0.98, 0.199, 0.0],
    "Safety audits found no incidents.": [0.1, 0.0, 0.995],
}


def unit(values: list[float]) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def stored_payload(title: str, text: str) -> str:
    units = chunk_units(title, text)
    return pack(units, [unit(VECTORS.get(u, [0.0, 0.0, 1.0])) for u in units])


class SentenceStore:
    """Both retrievers rank a a little over b, and c last; each chunk has its sentences stored."""

    def __init__(self, fail_sentences: bool = False) -> None:
        self.fail_sentences = fail_sentences
        self.sentence_reads: list[list[str]] = []
        self.chunks = {"a#0": ("a", "Farm news", A_TEXT), "b#0": ("b", "Annual report", B_TEXT),
                       "c#0": ("c", "Safety", "Safety audits found no incidents.")}

    def _hit(self, chunk_id: str, score: float) -> Hit:
        doc, title, text = self.chunks[chunk_id]
        return Hit(id=chunk_id, document_id=doc, title=title, text=text, score=score, metadata={})

    def dense_search(self, name, vector, limit):
        return [self._hit("a#0", 0.80), self._hit("b#0", 0.70), self._hit("c#0", 0.30)]

    def keyword_search(self, name, analyzed, limit):
        return [self._hit("a#0", 4.0), self._hit("b#0", 3.9), self._hit("c#0", 1.0)]

    def vectors(self, name, ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        self.sentence_reads.append(list(chunk_ids))
        if self.fail_sentences:
            raise ConnectionError("milvus: connection refused")
        stored = {}
        for chunk_id in chunk_ids:
            _, title, text = self.chunks[chunk_id]
            stored.update(unpack(stored_payload(title, text)))
        return stored


def embed(texts: list[str]) -> list[list[float]]:
    return [unit(VECTORS[t]).tolist() for t in texts]


def test_a_document_holding_the_answering_sentence_overtakes_one_that_only_reads_alike():
    store = SentenceStore()
    retriever = Retriever(embed, store, KeywordAnalyzer())
    without = retriever.search("c", QUERY, SearchConfig(top_k=2, sentence_weight=0))
    assert [d.id for d in without.documents] == ["a", "b"] and store.sentence_reads == []
    with_signal = retriever.search("c", QUERY, SearchConfig(top_k=2))  # the default weight, 1
    assert [d.id for d in with_signal.documents] == ["b", "a"]
    assert store.sentence_reads == [["a#0", "b#0", "c#0"]]  # one read for the leading documents' chunks
    assert with_signal.metrics["sentences_read"] == 8  # every chunk's sentences (titles are stored too)
    assert all(0.0 <= d.score <= 1.0 for d in with_signal.documents)
    assert "errors" not in with_signal.metrics


def test_a_failed_read_keeps_the_fused_ranking_and_says_the_search_was_not_whole():
    result = Retriever(embed, SentenceStore(fail_sentences=True), KeywordAnalyzer()).search(
        "c", QUERY, SearchConfig(top_k=2))
    assert [d.id for d in result.documents] == ["a", "b"]
    (error,) = result.metrics["errors"]
    assert error.startswith("sentence vectors not read: ConnectionError")


def test_a_keyword_search_has_no_query_vector_and_reads_no_sentences():
    store = SentenceStore()
    Retriever(embed, store, KeywordAnalyzer()).search("c", QUERY, SearchConfig(strategy="keyword", top_k=2))
    assert store.sentence_reads == []


def test_a_model_that_did_not_learn_the_querys_language_gets_no_sentence_signal():
    store = SentenceStore()
    retriever = Retriever(embed, store, KeywordAnalyzer("auto"))
    result = retriever.search("c", SPANISH, SearchConfig(top_k=2), model="all-MiniLM-L6-v2")
    assert store.sentence_reads == [] and [d.id for d in result.documents] == ["a", "b"]
    assert result.metrics["sentence_skipped"] == "the embedding model all-MiniLM-L6-v2 was not trained on es"
    # English with MiniLM, and Spanish with a model not known to be English-only, do get it.
    retriever.search("c", QUERY, SearchConfig(top_k=2), model="all-MiniLM-L6-v2")
    retriever.search("c", SPANISH, SearchConfig(top_k=2), model="multilingual-e5-small")
    assert len(store.sentence_reads) == 2


def test_only_the_leading_documents_are_read():
    fused = {f"d{i}": 1.0 - i / 1000 for i in range(SENTENCE_WINDOW + 20)}
    store = SentenceStore()
    store.dense_search = lambda name, vector, limit: [
        Hit(id=f"{d}#0", document_id=d, title="", text="x", score=s, metadata={}) for d, s in fused.items()]
    store.keyword_search = lambda name, analyzed, limit: []
    store.sentence_vectors = lambda name, chunk_ids: store.sentence_reads.append(list(chunk_ids)) or {}
    Retriever(embed, store, KeywordAnalyzer()).search("c", QUERY, SearchConfig(strategy="semantic", top_k=50))
    assert store.sentence_reads == [[f"d{i}#0" for i in range(SENTENCE_WINDOW)]]


def test_the_signal_is_added_to_the_fused_score_and_the_result_stays_between_0_and_1():
    fused = {"a": 1.0, "b": 0.8, "c": 0.1}
    ranked = with_sentence_signal(fused, {"a": 0.2, "b": 0.9}, weight=1.0)
    assert ranked == pytest.approx({"a": 0.5, "b": 0.9, "c": 0.05})  # c, not covered, counts as the lowest
    assert with_sentence_signal(fused, {"a": 0.2, "b": 0.9}, weight=0.0) == fused


def test_each_sentence_counts_alone_or_with_its_title_whichever_is_nearer():
    query = unit(VECTORS[QUERY])
    # The answering sentence is nearer alone (0.98) than with its unrelated title added.
    stored = unpack(stored_payload("Annual report", B_TEXT))
    assert best_sentence_cosine(query, [("Annual report", B_TEXT)], stored) == pytest.approx(
        float(query @ unit(VECTORS["Harrow Ridge opened in March 2025."])), abs=1e-3)
    # A sentence far from the question under a title near it (as a quarter named only in a report's title): read
    # alone it would be 0; with its title it is near.
    near_title = "Harrow Ridge opened in March 2025."
    stored = unpack(stored_payload(near_title, "The annual report covers many sites."))
    best = best_sentence_cosine(query, [(near_title, "The annual report covers many sites.")], stored)
    assert best == pytest.approx(float(query @ unit(unit(VECTORS[near_title]) + unit([0.0, 1.0, 0.0]))), abs=1e-3)
    assert best > 0.5
    # Nothing stored for these sentences: no signal, rather than a made-up one.
    assert best_sentence_cosine(query, [("Annual report", "A sentence nobody stored.")], stored) is None
    assert text_key(near_title) in stored


def test_the_weight_is_validated_when_the_config_is_built():
    with pytest.raises(ValidationError) as err:
        SearchConfig(sentence_weight=-1)
    assert err.value.errors()[0]["loc"] == ("sentence_weight",)
    assert SearchConfig().sentence_weight == 1.0
