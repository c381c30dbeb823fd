"""How search, permissions and the Milvus process grow with a collection: one collection filled to each size
directly through ``VectorStore``, on a ``milvus-lite server`` process of its own (the distributed mode's Milvus),
then timed at that size.

Rows: text drawn from the SciFact abstracts (2 to 4 sentences each, so the keyword side has real words and real
term statistics), analysed by ``KeywordAnalyzer`` as ingestion does. Vectors: the real model's for a sample of
``--sample`` abstracts; every other row's vector is a random convex mix of two sample vectors plus Gaussian noise
(sigma 0.02 a component), normalised, so they are spread as real ones are around real ones. A row's text and vector
are of different abstracts except in the sample: the figures are of cost and recall of the index, not of relevance.
Metadata: a region (a third each), a publication date; a fifth of the rows are chunks of documents restricted to a
document group of a team (``access_groups`` and ``_access_groups``, as ``VectorStore.upsert`` writes them).

At each size, over ``--queries`` SciFact training claims embedded by the same model (top-100 pools, as a job's
search): p50/p95 of dense, keyword, hybrid (both searches at once on two threads, then fused, as the retriever
does), hybrid with a metadata filter (``eq`` on region and a date range on ``published``, both on the indexed
fields of ``metadata_index``, and the same ``eq`` on the metadata JSON, scanned, as a collection made before the
fields filters), hybrid with the document-groups filter of a searcher in none of the groups (hiding the fifth; on the
field) and the same on the JSON key (how every collection filtered before the field). Recall@10 of the dense index
against exact cosine search over every vector, at the store's HNSW ``ef`` and at each of ``EFS`` (with the dense
search's time at each), the insert rate of the last 10,000 chunks written (with their flush), the cold load after
a server restart (the process started and the first search, which loads the collection itself as a job's search
does), the server's resident memory (VmRSS after the searches) and its data directory on disk. ``job_ms`` is null:
the default job end to end through the API needs a whole stack
over a collection of each size (``agentsearch bench default-job`` measures it on SciFact).

    agentsearch bench scale --chunks 10000,100000 --json scale.json
    .venv/bin/python -m agentsearch.bench.scale --chunks 2000 --queries 10
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from grpc import RpcError
from pymilvus import MilvusException

from agentsearch.bench.common import SCIFACT, load_average, machine, summary
from agentsearch.devstack import start_milvus_lite, stop_process
from agentsearch.pipeline.platform.ports import free_port
from agentsearch.pipeline.retrieval.access_field import ACCESS_KEY
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.retrieval.fusion import weighted_fuse
from agentsearch.pipeline.retrieval.stored_chunks import IndexedChunk
from agentsearch.pipeline.retrieval.vector_store import VectorStore
from agentsearch.pipeline.security.document_access import access_filter, token

RESULTS = Path(__file__).resolve().parent / "results"
NAME = "c_scale"
TEAM = "5f0c2a3e-0000-4000-8000-00000000beef"
RESTRICTED = 0.2
INSERT_BATCH = 1000
RATE_WINDOW = 10_000  # the insert rate is of the last this many chunks written
NOISE = 0.02
POOL = 100
REGION = MetadataFilter.model_validate({"eq": {"key": "region", "value": "emea"}})
# Publication dates run over 2010-2024 a month a row: 2023 and later is about a seventh of the rows.
RECENT = MetadataFilter.model_validate({"range": {"key": "published", "gte": "2023-01-01"}})
EFS = (64, 128, 256, 512)
# The JSON-filtered cases past this size are not run: at 100,000 chunks each failed past the read deadline while the
# server went on scanning behind it, slowing the cases timed after it (and the service refuses such a filter past
# max_scan_chunks).
JSON_CASES_UP_TO = 50_000  # HNSW candidate lists tried for recall@10 and the dense search's time
GROUPS = access_filter([token(TEAM, "sales")])  # a searcher in none of the rows' groups: the fifth hidden
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _sentences(limit: int) -> tuple[list[str], list[str]]:
    """The abstracts' sentences, and the first ``limit`` abstracts' texts (the sample the model embeds)."""
    sentences: list[str] = []
    abstracts: list[str] = []
    with (SCIFACT / "corpus.jsonl").open() as f:
        for line in f:
            doc = json.loads(line)
            text = f"{doc['title']}. {doc['text']}"
            sentences.extend(s for s in SENTENCE.split(text) if len(s) > 20)
            if len(abstracts) < limit:
                abstracts.append(text[:2000])
    return sentences, abstracts


class Corpus:
    """Rows made on demand, the same for a seed: the sample first (real vectors), then derived ones."""

    def __init__(self, sample_vectors: np.ndarray, sample_texts: list[str], sentences: list[str], seed: int = 7):
        self.sample, self.sample_texts, self.sentences = sample_vectors, sample_texts, sentences
        self.rng = np.random.default_rng(seed)
        self.pick = random.Random(seed)
        self.analyzer = KeywordAnalyzer()

    def vectors(self, start: int, count: int) -> np.ndarray:
        n = len(self.sample)
        out = np.empty((count, self.sample.shape[1]), dtype=np.float32)
        for j, i in enumerate(range(start, start + count)):
            if i < n:
                out[j] = self.sample[i]
                continue
            a, b = self.rng.integers(0, n, 2)
            w = self.rng.uniform(0.2, 0.8)
            v = w * self.sample[a] + (1 - w) * self.sample[b] + self.rng.normal(0, NOISE, self.sample.shape[1])
            out[j] = v / np.linalg.norm(v)
        return out

    def chunks(self, start: int, vectors: np.ndarray) -> list[IndexedChunk]:
        chunks = []
        for j, vector in enumerate(vectors):
            i = start + j
            text = (self.sample_texts[i] if i < len(self.sample_texts)
                    else " ".join(self.pick.choice(self.sentences) for _ in range(self.pick.randint(2, 4))))
            metadata: dict[str, Any] = {"region": ("emea", "apac", "amer")[i % 3],
                                        "published": f"20{10 + i % 15}-{1 + i % 12:02d}-01"}
            if i % 5 == 0:  # RESTRICTED of the rows, spread over four groups
                metadata[ACCESS_KEY] = [token(TEAM, ("hr", "legal", "finance", "board")[(i // 5) % 4])]
            chunks.append(IndexedChunk(id=f"s{i}#0", document_id=f"s{i}", title=f"doc {i}", text=text,
                                       keywords=self.analyzer.analyze(text), vector=vector.tolist(),
                                       metadata=metadata))
        return chunks


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _disk_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


class Server:
    """``milvus-lite server`` on a data directory, restartable."""

    def __init__(self, data: Path, log: Path) -> None:
        self.data, self.log = data, log
        self.proc: subprocess.Popen | None = None
        self.port = free_port()

    def start(self) -> VectorStore:
        self.proc = start_milvus_lite(self.data, self.port, dict(os.environ), self.log)
        return VectorStore(f"http://127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout_s=60)
            self.proc = None


def _timed(fn, *args: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn(*args)
    return (time.perf_counter() - t0) * 1000, value


def _hybrid(store: VectorStore, pool: ThreadPoolExecutor, vector: list[float], analysed: str, rule=None) -> list:
    """Both searches at once, fused with equal weights: the retriever's hybrid search without its later steps."""
    extra = {"filter_expr": rule} if rule is not None else {}
    dense = pool.submit(store.dense_search, NAME, vector, POOL, **extra)
    keyword = pool.submit(store.keyword_search, NAME, analysed, POOL, **extra)
    lists = [{h.id: h.score for h in f.result()} for f in (dense, keyword)]
    return sorted(weighted_fuse(lists, [1.0, 1.0]).items(), key=lambda kv: -kv[1])[:10]


