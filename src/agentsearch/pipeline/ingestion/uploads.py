"""Files uploaded as documents: each file read as the upload route takes it (its name, its format told from its
bytes, a JSON Lines file's lines), and each other file stored with its document ``pending`` beside its bytes, for a
parsing task (``agentsearch.pipeline.ingestion.file_parse``). A file refused at once (empty, of no format the parsers
read, a bad name or id, an id another file of the request has) is listed with the reason; nothing of it is stored.

Usage::

    uploads = read_uploads([("q4.pdf", data), ("faq.jsonl", lines)], document_ids=None, access=None)
    uploads.files, uploads.documents, uploads.rejected   # [StoredFile], [DocumentIn], [{"index", "file", "error"}]
    with db.session() as s:
        row_id, task_id = store_upload(s, collection, existing_row_or_none, uploads.files[0], uploader, access)
    # once committed: send agentsearch.parse_document (collection_id, row_id) with task_id
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from sqlalchemy.orm import Session

from agentsearch.pipeline.ingestion.documents import keep_file, upload_state
from agentsearch.pipeline.ingestion.documents_in import DocumentIn, IngestError, parse_jsonl
from agentsearch.pipeline.ingestion.lease import queue
from agentsearch.pipeline.parsing import ParseRefused, sniff
from agentsearch.pipeline.parsing.file_names import upload_name
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.security.document_access import DocumentAccess, groups_for, set_document_groups
from agentsearch.pipeline.security.storable import text_problem


@dataclass(frozen=True)
class StoredFile:
    """A file taken to be parsed by a worker, as one document."""

    document_id: str
    name: str
    format: str
    data: bytes


@dataclass
class Uploads:
    """The files of one request as read: those a worker parses, the documents of the JSON Lines files (stored as
    documents sent as JSON), and those refused, each with its place in the request."""

    files: list[StoredFile] = field(default_factory=list)
    documents: list[DocumentIn] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)


def read_uploads(files: Iterable[tuple[str, bytes]], document_ids: list[str] | None,
                 access: DocumentAccess | None) -> Uploads:
    """Each ``(name as sent, bytes)`` read in turn: ``document_ids`` name the files' documents in order (default:
    the file's name without the extension), ``access`` is given to each document that names none of its own."""
    uploads = Uploads()
    first_file: dict[str, str] = {}
    for i, (name, data) in enumerate(files):
        try:
            name = upload_name(name)
            file_format = sniff(data, name)
            if file_format == "jsonl":
                read = [d if d.access is not None or access is None else d.model_copy(update={"access": access})
                        for d in parse_jsonl(data.decode("utf-8"))]
                stored = None
            else:
                document_id = document_ids[i] if document_ids is not None else PurePath(name).stem
                read, stored = [], StoredFile(checked_id(document_id), name, file_format, data)
            ids = [d.id for d in read] if stored is None else [stored.document_id]
            for doc_id in ids:
                if doc_id in first_file:
                    raise ParseRefused(f"document id {doc_id!r} is also in {first_file[doc_id]}")
        except (ParseRefused, IngestError, UnicodeDecodeError) as exc:
            uploads.rejected.append({"index": i, "file": name, "error": str(exc)})
            continue
        first_file.update((doc_id, name) for doc_id in ids)
        uploads.documents.extend(read)
        if stored is not None:
            uploads.files.append(stored)
    return uploads


def checked_id(document_id: str) -> str:
    """A document id given in the form, or refused as a file's reason."""
    if not document_id.strip() or len(document_id) > 400 or text_problem(document_id):
        raise ParseRefused("the document id must be 1 to 400 characters of text")
    return document_id


def store_upload(s: Session, collection: CollectionRow, row: DocumentRow | None, stored: StoredFile,
                 uploader: uuid.UUID, access: DocumentAccess | None) -> tuple[uuid.UUID, str]:
    """The file's document ``pending`` (``row``: the document of its id, when there is one) and its bytes beside it:
    its row's id and the id of the parsing task that carries it. A document sent again keeps its indexed text and
    chunks until the new file is read: a search never finds it missing (its groups, though, count from now: a
    listing or a job citing it follows them at once)."""
    if row is None:
        row = DocumentRow(collection_id=collection.id, external_id=stored.document_id, text="",
                          title=PurePath(stored.name).stem)
        s.add(row)
    task_id = str(uuid.uuid4())
    queue(row, task_id)
    row.pages_done, row.pages_total = 0, None
    row.content_hash = hashlib.sha256(stored.data).hexdigest()
    row.metadata_ = {"source": stored.name, "format": stored.format}
    s.flush()
    set_document_groups(s, row, collection, groups_for(collection, access, ("body", "access")))
    keep_file(s, row, stored.name, stored.format, stored.data, upload_state(uploader))
    return row.id, task_id
