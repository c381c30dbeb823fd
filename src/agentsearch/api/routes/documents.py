"""A collection's documents as its readers find them, and files uploaded as documents.

``POST /v1/collections/{id}/documents`` takes documents as JSON; a browser, the command line and a synced folder
hold files. The upload route reads each file through ``agentsearch.pipeline.ingestion.uploads``, which tells its format
from its bytes (``agentsearch.pipeline.parsing.sniff``). A JSON Lines file is read there, one document per line, and
stored through the JSON route's own code (a bad line refuses that file, naming the line). Any other file is stored with
its document ``pending`` and parsed by a worker (``agentsearch.worker.parsing``), which ends the document ``indexed`` or
``failed`` with the reason; the listing shows each document's pages read so far. A file refused at once (empty, of
no format the parsers read, a bad name) is listed in the answer's ``rejected``; nothing of it is stored and the
other files of the request are taken.

Usage::

    GET  /v1/collections/{id}/documents?status=failed&limit=50
         -> {"items": [{"id", "title", "status", ...}], "total"}
    GET  /v1/collections/{id}/documents/{document_id}              -> the document with its text and parts
    POST /v1/collections/{id}/files   (multipart/form-data, field "files", one or more; optional "document_ids";
                                       optional "access": '{"groups": ["hr"]}' for each file's document)
         -> 202 {"accepted", "documents": [{"id", "file", "format"}], "rejected": [{"file", "error"}]}
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser
from agentsearch.api.errors import not_found, unprocessable
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.routes.collections import add_documents, documents_within_quota, refused_if_hidden
from agentsearch.api.schemas import DocumentsIn, FilesAccepted
from agentsearch.api.services import AppServices
from agentsearch.pipeline.ingestion.documents import document_page, visible_document
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.security.document_access import DocumentAccess, document_groups, groups_for, shown_metadata
from agentsearch.pipeline.services import Services

if TYPE_CHECKING:
    from agentsearch.pipeline.ingestion.uploads import StoredFile

router = APIRouter(prefix="/v1/collections", tags=["collections"], route_class=GuardedRoute)

MAX_UPLOAD_FILES = 20


@router.get("/{collection_id}/documents")
def list_documents(
    collection_id: uuid.UUID,
    user_id: CurrentUser,
    request: Request, services: AppServices,
    status: str | None = Query(None, pattern="^(pending|indexed|failed)$"),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict:
    """The collection's documents the caller finds, oldest first, without their text (read one document for that).
    A document restricted to document groups is listed only for their members
    (``agentsearch.pipeline.security.document_access``)."""
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        collection = reach.collection(collection_id)
        total, rows = document_page(s, collection, reach.access.tokens, status, limit, offset)
        groups = document_groups(s, [r.id for r in rows])
        items = [{"id": r.external_id, "title": r.title, "status": r.status, "error": r.error,
                  "chars": len(r.text), "metadata": shown_metadata(r.metadata_), "access": _access(groups.get(r.id)),
                  "updated_at": r.updated_at, "pages_done": r.pages_done, "pages_total": r.pages_total,
                  "notes": r.notes or [], "content_hash": r.content_hash} for r in rows]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def _access(groups: list[str] | None) -> dict[str, list[str]] | None:
    return {"groups": groups} if groups else None


@router.get("/{collection_id}/documents/{document_id:path}")
def read_document(collection_id: uuid.UUID, document_id: str, user_id: CurrentUser, request: Request,
                  services: AppServices) -> dict:
    """One document with its text: what a citation of it points into. One restricted to document groups the caller
    is in none of answers 404, as a missing one."""
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        row = visible_document(s, reach.collection(collection_id), reach.access.tokens, document_id)
        if row is None:
            raise not_found("document", document_id)
        return {"id": row.external_id, "title": row.title, "text": row.text,
                "metadata": shown_metadata(row.metadata_), "access": _access(document_groups(s, [row.id]).get(row.id)),
                "status": row.status, "error": row.error, "updated_at": row.updated_at, "parts": row.parts or [],
                "notes": row.notes or [], "content_hash": row.content_hash, "pages_done": row.pages_done,
                "pages_total": row.pages_total}


@router.post("/{collection_id}/files", status_code=202, response_model=FilesAccepted,
             max_body_size=get_settings().max_upload_bytes)
def upload_files(
    collection_id: uuid.UUID,
    user_id: CurrentUser,
    request: Request, services: AppServices,
    files: list[UploadFile] = File(description="Any file the parsers read (PDF, scans and images, Word, PowerPoint, "
                                                "Excel, CSV, HTML, Markdown, text, e-mail): one document each; JSON "
                                                "Lines: one document per line."),
    document_ids: list[str] | None = Form(None, description="The id of each file's document, in the order of the "
                                                            "files (default: the file's name without the extension)."),
    access: str | None = Form(None, description='Who finds the files\' documents in a team collection, as JSON: '
                                                '{"groups": [...]}; a JSON Lines line\'s own access wins.'),
) -> FilesAccepted:
    """Store each file and its document as ``pending``; workers parse and index them (``agentsearch.worker.parsing``). A
    file that cannot be taken at all is listed in ``rejected`` with the reason, and nothing of it is stored; the others
    are taken. When every file is refused, the answer is 422 naming each."""
    from agentsearch.pipeline.ingestion.uploads import read_uploads  # the parsers load with their first use

    if len(files) > MAX_UPLOAD_FILES:
        raise unprocessable(("body", "files"), f"at most {MAX_UPLOAD_FILES} files per request")
    if document_ids is not None and len(document_ids) != len(files):
        raise unprocessable(("body", "document_ids"), f"{len(document_ids)} ids for {len(files)} files; give one "
                                                      "per file, or none")
    with services.db.session() as s:
        # Another user's collection is refused before any file is read.
        collection = Reach(request, s, user_id).collection(collection_id)
        given = _form_access(access, collection)
    # Each file read as its turn comes.
    uploads = read_uploads(((upload.filename or "", upload.file.read()) for upload in files), document_ids, given)
    taken, line_documents, rejected = uploads.files, uploads.documents, uploads.rejected
    if not taken and not line_documents:
        raise RequestValidationError([{"type": "value_error", "loc": ("body", "files", r["index"]),
                                       "msg": f"{r['file'] or 'the file'}: {r['error']}"} for r in rejected])
    task_ids: list[str] = []
    if line_documents:
        try:
            body = DocumentsIn(documents=line_documents)
        except ValidationError as exc:
            raise unprocessable(("body", "files"), exc.errors()[0]["msg"]) from None
        task_ids = add_documents(collection_id, body, user_id, request, services).task_ids
    documents = _store_files(request, services, collection_id, user_id, taken, given)
    return FilesAccepted(collection_id=collection_id, accepted=len(line_documents) + len(documents),
                         task_id=task_ids[0] if task_ids else None, task_ids=task_ids, documents=documents,
                         rejected=[{"file": r["file"], "error": r["error"]} for r in rejected])


def _form_access(raw: str | None, collection: CollectionRow) -> DocumentAccess | None:
    """The form's ``access`` field, read as the JSON route reads a document's: 422 naming it when it is not."""
    if raw is None or not raw.strip():
        return None
    try:
        given = DocumentAccess.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise unprocessable(("body", "access", *first["loc"]), first["msg"]) from None
    groups_for(collection, given, ("body", "access"))
    return given


def _store_files(request: Request, services: Services, collection_id: uuid.UUID, user_id: uuid.UUID,
                 taken: list[StoredFile], access: DocumentAccess | None) -> list[dict[str, str]]:
    """Each file's document ``pending`` and its bytes beside it (``store_upload``), then one parsing task per
    file."""
    from agentsearch.pipeline.ingestion.uploads import store_upload

    if not taken:
        return []
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        owner = collection.user_id  # whose quota, as for documents sent as JSON
        existing = documents_within_quota(s, request, owner, collection_id, [f.document_id for f in taken])
        refused_if_hidden(s, existing.values(), collection, user_id)
        rows = [(*store_upload(s, collection, existing.get(stored.document_id), stored, user_id, access), stored)
                for stored in taken]
        audit(request, s, "document.upload", collection_id=collection_id, target=("documents", len(rows)),
              details={"ids": [stored.document_id for _, _, stored in rows[:20]]})
    celery = request.app.state.celery
    for row_id, task_id, _ in rows:
        celery.send_task("agentsearch.parse_document", args=(str(collection_id), str(row_id)), task_id=task_id)
    return [{"id": stored.document_id, "file": stored.name, "format": stored.format} for _, _, stored in rows]
