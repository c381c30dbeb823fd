"""SciFact's training claims through several retrievers in one run: this tree's, with settings of its own, beside an
older tree's, on one collection, each claim asked of every side in turn.

A release's search is compared with the one before on the same machine at the same moment: every side searches the
same Milvus Lite collection (the whole corpus, indexed once by this tree into ``--data-dir`` and reused, as
``agentsearch bench retrieval`` does), and each claim goes to every side before the next claim, the sides' order
turning with each claim, so a busy moment of the machine falls on all of them. A side is ``now`` (this tree, the
service's defaults), ``now:KEY=VALUE,...`` (this tree with settings changed, e.g. ``embedding_query_runtime=same``),
or ``base`` (the tree at ``--baseline-tree``: a checkout from before the code moved under ``src/agentsearch``, whose
packages ``pipeline``, ``cli``... are top-level, so both import in one process). Every side runs
``Retriever.search`` as ``agentsearch eval retrieval`` does: the service's default strategy and fusion, top 100, no
result cache. The report gives each side's nDCG@10, recall@100 and the p50 and p95 of one search, with the load
average at the start and the end.

    git worktree add --detach /tmp/base 652e0c4
    .venv/bin/python -m agentsearch.bench.retrieval_trees --baseline-tree /tmp/base --side base --side now \\
        --side now:embedding_query_runtime=same --data-dir /tmp/retrieval-cache/bench --json out.json
    .venv/bin/python -m agentsearch.bench.retrieval_trees --limit 50     # this tree alone, 50 claims
    X=../shared/eval/xquad/de; .venv/bin/python -m agentsearch.bench.retrieval_trees --corpus $X/corpus.jsonl \\
        --queries $X/queries.jsonl --qrels $X/qrels/dev.tsv --side now --side now:search_title_weight=0   # any set
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsearch.bench.common import SCIFACT
from agentsearch.bench.retrieval_regression import DEFAULT_DATA_DIR

Search = Callable[[str], tuple[list[str], dict[str, Any]]]


def parse_side(spec: str) -> tuple[str, dict[str, str]]:
    """``"now:a=1,b=x"`` -> ``("now", {"a": "1", "b": "x"})``.

    >>> parse_side("now:embedding_query_runtime=same")
    ('now', {'embedding_query_runtime': 'same'})
    """
    kind, _, rest = spec.partition(":")
    if kind not in ("now", "base"):
        raise ValueError(f"side {spec!r}: 'now', 'now:KEY=VALUE,...' or 'base'")
    overrides = {}
    for pair in filter(None, rest.split(",")):
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"side {spec!r}: {pair!r} is not KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return kind, overrides


def this_tree(data_dir: Path, overrides: dict[str, str], collection: str, store: Any) -> Search:
    """A search of this tree with ``overrides`` on the service's settings, on the shared store."""
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
    from agentsearch.pipeline.retrieval.config import SearchConfig
    from agentsearch.pipeline.retrieval.embedder import make_embedder
    from agentsearch.pipeline.retrieval.retriever import Retriever

    settings = Settings(data_dir=data_dir, milvus_uri=None, **overrides)  # type: ignore[arg-type]
    embedder = make_embedder(settings)
    embed = getattr(embedder, "embed_queries", embedder.embed)
    retriever = Retriever(embed=embed, store=store, analyzer=KeywordAnalyzer(settings.keyword_language), cache=None)
    config = SearchConfig(**{**settings.search_defaults(), "top_k": 100, "candidates": 100})

    def search(text: str) -> tuple[list[str], dict[str, Any]]:
        result = retriever.search(collection, text, config, model=settings.embedding_model)
        return [d.id for d in result.documents], result.metrics
    return search


def base_tree(tree: Path, data_dir: Path, collection: str) -> Search:
    """A search of the tree at ``tree`` (top-level packages), with its own store, model and defaults."""
    # Left on the path: that tree's modules import others of it when first called.
    sys.path.insert(0, str(tree.resolve()))
    settings = importlib.import_module("pipeline.platform.settings").Settings(
        data_dir=data_dir, milvus_uri=str((data_dir / "milvus.db").resolve()))
    retriever = importlib.import_module("pipeline.services").Services(settings).uncached_retriever()
    config = importlib.import_module("pipeline.retrieval.config").SearchConfig(
        **{**settings.search_defaults(), "top_k": 100, "candidates": 100})

    def search(text: str) -> tuple[list[str], dict[str, Any]]:
        result = retriever.search(collection, text, config, model=settings.embedding_model)
        return [d.id for d in result.documents], result.metrics
    return search