def _searches(store: VectorStore, queries: list[tuple[list[float], str]], size: int) -> dict[str, dict]:
    """Each case once per query, the cases interleaved so the machine's load falls on all of them alike."""
    # The JSON clauses every collection made before the fields is filtered with (until `agentsearch reindex`).
    json_groups, json_region = GROUPS.expression(), REGION.expression()
    cases = {
        "dense_ms": lambda v, a, p: store.dense_search(NAME, v, POOL),
        "keyword_ms": lambda v, a, p: store.keyword_search(NAME, a, POOL),
        "hybrid_ms": lambda v, a, p: _hybrid(store, p, v, a),
        "hybrid_filter_ms": lambda v, a, p: _hybrid(store, p, v, a, REGION),
        "hybrid_range_ms": lambda v, a, p: _hybrid(store, p, v, a, RECENT),
        "hybrid_filter_json_ms": lambda v, a, p: _hybrid(store, p, v, a, json_region),
        "hybrid_groups_ms": lambda v, a, p: _hybrid(store, p, v, a, GROUPS),
        "hybrid_groups_json_ms": lambda v, a, p: _hybrid(store, p, v, a, json_groups),
    }
    skipped = [name for name in cases if "json" in name] if size > JSON_CASES_UP_TO else []
    for name in skipped:
        del cases[name]
    times: dict[str, list[float]] = {name: [] for name in cases}
    # A search past the store's read deadline (READ_TIMEOUT_S) fails as a job's would; a case that fails twice is
    # dropped for the rest of the size, so a scan that no longer fits cannot hold the run for minutes.
    failed: dict[str, int] = dict.fromkeys(cases, 0)
    with ThreadPoolExecutor(2) as pool:
        for vector, analysed in [*queries[:2], *queries]:  # the first two: warm-up, the first searches after a load
            for name, fn in cases.items():
                if failed[name] >= 2:
                    continue
                try:
                    took = _timed(fn, vector, analysed, pool)[0]
                except (MilvusException, RpcError):  # pymilvus raises a deadline as gRPC's own error
                    failed[name] += 1
                    continue
                times[name].append(took)
        del queries  # the warm-up's times are dropped below
    out: dict[str, dict] = {}
    for name, ts in times.items():
        kept = ts[2:] if len(ts) > 2 else ts
        out[name] = ({k: round(v, 2) for k, v in summary(kept).items()} if kept
                     else {"p50": None, "p95": None, "n": 0})
        out[name]["failed"] = failed[name]
    for name in skipped:
        out[name] = {"p50": None, "p95": None, "n": 0, "skipped": f"not run past {JSON_CASES_UP_TO:,} chunks"}
    return out


