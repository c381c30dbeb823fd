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
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from pipeline.platform.db import DocumentRow, utcnow

# Long enough to hold several tasks' ends (a task of 32 small documents takes seconds), short enough that the time
# left follows a change of pace: another worker started, or a run of large documents.
RATE_WINDOW_S = 60.0
# A rate over less than this is mostly the luck of which task ended first.
MIN_SPAN_S = 1.0


class IngestionProgress(BaseModel):
    """A collection's current ingestion (``pipeline.ingestion.progress``)."""

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
    """The collection's current ingestion, from its documents' ``queued_at`` and ``finished_at``."""
    now = now or utcnow()
    of_collection = DocumentRow.collection_id == collection_id
    last_queued = s.scalar(select(func.max(DocumentRow.queued_at)).where(of_collection))
    if last_queued is None:
        return IngestionProgress()
    pending, oldest_pending = s.execute(select(func.count(), func.min(DocumentRow.queued_at)).where(
        of_collection, DocumentRow.status == "pending")).one()
    # Pending when the last documents were queued, and ended since: the oldest of them began the ingestion.
    oldest_ended = s.scalar(select(func.min(DocumentRow.queued_at)).where(
        of_collection, DocumentRow.finished_at >= last_queued))
    started_at = min(_aware(t) for t in (oldest_pending, oldest_ended, last_queued) if t is not None)
    ended = (of_collection, DocumentRow.status != "pending", DocumentRow.finished_at >= started_at)
    documents, chunks, failed, last_end = s.execute(select(
        func.count(), func.coalesce(func.sum(DocumentRow.chunks), 0),
        func.coalesce(func.sum(case((DocumentRow.status == "failed", 1), else_=0)), 0),
        func.max(DocumentRow.finished_at)).where(*ended)).one()
    end = now if pending or last_end is None else _aware(last_end)
    span_s = max(0.0, min(RATE_WINDOW_S, (end - started_at).total_seconds()))
    recent = DocumentRow.finished_at >= end - timedelta(seconds=span_s)
    recent_documents, recent_chunks = s.execute(select(
        func.count(), func.coalesce(func.sum(DocumentRow.chunks), 0)).where(*ended, recent)).one()
    return estimate(pending, Ended(documents, chunks, failed), Ended(recent_documents, recent_chunks or 0), span_s,
                    started_at)


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes for timezone-aware columns; they were written in UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
