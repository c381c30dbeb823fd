"""Ingestion tasks: documents chunked, embedded and indexed in Milvus (``agentsearch.pipeline.ingestion.index_batch``),
or deleted from it.

Usage::

    tasks = queue_in_tasks(rows, settings.ingest_task_documents)     # in the transaction storing the rows
    for task_id, row_ids in tasks:                                    # once it committed
        ingest_documents.apply_async((str(collection_id), row_ids), task_id=task_id)
        # -> {"indexed": n, "failed": n, "chunks": n}; a row that names another task is left to that one
    delete_documents.delay(str(collection_id), [external_id, ...])     # {"deleted": n}
"""

from __future__ import annotations

import uuid
from typing import Any

from agentsearch.pipeline.ingestion.index_batch import TryAgain, index_batch, mark_documents
from agentsearch.pipeline.ingestion.lease import Delivery
from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import DB_RETRY, app


def delivery(task: Any) -> Delivery:
    """The message ``task`` (a bound task) runs, as the ingestion package claims documents with it."""
    return Delivery(task.request.id, task.request.retries, task.request.hostname)


@app.task(name="agentsearch.ingest_documents", bind=True, **DB_RETRY)
def ingest_documents(self, collection_id: str, document_ids: list[str]) -> dict[str, int]:
    """Chunk, embed and index the given document rows (``index_batch``). Milvus away is waited out with the
    backoff it names; the database away as by every step (``DB_RETRY``)."""
    try:
        return index_batch(get_services(), collection_id, document_ids, delivery(self))
    except TryAgain as again:
        raise self.retry(exc=again.cause, countdown=again.delay,
                         max_retries=self.request.retries + 1) from again.cause


@app.task(name="agentsearch.delete_documents", bind=True, max_retries=3)
def delete_documents(self, collection_id: str, external_ids: list[str]) -> dict[str, int]:
    services = get_services()
    try:
        services.vector_store.delete_documents(milvus_collection_name(collection_id), external_ids)
    except Exception as exc:  # whatever the vector store raised, the deletion is tried again
        raise self.retry(exc=exc, countdown=2 ** self.request.retries) from exc
    # Again now that the vectors are gone: results cached in between may still hold the document.
    mark_documents(services, [], "indexed", None, bump_epoch=uuid.UUID(collection_id))
    return {"deleted": len(external_ids)}
