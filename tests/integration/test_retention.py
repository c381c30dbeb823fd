"""Retention on the real stack: jobs of every ending and one running, with artifacts, webhook deliveries and
attempts and conversation turns, backdated in PostgreSQL; `agentsearch retention run --dry-run` counts what would
go and deletes nothing; the periodic task, run by the worker as beat sends it, prunes exactly that; /metrics counts
it; the running job ends as if nothing had happened."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from celery import Celery

from tests.integration.conftest import own_collection, search, use_agents, wait_job
from tests.integration.test_metrics import scrape, total

pytestmark = pytest.mark.integration

DOCUMENTS = [
    {"id": "solar", "title": "Solar output", "text": "Solar output in 2025 rose by a fifth across the fleet."},
    {"id": "wind", "title": "Wind farms", "text": "Northwind operates three wind farms on the northern coast."},
]
RESPONDER = ["executive_summary"]  # one artifact per job
# The running job's agent sleeps past everything the test does before it looks at it again.
RUNNING_SLEEP_S = 20


def _wait_status(http: httpx.Client, job_id: str, status: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while http.get(f"/v1/jobs/{job_id}").json()["status"] != status:
        assert time.monotonic() < deadline, f"job {job_id} never {status}"
        time.sleep(0.1)


def _backdate_job(stack, job_id: str, days: int) -> None:
    assert stack.sql("UPDATE jobs SET created_at = created_at - %s * interval '1 day', "
                     "started_at = started_at - %s * interval '1 day', "
                     "finished_at = finished_at - %s * interval '1 day' WHERE id = %s RETURNING id",
                     days, days, days, job_id)


def _settle(stack, job_id: str, status: str, days: int, attempts: int) -> str:
    """The job's delivery, as if sent ``days`` ago and ended ``status`` after ``attempts`` attempts."""
    delivery_id = stack.sql("UPDATE webhook_deliveries SET status = %s, attempts = %s, next_attempt_at = NULL, "
                            "created_at = now() - %s * interval '1 day' WHERE job_id = %s RETURNING id::text",
                            status, attempts, days, job_id)[0][0]
    for number in range(1, attempts + 1):
        stack.sql("INSERT INTO webhook_attempts (id, delivery_id, number, manual, started_at, duration_ms, "
                  "status_code) VALUES (%s, %s, %s, false, now(), 12.5, %s) RETURNING id",
                  str(uuid.uuid4()), delivery_id, number, 200 if status == "delivered" else 503)
    return delivery_id


def _present(stack, table: str, ids: list[str]) -> set[str]:
    return {row[0] for row in stack.sql(f"SELECT id::text FROM {table} WHERE id::text = ANY(%s)", ids)}


