"""How far a collection's ingestion is, and when it should end: documents and chunks done, the rate, the time left.

The current ingestion is what was pending when documents were last queued, with everything that ended since the
oldest of those was queued (``started_at``): ``documents_total`` is what is pending now plus what ended since then,
so a second upload sent while the first is indexed joins it, and once nothing is pending the last ingestion stays
shown, whole. The rate is that of the documents that ended in the last ``RATE_WINDOW_S`` (or since the ingestion
began, when that is shorter), up to now while anything is pending and up to the last document's end after; the time
left is what is pending at that rate of documents: null when nothing is pending, or when nothing has ended yet to
measure a rate by.

Usage::

    with db.session() as s:
        collection_progress(s, collection_id)      # IngestionProgress(documents_done=40, documents_total=100, ...)
    estimate(pending=60, done=Ended(40, 160, failed=1), recent=Ended(40, 160), span_s=20.0,
             started_at=started)                   # 2 documents and 8 chunks a second, eta_s=30.0
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field
from sqlalchemy import ColumnElement, and_, case, func, or_, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.collections import DocumentRow

# Long enough to hold several tasks' ends (a task of 32 small documents takes seconds), short enough that the time
# left follows a change of pace: another worker started, or a run of large documents.
RATE_WINDOW_S = 60.0
# A rate over less than this is mostly the luck of which task ended first.
MIN_SPAN_S = 1.0


class IngestionProgress(BaseModel):
    """A collection's current ingestion (``agentsearch.pipeline.ingestion.progress``)."""

    documents_done: int = Field(0, description="Documents of the current ingestion that ended, indexed or failed.")
    documents_total: int = Field(0, description="Documents of the current ingestion: pending now and ended since "
                                                "it began.")
    documents_failed: int = Field(0, description="Of the documents done, those that failed (their reasons are in "
                                                 "the documents listing).")
    pending: int = Field(0, description="Documents pending now: waiting for a worker, parsed or indexed.")
    chunks: int = Field(0, description="Chunks indexed of the documents done.")
    documents_per_s: float | None = Field(None, description=f"Documents ended a second over the last "
                                                            f"{RATE_WINDOW_S:g} s; null before the first.")
    chunks_per_s: float | None = Field(None, description="Chunks indexed a second, over the same window.")
    eta_s: float | None = Field(None, description="Seconds until nothing is pending at that rate; null when "
                                                  "nothing is pending or there is no rate yet.")
    started_at: datetime | None = Field(None, description="When the oldest document of the current ingestion was "
                                                          "queued; null when the collection never had one.")


@dataclass(frozen=True)
class Ended:
    """Documents that ended, with their chunks and how many of them failed."""

    documents: int
    chunks: int
    failed: int = 0


def estimate(pending: int, done: Ended, recent: Ended, span_s: float,
             started_at: datetime | None) -> IngestionProgress:
    """The progress of ``pending`` documents after ``done`` ended, ``recent`` of them in the last ``span_s``."""
    span = max(span_s, MIN_SPAN_S)
    documents_per_s = recent.documents / span if recent.documents > 0 else None
    chunks_per_s = recent.chunks / span if recent.documents > 0 else None
    return IngestionProgress(
        documents_done=done.documents, documents_total=pending + done.documents, documents_failed=done.failed,
        pending=pending, chunks=done.chunks, documents_per_s=documents_per_s, chunks_per_s=chunks_per_s,
        eta_s=pending / documents_per_s if pending and documents_per_s else None, started_at=started_at,
    )


def collection_progress(s: Session, collection_id: uuid.UUID, now: datetime | None = None) -> IngestionProgress:
    """The collection's current ingestion, from its documents' ``queued_at`` and ``finished_at``.

    What is pending, what ended and what ended lately are counted by one statement: each statement sees the
    documents as they were when it began, and a task that ends a batch between two of them would be counted both
    pending and done (more documents in all than were sent), or among the recent ends but not among the done (a
    rate and a time left with nothing done).
    """
    now = now or utcnow()
    of_collection = DocumentRow.collection_id == collection_id
    started_at = _started_at(s, of_collection)
    if started_at is None:
        return IngestionProgress()
    is_pending = DocumentRow.status == "pending"
    ended = and_(DocumentRow.status != "pending", DocumentRow.finished_at >= started_at)
    # While anything is pending the rate runs up to now, so its window is known before the statement.
    recent_from = now - timedelta(seconds=_span_s(started_at, now))
    recent = and_(ended, DocumentRow.finished_at >= recent_from)
    pending, documents, chunks, failed, last_end, recent_documents, recent_chunks = s.execute(select(
        _count(is_pending), _count(ended), _chunks(ended), _count(and_(ended, DocumentRow.status == "failed")),
        func.max(case((ended, DocumentRow.finished_at))), _count(recent), _chunks(recent),
    ).where(of_collection, or_(is_pending, ended))).one()
    done = Ended(documents, chunks, failed)
    if pending or last_end is None:
        return estimate(pending, done, Ended(recent_documents, recent_chunks), _span_s(started_at, now), started_at)
    # Nothing pending: the rate runs up to the last end, read once the statement told it. Bounded by that end too,
    # so what a new upload ends meanwhile is not counted among what this ingestion ended.
    end = _aware(last_end)
    span_s = _span_s(started_at, end)
    recent_documents, recent_chunks = s.execute(select(_count(ended), _chunks(ended)).where(
        of_collection, ended, DocumentRow.finished_at >= end - timedelta(seconds=span_s),
        DocumentRow.finished_at <= end)).one()
    return estimate(0, done, Ended(recent_documents, recent_chunks), span_s, started_at)


def _started_at(s: Session, of_collection: ColumnElement[bool]) -> datetime | None:
    """When the current ingestion began: the oldest of what is pending and of what ended since the last documents
    were queued (pending then), else that last queueing; None when nothing was ever queued."""
    last_queued = s.scalar(select(func.max(DocumentRow.queued_at)).where(of_collection))
    if last_queued is None:
        return None
    oldest_pending = s.scalar(select(func.min(DocumentRow.queued_at)).where(
        of_collection, DocumentRow.status == "pending"))
    # Pending when the last documents were queued, and ended since: the oldest of them began the ingestion.
    oldest_ended = s.scalar(select(func.min(DocumentRow.queued_at)).where(
        of_collection, DocumentRow.finished_at >= last_queued))
    return min(_aware(t) for t in (oldest_pending, oldest_ended, last_queued) if t is not None)


def _span_s(started_at: datetime, end: datetime) -> float:
    """The rate's window ending at ``end``: the last ``RATE_WINDOW_S``, or since the ingestion began if shorter."""
    return max(0.0, min(RATE_WINDOW_S, (end - started_at).total_seconds()))


def _count(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _chunks(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((condition, DocumentRow.chunks), else_=0)), 0)


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes for timezone-aware columns; they were written in UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
