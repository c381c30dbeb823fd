"""Drill 2: Redis (broker, results, caches) restarted for 10 s while jobs are arriving and running.

The stack has two worker nodes of two prefork processes each, as deployed. Jobs (the drill's pre-search agent, then
its response agent in the chord that ends every job, both with a 10 s timeout) are submitted at a steady rate. Once
a node has one process in a response agent's call and the other one free, Redis is stopped and started again 10 s
later from its append-only file. A submission refused meanwhile (503) is sent again by the client with the same
Idempotency-Key. Every worker node must come back by itself (alive, answering ``inspect ping``) and every accepted
job must succeed.

Why that moment: a node with one process busy and the other waiting on BRPOP is the one whose broker connection,
taken apart when Redis goes, still holds an unacknowledged message (``agentsearch.worker.redis_broker``): kombu ended
such a worker. With one process per node (as this drill had), a node is busy (no BRPOP) or free (nothing unacknowledged)
and never meets it. Why 10 s and a 10 s agent timeout: a response agent that ends while Redis is away stores its
result when Redis is back, inside its time limit (it was 15 s for a 10 s agent); a 3 s outage and a 60 s timeout (as
this drill had) left that limit far away.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

import httpx
import pytest
from celery import Celery

from agentsearch.devstack import wait_for
from tests.chaos.harness import (
    JOB_DEADLINE_S,
    ChaosStack,
    latency_figures,
    record,
    search_body,
    side_effects,
    submit_paced,
    use_agents,
)

NODES = 2
PROCESSES = 2
JOBS = 30
# Below what the four processes can take (a job keeps one busy for about 4.5 s): processes are often free between
# jobs, and the moment the outage waits for comes within seconds.
SUBMIT_PER_S = 0.75
# Response agents in a call when Redis stops: their chords wait on results stored while Redis is away.
RESPONDERS_AT_STOP = 2
DOWN_S = 10.0
STEP_WORK_S = 0.5
RESPONDER_WORK_S = 3.0
# The agents' timeout, short as a deployment's may be: Celery's soft limit was 5 s above it, and a result stored
# while Redis was away could not wait for it; agentsearch.worker.job_tasks now leaves
# agentsearch.worker.app.REDIS_OUTAGE_WAIT_S more.
AGENT_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def redis_stack(tmp_path_factory):
    with ChaosStack(tmp_path_factory.mktemp("chaos-redis"), workers=NODES, concurrency=PROCESSES) as stack:
        yield stack


def pids_in_a_call(stack: ChaosStack, name: str) -> set[int]:
    """The processes in a call of the drill agent ``name`` now (started and not done), by its call log."""
    calls = Counter((e["pid"], e["event"]) for e in stack.events(name))
    return {pid for (pid, event), n in calls.items() if event == "start" and n > calls[(pid, "done")]}


def nodes_half_busy(stack: ChaosStack) -> list[int]:
    """The nodes with one process in a response agent's call and the other in no drill agent's call."""
    responding = pids_in_a_call(stack, "responder")
    busy = responding | pids_in_a_call(stack, "step")
    return [i for i in stack.alive_workers()
            if len(children := set(stack.worker_children(i))) == PROCESSES
            and len(children & responding) == 1 and len(children & busy) == 1]


def nodes_answering(stack: ChaosStack, ping: Celery) -> set[str]:
    """The worker nodes that answer ``inspect ping`` now."""
    replies = ping.control.ping(destination=list(stack.worker_names), timeout=1.0)
    return {name for reply in replies for name in reply} & set(stack.worker_names)


@pytest.mark.timeout(900)
def test_every_worker_and_every_job_outlive_a_redis_restart(redis_stack):
    stack = redis_stack
    use_agents(stack, *({"agent_id": agent_id, "timeout_s": AGENT_TIMEOUT_S,
                         "config": {"log_dir": str(stack.call_logs), "work_s": work_s}}
                        for agent_id, work_s in (("chaos_step", STEP_WORK_S), ("chaos_responder", RESPONDER_WORK_S))))
    tag = uuid.uuid4().hex[:6]
    queries = [f"How much battery storage does Northwind operate? [redis-{tag}-{i}]" for i in range(JOBS)]
    outage: dict = {}

    def restart() -> None:
        wait_for(lambda: nodes_half_busy(stack) and len(pids_in_a_call(stack, "responder")) >= RESPONDERS_AT_STOP,
                 120, f"a node with one process in a response agent and one free, {RESPONDERS_AT_STOP} in all")
        outage["nodes_half_busy"] = len(nodes_half_busy(stack))
        outage["responders_running"] = len(pids_in_a_call(stack, "responder"))
        outage["jobs_in_flight"] = stack.sql(
            "SELECT count(*) FROM jobs WHERE query LIKE %s AND status NOT IN ('succeeded', 'failed', 'cancelled')",
            f"%[redis-{tag}-%")[0][0]
        outage["down_at"] = datetime.now(UTC)
        stack.restart_redis(down_s=DOWN_S)  # the outage's length is the fault itself, not a state to wait for
        outage["up_at"], up = datetime.now(UTC), time.monotonic()
        wait_for(lambda: httpx.get(f"{stack.api_url}/readyz", timeout=5).status_code == 200, 60, "the API ready")
        outage["api_ready_after_s"] = round(time.monotonic() - up, 2)

    restarter = threading.Thread(target=restart, daemon=True)
    restarter.start()
    ids, codes = submit_paced(stack, [search_body(stack, q) for q in queries], SUBMIT_PER_S, retry_s=120)
    restarter.join(180)
    assert "up_at" in outage, "Redis was never restarted: no node was half busy"
    accepted = [j for j in ids if j]
    ping = Celery(broker=stack.env["AGENTSEARCH_BROKER_URL"])
    try:
        try:
            wait_for(lambda: nodes_answering(stack, ping) == set(stack.worker_names), 60,
                     "every worker node answering inspect ping")
        except TimeoutError:
            pass  # asserted below, with the figures recorded first
        answering = nodes_answering(stack, ping)
    finally:
        ping.close()
    # With a node gone the jobs would wait for their deadline: the figures are taken without waiting that long.
    everyone_back = answering == set(stack.worker_names)
    rows = stack.wait_terminal(accepted, timeout_s=JOB_DEADLINE_S + 60 if everyone_back else 30)

    finished_after = sorted((r["finished_at"] - outage["up_at"]).total_seconds() for r in rows.values()
                            if r["finished_at"] and r["finished_at"] > outage["up_at"])
    lost = [j for j in accepted if rows.get(j, {}).get("status") not in ("succeeded", "failed", "cancelled")]
    statuses = Counter(r["status"] for r in rows.values())
    figures = {
        "worker_nodes": NODES, "processes_per_node": PROCESSES, "redis_down_s": DOWN_S,
        "agent_timeout_s": AGENT_TIMEOUT_S, "nodes_half_busy_at_stop": outage["nodes_half_busy"],
        "responders_running_at_stop": outage["responders_running"], "jobs_in_flight_at_stop": outage["jobs_in_flight"],
        "jobs_submitted": JOBS, "jobs_accepted": len(accepted), "never_accepted": JOBS - len(accepted),
        "submit_status_codes": dict(codes), "statuses": dict(statuses), "lost_jobs": len(lost),
        "failure_reasons": dict(Counter((r["error"] or "")[:120] for r in rows.values() if r["status"] == "failed")),
        "worker_nodes_alive": len(stack.alive_workers()),
        "worker_nodes_answering_ping": len(answering),
        "unrecoverable_errors": stack.worker_log_lines("Unrecoverable error"),
        "api_ready_after_redis_back_s": outage.get("api_ready_after_s"),
        "first_job_finished_after_redis_back_s": round(finished_after[0], 2) if finished_after else None,
        "last_job_finished_after_redis_back_s": round(finished_after[-1], 2) if finished_after else None,
        "response_side_effects": side_effects(stack, "responder", set(queries)),
        "pre_search_side_effects": side_effects(stack, "step", set(queries)),
        "latency": latency_figures(rows),
    }
    record("2_redis_restart", figures)

    assert figures["worker_nodes_alive"] == NODES, figures["unrecoverable_errors"]
    assert answering == set(stack.worker_names), f"not answering ping: {set(stack.worker_names) - answering}"
    assert len(accepted) == JOBS, "a client retrying its 503s must get every job in"
    assert not lost and statuses["succeeded"] == JOBS, figures["failure_reasons"]
    assert figures["api_ready_after_redis_back_s"] < 30
    assert figures["response_side_effects"]["duplicated_side_effects"] == 0
    assert not any(500 <= code != 503 for code in codes), codes
