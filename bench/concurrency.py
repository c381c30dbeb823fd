"""Benchmark 7: many jobs at once whose agents wait, on one worker host: prefork processes beside a thread pool.

Every job is ``bench_sleep_pre``, ``bench_skip_search`` and ``bench_sleep_post``: two agents that each wait
``bench.agents.SLEEP_S`` (an LLM's latency without its CPU) and no search, no response agents, a query of its own,
no cache. ``--jobs`` of them are submitted at once (from a few client threads, as many users would), on two stacks
in turn, each one worker host of this machine:

- ``prefork``: ``agentsearch worker --pool prefork --concurrency 2`` on every queue (the layout before the thread
  pool: a process per core);
- ``thread_pool``: ``agentsearch worker --pool threads --queues celery --concurrency THREADS`` for the job's steps,
  beside ``agentsearch worker --pool prefork --queues artifacts,ingest --concurrency 1`` for the CPU-heavy queues
  (the layout the README recommends).

Jobs/s = jobs / (last ``finished_at`` - first ``created_at``); a job's latency is ``finished_at - created_at``;
errors are jobs that did not succeed (or were not accepted). Each stack gets a small warm-up batch first.

Then the thread-pool worker's memory: after a batch of jobs that search (hybrid, the sample corpus) and answer, its
peak resident set (``VmHWM``) with the model in process and, on a third stack, with an embeddings server
(``AGENTSEARCH_EMBEDDING_URL``: Infinity from ``devstack.embedding_server``), where it holds no model at all.

    .venv/bin/python bench/concurrency.py --jobs 200 [--threads 64] [--json out.json]
    .venv/bin/agentsearch bench concurrency --jobs 200 --json out.json      # the same
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from bench import scifact
from bench.agents import SLEEP_S
from bench.common import SAMPLE_CORPUS, Target, bench_stack, ingest, job_wall_ms, summary, wait_idle
from devstack.embedding_server import EmbeddingServer

AGENTS = ["bench_sleep_pre", "bench_skip_search", "bench_sleep_post"]
SEARCH_AGENTS = ["bench_sleep_pre", "bench_sleep_post"]
QUERY = "How did the grid cope with the winter peak?"
CLIENT_THREADS = 8
POLL_BATCH = 20
DEFAULT_THREADS = 128  # WORKER_THREADS' default


def _collection(target: Target) -> str:
    with target.http() as http:
        created = http.post("/v1/collections", json={"name": f"concurrency-{time.time_ns()}"})
        created.raise_for_status()
        return created.json()["id"]


def run_batch(target: Target, collection_id: str, jobs: int, tag: str, timeout_s: float = 900,
              agents: list[str] = AGENTS) -> dict:
    """Submit ``jobs`` at once and wait for all of them; throughput, latency and errors."""
    def submit(i: int) -> str | None:
        response = client.post("/v1/search", json={"collection_id": collection_id, "query": f"{QUERY} ({tag} {i})",
                                                   "agents": agents, "use_cache": False})
        return response.json()["job_id"] if response.status_code == 202 else None

    # One client shared by the submitting threads (httpx's is thread-safe): a client per request would spend
    # more time making its TLS context than the API spends on the request.
    with target.http() as client, ThreadPoolExecutor(CLIENT_THREADS) as pool:
        submitted = list(pool.map(submit, range(jobs)))
    ids = [job_id for job_id in submitted if job_id]
    finished: dict[str, dict] = {}
    deadline = time.monotonic() + timeout_s
    with target.http() as http:
        while len(finished) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.5)
            # A few of the oldest unfinished jobs per look: polling all of them would load the API (on the same
            # two cores) more than the jobs do. The figures come from the rows' own times, not from this loop.
            for job_id in [j for j in ids if j not in finished][:POLL_BATCH]:
                job = http.get(f"/v1/jobs/{job_id}").json()
                if job["status"] not in ("succeeded", "failed", "cancelled"):
                    break
                finished[job_id] = job
    succeeded = [job for job in finished.values() if job["status"] == "succeeded"]
    errors = jobs - len(succeeded)
    why = sorted({str(job.get("error")) for job in finished.values() if job["status"] != "succeeded"})[:3]
    if not succeeded:
        return {"jobs": jobs, "errors": errors, "why": why, "jobs_per_s": 0.0, "p50_ms": None, "p95_ms": None}
    first = min(datetime.fromisoformat(j["created_at"]) for j in finished.values())
    last = max(datetime.fromisoformat(j["finished_at"]) for j in finished.values() if j["finished_at"])
    seconds = (last - first).total_seconds()
    latency = summary([job_wall_ms(j) for j in succeeded])
    return {"jobs": jobs, "errors": errors, **({"why": why} if why else {}), "seconds": round(seconds, 3),
            "jobs_per_s": round(len(succeeded) / seconds, 3), "p50_ms": round(latency["p50"], 1),
            "p95_ms": round(latency["p95"], 1)}


def _memory(stack, index: int) -> list[dict]:
    """VmHWM, VmRSS and Pss (MiB) of one worker's processes: its main process and any prefork children."""
    return [scifact.memory_of(stack.worker_procs[index].pid, "main"),
            *[scifact.memory_of(pid, "prefork child") for pid in stack.worker_children(index)]]


