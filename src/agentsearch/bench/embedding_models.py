"""The packaged embedding models side by side: what one costs, and how well it ranks on its own.

    .venv/bin/python -m agentsearch.bench.embedding_models cost MODEL [--chunks 200]
    .venv/bin/python -m agentsearch.bench.embedding_models xquad MODEL [--corpus en] [--languages de,zh,...]
    .venv/bin/python -m agentsearch.bench.embedding_models scifact MODEL [--abstracts 1000]

``cost``: seconds to load, resident memory, ms per 1,000 SciFact chunks (up to 1,000 characters, "title. chunk",
batches of 64) and ms per query (100 claims, one at a time), in this process: run each model in a fresh one.
``xquad``: nDCG@10 of the model alone (cosine, no BM25, no chunking: each paragraph as "title. text") for every
question of each language against the paragraphs of ``--corpus``; XQuAD's ids are shared across languages, so a
German question is judged against the English paragraph. ``scifact``: the same on the first N abstracts and the
train claims whose relevant abstracts are all among them. Figures in docs/evaluation.md, "Models".
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from agentsearch.bench.common import REPO

XQUAD = REPO.parent / "shared" / "eval" / "xquad"
SCIFACT = REPO.parent / "shared" / "eval" / "scifact"
LANGUAGES = ("en", "de", "es", "ar", "hi", "ro", "ru", "th", "zh")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def ndcg_at_10(scores: np.ndarray, ids: list[str], relevant: list[set[str]]) -> float:
    """Mean nDCG@10 of rows of query-by-document scores, binary relevance."""
    total = 0.0
    for row, rel in zip(scores, relevant, strict=True):
        top = np.argsort(-row)[:10]
        dcg = sum(1 / math.log2(rank + 2) for rank, j in enumerate(top) if ids[j] in rel)
        total += dcg / sum(1 / math.log2(rank + 2) for rank in range(min(len(rel), 10)))
    return total / len(relevant)


def cost(model: str, n_chunks: int = 200) -> dict:
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus, load_beir_queries
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig, chunk_text
    from agentsearch.pipeline.retrieval.embedder import Embedder

    chunking = ChunkingConfig()
    texts = [f"{d['title']}. {piece}" for d in load_beir_corpus(SCIFACT / "corpus.jsonl")[: n_chunks * 2]
             for piece in chunk_text(d["text"], chunking.max_chars, chunking.overlap_chars)][:n_chunks]
    claims = list(load_beir_queries(SCIFACT / "queries_train.jsonl").values())[:100]
    before = _rss_mb()
    started = time.perf_counter()
    embedder = Embedder(model)
    embedder.embed(texts[:8])
    embedder.embed_queries(claims[:2])  # the first calls pay for lazy initialisation
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    for start in range(0, len(texts), 64):
        embedder.embed(texts[start : start + 64])
    per_chunk_ms = (time.perf_counter() - started) * 1000 / len(texts)
    query_ms = []
    for claim in claims:
        started = time.perf_counter()
        embedder.embed_queries([claim])
        query_ms.append((time.perf_counter() - started) * 1000)
    return {"model": model, "load_s": round(load_s, 1), "rss_mb_before": round(before),
            "rss_mb_after": round(_rss_mb()),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "chunks": len(texts), "ms_per_1000_chunks": round(per_chunk_ms * 1000),
            "query_ms_p50": round(statistics.median(query_ms), 1),
            "query_ms_p95": round(sorted(query_ms)[int(0.95 * (len(query_ms) - 1))], 1)}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> dict[str, set[str]]:
    judged: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        query, doc, _ = line.split("\t")
        judged.setdefault(query, set()).add(doc)
    return judged


def xquad(model: str, corpus_language: str = "en", languages: tuple[str, ...] = LANGUAGES) -> list[dict]:
    from agentsearch.pipeline.retrieval.embedder import Embedder

    embedder = Embedder(model)
    paragraphs = _jsonl(XQUAD / corpus_language / "corpus.jsonl")
    ids = [p["_id"] for p in paragraphs]
    matrix = np.asarray(embedder.embed([f"{p['title'].replace('_', ' ')}. {p['text']}" for p in paragraphs]))
    rows = []
    for language in languages:
        judged = _qrels(XQUAD / language / "qrels" / "dev.tsv")
        questions = [q for q in _jsonl(XQUAD / language / "queries.jsonl") if q["_id"] in judged]
        scores = np.asarray(embedder.embed_queries([q["text"] for q in questions])) @ matrix.T
        rows.append({"model": model, "questions": language, "paragraphs": corpus_language, "n": len(questions),
                     "ndcg@10": round(ndcg_at_10(scores, ids, [judged[q["_id"]] for q in questions]), 4)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def scifact(model: str, abstracts: int = 1000) -> dict:
    from agentsearch.pipeline.retrieval.embedder import Embedder

    docs = _jsonl(SCIFACT / "corpus.jsonl")[:abstracts]
    ids = [d["_id"] for d in docs]
    judged = _qrels(SCIFACT / "qrels" / "train.tsv")
    claims = [q for q in _jsonl(SCIFACT / "queries_train.jsonl") if q["_id"] in judged and judged[q["_id"]] <= set(ids)]
    if not claims:
        raise SystemExit(f"no train claim has all its relevant abstracts among the first {abstracts}")
    embedder = Embedder(model)
    started = time.perf_counter()
    matrix = np.asarray(embedder.embed([f"{d['title']}. {d['text']}" for d in docs]))
    embed_s = time.perf_counter() - started
    scores = np.asarray(embedder.embed_queries([q["text"] for q in claims])) @ matrix.T
    return {"model": model, "abstracts": len(docs), "claims": len(claims),
            "ndcg@10": round(ndcg_at_10(scores, ids, [judged[q["_id"]] for q in claims]), 4),
            "embed_s": round(embed_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["cost", "xquad", "scifact"])
    parser.add_argument("model")
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--corpus", default="en")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--abstracts", type=int, default=1000)
    args = parser.parse_args()
    if args.what == "cost":
        print(json.dumps(cost(args.model, args.chunks)))
    elif args.what == "xquad":
        xquad(args.model, args.corpus, tuple(args.languages.split(",")))
    else:
        print(json.dumps(scifact(args.model, args.abstracts)))


if __name__ == "__main__":
    main()
