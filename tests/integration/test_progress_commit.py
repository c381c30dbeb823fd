"""On PostgreSQL a progress report does not wait for the WAL flush; the state kept for ``assemble`` does."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from sqlalchemy import event, text

from devstack import PG_ADMIN
from pipeline.job.state import JobState
from pipeline.job.store import JobStore
from pipeline.platform.db import DEFAULT_USER_ID, Collection, Database, Job

pytestmark = pytest.mark.integration


@pytest.fixture
def database():
    name = f"agentsearch_progress_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    from migrations import upgrade

    upgrade(url)
    db = Database(url)
    yield db
    db.dispose()
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_progress_commits_without_waiting_for_the_disk_but_a_kept_state_waits(database):
    collection_id, job_id = uuid.uuid4(), uuid.uuid4()
    state = JobState(job_id=str(job_id), collection_id=str(collection_id), query="q")
    with database.session() as s:
        s.add(Collection(id=collection_id, user_id=DEFAULT_USER_ID, name="c", embedding_model="m"))
        s.flush()
        s.add(Job(id=job_id, user_id=DEFAULT_USER_ID, collection_id=collection_id, query="q", status="queued",
                  request={}, config_snapshot=[]))
    transactions: list[list[str]] = []
    event.listen(database.engine, "begin", lambda conn: transactions.append([]))
    event.listen(database.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: transactions[-1].append(statement) if transactions else None)

    store = JobStore(database)
    assert store.progress(str(job_id), "pre_search:a", state)
    assert store.progress(str(job_id), "response", state, keep_state=True)

    plain, kept = transactions
    assert plain[0] == "SET LOCAL synchronous_commit TO OFF"
    assert not [s for s in kept if "synchronous_commit" in s]
    with database.session() as s:
        job = s.get(Job, job_id)
        assert (job.status, job.stage, job.state["job_id"]) == ("running", "response", str(job_id))
        # Only for that transaction: the pooled connection commits durably again afterwards.
        assert s.execute(text("SHOW synchronous_commit")).scalar() == "on"
