"""Answers that say when they go stale, on a migrated SQLite database: a job's cited versions recorded at its end, a
document indexed again at another digest or deleted marks the answers citing it, the whole-job cache skips them, a
cached copy shows its source's marks, and ``job.stale`` is written once per job for the webhooks that asked for it
(the whole road through a real stack: tests/integration/test_stale_answers.py)."""

from __future__ import annotations

import uuid
from collections import Counter
from types import SimpleNamespace

import pytest

from agentsearch.pipeline.ingestion.cited import Cited, chunk_version, mark_deleted, stale_marks
from agentsearch.pipeline.ingestion.documents import remove_document
from agentsearch.pipeline.ingestion.index_batch import mark_documents
from agentsearch.pipeline.ingestion.indexing import content_digest
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.tables.answers import JobCitationRow
from agentsearch.pipeline.platform.tables.collections import DocumentRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow, WebhookRow
from agentsearch.pipeline.webhooks import outbox
from agentsearch.pipeline.webhooks.secret import new_secret
from agentsearch.pipeline.webhooks.stale import announce_stale


@pytest.fixture
def db(migrated_db, monkeypatch):
    monkeypatch.setattr(outbox, "_listeners", [])
    return migrated_db


def _document(db, collection: uuid.UUID, external_id: str, text: str) -> tuple[uuid.UUID, str]:
    """A document indexed as ``index_batch`` ends one: its row marked with the version its chunks carry."""
    with db.session() as s:
        row = DocumentRow(collection_id=collection, external_id=external_id, title=external_id, text=text,
                          status="pending", task_id="t1")
        s.add(row)
        s.flush()
        row_id = row.id
    version = content_digest(external_id, text, None)
    mark_documents(SimpleNamespace(db=db), [row_id], "indexed", None, bump_epoch=collection, task_id="t1",
                   chunks=Counter({external_id: 1}), versions={external_id: version})
    return row_id, version


def _reindexed(db, collection: uuid.UUID, row_id: uuid.UUID, external_id: str, text: str) -> str:
    with db.session() as s:
        row = s.get(DocumentRow, row_id)
        row.text, row.status, row.task_id = text, "pending", "t2"
    version = content_digest(external_id, text, None)
    mark_documents(SimpleNamespace(db=db), [row_id], "indexed", None, bump_epoch=collection, task_id="t2",
                   chunks=Counter({external_id: 1}), versions={external_id: version})
    return version


def _answered(db, collection: uuid.UUID, cited: list[Cited], cache_key: str = "k") -> uuid.UUID:
    job_id = uuid.uuid4()
    with db.session() as s:
        JobStore(db).create(s, job_id, DEFAULT_USER_ID, collection, "q", request={}, deadline_s=600,
                            cache_key=cache_key)
    assert JobStore(db).succeed(str(job_id), {"answer": "a", "complete": True}, [], {}, cited=cited)
    return job_id


def _marks(db, *jobs: uuid.UUID) -> dict[uuid.UUID, dict[str, str]]:
    with db.session() as s:
        return stale_marks(s, jobs)


def test_a_chunk_id_carries_the_version_its_document_was_indexed_at():
    assert chunk_version("hr/leave#3fa4c1d2e0-12") == "3fa4c1d2e0"
    assert chunk_version("a#b#0123456789-0") == "0123456789"
    assert chunk_version("leave#0") is None  # a chunk of a release before versions


def test_a_document_indexed_again_with_other_content_marks_its_answers_and_the_cache_skips_them(db, collection_id):
    collection = collection_id
    leave, v1 = _document(db, collection, "leave", "Staff take twenty-eight days.")
    _, canteen_v = _document(db, collection, "canteen", "Lunch from noon.")
    job = _answered(db, collection, [Cited(collection, "leave", v1), Cited(collection, "canteen", canteen_v)])
    other = _answered(db, collection, [Cited(collection, "canteen", canteen_v)], cache_key="other")
    with db.session() as s:
        assert JobStore(db).find_cached(s, DEFAULT_USER_ID, "k").id == job
    assert _marks(db, job, other) == {}

    assert _reindexed(db, collection, leave, "leave", "Staff take twenty-eight days.") == v1  # same content
    assert _marks(db, job) == {}
    _reindexed(db, collection, leave, "leave", "Staff take thirty days.")
    assert _marks(db, job, other) == {job: {"leave": "changed"}}
    with db.session() as s:
        assert JobStore(db).find_cached(s, DEFAULT_USER_ID, "k") is None
        assert JobStore(db).find_cached(s, DEFAULT_USER_ID, "other").id == other


