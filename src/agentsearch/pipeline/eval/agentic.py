"""Iterative mode against single-shot search on a BEIR data set: for how many queries does the kept set hold at
least one relevant document?

A kept set is only comparable with a ranked list of the same length, so three baselines are reported: single-shot
top-``target`` (what a job returns), single-shot top-k with k equal to what the iterative mode kept for that same
query (matched size), and single-shot top-N with N the number of documents the iterative mode evaluated (the
documents it looked at, whether kept or not).

recall@10 and nDCG@10 are given for the iterative mode's final list (its kept results, best first, at most
``target``) and for single-shot top 10; with an LLM, the chat calls per job are counted and the guard's verdicts
(how many loops it turned the LLM off in, by rule) reported.

Usage::

    report = run_iterative_eval(services, collection, queries, qrels, IterativeConfig(), search_defaults)
    report["iterative"]["hit_rate"], report["single_shot"]["matched_size"]["hit_rate"]
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.loop import LoopState, final_documents, run_loop
from agentsearch.pipeline.agentic.runtime import SearchTarget, build_tools
from agentsearch.pipeline.eval.retrieval import ndcg_at, percentile, recall_at
from agentsearch.pipeline.retrieval.config import SearchConfig

if TYPE_CHECKING:  # types only: the services take seconds to load
    from agentsearch.pipeline.services import Services


def _rate(hits: list[bool]) -> float:
    return round(sum(hits) / len(hits), 4) if hits else 0.0


def count_calls(llm) -> Callable[[], int]:
    """Count ``llm``'s chat calls (every agent's call goes through ``reply`` or ``stream``); returns the reader."""
    calls = [0]
    for name in ("reply", "stream"):
        method = getattr(llm, name)

        def counted(*args, _method=method, **kwargs):
            calls[0] += 1
            return _method(*args, **kwargs)

        setattr(llm, name, counted)
    return lambda: calls[0]


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def run_iterative_eval(services: Services, collection: str, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                       config: IterativeConfig, defaults: dict[str, Any], llm=None,
                       progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    model = services.settings.embedding_model
    # No result cache: every query is real work, as in the retrieval evaluation.
    retriever = services.uncached_retriever()
    target = SearchTarget(name=collection)
    calls = count_calls(llm) if llm is not None else (lambda: 0)
    tools = build_tools(retriever, services.analyzer, [target], config, model=model, defaults=defaults, llm=llm)
    single_config = SearchConfig(**{**defaults, **config.search, "top_k": 100})

    iterative_hits, target_hits, matched_hits, examined_hits = [], [], [], []
    kept_sizes, examined_sizes, iterations, latencies = [], [], [], []
    stops: Counter[str] = Counter()
    guard_rules: Counter[str] = Counter()
    recall, ndcg, single_recall, single_ndcg, llm_calls, guard_checks = [], [], [], [], [], 0
    for query_id, text in queries.items():
        relevant = set(qrels.get(query_id, {}))
        started, calls_before = time.perf_counter(), calls()
        state = run_loop(LoopState.start(text, config), tools)
        latencies.append((time.perf_counter() - started) * 1000)
        llm_calls.append(calls() - calls_before)
        checks = [r.guard for r in state.history if r.guard is not None]
        guard_checks += len(checks)
        guard_rules.update(c.rule for c in checks if c.disagrees and c.rule)
        kept = [j.document.id for j in final_documents(state)]
        examined = len(state.kept) + len(state.discarded)
        ranked = [d.id for d in retriever.search(collection, text, single_config, model=model).documents]
        iterative_hits.append(bool(relevant & set(kept)))
        graded = qrels.get(query_id, {})
        recall.append(recall_at(kept, graded, 10))
        ndcg.append(ndcg_at(kept, graded, 10))
        single_recall.append(recall_at(ranked, graded, 10))
        single_ndcg.append(ndcg_at(ranked, graded, 10))
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
            "recall@10": _mean(recall),
            "ndcg@10": _mean(ndcg),
            "llm_calls_per_job": _mean(llm_calls),
            "llm_guard": {"batches_checked": guard_checks, "fired": dict(guard_rules),
                          "loops_turned_offline": sum(guard_rules.values())},
            "mean_kept": round(statistics.fmean(kept_sizes), 3) if n else 0.0,
            "empty_share": round(sum(1 for k in kept_sizes if k == 0) / n, 4) if n else 0.0,
            "mean_examined": round(statistics.fmean(examined_sizes), 3) if n else 0.0,
            "mean_iterations": round(statistics.fmean(iterations), 3) if n else 0.0,
            "stop_reasons": dict(stops),
            "latency_ms": {"p50": round(percentile(latencies, 0.5), 1), "p95": round(percentile(latencies, 0.95), 1)},
        },
        "single_shot": {
            "top_target": {"k": config.target, "hit_rate": _rate(target_hits)},
            "top_10": {"recall@10": _mean(single_recall), "ndcg@10": _mean(single_ndcg)},
            "matched_size": {"mean_k": round(statistics.fmean(kept_sizes), 3) if n else 0.0,
                             "hit_rate": _rate(matched_hits)},
            "examined_size": {"mean_k": round(statistics.fmean(examined_sizes), 3) if n else 0.0,
                              "hit_rate": _rate(examined_hits)},
        },
    }
