"""Job lifecycle through the API: whole-job cache, idempotency, wait, list, events, cancel, reaper."""

from __future__ import annotations

import json
import time
import uuid

import redis

from tests.integration.conftest import search, sleepy_job, use_agents, wait_job
from tests.support.events import read_events

QUERY = "How much battery storage does Northwind operate?"


def test_identical_job_is_answered_from_the_stored_response(stack, collection):
    query = f"{QUERY} {uuid.uuid4().hex[:6]}"
    with stack.http() as http:
        first = search(http, collection, query, agents=["language_detector", "executive_summary"])
        again = http.post("/v1/search", json={"collection_id": collection, "query": query,
                                              "agents": ["language_detector", "executive_summary"]})
        # Answered in the request itself (200, succeeded), where a job that runs is 202 and queued.
        assert again.status_code == 200 and again.json()["cached"] is True and again.json()["status"] == "succeeded"
        cached = http.get(f"/v1/jobs/{again.json()['job_id']}").json()
        other_options = http.post("/v1/search", json={"collection_id": collection, "query": query, "top_k": 3,
                                                      "agents": ["language_detector", "executive_summary"]})
        artifact = http.get(cached["response"]["agent_artifacts"][0]["url"])
    assert cached["response"]["answer"] == first["response"]["answer"]
    assert cached["response"]["cached_from"] == first["job_id"] and cached["job_id"] != first["job_id"]
    assert artifact.status_code == 200 and artifact.content
    assert other_options.status_code == 202 and other_options.json()["cached"] is False
    # Nothing ran for the cached job: no Celery task touched its row.
    (started_at, finished_at), = stack.sql("SELECT started_at, finished_at FROM jobs WHERE id = %s", cached["job_id"])
    assert started_at == finished_at


def test_a_job_with_a_failed_agent_is_not_reused(stack, collection):
    query = f"{QUERY} {uuid.uuid4().hex[:6]}"
    with stack.http() as http:
        search(http, collection, query, agents=["test_exploding"])
        again = http.post("/v1/search",
                          json={"collection_id": collection, "query": query, "agents": ["test_exploding"]})
    assert again.status_code == 202 and again.json()["cached"] is False


def test_idempotency_key_returns_the_same_job(stack, collection):
    key = f"client-retry-{uuid.uuid4()}"
    body = {"collection_id": collection, "query": QUERY, "agents": [], "use_cache": False}
    with stack.http() as http:
        first = http.post("/v1/search", json=body, headers={"Idempotency-Key": key})
        second = http.post("/v1/search", json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 202 and second.status_code == 200
    assert first.json()["job_id"] == second.json()["job_id"]
    assert stack.sql("SELECT count(*) FROM jobs WHERE idempotency_key = %s", key) == [(1,)]


def test_wait_returns_the_finished_job(stack, collection):
    with stack.http() as http:
        response = http.post("/v1/search", params={"wait": 30},
                             json={"collection_id": collection, "query": QUERY, "agents": [], "use_cache": False})
    assert response.status_code == 200
    assert response.json()["status"] == "succeeded" and response.json()["response"]["answer"]


def test_jobs_are_listed_newest_first_and_filtered_by_status(stack, collection):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=[], use_cache=False)
        page = http.get("/v1/jobs", params={"limit": 5}).json()
        failed = http.get("/v1/jobs", params={"status": "failed", "limit": 200}).json()
        bad = http.get("/v1/jobs", params={"status": "exploded"})
    assert page["items"][0]["job_id"] == job["job_id"] and len(page["items"]) == 5 and page["total"] >= 5
    assert all(item["status"] == "failed" for item in failed["items"])
    assert bad.status_code == 422


def test_events_stream_stages_agents_and_the_final_status(stack, collection):
    with stack.http() as http:
        job_id = http.post("/v1/search", json={"collection_id": collection, "query": QUERY, "use_cache": False,
                                               "agents": ["language_detector", "deduplicator", "executive_summary"]}
                           ).json()["job_id"]
        events = [(name, data) for _, name, data in read_events(http, job_id, timeout_s=60)]
    kinds = [e[0] for e in events]
    assert kinds[-1] == "done" and events[-1][1]["status"] == "succeeded"
    agents = [e[1]["agent_id"] for e in events if e[0] == "agent"]
    assert agents == ["language_detector", "deduplicator", "executive_summary"]
    assert {"core_search", "done"} <= {e[1]["stage"] for e in events if e[0] == "stage"}


