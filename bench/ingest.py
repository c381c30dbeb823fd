"""Ingestion speed beside the embedding model's own speed, measured in the same run.

    .venv/bin/python bench/ingest.py [--docs 1000] [--rounds 3]

Both sides embed exactly the same chunk texts with the same batching; ingestion adds chunking, stemming for BM25,
the Milvus upsert and the flush. Rounds alternate the two sides, and medians are reported, because these machines
are noisy. Results go to bench/results/ingest.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.evaluation import load_beir_corpus  # noqa: E402
from pipeline.ingest import ChunkingConfig, chunk_text, index_documents  # noqa: E402
from pipeline.retrieval.analyzer import KeywordAnalyzer  # noqa: E402
from pipeline.retrieval.embedder import Embedder  # noqa: E402
from pipeline.retrieval.vector_store import VectorStore  # noqa: E402

CORPUS = REPO.parent / "shared" / "eval" / "scifact" / "corpus.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    docs = load_beir_corpus(args.corpus)[: args.docs]
    chunking = ChunkingConfig()
    embedder, analyzer = Embedder("all-MiniLM-L6-v2"), KeywordAnalyzer()
    rows = [(d["id"], d["title"], d["text"], {}) for d in docs]
    texts = [f"{d['title']}. {p}" for d in docs for p in chunk_text(d["text"], chunking.max_chars, chunking.overlap_chars)]
    embedder.embed(texts[:64])  # warm-up: first call pays for lazy initialisation

    model_rates, ingest_rates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = VectorStore(str(Path(tmp) / "bench.db"))
        for round_ in range(args.rounds):
            started = time.perf_counter()
            for start in range(0, len(texts), chunking.embed_batch):
                embedder.embed(texts[start : start + chunking.embed_batch])
            model_rates.append(len(texts) / (time.perf_counter() - started))

            name = f"bench_{round_}"
            store.ensure_collection(name, embedder.dimension)
            started = time.perf_counter()
            for start in range(0, len(rows), 256):
                chunks = index_documents(rows[start : start + 256], embedder.embed, analyzer, chunking)
                store.upsert(name, chunks, flush=False)
            store.flush(name)
            ingest_rates.append(len(texts) / (time.perf_counter() - started))
            store.drop_collection(name)
            print(f"round {round_ + 1}: model {model_rates[-1]:.1f} chunks/s, ingestion {ingest_rates[-1]:.1f} chunks/s")

    model, ingest = statistics.median(model_rates), statistics.median(ingest_rates)
    report = f"""# Ingestion speed

Command: `.venv/bin/python bench/ingest.py --docs {args.docs} --rounds {args.rounds}`
Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, torch threads default.
Data: first {len(docs)} SciFact abstracts -> {len(texts)} chunks ({chunking.max_chars} chars, {chunking.overlap_chars} overlap).

| | median chunks/s | rounds |
|---|---:|---|
| embedding model alone | {model:.1f} | {', '.join(f'{r:.1f}' for r in model_rates)} |
| ingestion (chunk + embed + BM25 text + Milvus upsert + flush) | {ingest:.1f} | {', '.join(f'{r:.1f}' for r in ingest_rates)} |
| ratio | {ingest / model:.2f} | |
"""
    out = REPO / "bench" / "results" / "ingest.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
