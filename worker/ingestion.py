"""Ingestion tasks: documents chunked, embedded and indexed in Milvus, or deleted from it.

The API stores the document rows (``pending``) and sends ``ingest_documents``, a task for every
``ingest_task_documents`` of them so that every ingest process shares a large upload; the task indexes them and
marks them ``indexed`` or ``failed``, with their chunks and the time (a collection's progress is read from them,
``pipeline.ingestion.progress``). Every change moves the collection's epoch on, which invalidates its cached searches.

A task claims its documents as it starts (``pipeline.ingestion.lease``): only those whose row still names it, noting
its node; a document whose process died under it comes back with it and counts one lost attempt (past
``ingest_max_attempts`` it ends ``failed``), and one whose whole node died is sent again by the reaper
(``worker.reaper.reap_documents``).

Usage::

    tasks = queue_in_tasks(rows, settings.ingest_task_documents)     # in the transaction storing the rows
    for task_id, row_ids in tasks:                                    # once it committed
        ingest_documents.apply_async((str(collection_id), row_ids), task_id=task_id)
        # -> {"indexed": n, "failed": n, "chunks": n}; a row that names another task is left to that one
    delete_documents.delay(str(collection_id), [external_id, ...])     # {"deleted": n}
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from sqlalchemy import select, update

from pipeline.ingest import ChunkingConfig, index_documents, span_reader
from pipeline.ingestion.lease import claim, finish
from pipeline.platform.backoff import backoff_delay
from pipeline.platform.db import Collection, DocumentRow, milvus_collection_name
from pipeline.retrieval.vector_store import SchemaMismatch
from pipeline.services import Services, get_services
from worker.app import DB_RETRY, app

log = logging.getLogger("agentsearch.worker")


@app.task(name="agentsearch.ingest_documents", bind=True, **DB_RETRY)
def ingest_documents(self, collection_id: str, document_ids: list[str]) -> dict[str, int]:
    """Chunk, embed and index the given document rows; re-indexing a document replaces its earlier chunks (a
    search sees the old version or the new one, ``VectorStore.replace_documents``).

    Milvus away (a restart, an outage) is waited out with backoff for ``MILVUS_RETRY_S``; after that the documents
    end ``failed`` with the error, never ``pending`` for good. Making the collection is part of it: outside the
    retries, an ingest sent while Milvus was down left its documents pending forever, with no error anywhere. The
    database away is waited out as by every step (``DB_RETRY``); indexing again replaces what a first try stored.
    """
    services = get_services()
    settings = services.settings
    ids = [uuid.UUID(d) for d in document_ids]
    with services.db.session() as s:
        collection = s.get(Collection, uuid.UUID(collection_id))
        if collection is None:
            return {"indexed": 0, "failed": len(ids), "chunks": 0}
        pending = s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids), DocumentRow.status == "pending")).all()
        # Only the documents still sent with this task (a document sent again meanwhile is its new task's).
        rows = claim(pending, self.request.id, self.request.retries, self.request.hostname,
                     settings.ingest_max_attempts)
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
    task_id = self.request.id
    try:
        store.ensure_collection(milvus_name, embedder.dimension)
        chunks = index_documents(docs, embedder.embed, services.analyzer, chunking, parts,
                                 embed_spans=span_reader(embedder, settings.late_chunking))
        store.replace_documents(milvus_name, [d[0] for d in docs], chunks)
    except SchemaMismatch as exc:
        _mark_documents(services, ids, "failed", str(exc), task_id=task_id)  # waiting would not change it
        return {"indexed": 0, "failed": len(docs), "chunks": 0}
    except Exception as exc:
        delay = backoff_delay(self.request.retries, settings.milvus_retry_s)
        if delay is not None:
            # Named by collection: the documents' rows stay ``pending`` meanwhile, and this line says why.
            log.warning("collection %s: indexing %d documents failed (%s: %s); trying again in %g s", collection_id,
                        len(docs), type(exc).__name__, exc, delay)
            raise self.retry(exc=exc, countdown=delay, max_retries=self.request.retries + 1) from exc
        _mark_documents(services, ids, "failed", f"indexing failed after {self.request.retries + 1} attempts over "
                                                 f"{settings.milvus_retry_s:g} s: {type(exc).__name__}: {exc}",
                        task_id=task_id)
        raise
    _mark_documents(services, ids, "indexed", None, bump_epoch=uuid.UUID(collection_id), task_id=task_id,
                    chunks=Counter(c.document_id for c in chunks))
    return {"indexed": len(docs), "failed": 0, "chunks": len(chunks)}


@app.task(name="agentsearch.delete_documents", bind=True, max_retries=3)
def delete_documents(self, collection_id: str, external_ids: list[str]) -> dict[str, int]:
    services = get_services()
    try:
        services.vector_store.delete_documents(milvus_collection_name(collection_id), external_ids)
    except Exception as exc:  # whatever the vector store raised, the deletion is tried again
        raise self.retry(exc=exc, countdown=2 ** self.request.retries) from exc
    # Again now that the vectors are gone: results cached in between may still hold the document.
    _mark_documents(services, [], "indexed", None, bump_epoch=uuid.UUID(collection_id))
    return {"deleted": len(external_ids)}


def _mark_documents(services: Services, ids: list[uuid.UUID], status: str, error: str | None,
                    bump_epoch: uuid.UUID | None = None, task_id: str | None = None,
                    chunks: Counter[str] | None = None) -> None:
    """End the documents ``task_id`` carries (a document sent again meanwhile stays pending for its new task), each
    indexed one with its chunks (``chunks``, by document id) and every one with the time it ended."""
    with services.db.session() as s:
        finish(s, ids, task_id, status, error, chunks)
        if bump_epoch is not None:
            # Every change to the indexed content invalidates cached searches of the collection.
            s.execute(
                update(Collection).where(Collection.id == bump_epoch).values(index_epoch=Collection.index_epoch + 1)
            )