def test_cancel_stops_the_job_at_its_next_boundary(stack, collection):
    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "test_sleepy", "config": {"sleep_s": 5}, "timeout_s": 10},
                   {"agent_id": "executive_summary"})
        job_id = sleepy_job(http, collection, QUERY)
        assert http.delete(f"/v1/jobs/{job_id}").status_code == 202
        assert http.delete(f"/v1/jobs/{job_id}").status_code == 409
        job = wait_job(http, job_id)
    assert job["status"] == "cancelled" and job["response"] is None
    # The steps still queued were revoked: once the sleeping agent's step ends, the worker drops the next one
    # instead of running it, and nothing after it runs.
    (task_ids,), = stack.sql("SELECT task_ids FROM jobs WHERE id = %s", job_id)
    assert len(task_ids) >= 4
    steps = {f"agentsearch.{name}[{task_id}]"
             for task_id in task_ids for name in ("post_search_agent", "core_search", "generate_answer")}
    deadline = time.monotonic() + 60
    while not any(step in line for line in stack.worker_log_lines("Discarding revoked task: ") for step in steps):
        assert time.monotonic() < deadline, "the worker never dropped the cancelled job's next step"
        time.sleep(0.2)
    assert stack.sql("SELECT count(*) FROM artifacts WHERE job_id = %s", job_id) == [(0,)]


def test_a_step_records_where_it_runs_and_hands_its_output_on_unstored(stack, collection):
    results = redis.Redis.from_url(stack.env["AGENTSEARCH_RESULT_BACKEND"])

    def states(task_ids: list[str]) -> dict[str, dict]:
        raw = results.mget([f"celery-task-meta-{task_id}" for task_id in task_ids])
        return {task_id: json.loads(value) for task_id, value in zip(task_ids, raw, strict=True) if value}

    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "test_sleepy", "config": {"sleep_s": 2}, "timeout_s": 10})
        job_id = sleepy_job(http, collection, QUERY)
        (task_ids,), = stack.sql("SELECT task_ids FROM jobs WHERE id = %s", job_id)
        running = states(task_ids[:1])[task_ids[0]]
        assert wait_job(http, job_id)["status"] == "succeeded"
    # The reaper's view of a running step: started, on the worker's node (agentsearch.worker.reaper._started_nodes).
    (worker,), = stack.sql("SELECT worker FROM jobs WHERE id = %s", job_id)
    assert running["status"] == "STARTED" and running["result"]["hostname"] == worker
    # Every step of the chain ran (its start is recorded) and none stored its output: it went on in a message.
    ended = states(task_ids)
    assert set(ended) == set(task_ids)
    assert {meta["status"] for meta in ended.values()} == {"STARTED"}


def _finished_job(http, collection: str, query: str) -> str:
    job_id = http.post("/v1/search", json={"collection_id": collection, "query": query, "agents": [],
                                           "use_cache": False}).json()["job_id"]
    assert wait_job(http, job_id)["status"] == "succeeded"
    return job_id


