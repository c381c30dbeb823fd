"""Parsing an uploaded file, on the ingest queue: a window of it read in the parsing child process, or the whole
file (``agentsearch.pipeline.ingestion.file_parse``), then the tasks it names sent: the next window or the attachments'
parses at the back of the queue, behind what other users sent meanwhile (``NEW_WORK_PRIORITY``, as new work), and the
document's indexing (``agentsearch.worker.ingestion.ingest_documents``).

Usage::

    parse_document.delay(str(collection_id), str(document_row_id))   # {"status": "parsed" | "failed" | "window"}
"""

from __future__ import annotations

from typing import Any

from agentsearch.pipeline.ingestion.file_parse import parse_window
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import DB_RETRY, DB_UNAVAILABLE, INGEST_QUEUE, NEW_WORK_PRIORITY, app
from agentsearch.worker.ingestion import delivery, ingest_documents


@app.task(name="agentsearch.parse_document", bind=True, **DB_RETRY)
def parse_document(self, collection_id: str, document_id: str, start: int = 0) -> dict[str, Any]:
    """Read the next window of the document's file (from page ``start``), or the whole file when not paged."""
    outcome = parse_window(get_services(), collection_id, document_id, start, delivery(self), DB_UNAVAILABLE)
    for args, task_id in outcome.parses:
        parse_document.apply_async(args, queue=INGEST_QUEUE, priority=NEW_WORK_PRIORITY, task_id=task_id)
    if outcome.index is not None:
        args, task_id = outcome.index
        ingest_documents.apply_async(args, queue=INGEST_QUEUE, task_id=task_id)
    return outcome.answer
