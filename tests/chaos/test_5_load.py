"""Drill 5: 500 jobs submitted at once through the API.

No request may get a 5xx, every job must finish, and the job latencies (submission to end) are reported.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import httpx
import pytest

from tests.chaos.harness import JOB_DEADLINE_S, latency_figures, percentile, record, search_body, use_agents

JOBS = 500
AGENTS = ["language_detector", "executive_summary"]


async def submit_all(stack, bodies: list[dict]) -> tuple[list[str | None], Counter, list[float]]:
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=120, limits=limits,
                                 headers={"Authorization": f"Bearer {stack.api_key}"}) as client:
        async def one(body: dict) -> tuple[str | None, int, float]:
            started = time.perf_counter()
            try:
                response = await client.post("/v1/search", json=body)
            except httpx.TransportError:
                return None, 0, time.perf_counter() - started
            job_id = response.json().get("job_id") if response.status_code in (200, 202) else None
            return job_id, response.status_code, time.perf_counter() - started

        results = await asyncio.gather(*(one(b) for b in bodies))
    return [r[0] for r in results], Counter(r[1] for r in results), [r[2] for r in results]


@pytest.mark.timeout(1200)
def test_500_jobs_at_once_get_no_5xx_and_all_finish(stack):
    stack.wait_workers_ready()
    use_agents(stack)
    tag = uuid.uuid4().hex[:6]
    bodies = [search_body(stack, f"What did Northwind report about {topic}? [load-{tag}-{i}]", agents=AGENTS)
              for i, topic in zip(range(JOBS), ["revenue", "wind", "solar", "storage", "maintenance"] * JOBS)]
    started = time.monotonic()
    ids, codes, post_s = asyncio.run(submit_all(stack, bodies))
    submitted_s = time.monotonic() - started
    accepted = [j for j in ids if j]
    rows = stack.wait_terminal(accepted, timeout_s=JOB_DEADLINE_S + 120)
    drained_s = time.monotonic() - started
    statuses = Counter(r["status"] for r in rows.values())
    figures = {
        "jobs": JOBS, "agents": AGENTS, "status_codes": dict(codes),
        "server_errors": sum(n for code, n in codes.items() if code >= 500 or code == 0),
        "submit_s": round(submitted_s, 2),
        "post_p50_s": percentile(post_s, 0.5), "post_p95_s": percentile(post_s, 0.95),
        "statuses": dict(statuses),
        "failure_reasons": dict(Counter((r["error"] or "")[:80] for r in rows.values() if r["status"] == "failed")),
        "latency": latency_figures(rows), "all_done_after_s": round(drained_s, 1),
        "jobs_per_s": round(len(accepted) / drained_s, 2),
    }
    record("5_load", figures)

    assert figures["server_errors"] == 0, codes
    assert len(accepted) == JOBS and statuses["succeeded"] == JOBS, figures["failure_reasons"]
