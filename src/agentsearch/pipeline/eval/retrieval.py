"""Retrieval evaluation on BEIR-format data: nDCG@10, Recall@100, MRR@10 and query latency.

Usage::

    corpus = load_beir_corpus(Path("scifact/corpus.jsonl"))
    queries = load_beir_queries(Path("scifact/queries_train.jsonl"))
    qrels = load_qrels(Path("scifact/qrels/train.tsv"))
    report = score_run(run, qrels)     # run: {query_id: [doc ids, best first]}
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the services take seconds to load, which `agentsearch --help` would pay
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.services import Services


def load_beir_corpus(path: Path) -> list[dict]:
    docs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
                docs.append({"id": str(row["_id"]), "title": row.get("title") or "", "text": row.get("text") or ""})
            except (json.JSONDecodeError, KeyError) as exc:
                raise ValueError(f"{path}: line {number}: {exc}") from None
    return docs


def load_beir_queries(path: Path) -> dict[str, str]:
    queries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            queries[str(row["_id"])] = row["text"]
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader, None)
        if header is None or header[0] != "query-id":
            raise ValueError(f"{path}: expected a header row 'query-id corpus-id score'")
        for row in reader:
            if len(row) >= 3 and int(row[2]) > 0:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum((2 ** relevant.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def mrr_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if d in relevant), 0.0)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def score_run(run: dict[str, list[str]], qrels: dict[str, dict[str, int]],
              latencies_ms: list[float] | None = None) -> dict:
    judged = [q for q in run if q in qrels]
    if not judged:
        raise ValueError("no query of the run has relevance judgements")
    return {
        "ndcg@10": round(sum(ndcg_at(run[q], qrels[q]) for q in judged) / len(judged), 4),
        "recall@100": round(sum(recall_at(run[q], qrels[q]) for q in judged) / len(judged), 4),
        "mrr@10": round(sum(mrr_at(run[q], qrels[q]) for q in judged) / len(judged), 4),
        "latency_ms": {
            "p50": round(percentile(latencies_ms or [], 0.5), 2),
            "p95": round(percentile(latencies_ms or [], 0.95), 2),
        },
        "queries": len(judged),
    }


def corpus_collection_name(corpus_path: Path, settings: Settings) -> str:
    """One Milvus collection per (corpus file version, model, chunking): reused while none of them changes."""
    from agentsearch.pipeline.platform.kv import canonical_hash

    stat = corpus_path.stat()
    key = canonical_hash(
        [str(corpus_path.resolve()), stat.st_size, int(stat.st_mtime), settings.embedding_model,
         settings.embedding_runtime, settings.late_chunking, settings.chunk_chars, settings.chunk_overlap_chars,
         settings.keyword_language, "schema-3"]
    )
    return f"eval_{key[:16]}"


def ensure_corpus_indexed(services: Services, corpus_path: Path, progress=None, batch_docs: int = 256
                          ) -> tuple[str, int, bool]:
    """Index a BEIR corpus through the same ingestion code jobs use. Returns (collection, chunks, reused)."""
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
    from agentsearch.pipeline.ingestion.indexing import index_documents, span_reader

    settings = services.settings
    name = corpus_collection_name(corpus_path, settings)
    store, embedder = services.vector_store, services.embedder
    docs = load_beir_corpus(corpus_path)
    marker = settings.ensure_data_dir() / "eval" / f"{name}.done"
    if marker.exists() and store._client.has_collection(name):
        return name, int(marker.read_text() or 0), True
    store.drop_collection(name)
    store.ensure_collection(name, embedder.dimension)
    chunking = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    total = 0
    for start in range(0, len(docs), batch_docs):
        batch = docs[start : start + batch_docs]
        chunks = index_documents([(d["id"], d["title"], d["text"], {}) for d in batch], embedder.embed,
                                 services.analyzer, chunking, embed_spans=span_reader(embedder, settings.late_chunking))
        store.upsert(name, chunks, flush=False)
        total += len(chunks)
        if progress:
            progress(len(batch))
    store.flush(name)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(total))
    return name, total, False


def run_retrieval_eval(services: Services, collection: str, queries: dict[str, str], config, progress=None,
                       retriever=None) -> tuple[dict, dict]:
    """Every query through ``Retriever.search``, the path jobs use (caching off, so latency is real work);
    ``retriever``: another with the same ``search`` (a benchmark's slowed one), default the services' uncached one."""
    import time

    retriever = retriever or services.uncached_retriever()
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    for query_id, text in queries.items():
        started = time.perf_counter()
        result = retriever.search(collection, text, config, model=services.settings.embedding_model)
        latencies.append((time.perf_counter() - started) * 1000)
        run[query_id] = [d.id for d in result.documents]
        if progress:
            progress(1)
    return run, {"latencies_ms": latencies}


class CorpusTools:
    """The agent toolbox over an evaluation collection that lives only in Milvus (no document rows)."""

    def __init__(self, services: Services, collection: str, docs: list[dict], search_filter=None) -> None:

        self.search_filter = search_filter  # the run's MetadataFilter: agents' own searches apply it too
        self._retriever = services.uncached_retriever()
        self._services, self._collection, self._docs = services, collection, docs
        self._vocabulary: dict[str, int] | None = None
        self.llm = None

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._services.embedder.embed(texts)

    def embed_known(self, texts: list[str], documents) -> list[list[float]]:
        """As a job's toolbox does: the sentence vectors stored with the documents' chunks read, the rest embedded."""
        from agentsearch.pipeline.retrieval.sentence_vectors import KnownVectors, stored_for

        stored = stored_for(self._services.vector_store, documents, lambda _: self._collection, self._collection)
        return KnownVectors(self.embed, stored).embed(texts)

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid"):
        from agentsearch.pipeline.retrieval.config import SearchConfig

        config = SearchConfig(strategy=strategy, top_k=top_k, fusion=self._services.settings.search_fusion,
                              filter=self.search_filter)
        return self._retriever.search(self._collection, query, config).documents

    def vocabulary(self, collection_id: str) -> dict[str, int]:
        if self._vocabulary is None:
            from collections import Counter

            from agentsearch.pipeline.text import words

            self._vocabulary = dict(Counter(w for d in self._docs for w in words(f"{d['title']}. {d['text']}")))
        return self._vocabulary

    def acronyms(self, collection_id: str) -> dict[str, str]:
        from agentsearch.pipeline.text.acronyms import mine_acronyms

        return mine_acronyms([f"{d['title']}. {d['text']}" for d in self._docs])

    def breaker(self, name: str, fail_max: int, reset_timeout_s: float):
        from agentsearch.pipeline.platform.breakers import ADMIT_ALL

        return ADMIT_ALL


def run_agents_eval(services: Services, collection: str, docs: list[dict], queries: dict[str, str], config,
                    agent_ids: list[str], rerank_depth: int = 20, progress=None) -> tuple[dict, dict]:
    """Queries through pre-search agents, the search, and post-search agents (on the top ``rerank_depth``), with
    each agent's default config: the before/after of an agent on a benchmark."""
    import time

    from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, PostSearchInput, PreSearchInput, Stage

    tools = CorpusTools(services, collection, docs, search_filter=config.filter)
    agents = [services.registry.build(a) for a in agent_ids]
    retriever = services.uncached_retriever()
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    for query_id, text in queries.items():
        started = time.perf_counter()
        query, metadata = text, dict[str, object]()
        for agent in (a for a in agents if a.stage == Stage.PRE_SEARCH):
            try:
                out = agent.run(PreSearchInput(query=query, collection_id=collection, metadata=metadata),
                                AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id=collection, tools=tools))
            except AgentSkipped:
                continue  # as in a job: a skipping agent leaves the query as it was
            query, metadata = out.query, {**metadata, **out.metadata}
        documents = retriever.search(collection, query, config).documents
        head, tail = documents[:rerank_depth], documents[rerank_depth:]
        for agent in (a for a in agents if a.stage == Stage.POST_SEARCH):
            try:
                head = agent.run(
                    PostSearchInput(documents=head, query=query, collection_id=collection, metadata=metadata),
                    AgentContext(pipeline_stage=Stage.POST_SEARCH, collection_id=collection, tools=tools),
                ).documents
            except AgentSkipped:
                continue
        latencies.append((time.perf_counter() - started) * 1000)
        run[query_id] = [d.id for d in head + tail]
        if progress:
            progress(1)
    return run, {"latencies_ms": latencies}
