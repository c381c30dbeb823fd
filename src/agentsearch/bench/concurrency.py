"""Benchmark 7: many jobs at once whose agents wait, on one worker host: prefork processes beside a thread pool.

Every job is ``bench_sleep_pre``, ``bench_skip_search`` and ``bench_sleep_post``: two agents that each wait
``agentsearch.bench.agents.SLEEP_S`` (an LLM's latency without its CPU) and no search, no response agents, a query of
its own, no cache. ``--jobs`` of them are submitted at once (from a few client threads, as many users would), on two
stacks in turn, each one worker host of this machine:

- ``prefork``: ``agentsearch worker --pool prefork --concurrency 2`` on every queue (the layout before the thread
  pool: a process per core);
- ``thread_pool``: ``agentsearch worker --pool threads --queues celery --concurrency THREADS`` for the job's steps,
  beside ``agentsearch worker --pool prefork --queues artifacts,ingest --concurrency 1`` for the CPU-heavy queues
  (the layout docs/deployment.md recommends).

Jobs/s = jobs / (last ``finished_at`` - first ``created_at``); a job's latency is ``finished_at - created_at``;
errors are jobs that did not succeed (or were not accepted). Each stack gets a small warm-up batch first.

Then the thread-pool worker's memory: after a batch of jobs that search (hybrid, the sample corpus) and answer, its
peak resident set (``VmHWM``) with the model in process and, on a third stack, with an embeddings server
(``AGENTSEARCH_EMBEDDING_URL``: Infinity from ``agentsearch.devstack.embedding_server``), where it holds no model at
all.

With ``--llm`` it measures instead jobs whose answer step asks a real LLM: ``llama-server`` with
SmolLM2-135M-Instruct (``agentsearch.devstack.llm_server``, started here with ``--slots`` slots) behind a thread-pool
worker, each job a hybrid search of the sample corpus and the model's answer, no agents. Beside jobs/s and latency it
reports how the server's slots were used (``GET /slots`` and ``GET /metrics`` sampled while the batch ran: slots busy on
average and at most, the share of the time all were busy, requests waiting for a slot) and how many answers came from
the model rather than the offline fallback: worker threads past the slots only queue at the server, where a job's
answer budget runs out, so an operator sizes ``--concurrency`` to the endpoint's slots from these figures.

    .venv/bin/python -m agentsearch.bench.concurrency --jobs 200 [--threads 64] [--json out.json]
    .venv/bin/agentsearch bench concurrency --jobs 200 --json out.json      # the same
    .venv/bin/agentsearch bench concurrency --llm --jobs 16 --threads 8 [--slots 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from agentsearch.bench import scifact
from agentsearch.bench.agents import SLEEP_S
from agentsearch.bench.common import SAMPLE_CORPUS, Target, bench_stack, ingest, job_wall_ms, summary, wait_idle
from agentsearch.devstack.embedding_server import EmbeddingServer
from agentsearch.devstack.llm_server import LLMServer

AGENTS = ["bench_sleep_pre", "bench_skip_search", "bench_sleep_post"]
SEARCH_AGENTS = ["bench_sleep_pre", "bench_sleep_post"]
QUERY = "How did the grid cope with the winter peak?"
CLIENT_THREADS = 8
POLL_BATCH = 20
DEFAULT_THREADS = 128  # WORKER_THREADS' default
LLM_SLOT_TOKENS = 2048  # each slot's context, as the LLM server's default gives it


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
    # How the answers were made (llm or extractive) and, for the offline ones, why: an LLM endpoint short of
    # slots shows here as answers whose call ran out of time.
    answers = [((j["response"] or {}).get("metadata") or {}).get("answer") or {} for j in succeeded]
    methods = Counter(str(answer.get("method")) for answer in answers)
    reasons = Counter(str(answer["fallback_reason"])[:80] for answer in answers if answer.get("fallback_reason"))
    return {"jobs": jobs, "errors": errors, **({"why": why} if why else {}), "seconds": round(seconds, 3),
            "jobs_per_s": round(len(succeeded) / seconds, 3), "p50_ms": round(latency["p50"], 1),
            "p95_ms": round(latency["p95"], 1), "answers": dict(sorted(methods.items())),
            **({"fallback_reasons": dict(reasons.most_common(4))} if reasons else {})}


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


class SlotUse:
    """The LLM server's slots sampled while a batch runs: how many were busy, and requests waiting for one."""

    def __init__(self, server: LLMServer, interval_s: float = 0.25) -> None:
        self.server, self.interval_s = server, interval_s
        self.busy: list[int] = []
        self.waiting: list[int] = []
        self.slots = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> SlotUse:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(self.interval_s):
            slots = self.server.get("/slots").json()
            self.slots = len(slots)
            self.busy.append(sum(1 for slot in slots if slot["is_processing"]))
            self.waiting.append(int(self.server.metrics().get("requests_deferred", 0)))

    def figures(self) -> dict:
        if not self.busy:
            return {"slots": self.slots, "samples": 0}
        return {"slots": self.slots, "samples": len(self.busy),
                "busy_mean": round(sum(self.busy) / len(self.busy), 2), "busy_max": max(self.busy),
                "all_busy_share": round(sum(1 for b in self.busy if b == self.slots) / len(self.busy), 3),
                "waiting_max": max(self.waiting)}