def _first_search(store: VectorStore, vector: list[float], limit_s: float = 1800) -> int:
    """The first search after a cold load, tried again until it answers: returns how many tries failed (each past
    the store's read deadline, as a job's search right after a Milvus restart would)."""
    deadline = time.monotonic() + limit_s
    failed = 0
    while True:
        try:
            store.dense_search(NAME, vector, POOL)
            return failed
        except (MilvusException, RpcError):
            failed += 1
            if time.monotonic() > deadline:
                raise


def _ratio(case: dict, base: dict) -> float | None:
    return round(case["p50"] / base["p50"], 2) if case["p50"] and base["p50"] else None


def _recall(store: VectorStore, vectors: np.ndarray, queries: list[tuple[list[float], str]]) -> float | None:
    """Recall@10 of the dense index against exact cosine search over every stored vector (all normalised), over the
    queries whose search answered within the read deadline (None if none did)."""
    found = []
    for vector, _ in queries:
        exact = np.argsort(-(vectors @ np.asarray(vector, dtype=np.float32)))[:10]
        want = {f"s{i}#0" for i in exact}
        try:
            got = {h.id for h in store.dense_search(NAME, vector, 10)}
        except (MilvusException, RpcError):
            continue
        found.append(len(want & got) / 10)
    return round(statistics.mean(found), 4) if found else None


