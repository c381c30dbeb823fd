"""A document's lease on its ingestion: the task that carries it, the worker that started that task, what it lost.

Whoever queues a document names its task in the row (``queue``): the API for an upload, the parsing task for its
next window or for the indexing, the reaper for another try. A task claims the rows it was sent for as it starts
(``claim``), only those that still name it (a document sent again meanwhile belongs to its new task), and notes its
node and Celery's retry count. A row that this very message claimed before (same task, same retry) lost the process
that ran it: Celery handed the message back (``task_reject_on_worker_lost``), so the row counts one attempt more; a
document that lost ``max_attempts`` workers ends ``failed`` with the reason (one that kills every process reading it
would go round for ever). ``finish`` ends what the task indexed or failed, with its chunks and the time. The reaper
(``agentsearch.pipeline.ingestion.recovery``) reads the same columns.

Usage::

    queue(row, task_id)                                       # pending, carried by task_id: a new ingestion
    queue_in_tasks(rows, 32)                                  # [(task id, [row id, ...]), ...]: 32 rows a task
    taken = claim(rows, task_id, retries=0, node="w1@host", max_attempts=3)   # in the task's session
    Delivery(task_id, retries=0, node="w1@host")              # the same three, as a task's body is given them
    finish(s, [row.id for row in taken], task_id, "indexed", chunks={"doc-1": 4})
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.collections import DocumentRow


@dataclass(frozen=True)
class Delivery:
    """The message an ingest task runs: its id (what the rows it carries name), Celery's retry count of it, and the
    worker node running it; what ``claim`` notes in a row."""

    task_id: str
    retries: int
    node: str | None


def queue(row: DocumentRow, task_id: str, now: datetime | None = None, fresh: bool = True) -> None:
    """``task_id`` carries the document from now on. ``fresh``: a new ingestion of it (sent, or sent again), pending
    from now with nothing of an earlier one kept; not fresh: the next step of the same one (a parsing window, the
    indexing after parsing, the reaper's new try), which keeps when it was queued and what it lost."""
    row.task_id, row.worker, row.task_retries = task_id, None, None
    if fresh:
        row.status, row.error = "pending", None
        row.queued_at, row.finished_at, row.chunks, row.attempts = now or utcnow(), None, None, 0


def queue_in_tasks(rows: list[DocumentRow], task_documents: int, now: datetime | None = None,
                   fresh: bool = True) -> list[tuple[str, list[str]]]:
    """Queue the rows for tasks of at most ``task_documents`` each, so that several workers share them: each
    task's id with its rows' ids, to send once the rows are committed."""
    tasks = []
    for first in range(0, len(rows), task_documents):
        task_id, batch = str(uuid.uuid4()), rows[first:first + task_documents]
        for row in batch:
            queue(row, task_id, now, fresh)
        tasks.append((task_id, [str(row.id) for row in batch]))
    return tasks


def claim(rows: Iterable[DocumentRow], task_id: str, retries: int, node: str | None, max_attempts: int,
          now: datetime | None = None) -> list[DocumentRow]:
    """The pending rows this task may work on, claimed for ``node``; those past ``max_attempts`` end ``failed``.

    A row naming no task was queued before leases existed (or by hand): it is this task's. So is a row that names
    another task yet still has the end of an earlier ingestion: it was sent again by a release without leases (a
    rolling upgrade's older API), which marks it pending and leaves the rest; its ingestion starts afresh here."""
    taken = []
    for row in rows:
        if row.status == "pending" and row.task_id not in (task_id, None) and row.finished_at is not None:
            queue(row, task_id, now)
        if row.status != "pending" or row.task_id not in (task_id, None):
            continue
        if row.task_id == task_id and row.worker is not None and row.task_retries == retries:
            row.attempts += 1  # this message ran before and never ended: its process died
            if row.attempts >= max_attempts:
                give_up(row, f"the worker process running it on {row.worker} stopped", now)
                continue
        row.task_id, row.worker, row.task_retries = task_id, node, retries
        taken.append(row)
    return taken


def give_up(row: DocumentRow, cause: str, now: datetime | None = None) -> None:
    """End a document that lost its worker or task ``row.attempts`` times, the last time for ``cause``."""
    row.status, row.finished_at, row.chunks = "failed", now or utcnow(), None
    row.error = (f"indexing given up after {row.attempts} lost attempts (the last: {cause}); send the document "
                 "again, and split it if it is very large")


def finish(s: Session, row_ids: Iterable[uuid.UUID], task_id: str | None, status: str, error: str | None = None,
           chunks: Mapping[str, int] | None = None, now: datetime | None = None) -> list[DocumentRow]:
    """End the documents ``task_id`` carries (``indexed`` with their chunks, or ``failed`` with ``error``); a
    document queued again meanwhile is left to its new task. The rows ended."""
    ids = list(row_ids)
    if not ids:
        return []
    query = select(DocumentRow).where(DocumentRow.id.in_(ids))
    if task_id is not None:
        query = query.where(or_(DocumentRow.task_id == task_id, DocumentRow.task_id.is_(None)))
    rows = list(s.scalars(query).all())
    for row in rows:
        row.status, row.error, row.finished_at = status, error, now or utcnow()
        row.chunks = (chunks or {}).get(row.external_id, 0) if status == "indexed" else None
    return rows