def measure_llm(jobs: int, threads: int, slots: int = 4, server_threads: int = 1, warmup: int = 2) -> dict:
    """Jobs answered by the local LLM server (``slots`` slots of ``LLM_SLOT_TOKENS``) behind a thread-pool worker
    of ``threads``, beside the prefork worker of the CPU-heavy queues: throughput, latency and the slots' use."""
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-llm-") as tmp:
        return _measure_llm(Path(tmp), jobs, threads, slots, server_threads, warmup)


def _measure_llm(workdir: Path, jobs: int, threads: int, slots: int, server_threads: int, warmup: int) -> dict:
    server = LLMServer(workdir / "llm", ctx_size=slots * LLM_SLOT_TOKENS, parallel=slots, threads=server_threads)
    stack = bench_stack(workdir / "stack", workers=1, concurrency=threads, pool="threads", queues="celery",
                        llm=server)
    with server, stack:
        index = stack.add_worker(queues="artifacts,ingest", concurrency=1, pool="prefork")
        stack.wait_worker_ready(index)
        target = Target.of(stack)
        documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
        collection_id = ingest(target, f"corpus-{time.time_ns()}", documents)
        wait_idle(stack)
        run_batch(target, collection_id, warmup, "warm-up llm", agents=[])
        before = server.metrics()
        with SlotUse(server) as use:
            figures = run_batch(target, collection_id, jobs, "llm", agents=[])
        after = server.metrics()
    seconds = figures.get("seconds") or 0
    predicted = after["tokens_predicted_total"] - before["tokens_predicted_total"]
    prompt = after["prompt_tokens_total"] - before["prompt_tokens_total"]
    return {**figures, "threads": threads, "server_threads": server_threads, "slot_tokens": LLM_SLOT_TOKENS,
            # The server's own average since it started (the warm-up's few jobs included).
            "slot_use": {**use.figures(), "busy_per_decode": round(after.get("n_busy_slots_per_decode", 0), 2)},
            "prompt_tokens": int(prompt), "predicted_tokens": int(predicted),
            "tokens_per_s": round((prompt + predicted) / seconds, 1) if seconds else None,
            "server_start_s": round(server.start_s, 2)}


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
    parser.add_argument("--llm", action="store_true", help="jobs answered by a local LLM server instead")
    parser.add_argument("--slots", type=int, default=4, help="with --llm: the LLM server's slots")
    args = parser.parse_args()
    if args.llm:
        result = measure_llm(args.jobs, args.threads, args.slots)
    else:
        result = measure(args.jobs, args.threads, remote=not args.no_remote)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result if args.llm else public(result)) + "\n")


if __name__ == "__main__":
    main()
