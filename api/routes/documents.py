"""A collection's documents as its owner reads them, and files uploaded as documents.

``POST /v1/collections/{id}/documents`` takes documents as JSON; a browser holds files. The upload route reads
each file as ``agentsearch ingest`` reads it (``pipeline.ingest.read_documents``: JSON Lines, one document per
line; a ``.txt``, ``.md`` or ``.pdf`` file as one document) and stores the documents through the JSON route's own
code, so the checks, the quota and the indexing task are the same. A file with a bad line anywhere is refused whole,
naming the file and the line, and nothing of the request is stored; so is a PDF with more pages, or needing more CPU
time or memory to read, than the settings allow (``pdf_max_pages``, ``pdf_read_time_s``, ``pdf_read_memory_mb``);
the PDFs of one request share ``pdf_read_time_s``.

Usage::

    GET  /v1/collections/{id}/documents?status=failed&limit=50     -> {"items": [{"id", "title", "status", ...}], "total"}
    GET  /v1/collections/{id}/documents/{document_id}              -> the document with its text
    POST /v1/collections/{id}/files   (multipart/form-data, field "files", one or more)  -> 202 as the JSON route
"""

from __future__ import annotations

import math
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path, PurePath

from fastapi import APIRouter, File, Query, Request, UploadFile
from pydantic import ValidationError
from sqlalchemy import func, select

from api.auth import CurrentUser
from api.errors import not_found, unprocessable
from api.request_guard import GuardedRoute
from api.routes.collections import add_documents, get_collection
from api.schemas import DocumentsAccepted, DocumentsIn
from pipeline.platform.db import DocumentRow

router = APIRouter(prefix="/v1/collections", tags=["collections"], route_class=GuardedRoute)

UPLOAD_SUFFIXES = (".jsonl", ".ndjson", ".txt", ".md", ".markdown", ".pdf")
MAX_UPLOAD_FILES = 20
# A file's name becomes a file of the upload's own temporary directory while it is read.
MAX_NAME_BYTES = 200


@router.get("/{collection_id}/documents")
def list_documents(
    collection_id: uuid.UUID,
    user_id: CurrentUser,
    request: Request,
    status: str | None = Query(None, pattern="^(pending|indexed|failed)$"),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict:
    """The collection's documents, oldest first, without their text (read one document for that)."""
    with request.app.state.services.db.session() as s:
        get_collection(s, collection_id, user_id)
        query = select(DocumentRow).where(DocumentRow.collection_id == collection_id)
        if status:
            query = query.where(DocumentRow.status == status)
        total = s.scalar(select(func.count()).select_from(query.subquery()))
        rows = s.scalars(query.order_by(DocumentRow.created_at, DocumentRow.external_id).limit(limit).offset(offset))
        items = [{"id": r.external_id, "title": r.title, "status": r.status, "error": r.error,
                  "chars": len(r.text), "metadata": r.metadata_, "updated_at": r.updated_at} for r in rows]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/{collection_id}/documents/{document_id}")
def read_document(collection_id: uuid.UUID, document_id: str, user_id: CurrentUser, request: Request) -> dict:
    """One document with its text: what a citation of it points into."""
    with request.app.state.services.db.session() as s:
        get_collection(s, collection_id, user_id)
        row = s.scalar(select(DocumentRow).where(DocumentRow.collection_id == collection_id,
                                                 DocumentRow.external_id == document_id))
        if row is None:
            raise not_found("document", document_id)
        return {"id": row.external_id, "title": row.title, "text": row.text, "metadata": row.metadata_,
                "status": row.status, "error": row.error, "updated_at": row.updated_at}


@router.post("/{collection_id}/files", status_code=202, response_model=DocumentsAccepted)
def upload_files(
    collection_id: uuid.UUID,
    user_id: CurrentUser,
    request: Request,
    files: list[UploadFile] = File(description="JSON Lines (.jsonl, .ndjson), or .txt / .md / .pdf: one document "
                                                "each, its id the file's name without the extension."),
) -> DocumentsAccepted:
    """Store the documents of the uploaded files as ``pending`` and queue their indexing (as the JSON route)."""
    # Imported here: the readers (PDF, Markdown) take most of a second to load.
    from pipeline.ingest import IngestError, read_documents
    from pipeline.parsing import PdfLimits

    if len(files) > MAX_UPLOAD_FILES:
        raise unprocessable(("body", "files"), f"at most {MAX_UPLOAD_FILES} files per request")
    with request.app.state.services.db.session() as s:
        get_collection(s, collection_id, user_id)  # another user's collection is refused before any file is read
    # Each PDF is read in a child process held to these: one file cannot take the server's CPU or memory. The PDFs
    # of one request share the time limit: twenty files of just under it each would otherwise hold a request (and
    # the server's cores) twenty times as long.
    pdf_limits = PdfLimits.from_settings(request.app.state.services.settings)
    reading_ends = time.monotonic() + pdf_limits.time_s
    documents = []
    first_file: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="agentsearch-upload-") as workdir:
        for i, upload in enumerate(files):
            # The name only decides how the file is read and the id of a one-document file; never a path.
            name = PurePath((upload.filename or "").replace("\\", "/")).name
            if not name.lower().endswith(UPLOAD_SUFFIXES):
                raise unprocessable(("body", "files", i), f"{name or 'the file'}: unsupported file type; use "
                                                          + ", ".join(UPLOAD_SUFFIXES))
            if "\x00" in name or len(name.encode("utf-8", "replace")) > MAX_NAME_BYTES:
                raise unprocessable(("body", "files", i), f"the file name is longer than {MAX_NAME_BYTES} bytes "
                                                          "or holds a NUL character")
            path = Path(workdir) / f"{i}" / name
            path.parent.mkdir()
            path.write_bytes(upload.file.read())
            left_s = math.ceil(reading_ends - time.monotonic())
            if left_s < 1 and name.lower().endswith(".pdf"):
                raise unprocessable(("body", "files", i), f"{name}: the request's PDFs took longer than "
                                                          f"{pdf_limits.time_s} s to read; send fewer at once")
            try:
                read = read_documents(path, replace(pdf_limits, time_s=max(1, left_s)))
            except (IngestError, UnicodeDecodeError) as exc:
                message = str(exc) if str(exc).startswith(f"{name}:") else f"{name}: {exc}"
                raise unprocessable(("body", "files", i), message) from None
            except Exception as exc:  # noqa: BLE001 - a malformed file can break a reader (the PDF parser) anywhere
                raise unprocessable(("body", "files", i), f"{name}: not readable ({type(exc).__name__})") from None
            for doc in read:
                if doc.id in first_file:
                    raise unprocessable(("body", "files", i),
                                        f"{name}: document id {doc.id!r} is also in {first_file[doc.id]}")
                first_file[doc.id] = name
            documents.extend(read)
    limit = DocumentsIn.model_fields["documents"].metadata[-1].max_length
    if len(documents) > limit:
        raise unprocessable(("body", "files"), f"{len(documents)} documents; at most {limit} per request "
                                               "(`agentsearch ingest` sends a larger file in parts)")
    try:
        body = DocumentsIn(documents=documents)
    except ValidationError as exc:
        raise unprocessable(("body", "files"), exc.errors()[0]["msg"]) from None
    return add_documents(collection_id, body, user_id, request)
