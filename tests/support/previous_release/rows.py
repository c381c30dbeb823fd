"""A database's worth of rows as the previous release wrote them: what an upgrade must keep working.

A user with a key (and a revoked one), two collections, documents indexed, failed, pending and read from a file
(with the file still waiting to be parsed), agent configs on a collection (one with a fallback), jobs in every
state (queued, running, succeeded with an artifact, failed, cancelled, a cache hit) whose states and response are
those the release's own models wrote (``job_states.json``), a webhook with a delivery of each status and its
attempts, a conversation with a turn. Written with ``tests.support.schema_rows.insert_known``, which cuts each row
to the columns of the schema at hand, so the same rows go into a database at any revision.

Usage::

    with engine.begin() as conn:
        insert_known(conn, release_rows())
    http.get(f"/v1/jobs/{JOBS['succeeded']}", headers={"Authorization": f"Bearer {API_KEY}"})
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentsearch.pipeline.security.users import SHOWN_CHARS, digest
from tests.support.previous_release.capture import COLLECTION_ID, CONVERSATION_ID, JOB_ID, USER_ID
from tests.support.schema_rows import Rows

HERE = Path(__file__).resolve().parent
API_KEY = "as_previousReleaseKey0000000000000000000000"
REVOKED_KEY = "as_previousReleaseRevoked000000000000000000"
USER, COLLECTION, CONVERSATION = uuid.UUID(USER_ID), uuid.UUID(COLLECTION_ID), uuid.UUID(CONVERSATION_ID)
UPLOADS = uuid.UUID("7e57c0de-0000-4000-8000-0000000000c3")
JOBS = {status: uuid.UUID(f"7e57c0de-0000-4000-8000-0000000001{n:02d}")
        for n, status in enumerate(["running", "succeeded", "failed", "cancelled", "cached"])}
JOBS["queued"] = uuid.UUID(JOB_ID)  # the job of the release's captured messages (job_messages.json)
ARTIFACT = uuid.UUID("7e57c0de-0000-4000-8000-0000000002a1")
WEBHOOK = uuid.UUID("7e57c0de-0000-4000-8000-0000000003a1")
DELIVERIES = {status: uuid.UUID(f"7e57c0de-0000-4000-8000-0000000003{n:02d}")
              for n, status in enumerate(["delivered", "pending", "failed"], start=10)}
CONFIGS = {agent: uuid.UUID(f"7e57c0de-0000-4000-8000-0000000004{n:02d}")
           for n, agent in enumerate(["language_detector", "deduplicator", "relevance_filter", "executive_summary"])}
STAGES = {"language_detector": "pre_search", "deduplicator": "post_search", "relevance_filter": "post_search",
          "executive_summary": "response"}
# The job each delivery tells of (one delivery per webhook, job and event).
DELIVERED_FOR = {"delivered": "succeeded", "pending": "cached", "failed": "failed"}
# Documents of the indexed collection (text) and of the uploads one (each status, a file's parts and its bytes).
DOCUMENTS = {name: uuid.UUID(f"7e57c0de-0000-4000-8000-0000000005{n:02d}")
             for n, name in enumerate(["indexed", "also_indexed", "failed", "file", "pending_file"])}
MODEL = "all-MiniLM-L6-v2"  # the release's default embedding model, and the current one
SUMMARY_BYTES = b"# Q4 2025\n\nRevenue reached $412 million."


def captured() -> dict[str, Any]:
    return json.loads((HERE / "job_states.json").read_text())


def state(name: str, job_id: uuid.UUID) -> dict[str, Any]:
    """A state the release dumped (``job_states.json``), as the job ``job_id``'s."""
    return {**captured()["states"][name], "job_id": str(job_id)}


