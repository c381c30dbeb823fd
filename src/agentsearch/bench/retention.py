"""Rows pruned per second: one retention run (``agentsearch.pipeline.operations.retention``) over a database of old
rows.

A fresh database (on the machine's PostgreSQL, ``devstack.PG_ADMIN``, or with ``--sqlite`` a SQLite file) at the
schema's head gets ``--jobs`` finished jobs ended 40 days ago, each with ``ARTIFACTS_PER_JOB`` artifacts of
``ARTIFACT_BYTES``, one webhook delivery with two attempts and one conversation turn 100 days old: all past the
default retention. As many recent rows sit beside them and stay. One run with the default settings
(``retention_batch_rows``) is timed; the figure is every row it deleted (dependants included) over its seconds,
beside its longest batch: the longest any row was held locked.

    agentsearch bench retention --jobs 10000 --json retention.json
    agentsearch bench retention --jobs 2000 --sqlite

The row builders (``job_row``, ``artifact_row``, ...) are the unit tests' too (tests/unit/operations/test_retention.py).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.operations.retention import RetentionPolicy, prune
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.conversations import ConversationRow, ConversationTurnRow
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow, JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow, WebhookRow

ARTIFACTS_PER_JOB = 2
ARTIFACT_BYTES = 4096
# Inserted this many jobs (and their rows) a transaction while seeding.
SEED_CHUNK = 1000


def job_row(collection_id: uuid.UUID, status: str, finished_at: datetime | None, **extra: Any) -> dict[str, Any]:
    """A job's columns: ended at ``finished_at`` (None: queued or running), of the local user."""
    return {"id": uuid.uuid4(), "user_id": DEFAULT_USER_ID, "collection_id": collection_id, "query": "q",
            "status": status, "request": {}, "config_snapshot": [], "finished_at": finished_at,
            "created_at": finished_at or utcnow(), **extra}


def artifact_row(job_id: uuid.UUID, number: int, size: int = ARTIFACT_BYTES) -> dict[str, Any]:
    return {"id": uuid.uuid4(), "job_id": job_id, "agent_id": "executive_summary", "type": "txt",
            "filename": f"summary-{number}.txt", "content_type": "text/plain", "size": size, "data": b"x" * size,
            "metadata_": {}}


def delivery_row(webhook_id: uuid.UUID, job_id: uuid.UUID, status: str, created_at: datetime) -> dict[str, Any]:
    return {"id": uuid.uuid4(), "webhook_id": webhook_id, "job_id": job_id, "event": "job.succeeded",
            "message_id": f"msg_{uuid.uuid4().hex}", "payload": {}, "status": status, "attempts": 2,
            "created_at": created_at}


def attempt_row(delivery_id: uuid.UUID, number: int) -> dict[str, Any]:
    return {"id": uuid.uuid4(), "delivery_id": delivery_id, "number": number, "status_code": 200}


def turn_row(conversation_id: uuid.UUID, job_id: uuid.UUID, created_at: datetime) -> dict[str, Any]:
    return {"id": uuid.uuid4(), "conversation_id": conversation_id, "job_id": job_id, "status": "succeeded",
            "question": "q", "standalone_query": "q", "answer": "a", "created_at": created_at}


def owners(s: Session) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A collection, a webhook and a conversation of the local user, for rows to belong to."""
    collection = CollectionRow(name=f"retention-{uuid.uuid4().hex[:8]}", user_id=DEFAULT_USER_ID, embedding_model="m")
    hook = WebhookRow(user_id=DEFAULT_USER_ID, url="https://receiver.example/hook", events=["job.succeeded"],
                      secret="whsec_" + "A" * 32)
    conversation = ConversationRow(user_id=DEFAULT_USER_ID, title="retention")
    s.add_all([collection, hook, conversation])
    s.flush()
    return collection.id, hook.id, conversation.id


def seed(db: Database, jobs: int, now: datetime) -> None:
    """``jobs`` jobs past retention with their rows, and as many recent ones that stay."""
    with db.session() as s:
        collection_id, webhook_id, conversation_id = owners(s)
    for start in range(0, jobs, SEED_CHUNK):
        rows: dict[type, list[dict[str, Any]]] = {JobRow: [], ArtifactRow: [], WebhookDeliveryRow: [],
                                                  WebhookAttemptRow: [], ConversationTurnRow: []}
        for _ in range(start, min(jobs, start + SEED_CHUNK)):
            for ended in (now - timedelta(days=40), now - timedelta(days=1)):
                job = job_row(collection_id, "succeeded", ended)
                delivery = delivery_row(webhook_id, job["id"], "delivered", ended)
                rows[JobRow].append(job)
                rows[ArtifactRow] += [artifact_row(job["id"], n) for n in range(ARTIFACTS_PER_JOB)]
                rows[WebhookDeliveryRow].append(delivery)
                rows[WebhookAttemptRow] += [attempt_row(delivery["id"], n) for n in (1, 2)]
                turned = ended - timedelta(days=60) if ended < now - timedelta(days=30) else ended
                rows[ConversationTurnRow].append(turn_row(conversation_id, job["id"], turned))
        with db.session() as s:
            for table, values in rows.items():
                s.execute(insert(table), values)


def row_count(db: Database) -> int:
    with db.session() as s:
        return sum(s.scalar(select(func.count()).select_from(table)) or 0
                   for table in (JobRow, ArtifactRow, WebhookDeliveryRow, WebhookAttemptRow, ConversationTurnRow))


@contextmanager
def scratch_database(sqlite: bool) -> Iterator[tuple[Database, str]]:
    """A fresh database at the schema's head, dropped afterwards; and what it is, for the figures."""
    from agentsearch.migrations import upgrade

    if sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'retention.db'}"
            upgrade(url)
            db = Database(url)
            try:
                yield db, "sqlite"
            finally:
                db.dispose()
        return
    import psycopg

    from agentsearch.devstack import PG_ADMIN

    name = f"agentsearch_bench_retention_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    try:
        upgrade(url)
        db = Database(url)
        try:
            yield db, "postgresql"
        finally:
            db.dispose()
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(jobs: int, sqlite: bool = False) -> dict[str, Any]:
    """One timed retention run over ``jobs`` old jobs and their rows (and as many recent ones)."""
    policy = RetentionPolicy.of(Settings())
    now = utcnow()
    with scratch_database(sqlite) as (db, database):
        seed(db, jobs, now)
        before = row_count(db)
        report = prune(db, policy, now=now)
        after = row_count(db)
    if before - after != report.total:
        raise RuntimeError(f"the run counted {report.total} rows but {before - after} went")
    return {"database": database, "jobs": jobs, "rows_before": before, "rows_pruned": report.total,
            "rows_kept": after, "batch_rows": policy.batch_rows, "seconds": round(report.seconds, 3),
            "longest_batch_s": round(report.longest_batch_s, 3),
            "rows_per_s": round(report.total / report.seconds) if report.seconds else None,
            "counts": report.counts}
