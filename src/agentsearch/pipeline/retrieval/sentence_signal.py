"""The search's sentence signal: the query's best cosine with a stored sentence of each leading document.

A question usually asks about one sentence of a passage, while the dense side of the search compares it with a whole
chunk. Ingestion stored every sentence's vector (``sentence_vectors``), so the signal costs one read and no model.
With weight 1 it moved nDCG@10 from 0.8036 to 0.8243 for Arabic questions over English paragraphs (E5) and from
0.7280 to 0.7338 on SciFact (docs/evaluation.md, "The sentence signal").

Usage::

    fused = with_best_sentences(store, "c_ab12", query, vector, model, fused, chunks_of, dense, 1.0, metrics)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from agentsearch.pipeline.retrieval.fusion import with_sentence_signal
from agentsearch.pipeline.retrieval.language import detect_language, embedding_learnt
from agentsearch.pipeline.retrieval.sentence_vectors import best_sentence_cosine
from agentsearch.pipeline.retrieval.stored_chunks import Hit
from agentsearch.pipeline.retrieval.vector_store import VectorStore

# Read for the fused list's first documents only: each one is more vectors fetched, and reading the first 30 scored
# at least as well as reading every document found (src/agentsearch/bench/fusion_signals.py).
SENTENCE_WINDOW = 30


def with_best_sentences(store: VectorStore, collection: str, query: str, vector: list[float], model: str,
                        fused: dict[str, float], chunks_of: dict[str, dict[str, Hit]], dense: dict[str, float],
                        weight: float, metrics: dict[str, Any],
                        per_chunk: dict[str, float] | None = None) -> dict[str, float]:
    """``fused`` with the sentence signal beside it (``fusion.with_sentence_signal``), for the first
    ``SENTENCE_WINDOW`` documents; ``chunks_of`` holds every chunk the search found of each document, ``dense`` each
    document's best chunk cosine, which a document with no stored sentence counts instead. ``per_chunk``, when
    given, receives each of those documents' chunks' own best sentence cosine (the chunk that stands for a document
    is chosen by it too, ``Retriever``).

    Left out, and said in ``metrics``, where the embedding model did not learn the query's language; a failed read
    keeps the fused ranking and goes in ``metrics["errors"]``.
    """
    language = detect_language(query).code
    if not embedding_learnt(model, language):
        metrics["sentence_skipped"] = f"the embedding model {model} was not trained on {language}"
        return fused
    window = sorted(fused, key=fused.__getitem__, reverse=True)[:SENTENCE_WINDOW]
    t0 = time.perf_counter()
    try:
        stored = store.sentence_vectors(collection, [c for d in window for c in chunks_of[d]])
    except Exception as exc:  # noqa: BLE001 - the fused ranking stands; the search says what it lacks
        metrics["errors"].append(f"sentence vectors not read: {type(exc).__name__}: {exc}")
        return fused
    q = np.asarray(vector, dtype=np.float32)
    best: dict[str, float] = {}
    for doc_id in window:
        # Each chunk read once: a document's best sentence is its chunks' best, and each chunk's own is kept for
        # the choice of the chunk that stands for it (reading the document's chunks again for that doubled this
        # loop's time).
        own = {chunk_id: cosine for chunk_id, hit in chunks_of[doc_id].items()
               if (cosine := best_sentence_cosine(q, [(hit.title, hit.text)], stored)) is not None}
        cosine = max(own.values()) if own else None
        if per_chunk is not None and len(chunks_of[doc_id]) > 1:
            per_chunk.update(own)
        if cosine is None:
            cosine = dense.get(doc_id)
        if cosine is not None:
            best[doc_id] = cosine
    metrics["sentence_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    metrics["sentences_read"] = len(stored)
    return with_sentence_signal(fused, best, weight) if best else fused