def run(sides: list[str], data_dir: Path = DEFAULT_DATA_DIR, baseline_tree: Path | None = None,
        limit: int | None = None, warmup: int = 3, progress: Callable[[int], None] | None = None,
        corpus: Path = SCIFACT / "corpus.jsonl", queries: Path = SCIFACT / "queries_train.jsonl",
        qrels: Path = SCIFACT / "qrels" / "train.tsv", deadline_s: float | None = None) -> dict[str, Any]:
    """Every judged query of ``queries`` asked of every side in turn; ``corpus`` indexed once into ``data_dir``.
    ``deadline_s``: no new query after this many seconds of asking; the figures are of the queries every side
    answered (a run that must end in a quiet window of the machine)."""
    from agentsearch.pipeline.eval.retrieval import ensure_corpus_indexed, load_beir_queries, load_qrels, score_run
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.services import Services

    data_dir = data_dir.expanduser()
    services = Services(Settings(data_dir=data_dir, milvus_uri=None))
    started = time.perf_counter()
    collection, chunks, reused = ensure_corpus_indexed(services, corpus)
    index_s = time.perf_counter() - started
    judged = load_qrels(qrels)
    asked = {q: t for q, t in load_beir_queries(queries).items() if q in judged}
    if limit:
        asked = dict(list(asked.items())[:limit])
    searches: dict[str, Search] = {}
    for spec in sides:
        kind, overrides = parse_side(spec)
        if kind == "base":
            if baseline_tree is None:
                raise ValueError("side 'base' needs --baseline-tree")
            searches[spec] = base_tree(baseline_tree, data_dir, collection)
        else:
            searches[spec] = this_tree(data_dir, overrides, collection, services.vector_store)
    texts = list(asked.values())
    for search in searches.values():
        for text in texts[:warmup]:  # models' sessions, Milvus's load, caches of a process's first search
            search(text)
    load_start = os.getloadavg()
    runs: dict[str, dict[str, list[str]]] = {s: {} for s in searches}
    latencies: dict[str, list[float]] = {s: [] for s in searches}
    embedding: dict[str, list[float]] = {s: [] for s in searches}  # the query's embedding, within the search
    order = list(searches)
    asking = time.monotonic()
    for i, (query_id, text) in enumerate(asked.items()):
        if deadline_s is not None and time.monotonic() - asking > deadline_s:
            break
        turn = order[i % len(order):] + order[:i % len(order)]
        for side in turn:
            t0 = time.perf_counter()
            runs[side][query_id], metrics = searches[side](text)
            latencies[side].append((time.perf_counter() - t0) * 1000)
            embedding[side].append(float(metrics.get("embedding_ms", 0.0)))
        if progress:
            progress(1)
    load_end = os.getloadavg()
    figures = {}
    for side in order:
        scores = score_run(runs[side], judged, latencies[side])
        figures[side] = {"ndcg@10": scores["ndcg@10"], "recall@100": scores["recall@100"],
                         "mrr@10": scores["mrr@10"], "p50_ms": scores["latency_ms"]["p50"],
                         "p95_ms": scores["latency_ms"]["p95"], "queries": scores["queries"],
                         "embedding_p50_ms": round(statistics.median(embedding[side]), 2) if embedding[side] else 0.0}
    return {"figures": figures, "collection": collection, "chunks": chunks, "index_reused": reused,
            "index_s": round(index_s, 1), "load_start": [round(x, 2) for x in load_start],
            "load_end": [round(x, 2) for x in load_end], "baseline_tree": str(baseline_tree or ""),
            "queries": len(runs[order[0]]), "judged_queries": len(asked)}


def table(result: dict[str, Any]) -> list[str]:
    lines = ["| side | nDCG@10 | recall@100 | MRR@10 | p50 ms | p95 ms | query embedding p50 ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for side, f in result["figures"].items():
        lines.append(f"| {side} | {f['ndcg@10']:.4f} | {f['recall@100']:.4f} | {f['mrr@10']:.4f} | "
                     f"{f['p50_ms']:.1f} | {f['p95_ms']:.1f} | {f.get('embedding_p50_ms', 0.0):.1f} |")
    lines.append("")
    lines.append(f"{result['queries']} queries, {result['chunks']} chunks (index "
                 f"{'reused' if result['index_reused'] else 'built in this run'}); load average "
                 f"{', '.join(map(str, result['load_start']))} at the start, "
                 f"{', '.join(map(str, result['load_end']))} at the end.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--side", action="append", dest="sides", default=None,
                        help="base, now or now:KEY=VALUE,... (repeat for each side; default: now)")
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--limit", type=int, default=None, help="Only the first N judged training claims.")
    parser.add_argument("--corpus", type=Path, default=SCIFACT / "corpus.jsonl")
    parser.add_argument("--queries", type=Path, default=SCIFACT / "queries_train.jsonl")
    parser.add_argument("--qrels", type=Path, default=SCIFACT / "qrels" / "train.tsv")
    parser.add_argument("--deadline-s", type=float, default=None, help="Ask no new query after this many seconds.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sides = args.sides or ["now"]
    result = run(sides, args.data_dir, args.baseline_tree, args.limit, corpus=args.corpus, queries=args.queries,
                 qrels=args.qrels, deadline_s=args.deadline_s,
                 progress=lambda n: print(".", end="", flush=True, file=sys.stderr))
    print("\n".join(table(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
