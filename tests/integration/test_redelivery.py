"""At-least-once on the real stack: a job step whose worker process is SIGKILLed mid-way is handed back by its
node (acks_late + reject_on_worker_lost), runs again in a fresh process, and the job still ends exactly once."""

from __future__ import annotations

import os
import signal

from tests.integration.conftest import sleepy_job, use_agents, wait_job

QUERY = "How much battery storage does Northwind operate?"


def test_a_step_killed_with_its_process_runs_again_and_the_job_ends_once(stack, collection):
    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "test_sleepy", "config": {"sleep_s": 3}, "timeout_s": 20},
                   {"agent_id": "executive_summary"})
        job_id = sleepy_job(http, collection, QUERY)
        killed = stack.worker_children(0)
        for pid in killed:  # both pool processes: whichever runs the step dies with it
            os.kill(pid, signal.SIGKILL)
        job = wait_job(http, job_id, timeout_s=120)

    assert job["status"] == "succeeded", job["error"]
    assert [a["agent_id"] for a in job["response"]["agents"]] == ["test_sleepy", "executive_summary"]
    assert job["response"]["agents"][0]["status"] == "ok"
    assert not set(killed) & set(stack.worker_children(0)), "the pool should have been replaced"
    (attempts, stage_log), = stack.sql("SELECT attempts, stage_log FROM jobs WHERE id = %s", job_id)
    assert attempts == 1, "handed back by the node at once, not retried by the reaper"
    assert [e["stage"] for e in stage_log].count("done") == 1
    assert stack.sql("SELECT count(*) FROM artifacts WHERE job_id = %s", job_id) == [(1,)]
    assert "WorkerLostError" in stack.logs["worker-0"].read_text()
