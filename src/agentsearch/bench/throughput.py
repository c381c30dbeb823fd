"""Benchmark 4: jobs per second with one worker process, then two, when agents wait (an LLM's latency, no CPU).

Two kinds of job, each with ``bench_sleep_pre`` and ``bench_sleep_post`` (each sleeps
``agentsearch.bench.agents.SLEEP_S``), no response agents, a query of its own, no cache:

- ``waiting``: the agents' waits are the job: ``bench_skip_search`` asks for no search, so search and the answer
  have nothing to compute (as when an LLM endpoint answers). The benchmark's goal is about this kind.
- ``with_search``: the same agents around a hybrid search of the sample corpus and the extractive answer, which
  embed text on this machine's CPU.

``--jobs`` jobs of a kind are submitted at once; throughput is jobs / (last ``finished_at`` - first ``created_at``).
The stack starts with one ``agentsearch worker --concurrency 1`` (one process), measures both kinds, then adds a
second ``agentsearch worker --concurrency 1`` (two processes, two nodes: how a deployment scales out) and measures
again. Each measurement follows an unrecorded warm-up batch, so a new process has loaded its model and connections.

    .venv/bin/python -m agentsearch.bench.throughput [--jobs 12]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime
from pathlib import Path

from agentsearch.bench.agents import SLEEP_S
from agentsearch.bench.common import SAMPLE_CORPUS, Target, bench_stack, ingest, job_wall_ms, summary, wait_idle

KINDS = {
    "waiting": ["bench_sleep_pre", "bench_skip_search", "bench_sleep_post"],
    "with_search": ["bench_sleep_pre", "bench_sleep_post"],
}
QUERY = "What was Northwind Energy's revenue in Q4 2025?"


def _batch(target: Target, collection_id: str, agents: list[str], jobs: int, tag: str, timeout_s: float = 600) -> dict:
    with target.http() as http:
        ids = []
        for i in range(jobs):
            response = http.post("/v1/search", json={"collection_id": collection_id, "query": f"{QUERY} ({tag} {i})",
                                                     "agents": agents, "use_cache": False})
            response.raise_for_status()
            ids.append(response.json()["job_id"])
        deadline = time.monotonic() + timeout_s
        finished: dict[str, dict] = {}
        while len(finished) < len(ids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(ids) - len(finished)} of {len(ids)} jobs still running")
            time.sleep(0.5)
            for job_id in ids:
                if job_id not in finished:
                    job = http.get(f"/v1/jobs/{job_id}").json()
                    if job["status"] in ("succeeded", "failed", "cancelled"):
                        if job["status"] != "succeeded":
                            raise RuntimeError(f"throughput job {job_id} ended {job['status']}: {job.get('error')}")
                        finished[job_id] = job
    first = min(datetime.fromisoformat(j["created_at"]) for j in finished.values())
    last = max(datetime.fromisoformat(j["finished_at"]) for j in finished.values())
    seconds = (last - first).total_seconds()
    return {"jobs": jobs, "seconds": round(seconds, 3), "jobs_per_s": jobs / seconds,
            "job_ms": summary([job_wall_ms(j) for j in finished.values()])}


def measure(stack, jobs: int = 12, warmup: int = 2) -> dict:
    """``stack`` has one worker of concurrency 1; a second one is added half way."""
    target = Target.of(stack)
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    collection_id = ingest(target, "throughput", documents)
    phases: dict[str, dict] = {}
    for phase in ("one_process", "two_processes"):
        if phase == "two_processes":
            index = stack.add_worker(concurrency=1)
            stack.wait_worker_ready(index)
            wait_idle(stack)
        for kind, agents in KINDS.items():
            _batch(target, collection_id, agents, warmup * (2 if phase == "two_processes" else 1), f"warm-up {phase}")
            phases.setdefault(kind, {})[phase] = _batch(target, collection_id, agents, jobs, f"{kind} {phase}")
    for figures in phases.values():
        figures["ratio"] = figures["two_processes"]["jobs_per_s"] / figures["one_process"]["jobs_per_s"]
    return {"sleep_s_per_agent": SLEEP_S, "kinds": KINDS, **phases, "ratio": phases["waiting"]["ratio"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, \
            bench_stack(Path(tmp), workers=1, concurrency=1) as stack:
        wait_idle(stack)
        print(json.dumps(measure(stack, args.jobs), indent=2))


if __name__ == "__main__":
    main()
