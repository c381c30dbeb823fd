"""A collection's ingestion progress (``agentsearch.pipeline.ingestion.progress``): the arithmetic of the rate and the
time left,
and which documents make the current ingestion, read from document rows in SQLite."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, select, update

from agentsearch.pipeline.ingestion.progress import MIN_SPAN_S, RATE_WINDOW_S, Ended, collection_progress, estimate
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.collections import DocumentRow

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def test_the_time_left_is_what_is_pending_at_the_recent_rate_of_documents():
    progress = estimate(pending=60, done=Ended(40, 160, failed=1), recent=Ended(20, 100), span_s=10.0,
                        started_at=T0)
    assert (progress.documents_done, progress.documents_total, progress.documents_failed) == (40, 100, 1)
    assert (progress.pending, progress.chunks) == (60, 160)
    assert progress.documents_per_s == 2.0 and progress.chunks_per_s == 10.0
    assert progress.eta_s == 30.0
    assert progress.started_at == T0


def test_no_time_left_when_nothing_is_pending_and_none_before_anything_ended():
    finished = estimate(pending=0, done=Ended(100, 400), recent=Ended(50, 200), span_s=25.0, started_at=T0)
    assert finished.eta_s is None and finished.documents_per_s == 2.0 and finished.chunks_per_s == 8.0
    waiting = estimate(pending=100, done=Ended(0, 0), recent=Ended(0, 0), span_s=12.0, started_at=T0)
    assert waiting.documents_per_s is None and waiting.chunks_per_s is None and waiting.eta_s is None
    assert waiting.documents_total == 100


def test_a_rate_over_a_moment_counts_at_least_a_second():
    progress = estimate(pending=10, done=Ended(5, 5), recent=Ended(5, 5), span_s=0.01, started_at=T0)
    assert progress.documents_per_s == 5 / MIN_SPAN_S
    assert progress.eta_s == 2.0


@pytest.fixture
def db(migrated_db):
    return migrated_db


def _documents(db, collection_id, n: int, queued_s: float, ended_s: list[float] | None = None, chunks: int = 3,
               status: str = "indexed") -> None:
    """``n`` documents queued ``queued_s`` after T0; the i-th ended ``ended_s[i]`` after T0 (pending without)."""
    with db.session() as s:
        for i in range(n):
            ended = ended_s[i] if ended_s is not None else None
            s.add(DocumentRow(collection_id=collection_id, external_id=uuid.uuid4().hex, text="t",
                              queued_at=T0 + timedelta(seconds=queued_s),
                              status=status if ended is not None else "pending",
                              finished_at=T0 + timedelta(seconds=ended) if ended is not None else None,
                              chunks=chunks if ended is not None and status == "indexed" else None))


def _progress(db, collection_id, at_s: float):
    with db.session() as s:
        return collection_progress(s, collection_id, now=T0 + timedelta(seconds=at_s))


def test_a_collection_never_ingested_into_shows_nothing(db, collection_id):
    progress = _progress(db, collection_id, 0)
    assert progress.documents_total == 0 and progress.started_at is None and progress.eta_s is None


def test_an_upload_under_way_counts_what_ended_since_it_began_and_its_rate_over_the_last_minute(db, collection_id):
    collection = collection_id
    _documents(db, collection, 50, queued_s=-3600, ended_s=[-3500] * 50)  # an earlier ingestion, long over
    _documents(db, collection, 30, queued_s=0, ended_s=[10] * 10 + [70] * 20)
    _documents(db, collection, 2, queued_s=0, ended_s=[75, 75], status="failed")
    _documents(db, collection, 68, queued_s=0)
    progress = _progress(db, collection, 80)
    assert (progress.documents_done, progress.documents_total, progress.pending) == (32, 100, 68)
    assert progress.documents_failed == 2 and progress.chunks == 90
    # The last 60 s: the 20 indexed at 70 s and the 2 failed at 75 s (the 10 of 10 s are older).
    assert progress.documents_per_s == pytest.approx(22 / RATE_WINDOW_S)
    assert progress.chunks_per_s == pytest.approx(60 / RATE_WINDOW_S)
    assert progress.eta_s == pytest.approx(68 / (22 / RATE_WINDOW_S))
    assert progress.started_at == T0


def test_a_second_upload_joins_the_one_under_way_and_the_rate_counts_from_its_start(db, collection_id):
    collection = collection_id
    _documents(db, collection, 10, queued_s=0, ended_s=[4] * 10)
    _documents(db, collection, 10, queued_s=2)          # sent while the first was indexed
    progress = _progress(db, collection, 5)
    assert (progress.documents_done, progress.documents_total) == (10, 20)
    assert progress.documents_per_s == pytest.approx(10 / 5) and progress.eta_s == pytest.approx(5.0)


def test_once_nothing_is_pending_the_last_ingestion_stays_shown_whole_with_no_time_left(db, collection_id):
    collection = collection_id
    _documents(db, collection, 5, queued_s=-600, ended_s=[-590] * 5)   # before it: not part of it
    _documents(db, collection, 40, queued_s=0, ended_s=[10] * 20 + [20] * 20)
    _documents(db, collection, 10, queued_s=15, ended_s=[30] * 10)    # sent while the first 40 were pending
    progress = _progress(db, collection, 3600)
    assert (progress.documents_done, progress.documents_total, progress.pending) == (50, 50, 0)
    assert progress.chunks == 150 and progress.eta_s is None
    # Measured up to the last end (30 s), not to now: the rate the ingestion went at.
    assert progress.documents_per_s == pytest.approx(50 / 30) and progress.chunks_per_s == pytest.approx(150 / 30)
    assert progress.started_at == T0


def test_documents_ended_while_the_progress_is_read_are_counted_once_and_their_rate_with_them(db, collection_id):
    # An upload of 100 under way, and a worker that ends 10 more of them after each statement the progress reads:
    # whatever moment the figures are of, they are of one (100 in all, the recent ends among those done).
    _documents(db, collection_id, 100, queued_s=0)
    with db.session() as s:
        waiting = list(s.scalars(select(DocumentRow.id).where(DocumentRow.collection_id == collection_id)))
    worker = Database(db.url)

    def end_ten(_conn, _cursor, statement: str, *_args) -> None:
        if not statement.lstrip().upper().startswith("SELECT") or not waiting:
            return
        batch = [waiting.pop() for _ in range(10)]
        with worker.session() as w:
            w.execute(update(DocumentRow).where(DocumentRow.id.in_(batch)).values(
                status="indexed", chunks=2, finished_at=T0 + timedelta(seconds=20)))

    event.listen(db.engine, "after_cursor_execute", end_ten)
    try:
        progress = _progress(db, collection_id, 30)
    finally:
        event.remove(db.engine, "after_cursor_execute", end_ten)
        worker.dispose()
    assert progress.documents_done > 0 and progress.documents_total == 100
    assert progress.pending == 100 - progress.documents_done and progress.chunks == 2 * progress.documents_done
    # All of them ended within the last minute: the rate counts each done, over the 30 s since the upload began.
    assert progress.documents_per_s == pytest.approx(progress.documents_done / 30)
    assert progress.eta_s == pytest.approx(progress.pending / progress.documents_per_s)
