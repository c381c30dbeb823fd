"""The reranker on real text, with the fake toolbox of ``post_search_fakes`` (real MiniLM embeddings)."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.agents.builtin.reranker import Reranker, proximity_score, smallest_window
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.sentence_vectors import chunk_units
from tests.unit.agents.post_search_fakes import CORPUS, CachedEmbedder, FakeTools, ctx_with, run

HARROW_QUERY = "When did the Harrow Ridge solar farm enter commercial operation?"
# The search order had the document that answers (Q3 2024: "entered commercial operation on 12 September 2024")
# last, behind documents that mention Harrow Ridge without saying when it started, and unrelated ones.
HARROW_CANDIDATES = ["nw-2024-q1", "nw-2024-q4", "energy-finance-glossary", "nw-2024-q2", "nw-2024-q3"]


def search_order(ids: list[str]) -> list[Document]:
    return [CORPUS[i].model_copy(update={"score": round(0.9 - 0.05 * k, 2)}) for k, i in enumerate(ids)]


def test_reranker_puts_the_document_that_answers_first(embedder):
    out = run(Reranker(), search_order(HARROW_CANDIDATES), HARROW_QUERY, ctx_with(FakeTools(embedder)))
    ids = [d.id for d in out.documents]
    assert ids[0] == "nw-2024-q3"
    assert set(ids) == set(HARROW_CANDIDATES)
    scores = [d.score for d in out.documents]
    assert scores == sorted(scores, reverse=True) and 0.0 <= scores[-1] <= scores[0] <= 1.0
    top = out.documents[0].metadata["rerank"]
    assert top["original_rank"] == 5 and top["original_score"] == 0.7 and top["score"] == out.documents[0].score
    assert all(0.0 <= top[k] <= 1.0 for k in ("dense", "bm25", "proximity"))
    assert top["bm25"] == 1.0  # the best BM25 of the candidates is the unit
    summary = out.metadata["rerank"]
    assert summary["method"] == "offline" and summary["dense"] == "ok"
    assert summary["weights"] == {"dense": 0.5, "bm25": 0.3, "proximity": 0.2}
    assert summary["order"] == ids and summary["moved"] >= 2


class KnownTools(FakeTools):
    """A toolbox with ``embed_known``, as a job's: texts whose vectors ingestion stored are read, not embedded."""

    def __init__(self, embedder: CachedEmbedder) -> None:
        super().__init__(embedder)
        self.asked: list[tuple[list[str], list[str]]] = []

    def embed_known(self, texts: list[str], documents: list[Document]) -> list[list[float]]:
        self.asked.append((list(texts), [d.id for d in documents]))
        return self.embed(texts)


def test_reranker_reads_known_vectors_of_whole_sentences_and_titles_and_ranks_as_with_embed(embedder):
    tools = KnownTools(embedder)
    documents = search_order(HARROW_CANDIDATES)
    out = run(Reranker(), documents, HARROW_QUERY, ctx_with(tools))
    plain = run(Reranker(), documents, HARROW_QUERY, ctx_with(FakeTools(embedder)))
    assert [d.id for d in out.documents] == [d.id for d in plain.documents]
    assert out.metadata["rerank"]["dense"] == "ok"
    [(texts, ids)] = tools.asked  # one call for every document
    assert ids == HARROW_CANDIDATES and texts[0] == HARROW_QUERY
    # What it asks for is what ingestion stores: each document's whole sentences and its title.
    stored = {u for d in documents for u in chunk_units(d.title, d.text)}
    assert set(texts[1:]) <= stored


def test_reranker_without_a_toolbox_ranks_by_bm25_and_proximity_and_says_so():
    out = run(Reranker(), search_order(HARROW_CANDIDATES), HARROW_QUERY)
    assert out.documents[0].id == "nw-2024-q3"
    summary = out.metadata["rerank"]
    assert summary["dense"].startswith("unavailable: no agent toolbox")
    assert summary["weights"] == {"bm25": 0.6, "proximity": 0.4}
    assert "dense" not in out.documents[0].metadata["rerank"]


def test_reranker_weights_decide(embedder):
    # Lexically, the glossary's definitions match "capacity factor" best; only BM25 weighted, the glossary wins.
    query = "What is a capacity factor?"
    ids = ["nw-2024-q3", "nw-kestrel-storage", "energy-finance-glossary"]
    only_bm25 = run(Reranker({"dense_weight": 0, "proximity_weight": 0}), search_order(ids), query)
    assert only_bm25.documents[0].id == "energy-finance-glossary"
    assert only_bm25.metadata["rerank"]["weights"] == {"bm25": 1.0}


