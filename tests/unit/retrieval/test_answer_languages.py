"""The answer's sentence choice in languages other than English: the keyword analysis of each document's language,
inflected forms, an embedding model's cosines only for languages it learnt, and the chunk that stands for a
document in a search."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.eval.answers import holds_gold_span
from agentsearch.pipeline.job.answer import extractive_answer, question_kind, score_sentences
from agentsearch.pipeline.job.answer.question_kind import holds_kind
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.language import embedding_learnt
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.stored_chunks import Hit

GERMAN = Document(id="bern", title="Bern", score=1.0, metadata={"language": "de"}, text=(
    "Das Parlament tagt im Frühling. Das Parlament wurde 1902 in Bern gebaut."))


class RecordingEmbed:
    """An embedding function that records what it was asked: the query points the same way as every text."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(texts)
        return [[1.0, 0.0] for _ in texts]


def test_an_embedding_model_is_asked_only_about_a_language_it_learnt():
    embed = RecordingEmbed()
    question = "Wann wurde das Parlament in Bern gebaut?"
    answer = extractive_answer(question, [GERMAN], max_sentences=1, embed=embed, language="auto",
                               embedding_model="all-MiniLM-L6-v2")
    assert embed.calls == []
    assert answer.info["scoring"] == "lexical"
    assert answer.info["semantic_skipped"] == "the embedding model all-MiniLM-L6-v2 was not trained on de"
    assert answer.text == "Das Parlament wurde 1902 in Bern gebaut [1]."
    # A model not known to be English-only (a multilingual one), or no model named, is asked.
    for model in ("multilingual-e5-small", None):
        answer = extractive_answer(question, [GERMAN], max_sentences=1, embed=embed, language="auto",
                                   embedding_model=model)
        assert answer.info["scoring"] == "embedding+lexical" and "semantic_skipped" not in answer.info
    assert len(embed.calls) == 2
    english = Document(id="bern-en", title="Bern", score=1.0, metadata={"language": "en"},
                       text="The parliament meets in spring. The parliament building in Bern opened in 1902.")
    answer = extractive_answer("When did the parliament building in Bern open?", [english], embed=embed,
                               language="auto", embedding_model="all-MiniLM-L6-v2")
    assert answer.info["scoring"] == "embedding+lexical" and len(embed.calls) == 3


def test_embedding_learnt_names_only_the_models_it_knows_to_be_narrow():
    assert embedding_learnt("all-MiniLM-L6-v2", "en")
    assert not embedding_learnt("all-MiniLM-L6-v2", "ar")
    assert embedding_learnt("multilingual-e5-small", "ar") and embedding_learnt(None, "ar")


def test_an_inflected_form_holds_a_query_term_a_stemmer_left_whole():
    # Arabic's stemmer leaves "متوسعتين" as "متوسعت", which holds the question's "متوسع"; "حضر" (three letters)
    # would meet pieces of unrelated words, so it is held only as itself.
    document = Document(id="ca", title="", score=1.0, metadata={"language": "ar"},
                        text="في المنطقة مدن كثيرة. تحوي المنطقة منطقتين حضريتين متوسعتين.")
    scored, _info = score_sentences("كم منطقة حضرية متوسعة؟", [document], language="auto")
    first, second = scored
    assert first.text == "تحوي المنطقة منطقتين حضريتين متوسعتين." and first.lexical > second.lexical > 0
    analyzer = KeywordAnalyzer("auto")
    assert "حضر" in analyzer.terms("كم منطقة حضرية متوسعة؟")
    assert "حضر" not in analyzer.terms_as("ar", first.text)


def test_a_word_every_sentence_holds_weighs_next_to_nothing():
    document = Document(id="d", title="", score=1.0, metadata={"language": "ar"},
                        text="كان في المدينة سوق. كان في المدينة نهر. كان في المدينة جسر كبير.")
    scored, _ = score_sentences("ماذا كان في المدينة جسر؟", [document], language="auto")
    assert scored[0].text == "كان في المدينة جسر كبير."
    # "كان", "في" and the city are in every sentence: together they weigh less than a third of the bridge.
    assert scored[0].lexical > 3 * scored[1].lexical


