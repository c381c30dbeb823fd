"""Drill 7: the drills of a thread-pool worker, which runs every step of many jobs in one process.

The stack is the recommended layout: a prefork worker on the CPU-heavy queues (``artifacts``, ``ingest``) and a
thread-pool worker on the job's queue. A SIGKILLed thread-pool worker takes every step it was running with it: all
of them must come back (late acknowledgement) and no stored output may be made twice. A hung agent must cost its job
no more than the agent's timeout plus 2 s, as in a prefork worker, and the hung threads it leaves behind must stay
under the cap: past it the worker finishes its steps and starts afresh.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.chaos.harness import (
    JOB_DEADLINE_S,
    REAPER_INTERVAL_S,
    ChaosStack,
    latency_figures,
    record,
    search_body,
    side_effects,
    submit,
    submit_paced,
    use_agents,
    use_drill_agents,
)

THREADS = 32
ABANDONED_CAP = 4
JOBS = 80
SUBMIT_PER_S = 8.0
# Steps running in the thread-pool worker when it is killed: every one of them has to come back.
RUNNING_AT_KILL = 4
AGENT_TIMEOUT_S = 3.0


@pytest.fixture(scope="module")
def pool_stack(tmp_path_factory):
    with ChaosStack(tmp_path_factory.mktemp("chaos-threads"), workers=1, concurrency=1, queues="artifacts,ingest",
                    extra_env={"AGENTSEARCH_WORKER_MAX_ABANDONED_THREADS": str(ABANDONED_CAP)}) as stack:
        stack.threads_index = add_thread_pool_worker(stack)
        yield stack


def add_thread_pool_worker(stack) -> int:
    index = stack.add_worker(queues="celery", concurrency=THREADS, pool="threads")
    stack.wait_worker_ready(index)
    return index


@pytest.mark.timeout(1200)
def test_a_killed_thread_pool_worker_loses_no_job(pool_stack):
    stack = pool_stack
    use_drill_agents(stack, work_s=1.0)
    tag = uuid.uuid4().hex[:6]
    queries = [f"What was Northwind Energy's revenue in 2024? [threads-kill-{tag}-{i}]" for i in range(JOBS)]
    kills: list[tuple[int, float]] = []
    started = time.monotonic()

    def kill_then_replace() -> None:
        stack.wait_calls("step", set(queries), at_least=RUNNING_AT_KILL, in_flight=True)
        victim = stack.threads_index
        kills.append((stack.worker_procs[victim].pid, time.time()))
        stack.kill_worker(victim, signal.SIGKILL)
        stack.wait_worker_gone(victim)
        stack.threads_index = add_thread_pool_worker(stack)

    with ThreadPoolExecutor(1) as killer:
        killed = killer.submit(kill_then_replace)
        ids, codes = submit_paced(stack, [search_body(stack, q) for q in queries], SUBMIT_PER_S)
        killed.result()
    accepted = [j for j in ids if j]
    rows = stack.wait_terminal(accepted, timeout_s=2 * JOB_DEADLINE_S + 4 * REAPER_INTERVAL_S)
    statuses = Counter(r["status"] for r in rows.values())
    lost = [j for j in accepted if rows.get(j, {}).get("status") not in ("succeeded", "failed", "cancelled")]
    failed_without_reason = [r["id"] for r in rows.values() if r["status"] == "failed" and not r["error"]]
    succeeded = [r for r in rows.values() if r["status"] == "succeeded"]
    records_twice = [r["id"] for r in succeeded
                     if Counter(a["agent_id"] for a in r["agent_runs"]).most_common(1)[0][1] > 1]
    artifacts = dict(stack.sql("SELECT job_id::text, count(*) FROM artifacts WHERE job_id = ANY(%s::uuid[]) "
                               "AND filename = 'chaos.txt' GROUP BY job_id", accepted))
    figures = {
        "jobs_submitted": JOBS, "jobs_accepted": len(accepted), "submit_status_codes": dict(codes),
        "statuses": dict(statuses), "lost_jobs": len(lost), "failed_without_reason": len(failed_without_reason),
        "failure_reasons": dict(Counter((r["error"] or "")[:80] for r in rows.values() if r["status"] == "failed")),
        "jobs_retried_by_reaper": sum(1 for r in rows.values() if r["attempts"] > 1),
        "pre_search_side_effects": side_effects(stack, "step", set(queries), kills, one_task_per_process=False),
        "succeeded_without_artifact": sum(1 for r in succeeded if artifacts.get(r["id"], 0) == 0),
        "artifact_rows_over_one_per_job": sum(1 for n in artifacts.values() if n > 1),
        "agent_recorded_twice_in_a_job": len(records_twice),
        "latency": latency_figures(rows), "drill_s": round(time.monotonic() - started, 1),
    }
    record("7a_thread_pool_kill", figures)

    assert not lost and not failed_without_reason
    # The kill lands while steps are running: some of them must run again, and none whose output was stored.
    assert figures["pre_search_side_effects"]["jobs_with_a_call_started_again"] > 0
    assert figures["pre_search_side_effects"]["duplicated_with_output_stored"] == 0
    assert figures["artifact_rows_over_one_per_job"] == 0 and figures["succeeded_without_artifact"] == 0
    assert not records_twice


def _abandoned(stack) -> dict[str, float]:
    text = httpx.get(f"{stack.api_url}/metrics", timeout=10).text
    return {f"{s.name}{{{s.labels.get('worker')}}}": s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name.startswith("agentsearch_worker_")}


@pytest.mark.timeout(900)
def test_hung_agents_in_a_thread_pool_cost_their_timeout_and_stay_under_the_cap(pool_stack):
    stack = pool_stack
    tag = uuid.uuid4().hex[:6]
    use_agents(stack, {"agent_id": "chaos_hang", "timeout_s": AGENT_TIMEOUT_S})
    pid = stack.worker_procs[stack.threads_index].pid

    def run(queries: list[str]) -> dict[str, dict]:
        with stack.http() as http:
            ids = [submit(http, search_body(stack, query))[0] for query in queries]
        return stack.wait_terminal(ids, timeout_s=600)

    def seconds(rows: dict[str, dict]) -> list[float]:
        return sorted(round((r["finished_at"] - r["created_at"]).total_seconds(), 2) for r in rows.values())

    # Below the cap, one at a time: each hung agent costs its job its timeout, plus the job's own steps.
    below = {}
    for i in range(ABANDONED_CAP - 1):
        below.update(run([f"Northwind revenue 2025 [hang-{tag}-{i}]"]))
    # Then more at once than the cap allows: the worker finishes its steps, starts afresh, and goes on.
    past = run([f"Northwind revenue 2025 [hang-past-{tag}-{i}]" for i in range(ABANDONED_CAP + 2)])
    metrics = _abandoned(stack)
    figures = {"agent_timeout_s": AGENT_TIMEOUT_S, "cap": ABANDONED_CAP, "job_s_one_at_a_time": seconds(below),
               "job_s_past_the_cap": seconds(past),
               "statuses": dict(Counter(r["status"] for r in [*below.values(), *past.values()])),
               "agent_status": dict(Counter(a["status"] for r in [*below.values(), *past.values()]
                                            for a in r["agent_runs"] if a["agent_id"] == "chaos_hang")),
               "metrics": metrics}
    record("7b_thread_pool_hung_agents", figures)

    assert figures["statuses"] == {"succeeded": 2 * ABANDONED_CAP + 1}
    assert figures["agent_status"] == {"timeout": 2 * ABANDONED_CAP + 1}
    assert max(figures["job_s_one_at_a_time"]) <= AGENT_TIMEOUT_S + 2
    # The worker passed the cap and started afresh in the same process; what it holds now is below the cap.
    recycles = next(k for k in metrics if k.startswith("agentsearch_worker_recycles_total") and k.endswith(f":{pid}}}"))
    assert metrics[recycles] >= 1
    assert metrics[recycles.replace("recycles_total", "abandoned_threads")] < ABANDONED_CAP
    assert stack.worker_procs[stack.threads_index].poll() is None