def test_reaper_retries_a_job_whose_worker_died_once_and_fails_overdue_ones(stack, collection):
    from celery import Celery

    with stack.http() as http:
        healthy = _finished_job(http, collection, QUERY)
        overdue = _finished_job(http, collection, QUERY + " overdue")
        orphan = _finished_job(http, collection, QUERY + " orphan")
        orphan_again = _finished_job(http, collection, QUERY + " orphan again")
    # Rewind three jobs to "running" as if their workers had vanished mid-job: one past its deadline, two whose
    # node stopped heartbeating (one of them already retried once).
    rewind = ("UPDATE jobs SET status = 'running', stage = 'core_search', finished_at = NULL, response = NULL, "
              "updated_at = now() - interval '5 minutes', worker = 'w-gone@nowhere', attempts = %s, "
              "deadline_at = now() + %s * interval '1 minute' WHERE id = %s RETURNING id")
    stack.sql(rewind, 1, -1, overdue)
    stack.sql(rewind, 1, 10, orphan)
    stack.sql(rewind, 2, 10, orphan_again)
    # The periodic task itself, run by the stack's worker as beat would have it.
    celery = Celery(broker=stack.env["AGENTSEARCH_BROKER_URL"], backend=stack.env["AGENTSEARCH_RESULT_BACKEND"])
    # This process is no task; it may have run a worker in-process before (the unit tests' embedded apps),
    # which marks it as one for Celery's check against waiting on a result inside a task.
    result = celery.send_task("agentsearch.reap_jobs").get(timeout=60, disable_sync_subtasks=False)
    assert set(result["retried"]) == {orphan}
    assert set(result["failed"]) == {overdue, orphan_again}
    with stack.http() as http:
        retried = wait_job(http, orphan)
    assert retried["status"] == "succeeded" and retried["response"]["answer"]
    (attempts, log), = stack.sql("SELECT attempts, stage_log FROM jobs WHERE id = %s", orphan)
    assert attempts == 2 and any(e["stage"] == "retry" and "worker lost" in e["reason"] for e in log)
    errors = dict(stack.sql("SELECT id::text, error FROM jobs WHERE id IN (%s, %s)", overdue, orphan_again))
    assert "deadline passed in stage core_search" in errors[overdue]
    assert "w-gone@nowhere stopped in stage core_search on attempt 2" in errors[orphan_again]
    assert stack.sql("SELECT status FROM jobs WHERE id = %s", healthy) == [("succeeded",)]


def test_reaper_retries_a_queued_job_whose_message_a_dead_node_took_but_never_started(stack, collection):
    from celery import Celery

    celery = Celery(broker=stack.env["AGENTSEARCH_BROKER_URL"], backend=stack.env["AGENTSEARCH_RESULT_BACKEND"])
    results = redis.Redis.from_url(stack.env["AGENTSEARCH_RESULT_BACKEND"])
    broker = redis.Redis.from_url(stack.env["AGENTSEARCH_BROKER_URL"])
    # A live worker notes its node as a message arrives, before any thread starts the task: one due in an hour is
    # taken and held, never started, and its result names the node that holds it.
    held = celery.send_task("agentsearch.reap_documents", countdown=3600)
    try:
        deadline = time.monotonic() + 30
        while (raw := results.get(f"celery-task-meta-{held.id}")) is None:
            assert time.monotonic() < deadline, "the worker noted no receipt of the message it took"
            time.sleep(0.1)
        receipt = json.loads(raw)
        assert receipt["status"] == "RECEIVED" and receipt["result"]["hostname"].startswith("w")
    finally:
        held.revoke()
    with stack.http() as http:
        taken = _finished_job(http, collection, QUERY + " taken")
    (task_ids,), = stack.sql("SELECT task_ids FROM jobs WHERE id = %s", taken)
    # The job as a killed node leaves it: still queued (no step reported), its first message taken and unacknowledged
    # (kombu's ``unacked`` hash) by a node that stopped heartbeating, its receipt noted there, no start.
    stack.sql("UPDATE jobs SET status = 'queued', stage = NULL, finished_at = NULL, response = NULL, worker = NULL, "
              "updated_at = now() - interval '5 minutes', attempts = 1, deadline_at = now() + interval '10 minutes' "
              "WHERE id = %s RETURNING id", taken)
    results.set(f"celery-task-meta-{task_ids[0]}",
                json.dumps({"status": "RECEIVED", "result": {"hostname": "w-gone@nowhere"}, "task_id": task_ids[0]}))
    tag = f"gone-{uuid.uuid4().hex}"
    broker.hset("unacked", tag, json.dumps([{"headers": {"id": task_ids[0]}, "body": ""}, "", "celery"]))
    broker.zadd("unacked_index", {tag: time.time() - 300})
    try:
        result = celery.send_task("agentsearch.reap_jobs").get(timeout=60, disable_sync_subtasks=False)
    finally:
        broker.hdel("unacked", tag)
        broker.zrem("unacked_index", tag)
    assert taken in result["retried"]
    with stack.http() as http:
        assert wait_job(http, taken)["status"] == "succeeded"
    (log,), = stack.sql("SELECT stage_log FROM jobs WHERE id = %s", taken)
    assert any(e["stage"] == "retry" and "waiting in the queue (w-gone@nowhere)" in e["reason"] for e in log)