def test_each_document_is_analysed_as_its_stored_language_and_detected_once_when_it_has_none(monkeypatch):
    import agentsearch.pipeline.retrieval.analyzer as analyzer_module

    seen: list[str] = []
    detect = analyzer_module.detect_language

    def counting(text: str):
        seen.append(text)
        return detect(text)

    monkeypatch.setattr(analyzer_module, "detect_language", counting)
    score_sentences("Wann wurde das Parlament gebaut?", [GERMAN], language="auto")
    assert seen == ["Wann wurde das Parlament gebaut?"]  # the query only: the document's language is stored
    seen.clear()
    bare = GERMAN.model_copy(update={"metadata": {}})
    score_sentences("Wann wurde das Parlament gebaut?", [bare], language="auto")
    assert sorted(seen) == sorted(["Wann wurde das Parlament gebaut?", bare.text])  # once per document


def test_a_gold_span_is_read_past_citation_marks():
    assert holds_gold_span("Luther left a note: his last writing [1].", ["his last writing."])
    assert holds_gold_span("Revenue rose 16% [2] in Q4 [3].", ["16% in Q4"])
    assert not holds_gold_span("Revenue rose 16% [2].", ["17%"])


def test_a_year_is_read_where_it_runs_into_a_word():
    assert holds_kind("最后直至发布《枫丹白露法令》（1685年）。", "time", set())
    assert not holds_kind("编号 216850 的文件。", "time", set())
    assert question_kind("Who led the Panthers?") == "name"


class TwoChunkStore:
    """Milvus stand-in: one German document in two chunks; the dense side ranks the first chunk best, the keyword
    side the second (the one holding the answer)."""

    def languages(self, name):
        return {"de": 2, "en": 1}

    def dense_search(self, name, vector, limit, **_):
        return [Hit(id="bern#0", document_id="bern", title="", text="Das Parlament tagt im Frühling.", score=0.9,
                    metadata={"language": "de"}),
                Hit(id="bern#1", document_id="bern", title="", text="Es wurde 1902 in Bern gebaut.", score=0.5,
                    metadata={"language": "de"})]

    def keyword_search(self, name, analyzed, limit, **_):
        return [Hit(id="bern#1", document_id="bern", title="", text="Es wurde 1902 in Bern gebaut.", score=4.0,
                    metadata={"language": "de"})]

    def vectors(self, name, ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        return {}


@pytest.mark.parametrize(("model", "query", "chunk"), [
    # MiniLM learnt English only: for a German question its cosine does not pick the document's passage.
    ("all-MiniLM-L6-v2", "Wann wurde das Parlament in Bern gebaut?", "bern#1"),
    ("multilingual-e5-small", "Wann wurde das Parlament in Bern gebaut?", "bern#0"),
    ("all-MiniLM-L6-v2", "When was the parliament in Bern built?", "bern#0"),
])
def test_the_chunk_that_stands_for_a_document_comes_from_a_side_that_reads_the_query(model, query, chunk):
    retriever = Retriever(lambda texts: [[1.0, 0.0] for _ in texts], TwoChunkStore(), KeywordAnalyzer("auto"))
    result = retriever.search("c", query, SearchConfig(top_k=1, sentence_weight=0), model=model)
    assert [d.metadata["chunk_id"] for d in result.documents] == [chunk]


class ThreeChunkStore(TwoChunkStore):
    """One English document in three chunks: the dense side ranks the first best, by a little; the keyword side
    ranks the second far ahead."""

    def languages(self, name):
        return {"en": 3}

    def dense_search(self, name, vector, limit, **_):
        return [Hit(id=f"plan#{i}", document_id="plan", title="", text=text, score=score, metadata={"language": "en"})
                for i, (text, score) in enumerate([("The board met in spring.", 0.9),
                                                   ("The plant was built in 1902.", 0.8), ("Lunch was served.", 0.1)])]

    def keyword_search(self, name, analyzed, limit, **_):
        return [Hit(id=f"plan#{i}", document_id="plan", title="", text=text, score=score, metadata={"language": "en"})
                for i, (text, score) in [(1, ("The plant was built in 1902.", 4.0)),
                                         (0, ("The board met in spring.", 1.0)), (2, ("Lunch was served.", 0.5))]]


def test_the_chunk_that_stands_for_a_document_is_the_one_every_signal_ranks_first():
    retriever = Retriever(lambda texts: [[1.0, 0.0] for _ in texts], ThreeChunkStore(), KeywordAnalyzer("auto"))
    result = retriever.search("c", "When was the plant built?", SearchConfig(top_k=1, sentence_weight=0),
                              model="all-MiniLM-L6-v2")
    # Cosine alone picks plan#0 (0.9 against 0.8); both sides fused rank plan#1 first (0.94 against 0.57).
    assert [d.metadata["chunk_id"] for d in result.documents] == ["plan#1"]

