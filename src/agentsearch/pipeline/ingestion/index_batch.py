"""A batch of document rows chunked, embedded and indexed in Milvus (the body of ``agentsearch.worker.ingestion``'s
``ingest_documents``), and the end of each document written in its row.

The API stores the document rows (``pending``) and sends an ingest task for every ``ingest_task_documents`` of them
so that every ingest process shares a large upload; the task indexes them and marks them ``indexed`` or ``failed``,
with their chunks and the time (a collection's progress is read from them, ``agentsearch.pipeline.ingestion.progress``).
Every change moves the collection's epoch on, which invalidates its cached searches.

A task claims its documents as it starts (``agentsearch.pipeline.ingestion.lease``): only those whose row still names
it, noting its node; a document whose process died under it comes back with it and counts one lost attempt (past
``ingest_max_attempts`` it ends ``failed``), and one whose whole node died is sent again by the reaper
(``agentsearch.worker.reaper.reap_documents``).

Usage::

    try:
        index_batch(services, collection_id, row_ids, Delivery(task_id, retries, node))
        # -> {"indexed": n, "failed": n, "chunks": n}; a row that names another task is left to that one
    except TryAgain as again:
        ...  # Milvus away: the task retries after again.delay s
    mark_documents(services, [], "indexed", None, bump_epoch=collection_uuid)   # the epoch moved on alone
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from sqlalchemy import select, update

from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
from agentsearch.pipeline.ingestion.cited import mark_changed
from agentsearch.pipeline.ingestion.indexing import content_digest, index_documents, span_reader
from agentsearch.pipeline.ingestion.lease import Delivery, claim, finish
from agentsearch.pipeline.platform.backoff import backoff_delay
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.retrieval.vector_store import SchemaMismatch
from agentsearch.pipeline.services import Services

log = logging.getLogger("agentsearch.worker")


class TryAgain(Exception):
    """Indexing failed within ``milvus_retry_s``: the task is to be tried again after ``delay`` seconds."""

    def __init__(self, cause: Exception, delay: float) -> None:
        super().__init__(str(cause))
        self.cause, self.delay = cause, delay


def index_batch(services: Services, collection_id: str, document_ids: list[str],
                delivery: Delivery) -> dict[str, int]:
    """Chunk, embed and index the given document rows; re-indexing a document replaces its earlier chunks (a
    search sees the old version or the new one, ``VectorStore.replace_documents``).

    Milvus away (a restart, an outage) is waited out with backoff for ``MILVUS_RETRY_S`` (``TryAgain``); after that
    the documents end ``failed`` with the error, never ``pending`` for good. Making the collection is part of it:
    outside the retries, an ingest sent while Milvus was down left its documents pending forever, with no error
    anywhere. The database away is waited out by the task's retries; indexing again replaces what a first try
    stored.
    """
    settings = services.settings
    ids = [uuid.UUID(d) for d in document_ids]
    with services.db.session() as s:
        collection = s.get(CollectionRow, uuid.UUID(collection_id))
        if collection is None:
            return {"indexed": 0, "failed": len(ids), "chunks": 0}
        pending = s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids), DocumentRow.status == "pending")).all()
        # Only the documents still sent with this task (a document sent again meanwhile is its new task's).
        rows = claim(pending, delivery.task_id, delivery.retries, delivery.node, settings.ingest_max_attempts)
        given_up = sum(r.status == "failed" for r in pending)
        docs = [(r.external_id, r.title, r.text, dict(r.metadata_ or {})) for r in rows]
        parts = {r.external_id: r.parts for r in rows if r.parts}
        ids = [r.id for r in rows]
        milvus_name = collection.milvus_name
    if not docs:
        # A redelivered task whose work is already done, or whose documents were sent again with another task.
        return {"indexed": 0, "failed": given_up, "chunks": 0}
    embedder, store = services.embedder, services.vector_store
    chunking = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    task_id = delivery.task_id
    try:
        store.ensure_collection(milvus_name, embedder.dimension)
        chunks = index_documents(docs, embedder.embed, services.analyzer, chunking, parts,
                                 embed_spans=span_reader(embedder, settings.late_chunking))
        store.replace_documents(milvus_name, [d[0] for d in docs], chunks)
    except SchemaMismatch as exc:
        mark_documents(services, ids, "failed", str(exc), task_id=task_id)  # waiting would not change it
        return {"indexed": 0, "failed": len(docs), "chunks": 0}
    except Exception as exc:
        delay = backoff_delay(delivery.retries, settings.milvus_retry_s)
        if delay is not None:
            # Named by collection: the documents' rows stay ``pending`` meanwhile, and this line says why.
            log.warning("collection %s: indexing %d documents failed (%s: %s); trying again in %g s", collection_id,
                        len(docs), type(exc).__name__, exc, delay)
            raise TryAgain(exc, delay) from exc
        mark_documents(services, ids, "failed", f"indexing failed after {delivery.retries + 1} attempts over "
                                                f"{settings.milvus_retry_s:g} s: {type(exc).__name__}: {exc}",
                       task_id=task_id)
        raise
    # The digest each document's chunk ids carry: the version an answer citing it read.
    versions = {d[0]: content_digest(d[1], d[2], parts.get(d[0])) for d in docs}
    mark_documents(services, ids, "indexed", None, bump_epoch=uuid.UUID(collection_id), task_id=task_id,
                   chunks=Counter(c.document_id for c in chunks), versions=versions)
    return {"indexed": len(docs), "failed": 0, "chunks": len(chunks)}


def mark_documents(services: Services, ids: list[uuid.UUID], status: str, error: str | None,
                   bump_epoch: uuid.UUID | None = None, task_id: str | None = None,
                   chunks: Counter[str] | None = None, versions: dict[str, str] | None = None) -> None:
    """End the documents ``task_id`` carries (a document sent again meanwhile stays pending for its new task), each
    indexed one with its chunks (``chunks``, by document id) and every one with the time it ended. An indexed one
    with its version (``versions``, by document id) keeps it, and the answers citing another version of it are
    marked stale in the same transaction (``agentsearch.pipeline.ingestion.cited``)."""
    with services.db.session() as s:
        ended = finish(s, ids, task_id, status, error, chunks)
        if status == "indexed" and versions and bump_epoch is not None:
            now_at = {row.external_id: versions[row.external_id] for row in ended if row.external_id in versions}
            for row in ended:
                row.version = now_at.get(row.external_id, row.version)
            mark_changed(s, bump_epoch, now_at)
        if bump_epoch is not None:
            # Every change to the indexed content invalidates cached searches of the collection.
            s.execute(
                update(CollectionRow).where(CollectionRow.id == bump_epoch)
                .values(index_epoch=CollectionRow.index_epoch + 1)
            )
