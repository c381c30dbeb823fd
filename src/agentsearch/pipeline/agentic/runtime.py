"""Wiring: the loop's tools (search, scorer, refiner, grader, compressor) from the retrieval engine and, when one
is configured and allowed, the LLM. Used by the worker's tasks and by the evaluation alike, so both run the same path.

Usage::

    targets = [SearchTarget(name="c_ab12...", collection_id="ab12...", epoch=3)]
    tools = build_tools(retriever, analyzer, targets, config, model="all-MiniLM-L6-v2", llm=None)
    state = run_loop(LoopState.start(query, config), tools)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentsearch.pipeline.agentic.compress import Compressor
from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.loop import LoopTools, SkipSeen
from agentsearch.pipeline.agentic.refine import LLMRefiner, OfflineRefiner
from agentsearch.pipeline.agentic.scoring import LLMScorer, OfflineScorer
from agentsearch.pipeline.agentic.sufficiency import LLMGrader, OfflineGrader
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.retriever import Retriever


@dataclass(frozen=True)
class SearchTarget:
    name: str  # the Milvus collection
    collection_id: str = ""  # the service's collection id ("" for an evaluation collection)
    epoch: int = 0


def job_filter(search: dict[str, Any]) -> dict[str, Any]:
    """The metadata filter part of a job's search overrides (``{"filter": ...}``, or nothing): the loop's searches
    take the job's filter and none of its other overrides."""
    return {"filter": search["filter"]} if search.get("filter") is not None else {}


def search_function(retriever: Retriever, targets: list[SearchTarget], config: IterativeConfig,
                    defaults: dict[str, Any] | None = None, model: str = ""):
    """``search(query, top_k)`` over every target, merged by document (best score wins), best first."""

    def search(query: str, top_k: int) -> list[Document]:
        search_config = SearchConfig(**{**(defaults or {}), **config.search, "top_k": top_k})
        best: dict[tuple[str, str], Document] = {}
        for target in targets:
            result = retriever.search(target.name, query, search_config, epoch=target.epoch, model=model)
            for doc in result.documents:
                doc = doc.model_copy(update={"metadata": {**doc.metadata, "collection_id": target.collection_id,
                                                          "milvus_collection": target.name}})
                key = (target.collection_id, doc.id)
                if key not in best or doc.score > best[key].score:
                    best[key] = doc
        return sorted(best.values(), key=lambda d: d.score, reverse=True)[:top_k]

    return search


def vectors_function(retriever: Retriever):
    """Stored chunk vectors of retrieved documents, by document id: no document is embedded again."""

    def vectors(documents: list[Document]) -> dict[str, list[float]]:
        by_collection: dict[str, list[Document]] = {}
        for doc in documents:
            if doc.metadata.get("milvus_collection") and doc.metadata.get("chunk_id"):
                by_collection.setdefault(doc.metadata["milvus_collection"], []).append(doc)
        found: dict[str, list[float]] = {}
        for name, docs in by_collection.items():
            stored = retriever.store.vectors(name, [d.metadata["chunk_id"] for d in docs])
            found.update({d.id: stored[d.metadata["chunk_id"]] for d in docs if d.metadata["chunk_id"] in stored})
        return found

    return vectors


def build_tools(retriever: Retriever, analyzer: KeywordAnalyzer, targets: list[SearchTarget], config: IterativeConfig,
                model: str = "", defaults: dict[str, Any] | None = None, llm: LLMClient | None = None,
                skip_seen: SkipSeen | None = None) -> LoopTools:
    use_llm = llm if config.llm == "auto" else None
    search_config = SearchConfig(**{**(defaults or {}), **config.search})
    offline_scorer = OfflineScorer(analyzer, embed=lambda texts: [retriever.embed_query(t, model)[0] for t in texts],
                                   doc_vectors=vectors_function(retriever), authority=search_config.authority,
                                   half_life_days=search_config.recency_half_life_days
                                   if search_config.recency_weight > 0 else None)
    offline_refiner, offline_grader = OfflineRefiner(analyzer), OfflineGrader(analyzer)
    search = search_function(retriever, targets, config, defaults, model)
    if use_llm is None:
        return LoopTools(search=search, scorer=offline_scorer, refiner=offline_refiner, grader=offline_grader,
                         skip_seen=skip_seen)
    # The offline tools stay at hand: the guard checks the LLM's scores against them and falls back to them.
    return LoopTools(search=search, scorer=LLMScorer(use_llm, config.llm_timeout_s),
                     refiner=LLMRefiner(use_llm, config.llm_timeout_s),
                     grader=LLMGrader(use_llm, offline_grader, config.llm_timeout_s,
                                      max_follow_ups=max(0, config.max_queries - 1)),
                     skip_seen=skip_seen, fallback_scorer=offline_scorer if config.llm_guard else None,
                     fallback_refiner=offline_refiner, fallback_grader=offline_grader)


def build_compressor(analyzer: KeywordAnalyzer, config: IterativeConfig, llm: LLMClient | None = None) -> Compressor:
    return Compressor(analyzer, max_chars=config.compress_max_chars, min_chars=config.compress_min_chars,
                      llm=llm if config.llm == "auto" else None, timeout_s=config.llm_timeout_s)
