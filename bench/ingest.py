"""Ingestion speed beside the embedding model's own speed, measured in the same run.

    .venv/bin/python bench/ingest.py [--docs 1000] [--rounds 3]

Both sides embed exactly the same texts with the same batching: every chunk, then each chunk's sentences (the
vectors ingestion stores for a job's reranker and answer, ``pipeline.retrieval.sentence_vectors``; a sentence
repeated within one call of 256 documents once); ingestion adds chunking, stemming for BM25, the Milvus upsert and
the flush. Rates count chunks. Rounds alternate the two sides, and medians are reported, because these machines
are noisy. Results go to bench/results/ingest.md. The model is the service's (AGENTSEARCH_EMBEDDING_MODEL, in this
process), or the embeddings server when AGENTSEARCH_EMBEDDING_URL is set.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import SCIFACT, machine

REPO = Path(__file__).resolve().parents[1]
CORPUS = SCIFACT / "corpus.jsonl"


def measure(corpus: Path = CORPUS, docs: int = 300, rounds: int = 3) -> dict:
    """Chunks/s of the embedding model alone and of the whole ingestion path, per round, in this process."""
    from pipeline.eval.retrieval import load_beir_corpus
    from pipeline.ingest import ChunkingConfig, chunk_text, index_documents
    from pipeline.platform.settings import get_settings
    from pipeline.retrieval.analyzer import KeywordAnalyzer
    from pipeline.retrieval.embedder import make_embedder
    from pipeline.retrieval.sentence_vectors import chunk_units
    from pipeline.retrieval.vector_store import VectorStore

    documents = load_beir_corpus(corpus)[:docs]
    chunking = ChunkingConfig()
    # The model the service would use: in this process, or the embeddings server at AGENTSEARCH_EMBEDDING_URL.
    embedder, analyzer = make_embedder(get_settings()), KeywordAnalyzer()
    rows = [(d["id"], d["title"], d["text"], {}) for d in documents]
    texts = [f"{d['title']}. {p}" for d in documents
             for p in chunk_text(d["text"], chunking.max_chars, chunking.overlap_chars)]
    # The sentences ingestion embeds beside the chunks, per call of 256 documents as index_documents gets them.
    sentences = [list(dict.fromkeys(u for d in documents[start : start + 256]
                                    for p in chunk_text(d["text"], chunking.max_chars, chunking.overlap_chars)
                                    for u in chunk_units(d["title"], p)))
                 for start in range(0, len(documents), 256)] if chunking.sentence_vectors else []
    embedder.embed(texts[:64])  # warm-up: first call pays for lazy initialisation

    model_rates, ingest_rates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = VectorStore(str(Path(tmp) / "bench.db"))
        for round_ in range(rounds):
            started = time.perf_counter()
            for start in range(0, len(texts), chunking.embed_batch):
                embedder.embed(texts[start : start + chunking.embed_batch])
            for group in sentences:
                for start in range(0, len(group), chunking.embed_batch):
                    embedder.embed(group[start : start + chunking.embed_batch])
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
    return {"docs": len(documents), "chunks": len(texts), "chunk_chars": chunking.max_chars,
            "overlap_chars": chunking.overlap_chars, "rounds": rounds, "model_chunks_per_s": model,
            "ingest_chunks_per_s": ingest, "ratio": ingest / model, "model_rounds": model_rates,
            "ingest_rounds": ingest_rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    r = measure(args.corpus, args.docs, args.rounds)
    about = machine()
    report = f"""# Ingestion speed

Command: `.venv/bin/python bench/ingest.py --docs {args.docs} --rounds {args.rounds}`
Machine: {about['nproc']} CPUs ({about['CPU model']}), Python {about['Python']}, torch threads default.
Data: first {r['docs']} SciFact abstracts -> {r['chunks']} chunks ({r['chunk_chars']} chars, {r['overlap_chars']} overlap).

| | median chunks/s | rounds |
|---|---:|---|
| embedding model alone | {r['model_chunks_per_s']:.1f} | {', '.join(f'{x:.1f}' for x in r['model_rounds'])} |
| ingestion (chunk + embed + BM25 text + Milvus upsert + flush) | {r['ingest_chunks_per_s']:.1f} | {', '.join(f'{x:.1f}' for x in r['ingest_rounds'])} |
| ratio | {r['ratio']:.2f} | |
"""
    out = REPO / "bench" / "results" / "ingest.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
