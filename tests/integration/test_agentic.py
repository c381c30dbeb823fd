"""Agentic modes on the real stack: an iterative job's iterations as job progress, and profile-set runs that do not
repeat what the user was shown."""

from __future__ import annotations

import time
import uuid

import httpx
from celery import Celery

from tests.integration.conftest import search, wait_job


def test_an_iterative_job_reports_each_iteration_and_answers(stack, collection):
    with stack.http() as http:
        job = search(http, collection, "How does Northwind maintain its wind turbines?", mode="iterative",
                     use_cache=False, agents=[],
                     iterative={"target": 3, "per_iteration": 2, "max_iterations": 2, "sufficiency": False})
    assert job["status"] == "succeeded", job.get("error")
    stages = [row[0] for row in stack.sql(
        "SELECT e->>'stage' FROM jobs, jsonb_array_elements(stage_log) e WHERE id = %s", uuid.UUID(job["job_id"]))]
    # Each iteration is a step of its own, between the loop's start and the answer.
    assert stages.index("agentic") < stages.index("iteration:1") < stages.index("iteration:2") < stages.index("answer")
    loop = job["response"]["metadata"]["agentic"]["loop"]
    assert loop["iterations"] == 2 and [h["threshold"] for h in loop["history"]] == [4.0, 3.8]
    assert loop["stop_reason"] in ("target_reached", "budget_exhausted")
    assert sum(h["evaluated"] for h in loop["history"]) == 4
    assert len(job["response"]["sources"]) == min(loop["kept"], 3)
    assert stack.sql("SELECT count(*) FROM agentic_loops WHERE job_id = %s AND status = 'done'",
                     uuid.UUID(job["job_id"])) == [(1,)]


def _run(http: httpx.Client, set_id: str) -> dict:
    started = http.post(f"/v1/profile-sets/{set_id}/runs")
    assert started.status_code == 202, started.text
    job = wait_job(http, started.json()["job_id"], timeout_s=120)
    assert job["status"] == "succeeded", job.get("error")
    runs = http.get(f"/v1/profile-sets/{set_id}/runs").json()["items"]
    return next(r for r in runs if r["job_id"] == job["job_id"])


def _items(results: dict) -> set[str]:
    return {i["document_id"] for name, items in results.items()
            if name not in ("total", "by_category_count") for i in items}


def test_profile_runs_merge_by_category_and_a_second_run_repeats_nothing(stack, collection):
    body = {
        "name": f"briefing-{uuid.uuid4().hex[:6]}", "collection_id": collection, "query": "Northwind Energy",
        "profiles": [
            {"name": "finance", "query_template": "{query} quarterly revenue results", "target": 2},
            {"name": "operations", "query_template": "{query} wind turbines solar farms operations", "target": 2},
        ],
        # The sample reports are a year or two old: the recency criterion alone would keep them below 4.
        "iterative": {"max_iterations": 2, "per_iteration": 3, "sufficiency": False,
                      "thresholds": {"first": 2.0, "later": 2.0}},
    }
    with stack.http() as http:
        created = http.post("/v1/profile-sets", json=body)
        assert created.status_code == 201, created.text
        set_id = created.json()["id"]
        first = _run(http, set_id)
        results = first["results"]
        assert set(results) == {"finance", "operations", "total", "by_category_count"}
        assert results["by_category_count"] == {"finance": len(results["finance"]),
                                                "operations": len(results["operations"])}
        assert results["total"] == len(results["finance"]) + len(results["operations"]) > 0
        second = _run(http, set_id)
        assert not _items(first["results"]) & _items(second["results"])
        assert http.get(f"/v1/profile-sets/{set_id}/runs").json()["total"] == 2
        job = http.get(f"/v1/jobs/{second['job_id']}").json()
        skipped = [s for loop in job["response"]["metadata"]["agentic"]["loops"].values()
                   for h in loop["history"] for s in h["skipped_earlier"]]
        assert skipped and {s["reason"] for s in skipped} <= {"id", "url", "near_duplicate"}
    shown = stack.sql("SELECT count(*) FROM seen_content WHERE job_id = %s", uuid.UUID(first["job_id"]))[0][0]
    assert shown == len(_items(first["results"]))


def test_another_user_cannot_see_or_run_a_profile_set(stack, collection):
    with stack.http() as http:
        created = http.post("/v1/profile-sets", json={
            "name": f"private-{uuid.uuid4().hex[:6]}", "collection_id": collection,
            "profiles": [{"name": "all", "query_template": "Northwind"}]})
        assert created.status_code == 201, created.text
        set_id = created.json()["id"]
        invalid = http.post("/v1/profile-sets", json={
            "name": "bad", "collection_id": collection, "profiles": [{"name": "total"}]})
        assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"][:3] == ["body", "profiles", 0]
    with stack.http(stack.create_user(f"other-{uuid.uuid4().hex[:6]}")) as other:
        assert other.get(f"/v1/profile-sets/{set_id}").status_code == 404
        assert other.post(f"/v1/profile-sets/{set_id}/runs").status_code == 404
        assert other.get(f"/v1/profile-sets/{set_id}/runs").status_code == 404
        assert other.get("/v1/profile-sets").json() == []


def test_a_scheduled_profile_set_runs_by_itself(stack, collection):
    with stack.http() as http:
        created = http.post("/v1/profile-sets", json={
            "name": f"scheduled-{uuid.uuid4().hex[:6]}", "collection_id": collection, "schedule_s": 60,
            "profiles": [{"name": "all", "query_template": "Northwind solar", "target": 1}],
            "iterative": {"max_iterations": 1, "thresholds": {"first": 1.0, "later": 1.0}}})
        assert created.status_code == 201, created.text
        set_id = created.json()["id"]
        # Due now instead of in a minute: what the beat task looks for.
        stack.sql("UPDATE profile_sets SET next_run_at = now() - interval '1 second' WHERE id = %s RETURNING id",
                  uuid.UUID(set_id))
        # What Celery beat sends every AGENTSEARCH_PROFILE_SCHEDULE_INTERVAL_S, sent once here.
        beat = Celery(broker=stack.env["AGENTSEARCH_BROKER_URL"])
        try:
            beat.send_task("agentsearch.run_due_profile_sets")
        finally:
            beat.close()
        deadline = time.monotonic() + 120
        while True:
            runs = http.get(f"/v1/profile-sets/{set_id}/runs").json()["items"]
            if runs and runs[0]["status"] in ("succeeded", "failed"):
                break
            assert time.monotonic() < deadline, runs
            time.sleep(0.3)
        assert runs[0]["trigger"] == "schedule" and runs[0]["status"] == "succeeded", runs[0]
        assert runs[0]["results"]["total"] == 1