def _ef_sweep(store: VectorStore, vectors: np.ndarray, queries: list[tuple[list[float], str]]) -> list[dict]:
    """Per HNSW ``ef``: recall@10 (a top-10 search, where ``ef`` is the whole candidate list) and the p50/p95 of a
    job's top-100 dense search (whose list is at least 100 whatever ``ef`` is)."""
    default, rows = store.dense_ef, []
    try:
        for ef in EFS:
            store.dense_ef = ef
            times = []
            for vector, _ in queries:
                try:
                    times.append(_timed(store.dense_search, NAME, vector, POOL)[0])
                except (MilvusException, RpcError):
                    continue  # past the read deadline: counted by what n lacks
            rows.append({"ef": ef, "recall_at_10": _recall(store, vectors, queries),
                         "dense_ms": {k: round(v, 2) for k, v in summary(times).items()} if times else None})
    finally:
        store.dense_ef = default
    return rows


def measure(sizes: list[int], queries: int = 20, sample: int = 2000, workdir: Path | None = None) -> dict:
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.retrieval.embedder import make_embedder

    settings = get_settings()
    embedder = make_embedder(settings)
    sentences, texts = _sentences(sample)
    t0 = time.perf_counter()
    sample_vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    embed_s = time.perf_counter() - t0
    claims = [json.loads(line)["text"] for line in (SCIFACT / "queries_train.jsonl").read_text().splitlines()]
    claims = random.Random(3).sample(claims, queries)
    analyzer = KeywordAnalyzer()
    query_set = [(v, analyzer.analyze(c)) for v, c in zip(embedder.embed(claims), claims, strict=True)]
    corpus = Corpus(sample_vectors, texts, sentences)
    result: dict[str, Any] = {
        "machine": machine(), "model": settings.embedding_model, "queries": queries, "pool": POOL,
        "vectors": f"the model's for {len(texts)} SciFact abstracts ({embed_s:.0f} s); every other row a random convex "
                   f"mix of two of them plus N(0, {NOISE}) noise a component, normalised",
        "text": "2-4 sentences drawn from the SciFact abstracts (the sample rows: their own abstract)",
        "hybrid": "dense and keyword top-100 at once on two threads, fused with equal weights (no reranking)",
        "groups": f"a fifth of the rows restricted to 4 groups; the searcher holds none of them ({RESTRICTED:.0%} "
                  "hidden)",
        "sizes": [],
    }
    root = Path(workdir or tempfile.mkdtemp(prefix="agentsearch-scale-"))
    server = Server(root / "milvus", root / "milvus.log")
    store = server.start()
    store.ensure_collection(NAME, dimension=sample_vectors.shape[1])
    written = 0
    all_vectors = np.empty((max(sizes), sample_vectors.shape[1]), dtype=np.float32)
    try:
        for size in sorted(sizes):
            size_started = time.perf_counter()
            rate_from = max(written, size - RATE_WINDOW)
            insert_s = 0.0
            while written < size:
                count = min(INSERT_BATCH, size - written)
                vectors = corpus.vectors(written, count)
                all_vectors[written:written + count] = vectors
                chunks = corpus.chunks(written, vectors)
                t = time.perf_counter()
                store.upsert(NAME, chunks, flush=False)
                if written >= rate_from:
                    insert_s += time.perf_counter() - t
                written += count
            t = time.perf_counter()
            store.flush(NAME)
            insert_s += time.perf_counter() - t
            store.close()
            server.stop()
            cold_s, store = _timed(server.start)
            # No load first: the first search loads the collection itself and waits for it (LOAD_WAIT_S), as a
            # job's search after a Milvus restart does; a failed try would count in cold_searches_failed.
            cold_ms, cold_failed = _timed(_first_search, store, query_set[0][0])
            row: dict[str, Any] = {"chunks": size, "load": load_average(),
                                   "insert_chunks_per_s": round((size - rate_from) / insert_s, 1),
                                   "cold_load_s": round((cold_s + cold_ms) / 1000, 2),
                                   "cold_first_search_s": round(cold_ms / 1000, 2),
                                   "cold_searches_failed": cold_failed, "dense_ef": store.dense_ef}
            row.update(_searches(store, query_set, size))
            row["job_ms"] = None
            row["job_ms_reason"] = "not run: the default job through the API needs a stack per size"
            row["recall_at_10"] = _recall(store, all_vectors[:size], query_set)
            row["ef_sweep"] = _ef_sweep(store, all_vectors[:size], query_set)
            row["milvus_rss_mb"] = _rss_mb(server.proc.pid) if server.proc else None
            row["disk_mb"] = _disk_mb(server.data)
            row["groups_ratio"] = _ratio(row["hybrid_groups_ms"], row["hybrid_ms"])
            row["groups_json_ratio"] = _ratio(row["hybrid_groups_json_ms"], row["hybrid_ms"])
            row["filter_ratio"] = _ratio(row["hybrid_filter_ms"], row["hybrid_ms"])
            row["range_ratio"] = _ratio(row["hybrid_range_ms"], row["hybrid_ms"])
            row["filter_json_ratio"] = _ratio(row["hybrid_filter_json_ms"], row["hybrid_ms"])
            row["seconds"] = round(time.perf_counter() - size_started, 1)
            result["sizes"].append(row)
            print(json.dumps(row), flush=True)
    finally:
        store.close()
        server.stop()
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return result


