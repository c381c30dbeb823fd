"""Benchmark 1: what one agent step costs in a job, beside one task of a bare Celery chain on the same workers.

What is measured, one job or chain at a time, on the same Redis and the same worker processes:

- jobs through the API (``POST /v1/search``, no response agents) whose first agent, ``bench_skip_search``, asks
  for no search, so every job is its agent steps plus core_search, generate_answer and assemble without their
  variable work (an embedding, a Milvus query); "with": N no-op pre-search agents after it (``bench.agents``),
  "without": none. A job's wall time is ``finished_at - created_at`` of its row: from the API creating it to
  ``assemble`` ending it. Each job has a query of its own, so no cache answers for it: every agent step takes the
  runner's whole path (breaker, cache lookup and lock, deadline thread, cache write, metrics).
- Celery chains of N + 1 and of 1 no-op tasks (``bench.noop_tasks``), sent from this process with the agent steps'
  time limits and a payload the size of a job's first state; a chain's wall time runs from just before
  ``apply_async`` to the end stamp its last task returns.

    hop = (median wall time with - median wall time without) / N

for each, and their ratio. The four kinds alternate in a rotating order, so load on the machine falls on all.

    .venv/bin/python bench/hop.py --agents 20 --jobs 30 [--json out.json]
    .venv/bin/agentsearch bench hop --agents 20 --jobs 30 --json out.json      # the same
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.agents import noop_agent_ids
from bench.common import Target, bench_stack, job_wall_ms, summary, wait_idle

BASE_AGENTS = ["bench_skip_search"]
RAW_TASK = "bench.noop"
KINDS = ("pipeline_with", "pipeline_without", "raw_with", "raw_without")


def hop_figures(agents: int, pipeline_with: list[float], pipeline_without: list[float], raw_with: list[float],
                raw_without: list[float]) -> dict[str, float]:
    """Milliseconds per hop from wall times with and without the N extra steps, and pipeline / raw."""
    if agents < 1:
        raise ValueError("the hop needs at least one agent")
    pipeline = (statistics.median(pipeline_with) - statistics.median(pipeline_without)) / agents
    raw = (statistics.median(raw_with) - statistics.median(raw_without)) / agents
    return {"pipeline_hop_ms": round(pipeline, 3), "raw_celery_hop_ms": round(raw, 3),
            "ratio": round(pipeline / raw, 3) if raw > 0 else float("inf")}


def _celery_client(target: Target):
    from celery import Celery

    client = Celery("agentsearch-bench", broker=target.broker_url, backend=target.result_backend)
    client.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    return client


def _collection(target: Target) -> str:
    """An empty collection: the jobs never search it."""
    with target.http() as http:
        created = http.post("/v1/collections", json={"name": f"bench-hop-{uuid.uuid4().hex[:8]}"})
        created.raise_for_status()
        return created.json()["id"]


def _first_state(collection_id: str) -> dict:
    """A payload the size of a job's first state, for the raw chain to carry."""
    from pipeline.job.state import JobState

    query = "benchmark solar energy raw 0000"
    return JobState(job_id=str(uuid.uuid4()), collection_id=collection_id, user_id=str(uuid.uuid4()), query=query,
                    original_query=query, collections={collection_id: 0}).dump()


def _raw_chain_ms(client, tasks: int, payload: dict) -> float:
    from celery import chain

    from worker.canvas import HARD_LIMIT_MARGIN_S, SOFT_LIMIT_MARGIN_S

    # The limits a job's agent step carries (default 30 s deadline): the pool's timer bookkeeping is Celery's cost.
    options = {"soft_time_limit": 30 + SOFT_LIMIT_MARGIN_S, "time_limit": 30 + HARD_LIMIT_MARGIN_S}
    canvas = chain(*[client.signature(RAW_TASK, options=options) for _ in range(tasks)])
    started = time.time()
    result = canvas.apply_async((payload,))
    ended = result.get(timeout=120)["at"]
    return (ended - started) * 1000


def _pipeline_job_ms(http, collection_id: str, agent_ids: list[str], query: str) -> float:
    response = http.post("/v1/search", params={"wait": 60}, json={
        "collection_id": collection_id, "query": query, "agents": BASE_AGENTS + agent_ids, "use_cache": False})
    job = response.json()
    if response.status_code != 200 or job.get("status") != "succeeded":
        raise RuntimeError(f"hop job did not succeed in time: {response.status_code} {response.text[:500]}")
    bad = [a for a in job["agents"] if a["status"] != "ok"]
    if bad:
        raise RuntimeError(f"a no-op agent did not end ok: {bad[0]}")
    return job_wall_ms(job)


def measure(target: Target, agents: int = 20, jobs: int = 30, warmup: int = 3,
            collection_id: str | None = None) -> dict:
    """Run the four kinds ``jobs`` times each (after ``warmup`` unrecorded rounds); figures and wall times."""
    agent_ids = noop_agent_ids(agents)
    collection_id = collection_id or _collection(target)
    payload = _first_state(collection_id)
    client = _celery_client(target)
    walls: dict[str, list[float]] = {kind: [] for kind in KINDS}
    try:
        with target.http() as http:
            run = {
                "pipeline_with": lambda i: _pipeline_job_ms(http, collection_id, agent_ids,
                                                            f"benchmark solar energy hop with {i}"),
                "pipeline_without": lambda i: _pipeline_job_ms(http, collection_id, [],
                                                               f"benchmark solar energy hop without {i}"),
                "raw_with": lambda i: _raw_chain_ms(client, agents + 1, payload),
                "raw_without": lambda i: _raw_chain_ms(client, 1, payload),
            }
            for i in range(-warmup, jobs):
                order = KINDS[i % len(KINDS):] + KINDS[:i % len(KINDS)]
                for kind in order:
                    ms = run[kind](i)
                    if i >= 0:
                        walls[kind].append(ms)
    finally:
        client.close()
    figures = hop_figures(agents, walls["pipeline_with"], walls["pipeline_without"], walls["raw_with"],
                          walls["raw_without"])
    return {**figures, "agents": agents, "jobs": jobs, "wall_ms": {k: summary(v) for k, v in walls.items()}}


def run_standalone(agents: int, jobs: int, attach: bool = False) -> dict:
    """On a stack of its own (Redis, PostgreSQL database, milvus-lite, one worker of two processes, the API), or
    with ``attach`` on the running one the ``AGENTSEARCH_*`` settings point to (its workers must have been started
    with ``bench.common.BENCH_ENV``)."""
    if attach:
        from pipeline.platform.settings import get_settings

        settings = get_settings()
        if not (settings.api_url and settings.api_key) or settings.embedded:
            raise RuntimeError("attach needs AGENTSEARCH_API_URL, AGENTSEARCH_API_KEY and a Redis broker "
                               "(AGENTSEARCH_BROKER_URL, AGENTSEARCH_RESULT_BACKEND)")
        return measure(Target(settings.api_url, settings.api_key, settings.broker_url, settings.result_backend),
                       agents, jobs)
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        return measure(Target.of(stack), agents, jobs)


def public(result: dict) -> dict[str, float]:
    """What ``agentsearch bench hop --json`` writes."""
    return {k: result[k] for k in ("pipeline_hop_ms", "raw_celery_hop_ms", "ratio")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--attach", action="store_true", help="use the running stack of the AGENTSEARCH_* settings")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run_standalone(args.agents, args.jobs, args.attach)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(public(result)) + "\n")


if __name__ == "__main__":
    main()
