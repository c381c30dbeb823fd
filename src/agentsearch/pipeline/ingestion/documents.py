"""A collection's document rows as its readers find them, and the writes of a document's row and file.

A document restricted to document groups is no trace to a reader outside them: it is neither counted, listed, read
nor deleted by it (``agentsearch.pipeline.security.document_access.visible_documents``). Every function takes the
caller's session, so a check and its change are one transaction.

Usage::

    with db.session() as s:
        status_counts(s, collection, tokens)                             # {"indexed": 12, "pending": 1}
        total, rows = document_page(s, collection, tokens, status=None, limit=100, offset=0)
        row = visible_document(s, collection, tokens, "q4-report")     # None: missing, or not for this reader
        existing = documents_by_id(s, collection.id, ["q4-report", "q3-report"])
        remove_document(s, row)                                          # the collection's epoch moves on
        keep_file(s, row, "q4.pdf", "pdf", data, upload_state(user_id))  # replaces a file not yet read
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from agentsearch.pipeline.ingestion.cited import mark_deleted
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentFileRow, DocumentRow
from agentsearch.pipeline.security.document_access import visible_documents


def status_counts(s: Session, collection: CollectionRow, tokens: Iterable[str]) -> dict[str, int]:
    """The collection's documents the reader finds, counted by status."""
    counted = select(DocumentRow.status, func.count()).where(DocumentRow.collection_id == collection.id)
    query = visible_documents(counted, collection, tokens)
    return dict(s.execute(query.group_by(DocumentRow.status)).all())


def document_page(s: Session, collection: CollectionRow, tokens: Iterable[str], status: str | None, limit: int,
                  offset: int) -> tuple[int, list[DocumentRow]]:
    """How many documents the reader finds (of ``status`` when given), and a page of them, oldest first."""
    query = visible_documents(select(DocumentRow).where(DocumentRow.collection_id == collection.id), collection,
                              tokens)
    if status:
        query = query.where(DocumentRow.status == status)
    total = s.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = s.scalars(query.order_by(DocumentRow.created_at, DocumentRow.external_id).limit(limit).offset(offset))
    return total, list(rows)


def visible_document(s: Session, collection: CollectionRow, tokens: Iterable[str],
                     external_id: str) -> DocumentRow | None:
    """The document of this id when the reader finds it; None when missing or of groups the reader is not in."""
    return s.scalar(visible_documents(select(DocumentRow).where(DocumentRow.collection_id == collection.id,
                                                                DocumentRow.external_id == external_id),
                                      collection, tokens))


def documents_by_id(s: Session, collection_id: uuid.UUID, external_ids: list[str]) -> dict[str, DocumentRow]:
    """The collection's documents of these ids that exist, by id (whoever finds them: a writer checks that)."""
    rows = s.scalars(select(DocumentRow).where(DocumentRow.collection_id == collection_id,
                                               DocumentRow.external_id.in_(external_ids)))
    return {row.external_id: row for row in rows}


def remove_document(s: Session, row: DocumentRow) -> None:
    """The document's row gone (its vectors are a worker's task) and its collection's epoch moved on, so no cached
    job answers from it; the answers citing it are marked stale (``deleted``) in the same transaction."""
    mark_deleted(s, row.collection_id, row.external_id)
    s.delete(row)
    s.execute(update(CollectionRow).where(CollectionRow.id == row.collection_id)
              .values(index_epoch=CollectionRow.index_epoch + 1))


def upload_state(uploader: uuid.UUID | None) -> dict[str, Any]:
    """The reading state an uploaded file starts with: who sent it, whose groups say which documents its attachments
    may replace (``agentsearch.pipeline.ingestion.attachments``)."""
    return {"uploader": str(uploader)} if uploader is not None else {}


def keep_file(s: Session, row: DocumentRow, name: str, file_format: str, data: bytes,
              state: dict[str, Any] | None = None) -> None:
    """The file the document is parsed from, beside its row, with its reading state (``DocumentFile.parsed``); one
    sent before and not read yet is replaced (the newer one is read)."""
    earlier = s.get(DocumentFileRow, row.id)
    if earlier is not None:
        s.delete(earlier)
        s.flush()
    s.add(DocumentFileRow(document_id=row.id, name=name[-255:], format=file_format, data=data, parsed=state or None))
