"""Drill 3: PostgreSQL stopped while jobs run, then started again.

While it is down, ``POST /v1/search`` must answer 503 (never another 5xx) and write nothing; once it is back, the
jobs that were in flight must finish (their steps wait for the database with backoff) or be reaped.
"""

from __future__ import annotations

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
    wait_until,
)

IN_FLIGHT = 12
DOWN_S = 15.0


@pytest.mark.timeout(900)
def test_postgres_stopped_answers_503_and_jobs_in_flight_finish_after(stack):
    stack.wait_workers_ready()
    use_drill_agents(stack, work_s=1.0)  # slow enough that jobs are mid-way when the database goes
    tag = uuid.uuid4().hex[:6]
    queries = [f"What is Northwind's wind capacity? [pg-{tag}-{i}]" for i in range(IN_FLIGHT)]
    ids, _ = submit_paced(stack, [search_body(stack, q) for q in queries], per_second=6)
    stack.wait_calls("step", set(queries), in_flight=True)

    down_at = datetime.now(UTC)
    stack.stop_postgres("fast")
    codes, ready_codes, read_codes = Counter(), Counter(), Counter()
    with stack.http(timeout_s=30) as http:
        until = time.monotonic() + DOWN_S
        n = 0
        while time.monotonic() < until:
            body = search_body(stack, f"Submitted while the database is down [pg-{tag}-down-{n}]")
            codes[http.post("/v1/search", json=body).status_code] += 1
            read_codes[http.get(f"/v1/jobs/{ids[0]}").status_code] += 1
            ready_codes[httpx.get(f"{stack.api_url}/readyz", timeout=10).status_code] += 1
            n += 1
            # The probes' pace while the outage lasts its DOWN_S: the outage's length is the drill's fault.
            time.sleep(0.5)
        stack.start_postgres()  # pg_ctl -w: back once it takes connections
        up_at, up = datetime.now(UTC), time.monotonic()
        wait_until(lambda: http.post("/v1/search", json=search_body(stack, f"Back [pg-{tag}-up]")).status_code == 202,
                   60, "the API taking jobs again after PostgreSQL came back")
        api_back_s = round(time.monotonic() - up, 2)

    rows = stack.wait_terminal(ids, timeout_s=JOB_DEADLINE_S + 60)
    # Nothing half-written: no job row from the outage, none accepted without its tasks.
    written_while_down = stack.sql("SELECT count(*) FROM jobs WHERE query LIKE %s", f"%[pg-{tag}-down-%")[0][0]
    without_tasks = stack.sql("SELECT count(*) FROM jobs WHERE query LIKE %s AND task_ids IS NULL",
                              f"%[pg-{tag}-%")[0][0]
    artifacts = dict(stack.sql("SELECT job_id::text, count(*) FROM artifacts WHERE job_id = ANY(%s::uuid[]) "
                               "GROUP BY job_id", ids))
    finished_after = sorted((r["finished_at"] - up_at).total_seconds() for r in rows.values()
                            if r["finished_at"] and r["finished_at"] > up_at)
    in_flight_at_stop = sum(1 for r in rows.values() if r["finished_at"] is None or r["finished_at"] > down_at)
    statuses = Counter(r["status"] for r in rows.values())
    figures = {
        "postgres_down_s": DOWN_S, "submit_codes_while_down": dict(codes), "read_codes_while_down": dict(read_codes),
        "readyz_codes_while_down": dict(ready_codes), "job_rows_written_while_down": written_while_down,
        "jobs_without_tasks": without_tasks, "api_took_jobs_again_after_s": api_back_s,
        "jobs_in_flight_at_stop": in_flight_at_stop, "statuses": dict(statuses),
        "failure_reasons": dict(Counter((r["error"] or "")[:80] for r in rows.values() if r["status"] == "failed")),
        "agent_errors": dict(Counter(f"{a['agent_id']}: {(a.get('errors') or [''])[0][:60]}"
                                     for r in rows.values() for a in r["agent_runs"] or []
                                     if a.get("status") == "error")),
        "succeeded_without_artifact": sum(1 for r in rows.values()
                                          if r["status"] == "succeeded" and not artifacts.get(r["id"])),
        "last_job_finished_after_postgres_back_s": round(finished_after[-1], 2) if finished_after else None,
        "response_side_effects": side_effects(stack, "responder", set(queries)),
        "latency": latency_figures(rows),
    }
    record("3_postgres_stop", figures)

    assert set(codes) == {503}, codes
    assert written_while_down == 0 and without_tasks == 0
    assert all(r["status"] in ("succeeded", "failed") for r in rows.values())
    assert all(r["error"] for r in rows.values() if r["status"] == "failed")
    assert figures["response_side_effects"]["duplicated_side_effects"] == 0
    assert not figures["agent_errors"] and figures["succeeded_without_artifact"] == 0
