"""Whole-job cache hits through the HTTP API, beside the API's cheapest authenticated read.

Starts the distributed stack on this machine (``devstack``: its own Redis, a fresh PostgreSQL database,
milvus-lite server, one prefork worker, the API), ingests the sample corpus, runs one job to completion, then sends
the identical request N times (each answered from the stored response, without Celery) and, interleaved, N
``GET /v1/collections/{id}`` (auth + one indexed read) as the floor to compare with. Prints and writes p50/p95 of
both and their ratio to ``src/agentsearch/bench/results/cache_hit.md``.

Usage::

    .venv/bin/python -m agentsearch.bench.cache_hit                 # 300 requests of each
    .venv/bin/python -m agentsearch.bench.cache_hit --requests 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from agentsearch.bench.common import SAMPLE_CORPUS, Target, bench_stack, ingest, machine, wait_idle
from agentsearch.pipeline.eval.retrieval import percentile

REPO = Path(__file__).resolve().parents[3]
QUERY = "What was Northwind Energy's revenue in Q4 2025?"
RESULTS = REPO / "src" / "agentsearch" / "bench" / "results" / "cache_hit.md"


def measure(target: Target, requests: int, collection_id: str | None = None) -> dict:
    """One job to completion, then ``requests`` identical submissions and as many collection reads, interleaved."""
    if collection_id is None:
        documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
        collection_id = ingest(target, "bench-cache", documents)
    body = {"collection_id": collection_id, "query": QUERY, "agents": ["language_detector", "executive_summary"]}
    with target.http() as http:
        first = http.post("/v1/search", json=body, params={"wait": 60})
        assert first.status_code == 200 and first.json()["status"] == "succeeded", first.text
        hit_ms, read_ms = [], []
        for _ in range(requests):
            started = time.perf_counter()
            response = http.post("/v1/search", json=body)
            hit_ms.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200 and response.json()["cached"], response.text
            started = time.perf_counter()
            read = http.get(f"/v1/collections/{collection_id}")
            read_ms.append((time.perf_counter() - started) * 1000)
            assert read.status_code == 200
    return {
        "requests": requests,
        "cache_hit_ms": {"p50": statistics.median(hit_ms), "p95": percentile(hit_ms, 0.95)},
        "collection_read_ms": {"p50": statistics.median(read_ms), "p95": percentile(read_ms, 0.95)},
        "ratio_p50": statistics.median(hit_ms) / statistics.median(read_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        result = measure(Target.of(stack), args.requests)
    hit, read = result["cache_hit_ms"], result["collection_read_ms"]
    table = (
        "| request | p50 ms | p95 ms |\n|---|---:|---:|\n"
        f"| POST /v1/search, whole-job cache hit | {hit['p50']:.2f} | {hit['p95']:.2f} |\n"
        f"| GET /v1/collections/{{id}} (floor: auth + one read) | {read['p50']:.2f} | {read['p95']:.2f} |\n"
        f"| ratio (hit / floor), p50 | {result['ratio_p50']:.2f} | |\n"
    )
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    about = machine()
    RESULTS.write_text(
        "# Whole-job cache hit through the API\n\n"
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {about['nproc']} CPUs, Python {about['Python']}, "
        f"{args.requests} sequential requests of each kind, interleaved, one keep-alive connection; stack: "
        "PostgreSQL, Redis, one prefork worker, uvicorn (one process).\n\n"
        f"Command: `.venv/bin/python -m agentsearch.bench.cache_hit --requests {args.requests}`\n\n{table}"
    )


if __name__ == "__main__":
    main()