def _with_search(stack, target: Target, jobs: int) -> dict:
    """The same waiting agents around a hybrid search of the sample corpus and the extractive answer, which embed
    (in the thread-pool process, or on the embeddings server): what the thread-pool worker's memory is read after."""
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    collection_id = ingest(target, f"corpus-{time.time_ns()}", documents)
    return run_batch(target, collection_id, jobs, "with search", agents=SEARCH_AGENTS)


def measure_layout(workdir: Path, layout: str, jobs: int, threads: int, search_jobs: int = 40,
                   warmup: int = 10) -> dict:
    """One layout on a stack of its own: ``prefork``, ``thread_pool`` or ``thread_pool_remote_embeddings`` (the
    thread pool with an embeddings server, whose worker holds no model)."""
    server = None
    env: dict[str, str] = {}
    if layout == "thread_pool_remote_embeddings":
        server = EmbeddingServer(workdir / "embeddings")
        server.start()
        env["AGENTSEARCH_EMBEDDING_URL"] = server.url
    try:
        if layout == "prefork":
            stack = bench_stack(workdir, workers=1, concurrency=2, pool="prefork", extra_env=env)
        else:
            stack = bench_stack(workdir, workers=1, concurrency=threads, pool="threads", queues="celery",
                                extra_env=env)
        with stack:
            if layout != "prefork":
                index = stack.add_worker(queues="artifacts,ingest", concurrency=1, pool="prefork")
                stack.wait_worker_ready(index)
            wait_idle(stack)
            target = Target.of(stack)
            collection_id = _collection(target)
            figures: dict = {}
            if layout != "thread_pool_remote_embeddings":  # the thread pool's figures are the other stack's
                run_batch(target, collection_id, warmup, f"warm-up {layout}")
                figures = run_batch(target, collection_id, jobs, layout)
            if layout != "prefork":
                figures["with_search"] = _with_search(stack, target, search_jobs)
            figures["memory"] = _memory(stack, 0)
            return figures
    finally:
        if server is not None:
            server.stop()


def measure(jobs: int = 200, threads: int = DEFAULT_THREADS, remote: bool = True) -> dict:
    results: dict = {"sleep_s_per_agent": SLEEP_S, "agents": AGENTS, "threads": threads}
    layouts = ("thread_pool", "prefork", *(("thread_pool_remote_embeddings",) if remote else ()))
    for layout in layouts:
        with tempfile.TemporaryDirectory(prefix=f"agentsearch-bench-{layout}-") as tmp:
            results[layout] = measure_layout(Path(tmp), layout, jobs, threads)
    prefork = results["prefork"]["jobs_per_s"]
    results["ratio"] = round(results["thread_pool"]["jobs_per_s"] / prefork, 2) if prefork else None
    return results


def public(result: dict) -> dict:
    """What ``agentsearch bench concurrency --json`` writes."""
    keys = ("jobs_per_s", "p50_ms", "p95_ms", "errors")
    return {layout: {k: result[layout][k] for k in keys} for layout in ("thread_pool", "prefork")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-remote", action="store_true", help="skip the stack with an embeddings server")
    args = parser.parse_args()
    result = measure(args.jobs, args.threads, remote=not args.no_remote)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(public(result)) + "\n")


if __name__ == "__main__":
    main()
