"""Drill 2: Redis (broker, results, caches) restarted while jobs are arriving and running.

Jobs are submitted at a steady rate; a few seconds in, Redis is stopped and started again from its append-only
file. A submission refused meanwhile (503) is sent again by the client with the same Idempotency-Key. No accepted
job may be lost; the workers and the API must reconnect by themselves.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

import httpx
import pytest

from tests.chaos.harness import (
    JOB_DEADLINE_S,
    latency_figures,
    record,
    search_body,
    side_effects,
    submit_paced,
    use_drill_agents,
)

JOBS = 60
SUBMIT_PER_S = 3.0
RESTART_AT_S = 6.0
DOWN_S = 3.0


@pytest.mark.timeout(900)
def test_no_job_is_lost_when_redis_restarts_mid_load(stack):
    stack.wait_workers_ready()
    use_drill_agents(stack, work_s=0.1)
    queries = [f"How much battery storage does Northwind operate? [redis-{uuid.uuid4().hex[:6]}-{i}]"
               for i in range(JOBS)]
    outage: dict = {}

    def restart() -> None:
        time.sleep(RESTART_AT_S)
        outage["down_at"] = datetime.now(UTC)
        stack.restart_redis(down_s=DOWN_S)
        outage["up_at"], up = datetime.now(UTC), time.monotonic()
        while True:
            try:
                if httpx.get(f"{stack.api_url}/readyz", timeout=5).status_code == 200:
                    outage["api_ready_after_s"] = round(time.monotonic() - up, 2)
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)

    restarter = threading.Thread(target=restart, daemon=True)
    restarter.start()
    ids, codes = submit_paced(stack, [search_body(stack, q) for q in queries], SUBMIT_PER_S, retry_s=120)
    restarter.join(120)
    accepted = [j for j in ids if j]
    rows = stack.wait_terminal(accepted, timeout_s=JOB_DEADLINE_S + 60)

    finished_after = sorted((r["finished_at"] - outage["up_at"]).total_seconds() for r in rows.values()
                            if r["finished_at"] and r["finished_at"] > outage["up_at"])
    lost = [j for j in accepted if rows.get(j, {}).get("status") not in ("succeeded", "failed", "cancelled")]
    statuses = Counter(r["status"] for r in rows.values())
    figures = {
        "jobs_submitted": JOBS, "jobs_accepted": len(accepted), "never_accepted": JOBS - len(accepted),
        "submit_status_codes": dict(codes), "redis_down_s": DOWN_S, "statuses": dict(statuses),
        "lost_jobs": len(lost),
        "failure_reasons": dict(Counter((r["error"] or "")[:80] for r in rows.values() if r["status"] == "failed")),
        "api_ready_after_redis_back_s": outage.get("api_ready_after_s"),
        "first_job_finished_after_redis_back_s": round(finished_after[0], 2) if finished_after else None,
        "response_side_effects": side_effects(stack, "responder", set(queries)),
        "pre_search_side_effects": side_effects(stack, "step", set(queries)),
        "latency": latency_figures(rows),
    }
    record("2_redis_restart", figures)

    assert len(accepted) == JOBS, "a client retrying its 503s must get every job in"
    assert not lost and statuses["succeeded"] == JOBS, figures["failure_reasons"]
    assert figures["api_ready_after_redis_back_s"] is not None and figures["api_ready_after_redis_back_s"] < 30
    assert figures["response_side_effects"]["duplicated_side_effects"] == 0
    assert not any(500 <= code != 503 for code in codes), codes
