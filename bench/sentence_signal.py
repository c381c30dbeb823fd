"""Would a sentence-level signal lift the default hybrid search on SciFact? An experiment on the training split.

A SciFact claim usually restates one sentence of the abstract that supports it, while the dense side of the search
compares the claim with a whole chunk. Ingestion already stores a vector per sentence of each chunk, so a search
could read them for its candidates at no embedding cost. This runs every training claim through the default search
(top 100, the path jobs use), reads the stored sentence vectors of the candidates, and re-ranks them by

    min-max(fused score) + w * min-max(best sentence cosine)        (or the mean of the best two: "top2")

for a few weights ``w``. To tell a method from a fit, the weight is also chosen on one half of the claims and scored
on the other. Nothing here changes the service.

Usage::

    .venv/bin/python bench/sentence_signal.py [--data ../shared/eval/scifact] [--limit N]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5)


def _minmax(values: list[float]) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    low, high = x.min(), x.max()
    return (x - low) / (high - low) if high > low else np.zeros_like(x)


def collect(data: Path, limit: int | None) -> tuple[dict, dict]:
    """Per claim: ``[(document id, fused score, [sentence cosines])]`` for the search's top 100, and the judgements."""
    from pipeline.eval.retrieval import ensure_corpus_indexed, load_beir_queries, load_qrels
    from pipeline.platform.settings import get_settings
    from pipeline.retrieval.config import SearchConfig
    from pipeline.retrieval.sentence_vectors import chunk_units, text_key
    from pipeline.services import get_services

    services = get_services()
    collection, chunks, reused = ensure_corpus_indexed(services, data / "corpus.jsonl")
    print(f"collection {collection}: {chunks} chunks ({'reused' if reused else 'indexed now'})", flush=True)
    judged = load_qrels(data / "qrels" / "train.tsv")
    claims = {q: t for q, t in load_beir_queries(data / "queries_train.jsonl").items() if q in judged}
    if limit:
        claims = dict(list(claims.items())[:limit])
    config = SearchConfig(**{**get_settings().search_defaults(), "top_k": 100, "candidates": 100})
    retriever, store = services.uncached_retriever(), services.vector_store
    runs: dict[str, list[tuple[str, float, list[float]]]] = {}
    for claim_id, claim in claims.items():
        result = retriever.search(collection, claim, config, model=services.settings.embedding_model)
        query = np.asarray(retriever.embed_query(claim, services.settings.embedding_model)[0], dtype=np.float32)
        rows = []
        for doc in result.documents:
            stored = store.sentence_vectors(collection, [doc.metadata["chunk_id"]])
            sentences = [u for u in chunk_units(doc.title, doc.text) if u != doc.title]  # the title is no sentence
            rows.append((doc.id, doc.score, [float(query @ stored[text_key(s)]) for s in sentences
                                             if text_key(s) in stored]))
        runs[claim_id] = rows
    return runs, judged


def rerank_score(runs: dict, judged: dict, weight: float, aggregate: str, claims: set[str] | None = None) -> float:
    from pipeline.eval.retrieval import ndcg_at

    scores = []
    for claim_id, rows in runs.items():
        if claims is not None and claim_id not in claims:
            continue
        if not rows:
            scores.append(0.0)
            continue
        best = []
        for _, _, cosines in rows:
            top = sorted(cosines, reverse=True)
            best.append((top[0] if aggregate == "max" else float(np.mean(top[:2]))) if top else 0.0)
        combined = _minmax([r[1] for r in rows]) + weight * _minmax(best)
        ranked = [rows[i][0] for i in np.argsort(-combined, kind="stable")]
        scores.append(ndcg_at(ranked, judged[claim_id]))
    return float(np.mean(scores))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/scifact"))
    parser.add_argument("--limit", type=int, default=None, help="Only the first N training claims.")
    args = parser.parse_args()
    runs, judged = collect(args.data, args.limit)
    print(f"{len(runs)} claims; the default search alone: nDCG@10 {rerank_score(runs, judged, 0.0, 'max'):.4f}")
    ids = list(runs)
    halves = (set(ids[::2]), set(ids[1::2]))
    for aggregate in ("max", "top2"):
        sweep = ", ".join(f"w {w}: {rerank_score(runs, judged, w, aggregate):.4f}" for w in WEIGHTS)
        print(f"{aggregate}: {sweep}")
        for chosen_on, scored_on in (halves, halves[::-1]):
            weight = max(WEIGHTS, key=lambda w: rerank_score(runs, judged, w, aggregate, chosen_on))
            held_out = rerank_score(runs, judged, weight, aggregate, scored_on)
            alone = rerank_score(runs, judged, 0.0, aggregate, scored_on)
            print(f"  w {weight} chosen on one half: the other half {held_out:.4f} against {alone:.4f} for the "
                  "search alone")


if __name__ == "__main__":
    main()