def _shown(ratio: float | None) -> str:
    return f"{ratio}x" if ratio is not None else "-"


def table(result: dict) -> str:
    """The figures as a Markdown table, one row per size."""
    head = ("| chunks | dense p50/p95 | keyword p50/p95 | hybrid p50/p95 | + eq (fields) | + date range (fields) | "
            "+ eq (JSON) | filters / hybrid | + groups (field) | + groups (JSON) | groups / hybrid | recall@10 | "
            "insert chunks/s | cold load | RSS | disk |")
    lines = [head, "|" + "---|" * 16]
    for r in result["sizes"]:
        def ms(key: str, r: dict = r) -> str:
            if r[key]["p50"] is None:
                return "not run" if "skipped" in r[key] else f"failed ({r[key].get('failed', 0)} past the deadline)"
            return f"{r[key]['p50']:.0f} / {r[key]['p95']:.0f} ms"
        lines.append(f"| {r['chunks']:,} | {ms('dense_ms')} | {ms('keyword_ms')} | {ms('hybrid_ms')} | "
                     f"{ms('hybrid_filter_ms')} | {ms('hybrid_range_ms')} | {ms('hybrid_filter_json_ms')} | "
                     f"eq {_shown(r['filter_ratio'])}, range {_shown(r['range_ratio'])} "
                     f"(JSON {_shown(r['filter_json_ratio'])}) | "
                     f"{ms('hybrid_groups_ms')} | {ms('hybrid_groups_json_ms')} | "
                     f"{r['groups_ratio']}x (JSON {_shown(r['groups_json_ratio'])}) | {r['recall_at_10']} | "
                     f"{r['insert_chunks_per_s']:,.0f} | {r['cold_load_s']} s | {r['milvus_rss_mb']:,.0f} MB | "
                     f"{r['disk_mb']:,.0f} MB |")
    return "\n".join(lines)


def plot(result: dict, out: Path) -> None:
    """The p50 curves against the collection's size, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["chunks"] for r in result["sizes"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in ("dense_ms", "keyword_ms", "hybrid_ms", "hybrid_filter_ms", "hybrid_range_ms", "hybrid_filter_json_ms",
                "hybrid_groups_ms", "hybrid_groups_json_ms"):
        # A case that failed at a size (past the read deadline) leaves a gap.
        p50s = [r[key]["p50"] if r[key]["p50"] is not None else float("nan") for r in result["sizes"]]
        ax.plot(sizes, p50s, marker="o", label=key.removesuffix("_ms"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the collection")
    ax.set_ylabel("p50 ms")
    ax.set_title("Search p50 against collection size (milvus-lite server)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", default="10000", help="sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = measure([int(s) for s in args.chunks.split(",")], args.queries, args.sample)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
