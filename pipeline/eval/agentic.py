"""Iterative mode against single-shot search on a BEIR data set: for how many queries does the kept set hold at
least one relevant document?

A kept set is only comparable with a ranked list of the same length, so three baselines are reported: single-shot
top-``target`` (what a job returns), single-shot top-k with k equal to what the iterative mode kept for that same
query (matched size), and single-shot top-N with N the number of documents the iterative mode evaluated (the
documents it looked at, whether kept or not).

Usage::

    report = run_iterative_eval(services, collection, queries, qrels, IterativeConfig(), search_defaults)
    report["iterative"]["hit_rate"], report["single_shot"]["matched_size"]["hit_rate"]
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipeline.agentic.config import IterativeConfig
from pipeline.agentic.loop import LoopState, final_documents, run_loop
from pipeline.agentic.runtime import SearchTarget, build_tools
from pipeline.eval.retrieval import percentile
from pipeline.retrieval.config import SearchConfig

if TYPE_CHECKING:  # types only: the services take seconds to load
    from pipeline.services import Services


def _rate(hits: list[bool]) -> float:
    return round(sum(hits) / len(hits), 4) if hits else 0.0


def run_iterative_eval(services: Services, collection: str, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                       config: IterativeConfig, defaults: dict[str, Any], llm=None,
                       progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    model = services.settings.embedding_model
    # No result cache: every query is real work, as in the retrieval evaluation.
    retriever = services.uncached_retriever()
    target = SearchTarget(name=collection)
    tools = build_tools(retriever, services.analyzer, [target], config, model=model, defaults=defaults, llm=llm)
    single_config = SearchConfig(**{**defaults, **config.search, "top_k": 100})

    iterative_hits, target_hits, matched_hits, examined_hits = [], [], [], []
    kept_sizes, examined_sizes, iterations, latencies = [], [], [], []
    stops: Counter[str] = Counter()
    for query_id, text in queries.items():
        relevant = set(qrels.get(query_id, {}))
        started = time.perf_counter()
        state = run_loop(LoopState.start(text, config), tools)
        latencies.append((time.perf_counter() - started) * 1000)
        kept = [j.document.id for j in final_documents(state)]
        examined = len(state.kept) + len(state.discarded)
        ranked = [d.id for d in retriever.search(collection, text, single_config, model=model).documents]
        iterative_hits.append(bool(relevant & set(kept)))
        target_hits.append(bool(relevant & set(ranked[: config.target])))
        matched_hits.append(bool(relevant & set(ranked[: len(kept)])))
        examined_hits.append(bool(relevant & set(ranked[:examined])))
        kept_sizes.append(len(kept))
        examined_sizes.append(examined)
        iterations.append(state.iteration)
        stops[state.stop_reason or "unknown"] += 1
        if progress:
            progress(1)
    n = len(kept_sizes)
    return {
        "queries": n,
        "config": config.model_dump(mode="json"),
        "iterative": {
            "hit_rate": _rate(iterative_hits),
            "mean_kept": round(statistics.fmean(kept_sizes), 3) if n else 0.0,
            "empty_share": round(sum(1 for k in kept_sizes if k == 0) / n, 4) if n else 0.0,
            "mean_examined": round(statistics.fmean(examined_sizes), 3) if n else 0.0,
            "mean_iterations": round(statistics.fmean(iterations), 3) if n else 0.0,
            "stop_reasons": dict(stops),
            "latency_ms": {"p50": round(percentile(latencies, 0.5), 1), "p95": round(percentile(latencies, 0.95), 1)},
        },
        "single_shot": {
            "top_target": {"k": config.target, "hit_rate": _rate(target_hits)},
            "matched_size": {"mean_k": round(statistics.fmean(kept_sizes), 3) if n else 0.0,
                             "hit_rate": _rate(matched_hits)},
            "examined_size": {"mean_k": round(statistics.fmean(examined_sizes), 3) if n else 0.0,
                              "hit_rate": _rate(examined_hits)},
        },
    }