def test_reranker_proximity_prefers_query_terms_close_together():
    analyzer = KeywordAnalyzer()
    query = analyzer.terms("battery storage project")
    close = analyzer.terms("Northwind approved the battery storage project at Kestrel Point in 2024.")
    apart = analyzer.terms("The battery supplier was chosen in March. Grid storage prices fell. A new project "
                           "office opened in Aberdeen.")
    assert smallest_window(close, set(query)) == (3, 3)
    assert smallest_window(apart, set(query))[1] > 3
    assert proximity_score(query, close) == 1.0
    assert 0 < proximity_score(query, apart) < proximity_score(query, close)
    assert proximity_score(query, analyzer.terms("Wind turbines need maintenance.")) == 0.0


def test_reranker_llm_listwise_orders_by_the_reply(embedder, fake_llm):
    fake_llm.script("Here is the ranking:\n```json\n[3, 1]\n```")
    tools = FakeTools(embedder, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    ids, query = ["nw-2024-q1", "nw-kestrel-storage", "nw-hr-flexible-work"], "battery storage at Kestrel Point"
    offline = [d.id for d in run(Reranker(), search_order(ids), query, ctx_with(FakeTools(embedder))).documents]
    assert offline[0] == "nw-kestrel-storage"
    out = run(Reranker({"mode": "llm", "llm_top_n": 3}), search_order(ids), query, ctx_with(tools))
    # The LLM saw the offline ranking as numbered passages (each its best passage, title first) and the query.
    request = fake_llm.requests[0]
    assert request["model"] == "fake" and request["messages"][0]["role"] == "system"
    prompt = request["messages"][-1]["content"]
    assert "Query: battery storage at Kestrel Point" in prompt
    shown = re.findall(r"^\[(\d)\] (.*)$", prompt, re.MULTILINE)
    assert [n for n, _ in shown] == ["1", "2", "3"]
    assert all(line.startswith(f"{CORPUS[i].title}: ") for (_, line), i in zip(shown, offline))
    # The documents follow the reply: #3, #1, then the one it left out.
    assert [d.id for d in out.documents] == [offline[2], offline[0], offline[1]]
    summary = out.metadata["rerank"]
    assert summary["method"] == "llm" and summary["llm_missing"] == 1 and "llm_error" not in summary
    assert [d.score for d in out.documents] == [1.0, round(2 / 3, 6), round(1 / 3, 6)]
    assert out.documents[0].metadata["rerank"]["offline_rank"] == 3


@pytest.mark.parametrize("reply", ["The second passage is the most relevant one.", "[7, 9]", '{"best": "two"}', ""])
def test_reranker_keeps_the_offline_order_when_the_llm_reply_is_malformed(embedder, fake_llm, reply):
    fake_llm.script(reply)
    tools = FakeTools(embedder, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    documents = search_order(HARROW_CANDIDATES)
    offline = run(Reranker(), documents, HARROW_QUERY, ctx_with(FakeTools(embedder)))
    out = run(Reranker({"mode": "auto"}), documents, HARROW_QUERY, ctx_with(tools))
    assert len(fake_llm.requests) == 1
    assert [d.id for d in out.documents] == [d.id for d in offline.documents]
    assert [d.score for d in out.documents] == [d.score for d in offline.documents]
    assert out.metadata["rerank"]["method"] == "offline"
    assert "kept the offline order" in out.metadata["rerank"]["llm_error"]


def test_reranker_auto_without_an_llm_is_offline_and_llm_mode_says_what_is_missing(embedder):
    tools = FakeTools(embedder)
    auto = run(Reranker({"mode": "auto"}), search_order(HARROW_CANDIDATES), HARROW_QUERY, ctx_with(tools))
    assert auto.metadata["rerank"]["method"] == "offline" and "llm_error" not in auto.metadata["rerank"]
    forced = run(Reranker({"mode": "llm"}), search_order(HARROW_CANDIDATES), HARROW_QUERY, ctx_with(tools))
    assert forced.metadata["rerank"]["llm_error"].startswith("no LLM endpoint configured")
    assert [d.id for d in forced.documents] == [d.id for d in auto.documents]


@pytest.mark.parametrize("config", [{"dense_weight": 0, "bm25_weight": 0, "proximity_weight": 0}, {"bm25_weight": -1},
                                    {"language": "klingon"}, {"mode": "magic"}, {"passage_sentences": 0}])
def test_reranker_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        Reranker(config)


def test_reranker_passes_an_empty_list_through():
    assert run(Reranker(), [], "q").documents == []