def test_retention_prunes_exactly_what_is_past_it_and_the_running_job_is_left_alone(stack, collection):
    key = stack.create_user(f"retention-{uuid.uuid4().hex[:6]}")
    with stack.http(key) as http:
        user_id = http.get("/v1/me").json()["user"]["id"]
        # Every job end of this user becomes a delivery; no worker takes the webhooks queue on this stack, so each
        # stays pending until the test settles it.
        hook_id = stack.sql("INSERT INTO webhooks (id, user_id, url, events, description, secret, status, "
                            "created_at, updated_at) VALUES (%s, %s, 'http://192.0.2.1/hook', %s::jsonb, 'retention', "
                            "%s, 'active', now(), now()) RETURNING id::text", str(uuid.uuid4()), user_id,
                            json.dumps(["job.succeeded", "job.failed", "job.cancelled"]),
                            "whsec_" + "A" * 32)[0][0]
        docs = own_collection(http, f"retention-{uuid.uuid4().hex[:6]}", DOCUMENTS)
        slow = own_collection(http, f"retention-slow-{uuid.uuid4().hex[:6]}", DOCUMENTS)
        pause = own_collection(http, f"retention-pause-{uuid.uuid4().hex[:6]}")
        # A job with the collection's own agents fails (a critical agent explodes); RESPONDER replaces them.
        exploding = use_agents(http, docs, {"agent_id": "test_exploding", "name": f"x-{uuid.uuid4().hex[:6]}"})[0]
        http.put(f"/v1/collections/{docs}/agents",
                 json={"agents": [{"agent_config_id": exploding["id"], "critical": True}]}).raise_for_status()
        use_agents(http, slow, {"agent_id": "test_sleepy", "name": f"s-{uuid.uuid4().hex[:6]}",
                                "config": {"sleep_s": RUNNING_SLEEP_S}})
        use_agents(http, pause, {"agent_id": "test_sleepy", "name": f"p-{uuid.uuid4().hex[:6]}",
                                 "config": {"sleep_s": 2}})
        conversation = http.post("/v1/conversations", json={"title": "retention"}).json()["id"]

        in_conversation = {"agents": RESPONDER, "use_cache": False, "conversation_id": conversation}
        old_a = search(http, docs, "solar output in 2025", **in_conversation)
        old_b = search(http, docs, "wind farms on the coast", **in_conversation)
        kept = search(http, docs, "how much did solar output rise", **in_conversation)
        asked = f"northwind wind farms {uuid.uuid4().hex[:6]}"
        source = search(http, docs, asked, agents=RESPONDER)
        copied = http.post("/v1/search", json={"collection_id": docs, "query": asked, "agents": RESPONDER})
        assert copied.status_code == 200 and copied.json()["cached"], copied.text
        copy = copied.json()
        failed = search(http, docs, "solar output", use_cache=False)  # the critical agent explodes
        running = http.post("/v1/search", json={"collection_id": slow, "query": "wind", "use_cache": False}).json()
        cancelled = http.post("/v1/search", json={"collection_id": pause, "query": "solar", "use_cache": False}).json()
        assert http.delete(f"/v1/jobs/{cancelled['job_id']}").status_code == 202
        _wait_status(http, running["job_id"], "running")
        _wait_status(http, cancelled["job_id"], "cancelled")
        assert [j["status"] for j in (old_a, old_b, kept, source, failed)] == ["succeeded"] * 4 + ["failed"]

        ids = {name: job["job_id"] for name, job in [("old_a", old_a), ("old_b", old_b), ("kept", kept),
                                                      ("source", source), ("copy", copy), ("failed", failed),
                                                      ("running", running), ("cancelled", cancelled)]}
        # 40 days: past the 30 days of jobs and deliveries, within the 90 of turns. The cached copy and the
        # kept job stay recent; the running job started 40 days ago and is still running.
        for name in ("old_a", "old_b", "source", "failed", "cancelled", "running"):
            _backdate_job(stack, ids[name], 40)
        stack.sql("UPDATE conversation_turns SET created_at = now() - interval '100 days' WHERE job_id = %s "
                  "RETURNING id", ids["old_a"])
        stack.sql("UPDATE conversation_turns SET created_at = now() - interval '40 days' WHERE job_id = %s "
                  "RETURNING id", ids["old_b"])
        delivered = _settle(stack, ids["old_a"], "delivered", 40, attempts=2)
        given_up = _settle(stack, ids["old_b"], "failed", 40, attempts=1)
        kept_delivery = _settle(stack, ids["kept"], "delivered", 1, attempts=1)
        pending = stack.sql("UPDATE webhook_deliveries SET created_at = now() - interval '40 days' "
                            "WHERE job_id = %s RETURNING id::text", ids["failed"])[0][0]
        artifacts = dict(stack.sql("SELECT job_id::text, count(*) FROM artifacts WHERE job_id::text = ANY(%s) "
                                   "GROUP BY job_id", list(ids.values())))
        assert artifacts.get(ids["old_a"]) and artifacts.get(ids["source"]) and not artifacts.get(ids["copy"])
        turns = dict(stack.sql("SELECT job_id::text, id::text FROM conversation_turns WHERE conversation_id = %s",
                               conversation))
        assert set(turns) == {ids["old_a"], ids["old_b"], ids["kept"]}

        # The audit events of these searches are minutes old, far within the 365 days of theirs: none goes.
        expected = {"jobs": 4, "artifacts": artifacts[ids["old_a"]] + artifacts[ids["old_b"]], "agentic_loops": 0,
                    "profile_runs": 0, "webhook_deliveries": 2, "webhook_attempts": 3, "conversation_turns": 1,
                    "audit_events": 0}
        all_jobs = stack.sql("SELECT count(*) FROM jobs")[0][0]

        dry = json.loads(stack.cli("retention", "run", "--dry-run", "--json"))
        assert dry["dry_run"] and dry["counts"] == expected
        assert stack.sql("SELECT count(*) FROM jobs")[0][0] == all_jobs  # nothing deleted

        _, before = scrape(stack)
        celery = Celery(broker=stack.env["AGENTSEARCH_BROKER_URL"], backend=stack.env["AGENTSEARCH_RESULT_BACKEND"])
        # This process is no task; it may have run a worker in-process before (the unit tests' embedded apps),
        # which marks it as one for Celery's check against waiting on a result inside a task.
        pruned = celery.send_task("agentsearch.prune_retained").get(timeout=60, disable_sync_subtasks=False)
        _, after = scrape(stack)
        assert http.get(f"/v1/jobs/{ids['running']}").json()["status"] == "running"  # all along the run

        assert pruned["counts"] == expected and pruned["complete"] and not pruned["dry_run"]
        assert stack.sql("SELECT count(*) FROM jobs")[0][0] == all_jobs - expected["jobs"]
        gone = {ids[n] for n in ("old_a", "old_b", "failed", "cancelled")}
        assert _present(stack, "jobs", list(ids.values())) == set(ids.values()) - gone
        assert not stack.sql("SELECT id FROM artifacts WHERE job_id::text = ANY(%s)", list(gone))
        assert stack.sql("SELECT count(*) FROM artifacts WHERE job_id = %s", ids["source"])[0][0] == artifacts[
            ids["source"]]
        assert _present(stack, "webhook_deliveries", [delivered, given_up, kept_delivery, pending]) == {
            kept_delivery, pending}
        assert not stack.sql("SELECT id FROM webhook_attempts WHERE delivery_id::text = ANY(%s)", [delivered, given_up])
        assert _present(stack, "conversation_turns", list(turns.values())) == {turns[ids["old_b"]], turns[ids["kept"]]}
        for kind, rows in expected.items():
            assert total(after, "agentsearch_retention_pruned_total", kind=kind) - total(
                before, "agentsearch_retention_pruned_total", kind=kind) == rows, kind

        # What the user sees: a pruned job is gone; its turn outlives it; a cached copy still serves its source's
        # artifact; the running job ends as it would have.
        assert http.get(f"/v1/jobs/{ids['old_b']}").status_code == 404
        shown = http.get(f"/v1/conversations/{conversation}").json()
        assert [t["job_id"] for t in shown["turns"]] == [ids["old_b"], ids["kept"]]
        filename = source["response"]["agent_artifacts"][0]["filename"]
        assert http.get(f"/v1/jobs/{ids['copy']}/artifacts/{filename}").status_code == 200
        assert wait_job(http, ids["running"], timeout_s=RUNNING_SLEEP_S + 30)["status"] == "succeeded"
        assert http.delete(f"/v1/webhooks/{hook_id}").status_code == 204
