"""Which way of combining the search's signals ranks best? Fusion functions and a sentence signal, side by side.

One pass runs every query through the two retrievers a hybrid search uses (dense and BM25, 100 chunks each, the
query analysed and embedded as jobs do) and reads the stored sentence vectors of every chunk found, keeping per
document: the best chunk's cosine, the best chunk's BM25 score, and the query's best cosine with one of its stored
sentences (``best_sentence_cosine``, as the search reads it). The pass is saved (``--signals FILE``), so the
combinations below are scored on the same lists, with no search in between, and a second run re-scores them at once:

- ``dense``, ``keyword``: one retriever alone;
- ``minmax``: min-max normalised scores, equal weights (the service's default fusion);
- ``zscore``: each list standardised (mean 0, deviation 1), equal weights; a document a list did not find gets that
  list's lowest score;
- ``rrf``: reciprocal rank fusion, k = 60;
- ``+ sentence w``: ``minmax`` plus ``w`` times the min-max of the best sentence cosine;
- ``best sentence``: the best sentence cosine alone;
- ``+ sentence w, the first N``: the same, with sentences read only for the fused list's first N documents;
- ``zscore, three signals``: ``zscore`` with the best sentence cosine standardised as a third list;
- ``sentence as dense``: a document's dense score is the larger of its chunk's and its best sentence's cosine.

Each weighted variant's weight is also chosen on one half of the queries and scored on the other, to tell a method
from a fit. ``--cost N`` instead times N searches as a job makes them (top 5), with and without the signal,
interleaved so both meet the same machine. Nothing here changes the service.

Usage::

    .venv/bin/python -m agentsearch.bench.fusion_signals --data ../shared/eval/scifact --signals /tmp/scifact.json
    .venv/bin/python -m agentsearch.bench.fusion_signals --corpus X/en/corpus.jsonl --queries X/ar/queries.jsonl \\
        --qrels X/ar/qrels/dev.tsv --signals /tmp/ar.json
    .venv/bin/python -m agentsearch.bench.fusion_signals --data ../shared/eval/scifact --cost 60
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from agentsearch.pipeline.retrieval.stored_chunks import Hit

POOL = 100
WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)

# Per query: {document id: [dense cosine or None, BM25 score or None, [sentence cosines]]}
Signals = dict[str, dict[str, list]]


def collect(corpus: Path, queries: Path, qrels: Path, limit: int | None) -> tuple[Signals, dict]:
    from agentsearch.pipeline.eval.retrieval import ensure_corpus_indexed, load_beir_queries, load_qrels
    from agentsearch.pipeline.retrieval.sentence_vectors import best_sentence_cosine
    from agentsearch.pipeline.services import get_services

    services = get_services()
    collection, chunks, reused = ensure_corpus_indexed(services, corpus)
    print(f"collection {collection}: {chunks} chunks ({'reused' if reused else 'indexed now'})", flush=True)
    judged = load_qrels(qrels)
    asked = {q: t for q, t in load_beir_queries(queries).items() if q in judged}
    if limit:
        asked = dict(list(asked.items())[:limit])
    retriever, store, model = services.uncached_retriever(), services.vector_store, services.settings.embedding_model
    languages = retriever.collection_languages(collection)
    signals: Signals = {}
    for query_id, query in asked.items():
        vector, _ = retriever.embed_query(query, model)
        analysed = retriever._analyse_query(query, languages, {}, [])
        per_doc: dict[str, list] = {}
        chunks_of: dict[str, dict[str, Hit]] = {}
        for slot, hits in ((0, store.dense_search(collection, vector, POOL)),
                           (1, store.keyword_search(collection, analysed, POOL))):
            for hit in hits:
                row = per_doc.setdefault(hit.document_id, [None, None, []])
                row[slot] = hit.score if row[slot] is None else max(row[slot], hit.score)
                chunks_of.setdefault(hit.document_id, {})[hit.id] = hit
        stored = store.sentence_vectors(collection, [c for found in chunks_of.values() for c in found])
        q = np.asarray(vector, dtype=np.float32)
        for doc_id, found in chunks_of.items():
            best = best_sentence_cosine(q, [(hit.title, hit.text) for hit in found.values()], stored)
            per_doc[doc_id][2] = [] if best is None else [best]
        signals[query_id] = per_doc
    return signals, judged


def cost(corpus: Path, queries: Path, n: int) -> None:
    """Median search time with and without the sentence signal, and what the signal itself took."""
    import statistics

    from agentsearch.pipeline.eval.retrieval import ensure_corpus_indexed, load_beir_queries
    from agentsearch.pipeline.retrieval.config import SearchConfig
    from agentsearch.pipeline.services import get_services

    services = get_services()
    collection, _, _ = ensure_corpus_indexed(services, corpus)
    retriever, model = services.uncached_retriever(), services.settings.embedding_model
    runs: dict[float, list[dict]] = {0.0: [], 1.0: []}
    for i, query in enumerate(list(load_beir_queries(queries).values())[:n]):
        for weight in (0.0, 1.0) if i % 2 else (1.0, 0.0):
            config = SearchConfig(**{**services.settings.search_defaults(), "top_k": 5, "sentence_weight": weight})
            runs[weight].append(retriever.search(collection, query, config, model=model).metrics)
    for weight, metrics in runs.items():
        print(f"sentence_weight {weight}: search p50 {statistics.median(m['processing_ms'] for m in metrics):.1f} ms, "
              f"the signal p50 {statistics.median(m.get('sentence_ms', 0.0) for m in metrics):.1f} ms, sentence "
              f"vectors read p50 {statistics.median(m.get('sentences_read', 0) for m in metrics):.0f} ({n} queries)")


def _minmax(x: np.ndarray) -> np.ndarray:
    low, high = x.min(), x.max()
    return (x - low) / (high - low) if high > low else np.zeros_like(x)


def _zscore(x: np.ndarray) -> np.ndarray:
    deviation = x.std()
    return (x - x.mean()) / deviation if deviation > 0 else np.zeros_like(x)


def _column(rows: list[list], slot: int, found: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """One list's scores over every document, normalised over the documents the list found; the others get the
    lowest normalised score (what a list says of a document it did not return)."""
    present = np.array([r[slot] is not None for r in rows])
    values = np.zeros(len(rows))
    if present.any():
        normalised = found(np.array([r[slot] for r in rows if r[slot] is not None], dtype=float))
        values[present] = normalised
        values[~present] = normalised.min()
    return values


def _best_sentence(rows: list[list]) -> np.ndarray:
    return np.array([max(r[2]) if r[2] else (r[0] if r[0] is not None else 0.0) for r in rows], dtype=float)


def ranker(name: str, weight: float = 0.0, window: int | None = None) -> Callable[[list[list]], np.ndarray]:
    def score(rows: list[list]) -> np.ndarray:
        if name in ("dense", "keyword"):
            return _column(rows, 0 if name == "dense" else 1, _minmax)
        if name == "minmax":
            return _column(rows, 0, _minmax) + _column(rows, 1, _minmax)
        if name == "zscore":
            return _column(rows, 0, _zscore) + _column(rows, 1, _zscore)
        if name == "rrf":
            fused = np.zeros(len(rows))
            for slot in (0, 1):
                found = [i for i, r in enumerate(rows) if r[slot] is not None]
                for rank, i in enumerate(sorted(found, key=lambda i: -rows[i][slot]), start=1):
                    fused[i] += 1 / (60 + rank)
            return fused
        if name == "best sentence":
            return _best_sentence(rows)
        if name == "sentence":
            fused = _column(rows, 0, _minmax) + _column(rows, 1, _minmax)
            if window is None or window >= len(rows):
                return fused + weight * _minmax(_best_sentence(rows))
            # Only the fused list's first ``window`` documents are read; the rest keep the lowest sentence score.
            top = np.argsort(-fused, kind="stable")[:window]
            sentence = np.zeros(len(rows))
            sentence[top] = _minmax(_best_sentence([rows[i] for i in top]))
            return fused + weight * sentence
        if name == "zscore, three signals":
            return _column(rows, 0, _zscore) + _column(rows, 1, _zscore) + _zscore(_best_sentence(rows))
        if name == "sentence as dense":
            dense = [[max(r[0], max(r[2])) if r[0] is not None and r[2] else r[0], r[1], r[2]] for r in rows]
            return _column(dense, 0, _minmax) + _column(dense, 1, _minmax)
        raise ValueError(name)
    return score


def evaluate(signals: Signals, judged: dict, score: Callable[[list[list]], np.ndarray],
             queries: set[str] | None = None) -> float:
    from agentsearch.pipeline.eval.retrieval import ndcg_at

    results = []
    for query_id, per_doc in signals.items():
        if queries is not None and query_id not in queries:
            continue
        ids = sorted(per_doc)  # no order from the pass itself: ties fall by id, not by one retriever's rank
        if not ids:
            results.append(0.0)
            continue
        order = np.argsort(-score([per_doc[i] for i in ids]), kind="stable")
        results.append(ndcg_at([ids[i] for i in order], judged[query_id]))
    return float(np.mean(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/scifact"),
                        help="A BEIR folder: its corpus.jsonl, queries_train.jsonl and qrels/train.tsv.")
    parser.add_argument("--corpus", type=Path, help="Another corpus (instead of --data's).")
    parser.add_argument("--queries", type=Path, help="Other queries (instead of --data's).")
    parser.add_argument("--qrels", type=Path, help="Other judgements (instead of --data's).")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N queries.")
    parser.add_argument("--signals", type=Path, help="Save the pass here, or read it if it exists.")
    parser.add_argument("--cost", type=int, metavar="N", help="Time N searches with and without the signal instead.")
    args = parser.parse_args()
    if args.cost:
        cost(args.corpus or args.data / "corpus.jsonl", args.queries or args.data / "queries_train.jsonl", args.cost)
        return
    qrels = args.qrels or args.data / "qrels" / "train.tsv"
    if args.signals and args.signals.exists():
        from agentsearch.pipeline.eval.retrieval import load_qrels

        signals, judged = json.loads(args.signals.read_text()), load_qrels(qrels)
    else:
        signals, judged = collect(args.corpus or args.data / "corpus.jsonl",
                                  args.queries or args.data / "queries_train.jsonl", qrels, args.limit)
        if args.signals:
            args.signals.write_text(json.dumps(signals))
    print(f"{len(signals)} queries, nDCG@10 over the union of both retrievers' {POOL} chunks")
    for name in ("dense", "keyword", "minmax", "zscore", "rrf", "best sentence", "zscore, three signals",
                 "sentence as dense"):
        print(f"  {name:18} {evaluate(signals, judged, ranker(name)):.4f}")
    print("  + sentence w      " + ", ".join(f"{w}: {evaluate(signals, judged, ranker('sentence', w)):.4f}"
                                            for w in WEIGHTS))
    for window in (10, 20, 30, 50):
        print(f"  + sentence w, the first {window:3}: " + ", ".join(
            f"{w}: {evaluate(signals, judged, ranker('sentence', w, window)):.4f}" for w in (0.5, 1.0, 2.0)))
    ids = list(signals)
    halves = (set(ids[::2]), set(ids[1::2]))
    for chosen_on, scored_on in (halves, halves[::-1]):
        weight = max(WEIGHTS, key=lambda w: evaluate(signals, judged, ranker("sentence", w), chosen_on))
        print(f"    w {weight} chosen on one half: the other half "
              f"{evaluate(signals, judged, ranker('sentence', weight), scored_on):.4f} against "
              f"{evaluate(signals, judged, ranker('minmax'), scored_on):.4f} for minmax alone")


if __name__ == "__main__":
    main()
