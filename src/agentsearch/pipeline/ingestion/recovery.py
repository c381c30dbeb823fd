"""Documents whose ingestion was lost, found for the reaper (``agentsearch.worker.reaper.reap_documents``), which sends
them again or, past their attempts, ends them ``failed`` with the reason.

A pending document whose row has not changed for ``grace_s`` is lost when:

- the node that started its task stopped heartbeating (``agentsearch.worker.liveness``): a whole worker killed or its
  host lost. Its message stays unacknowledged in Redis until the visibility timeout (about an hour) would hand it out;
- or its task is nowhere in the broker, neither waiting in the queue nor held by a worker: the API died between
  storing the documents and sending their task, Redis lost the message, or the task ended without ending them;
- or a worker took its task more than ``grace_s`` ago and never started it (that node died holding it).

A task that a live node runs is never lost, however long it takes, nor one waiting in the queue, however long the
queue. ``grace_s`` (``ORPHAN_GRACE_S``, 45 s) covers a node's heartbeat (every 10 s, expiring after 30 s) and a task
on its way from the queue to a worker; with the reaper's period (30 s) it bounds how long a lost document waits.

Usage::

    lost = find_lost(s, now, alive_nodes={"w1@host"}, broker=lambda: BrokerView(held={...}, queued={...}), grace_s=45)
    sends, failed = send_again(s, lost, max_attempts=3, task_documents=32)   # each Send sent after the commit
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.ingestion.lease import give_up, queue, queue_in_tasks
from agentsearch.pipeline.platform.tables.collections import DocumentFileRow, DocumentRow


@dataclass(frozen=True)
class BrokerView:
    """What the broker holds of the ingest tasks: the ids workers took and have not acknowledged, with when (epoch
    seconds), and the ids waiting in the queue (None when the queue was too long to read)."""

    held: dict[str, float]
    queued: set[str] | None


@dataclass(frozen=True)
class Lost:
    document_id: uuid.UUID
    task_id: str | None
    worker: str | None
    cause: str


@dataclass(frozen=True)
class Send:
    """A task to send once the transaction that queued its documents committed: ``parse_document`` for a file not
    read yet (from page ``start``), ``ingest_documents`` for the others."""

    task: str
    task_id: str
    collection_id: str
    document_ids: list[str]
    start: int = 0

    @property
    def args(self) -> tuple:
        if self.task == "agentsearch.parse_document":
            return self.collection_id, self.document_ids[0], self.start
        return self.collection_id, self.document_ids


def find_lost(s: Session, now: datetime, alive_nodes: set[str] | None,
              broker: Callable[[], BrokerView | None], grace_s: float) -> list[Lost]:
    """The pending documents whose worker or task was lost, each with the cause. Without ``alive_nodes`` (Redis
    away) no node counts as gone; the broker is read (``broker()``) only when a document is old enough to ask
    about, and without its answer (not Redis) no task counts as lost."""
    rows = s.execute(select(DocumentRow.id, DocumentRow.task_id, DocumentRow.worker).where(
        DocumentRow.status == "pending", DocumentRow.updated_at < now - timedelta(seconds=grace_s))).all()
    if not rows:
        return []
    view = broker()
    lost = []
    for document_id, task_id, worker in rows:
        cause = _cause(task_id, worker, now.timestamp() - grace_s, alive_nodes, view)
        if cause is not None:
            lost.append(Lost(document_id, task_id, worker, cause))
    return lost


def _cause(task_id: str | None, worker: str | None, held_before: float, alive_nodes: set[str] | None,
           broker: BrokerView | None) -> str | None:
    if worker is not None and alive_nodes is not None and worker not in alive_nodes:
        return f"worker {worker} stopped while it held the document"
    if broker is None or task_id is None:
        return None
    if task_id in broker.held:
        taken_at = broker.held[task_id]
        return "the worker that took its task stopped before starting it" if (
            worker is None and taken_at < held_before) else None
    if broker.queued is not None and task_id not in broker.queued:
        return "its task was lost from the broker"
    return None


def send_again(s: Session, lost: list[Lost], max_attempts: int,
               task_documents: int) -> tuple[list[Send], list[uuid.UUID]]:
    """Queue each lost document for a new task, one attempt more; one at ``max_attempts`` ends ``failed`` with the
    cause. Rows that moved on since they were looked at (a worker started them, they were sent again) are left: only
    the rows still as ``find_lost`` saw them are locked and changed. The tasks to send after the commit, and the
    documents failed."""
    seen = {item.document_id: item for item in lost}
    if not seen:
        return [], []
    rows = s.scalars(select(DocumentRow).where(DocumentRow.id.in_(seen), DocumentRow.status == "pending")
                     .with_for_update(skip_locked=True)).all()
    files = {f.document_id: f for f in s.scalars(select(DocumentFileRow).where(
        DocumentFileRow.document_id.in_([r.id for r in rows]))).all()}
    sends: list[Send] = []
    failed: list[uuid.UUID] = []
    to_index: dict[uuid.UUID, list[DocumentRow]] = {}
    for row in rows:
        item = seen[row.id]
        if (row.task_id, row.worker) != (item.task_id, item.worker):
            continue
        row.attempts += 1
        if row.attempts >= max_attempts:
            give_up(row, item.cause)
            failed.append(row.id)
        elif row.id in files:
            task_id = str(uuid.uuid4())
            queue(row, task_id, fresh=False)
            start = int((files[row.id].parsed or {}).get("next", 0))
            sends.append(Send("agentsearch.parse_document", task_id, str(row.collection_id), [str(row.id)], start))
        else:
            to_index.setdefault(row.collection_id, []).append(row)
    for collection_id, waiting in to_index.items():
        sends += [Send("agentsearch.ingest_documents", task_id, str(collection_id), ids)
                  for task_id, ids in queue_in_tasks(waiting, task_documents, fresh=False)]
    return sends, failed
