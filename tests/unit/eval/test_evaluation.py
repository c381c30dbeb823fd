"""Evaluation metrics and the agents-around-search evaluation, on small hand-checked cases."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.eval.retrieval import mrr_at, ndcg_at, recall_at, run_agents_eval, score_run
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.stored_chunks import Hit


def test_metrics_match_hand_computed_values():
    relevant = {"d2": 1, "d5": 1}
    ranked = ["d1", "d2", "d3", "d4", "d5"]
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at(ranked, relevant) == pytest.approx((1 / math.log2(3) + 1 / math.log2(6)) / ideal)
    assert mrr_at(ranked, relevant) == 0.5
    assert recall_at(ranked, relevant, k=3) == 0.5
    report = score_run({"q1": ranked, "q2": ["d9"]}, {"q1": relevant, "q2": {"d9": 1}}, [10.0, 30.0])
    assert report["mrr@10"] == 0.75 and report["queries"] == 2 and report["latency_ms"]["p50"] == 20.0


class ListStore:
    """Both retrievers answer from a fixed ranking, so only the agents can change the order."""

    def __init__(self, docs):
        self.docs = docs

    def dense_search(self, name, vector, limit):
        return [Hit(d["id"] + "#0", d["id"], d["title"], d["text"], 1.0 - i / 10, {}) for i, d in enumerate(self.docs)]

    def keyword_search(self, name, analyzed_query, limit):
        return self.dense_search(name, None, limit)

    def vectors(self, name, chunk_ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        return {}


def test_agents_run_around_the_search_and_a_skipping_agent_changes_nothing(tmp_path):
    docs = [
        {"id": "a", "title": "Press release",
         "text": "Northwind opened the Harrow Ridge wind farm in 2025 with 40 turbines."},
        # Not byte-identical (the search's exact dedup would drop it), but the same words.
        {"id": "b", "title": "Press release",
         "text": "Northwind opened the Harrow Ridge wind farm, in 2025, with 40 turbines!"},
        {"id": "c", "title": "Safety", "text": "No lost-time incidents were recorded at the solar sites."},
    ]
    embed = lambda texts: [[1.0, 0.0]] * len(texts)  # noqa: E731
    services = SimpleNamespace(
        embedder=SimpleNamespace(embed=embed),
        vector_store=ListStore(docs),
        analyzer=KeywordAnalyzer(),
        registry=AgentRegistry.discover(),
        settings=Settings(data_dir=tmp_path),
    )
    services.uncached_retriever = lambda: Retriever(embed, services.vector_store, services.analyzer, cache=None)
    config = SearchConfig(strategy="hybrid", top_k=10, near_duplicate_threshold=None)
    plain, _ = run_agents_eval(services, "eval", docs, {"q": "wind farm"}, config, [])
    # acronym_resolver finds nothing to expand here and skips; the deduplicator drops the copy of "a".
    with_agents, extra = run_agents_eval(services, "eval", docs, {"q": "wind farm"}, config,
                                         ["acronym_resolver", "deduplicator"])
    assert plain["q"] == ["a", "b", "c"]
    assert with_agents["q"] == ["a", "c"] and len(extra["latencies_ms"]) == 1


def test_evaluations_embed_queries_on_the_query_side_as_jobs_do(tmp_path):
    # E5 embeds a query and a passage apart; an evaluation that embedded its queries as passages measured a path no
    # job takes (XQuAD ar questions over en paragraphs: 0.673 nDCG@10 against the job path's 0.782).
    from agentsearch.pipeline.services import Services

    class TwoSided:
        def embed(self, texts):
            return [[0.0, 1.0] for _ in texts]

        def embed_queries(self, texts):
            return [[1.0, 0.0] for _ in texts]

    services = Services(Settings(data_dir=tmp_path)).use(embedder=TwoSided(), vector_store=ListStore([]))
    retriever = services.uncached_retriever()
    assert retriever.cache is None and retriever.store is services.vector_store
    assert retriever.embed_query("where?", "m") == ([1.0, 0.0], False)