def test_a_deleted_document_marks_its_answers_deleted_and_a_cached_copy_shows_its_sources(db, collection_id):
    collection = collection_id
    leave, v1 = _document(db, collection, "leave", "Twenty-eight days.")
    job = _answered(db, collection, [Cited(collection, "leave", v1)])
    copy = uuid.uuid4()
    with db.session() as s:
        source = JobStore(db).find_cached(s, DEFAULT_USER_ID, "k")
        JobStore(db).create(s, copy, DEFAULT_USER_ID, collection, "q", request={}, deadline_s=600,
                            answered_from=source)
    _reindexed(db, collection, leave, "leave", "Thirty days.")
    assert _marks(db, job, copy) == {job: {"leave": "changed"}, copy: {"leave": "changed"}}
    with db.session() as s:
        remove_document(s, s.get(DocumentRow, leave))
    assert _marks(db, job, copy) == {job: {"leave": "deleted"}, copy: {"leave": "deleted"}}


def test_a_job_ending_after_its_document_changed_or_went_is_born_stale(db, collection_id):
    collection = collection_id
    leave, v1 = _document(db, collection, "leave", "Twenty-eight days.")
    _reindexed(db, collection, leave, "leave", "Thirty days.")
    # It read the old chunks while the new ones were indexed, and ended after.
    late = _answered(db, collection, [Cited(collection, "leave", v1), Cited(collection, "gone", "0123456789")])
    assert _marks(db, late) == {late: {"leave": "changed", "gone": "deleted"}}


def test_job_stale_is_written_once_per_job_for_the_webhooks_that_asked_and_names_no_content(db, collection_id):
    collection = collection_id
    leave, v1 = _document(db, collection, "leave", "Twenty-eight days.")
    _, v2 = _document(db, collection, "canteen", "Lunch from noon.")
    with db.session() as s:
        asked = WebhookRow(user_id=DEFAULT_USER_ID, url="https://hooks.example.org/h", events=["job.stale"],
                           secret=new_secret())
        s.add_all([asked, WebhookRow(user_id=DEFAULT_USER_ID, url="https://hooks.example.org/e",
                                     events=["job.succeeded"], secret=new_secret())])
        s.flush()
        asked_id = asked.id
    job = _answered(db, collection, [Cited(collection, "leave", v1), Cited(collection, "canteen", v2)])
    assert announce_stale(db) == 0
    _reindexed(db, collection, leave, "leave", "Thirty days of annual leave, a secret figure.")
    assert announce_stale(db) == 1
    with db.session() as s:
        sent = [d for d in s.query(WebhookDeliveryRow).all() if d.event == "job.stale"]
        assert [(d.webhook_id, d.job_id) for d in sent] == [(asked_id, job)]
        assert sent[0].payload["data"]["stale"] == {"leave": "changed"}
        assert "secret" not in str(sent[0].payload) and "Thirty" not in str(sent[0].payload)
        assert all(c.announced_at is not None for c in s.query(JobCitationRow).filter_by(stale="changed"))
    # A second document of the job going later adds its mark; the job is not announced twice.
    with db.session() as s:
        assert mark_deleted(s, collection, "canteen") == 1
    assert announce_stale(db) == 1
    with db.session() as s:
        assert sum(d.event == "job.stale" for d in s.query(WebhookDeliveryRow).all()) == 1
    assert _marks(db, job) == {job: {"leave": "changed", "canteen": "deleted"}}
    assert announce_stale(db) == 0