def release_rows(now: datetime | None = None) -> Rows:
    """The rows, parents first, each with every column it ever had (cut to the schema's when inserted)."""
    now = now or datetime.now(UTC)
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731 - a short name for many timestamps
    fixture = captured()
    response = copy.deepcopy(fixture["response"])
    response["job_id"] = str(JOBS["succeeded"])
    response["agent_artifacts"][0]["id"] = str(ARTIFACT)
    response["agent_artifacts"][0]["size"] = len(SUMMARY_BYTES)
    job = {"user_id": USER, "collection_id": COLLECTION, "query": fixture["states"]["queued"]["query"],
           "request": {"query": fixture["states"]["queued"]["query"], "cot": True}, "config_snapshot": fixture["specs"],
           "agent_runs": [], "timings_ms": {}, "stage_log": [], "attempts": 1, "created_at": ago(30),
           "updated_at": ago(20), "deadline_at": ago(-10)}
    return {
        "users": [{"id": USER, "name": "prev-release-user", "created_at": ago(600)}],
        "api_keys": [{"id": uuid.uuid5(USER, key), "user_id": USER, "prefix": key[:SHOWN_CHARS], "digest": digest(key),
                      "label": label, "created_at": ago(600), "revoked_at": revoked}
                     for key, label, revoked in ((API_KEY, "ci", None), (REVOKED_KEY, "old", ago(60)))],
        "collections": [
            {"id": COLLECTION, "user_id": USER, "name": "prev-corpus", "description": "indexed by the release",
             "embedding_model": MODEL, "index_epoch": 3, "created_at": ago(600),
             "stage_timeouts": {"response": 60.0}},
            {"id": UPLOADS, "user_id": USER, "name": "prev-uploads", "description": None,
             "embedding_model": MODEL, "index_epoch": 1, "created_at": ago(600),
             "stage_timeouts": None}],
        "documents": [
            _document("indexed", COLLECTION, "nw-2025-q3", "Q3 2025 revenue was $380 million.", "indexed", ago),
            _document("also_indexed", COLLECTION, "nw-board", "The board met in March.", "indexed", ago),
            {**_document("failed", UPLOADS, "broken.pdf", "", "failed", ago), "error": "broken.pdf: not a PDF"},
            {**_document("file", UPLOADS, "minutes.docx", "Minutes of the meeting.", "indexed", ago),
             "parts": [{"start": 0, "end": 23, "location": {"section": "Minutes"}}], "notes": ["1 image skipped"],
             "content_hash": "ab" * 32, "pages_done": 1, "pages_total": 1},
            {**_document("pending_file", UPLOADS, "scan.pdf", "", "pending", ago), "pages_done": 0}],
        "document_files": [{"document_id": DOCUMENTS["pending_file"], "name": "scan.pdf", "format": "pdf",
                            "data": b"%PDF-1.4 not really", "parsed": None, "created_at": ago(40)}],
        "agent_configs": [
            {"id": config_id, "user_id": USER, "agent_id": agent, "name": f"prev {agent}", "description": None,
             "config": {"threshold": 0.5} if agent == "deduplicator" else {}, "enabled": True,
             "trigger_stage": STAGES[agent], "priority": 0, "timeout_s": 20.0, "cache_ttl_s": None,
             "breaker_fail_max": 5, "breaker_reset_timeout_s": 30.0, "created_at": ago(500), "updated_at": ago(500)}
            for agent, config_id in CONFIGS.items()],
        "collection_agents": [
            {"collection_id": COLLECTION, "agent_config_id": config_id, "priority": None, "enabled": True,
             "critical": False,
             "fallback_agent_config_id": CONFIGS["relevance_filter"] if agent == "deduplicator" else None}
            for agent, config_id in CONFIGS.items() if agent != "relevance_filter"],
        "jobs": [
            {**job, "id": JOBS["queued"], "status": "queued", "initial_state": state("queued", JOBS["queued"]),
             "task_ids": [str(uuid.uuid4())]},
            {**job, "id": JOBS["running"], "status": "running", "stage": "post_search:deduplicator",
             "state": state("searched", JOBS["running"]), "initial_state": state("queued", JOBS["running"]),
             "worker": "celery@prev-release-host", "started_at": ago(29),
             "stage_log": [{"stage": "pre_search:language_detector", "at": ago(29).isoformat()}]},
            {**job, "id": JOBS["succeeded"], "status": "succeeded", "stage": "done", "response": response,
             "state": state("responded", JOBS["succeeded"]), "agent_runs": fixture["response_runs"],
             "timings_ms": {"answer": 4.0, "response": 12.0}, "cache_key": "c" * 64, "started_at": ago(29),
             "finished_at": ago(28), "stage_log": [{"stage": "done", "at": ago(28).isoformat()}]},
            {**job, "id": JOBS["failed"], "status": "failed", "stage": "core_search", "started_at": ago(29),
             "error": "agentsearch.core_search failed: SearchFailed: nothing found", "finished_at": ago(28)},
            {**job, "id": JOBS["cancelled"], "status": "cancelled", "stage": "pre_search:language_detector",
             "finished_at": ago(28)},
            {**job, "id": JOBS["cached"], "status": "succeeded", "stage": "done", "cached_from": JOBS["succeeded"],
             "response": {**response, "job_id": str(JOBS["cached"]), "cached": True}, "finished_at": ago(27)}],
        "artifacts": [{"id": ARTIFACT, "job_id": JOBS["succeeded"], "agent_id": "executive_summary", "type": "summary",
                       "filename": "executive_summary.md", "content_type": "text/markdown",
                       "size": len(SUMMARY_BYTES), "data": SUMMARY_BYTES, "metadata": {}, "created_at": ago(28)}],
        "webhooks": [{"id": WEBHOOK, "user_id": USER, "url": "https://hooks.example.org/agentsearch",
                      "events": ["job.succeeded", "job.failed"], "description": "ops", "secret": "whsec_" + "A" * 43,
                      "status": "active", "failing_since": None, "created_at": ago(500), "updated_at": ago(500)}],
        "webhook_deliveries": [
            {"id": delivery_id, "webhook_id": WEBHOOK, "job_id": JOBS[DELIVERED_FOR[status]],
             "event": "job.succeeded" if status != "failed" else "job.failed", "message_id": f"msg_{delivery_id.hex}",
             "payload": {"type": "job.succeeded", "data": {"job_id": str(JOBS["succeeded"])}}, "status": status,
             "attempts": 1 if status != "pending" else 0, "next_attempt_at": ago(-5) if status == "pending" else None,
             "sending_until": None, "last_error": "HTTP 500" if status == "failed" else None, "created_at": ago(28),
             "delivered_at": ago(27) if status == "delivered" else None}
            for status, delivery_id in DELIVERIES.items()],
        "webhook_attempts": [
            {"id": uuid.uuid5(delivery_id, "1"), "delivery_id": delivery_id, "number": 1, "manual": False,
             "started_at": ago(27), "duration_ms": 42.0, "status_code": 200 if status == "delivered" else 500,
             "error": None if status == "delivered" else "HTTP 500"}
            for status, delivery_id in DELIVERIES.items() if status != "pending"],
        "conversations": [{"id": CONVERSATION, "user_id": USER, "title": "Northwind", "created_at": ago(30),
                           "updated_at": ago(28)}],
        "conversation_turns": [{"id": uuid.uuid5(CONVERSATION, "1"), "conversation_id": CONVERSATION,
                                "job_id": JOBS["succeeded"], "status": "succeeded", "question": job["query"],
                                "standalone_query": job["query"], "answer": response["answer"],
                                "created_at": ago(28)}],
    }


def _document(name: str, collection_id: uuid.UUID, external_id: str, text: str, status: str, ago) -> dict[str, Any]:
    return {"id": DOCUMENTS[name], "collection_id": collection_id, "external_id": external_id, "title": external_id,
            "text": text, "metadata": {"source": external_id}, "status": status, "error": None,
            "created_at": ago(100), "updated_at": ago(90)}
