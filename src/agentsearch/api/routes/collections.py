"""Collections and their documents.

A collection's view counts its documents by status and shows its current ingestion (``ingestion``: documents and
chunks done, the rate, the time left; ``agentsearch.pipeline.ingestion.progress``). Documents sent as JSON are stored
``pending`` and sent to the ingest workers as tasks of at most ``ingest_task_documents`` each, which they share.

Usage::

    GET  /v1/collections/{id}              -> {"documents": {"pending", "indexed", "failed"}, "ingestion": {...}, ...}
    POST /v1/collections/{id}/documents    -> 202 {"accepted", "task_id", "task_ids"}
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from fastapi import APIRouter, Request
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser, key_limits
from agentsearch.api.errors import not_found, unprocessable
from agentsearch.api.rate_limits import effective_limits
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.schemas import CollectionCreate, CollectionOut, CollectionUpdate, DocumentsAccepted, DocumentsIn
from agentsearch.api.services import AppServices, services_of
from agentsearch.pipeline.ingestion.documents import documents_by_id, remove_document, status_counts, visible_document
from agentsearch.pipeline.ingestion.lease import queue_in_tasks
from agentsearch.pipeline.ingestion.progress import collection_progress
from agentsearch.pipeline.job.stage_budget import StageTimeouts, over_deadline
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.document_access import groups_for, held_tokens, refuse_hidden, set_document_groups
from agentsearch.pipeline.security.quotas import check_chunk_limit, check_document_quota
from agentsearch.pipeline.security.teams import team_name

router = APIRouter(prefix="/v1/collections", tags=["collections"], route_class=GuardedRoute)


def _out(s: Session, c: CollectionRow, access: Access) -> CollectionOut:
    # Counted as the reader lists them: documents of groups it is not in are no trace of theirs.
    counts = status_counts(s, c, access.tokens)
    return CollectionOut(
        id=c.id,
        name=c.name,
        description=c.description,
        embedding_model=c.embedding_model,
        index_epoch=c.index_epoch,
        documents={k: counts.get(k, 0) for k in ("pending", "indexed", "failed")},
        created_at=c.created_at,
        stage_timeouts=c.stage_timeouts,
        ingestion=collection_progress(s, c.id),
        team_id=c.team_id,
        team=team_name(s, c.team_id) if c.team_id is not None else None,
        role=access.held(c),
    )


def checked_stage_timeouts(timeouts: StageTimeouts | None, deadline_s: float) -> dict[str, float] | None:
    """The stage budgets to store, or 422 naming the stage longer than the job deadline (which bounds them all)."""
    given = timeouts.given() if timeouts is not None else {}
    problem = over_deadline(given, deadline_s)
    if problem is not None:
        raise unprocessable(("body", "stage_timeouts", problem[0]), problem[1])
    return given or None


@router.post("", status_code=201, response_model=CollectionOut)
def create_collection(body: CollectionCreate, user_id: CurrentUser, request: Request,
                      services: AppServices) -> CollectionOut:
    """A personal collection, or with ``team_id`` one of the team's (its admins make them), for every member."""
    stage_timeouts = checked_stage_timeouts(body.stage_timeouts, services.settings.job_deadline_s)
    try:
        with services.db.session() as s:
            reach = Reach(request, s, user_id)
            if body.team_id is not None:
                reach.team(body.team_id)
            collection = CollectionRow(
                user_id=user_id,
                team_id=body.team_id,
                name=body.name,
                description=body.description,
                embedding_model=services.settings.embedding_model,
                stage_timeouts=stage_timeouts,
            )
            s.add(collection)
            s.flush()
            audit(request, s, "collection.create", team_id=body.team_id, collection_id=collection.id,
                  target=("collection", collection.id), details={"name": collection.name})
            return _out(s, collection, reach.access)
    except IntegrityError:
        raise unprocessable(("body", "name"), f"a collection named {body.name!r} already exists") from None


@router.get("", response_model=list[CollectionOut])
def list_collections(user_id: CurrentUser, request: Request, services: AppServices,
                     name: str | None = None) -> list[CollectionOut]:
    """The caller's personal collections and its teams' (each with ``team`` and the caller's ``role``). ``name``:
    ``team/name`` a team's; a plain name the personal one, or when there is none, the teams' of that name."""
    with services.db.session() as s:
        access = Reach(request, s, user_id).access
        return [_out(s, c, access) for c in access.collection_page(name, key_limits(request).collections)]


@router.get("/{collection_id}", response_model=CollectionOut)
def read_collection(collection_id: uuid.UUID, user_id: CurrentUser, request: Request,
                    services: AppServices) -> CollectionOut:
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        return _out(s, reach.collection(collection_id), reach.access)


@router.patch("/{collection_id}", response_model=CollectionOut)
def update_collection(collection_id: uuid.UUID, body: CollectionUpdate, user_id: CurrentUser,
                      request: Request, services: AppServices) -> CollectionOut:
    """Set the collection's stage budgets (``stage_timeouts``; null removes them): its next jobs run with them."""
    stage_timeouts = checked_stage_timeouts(body.stage_timeouts, services.settings.job_deadline_s)
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        collection = reach.collection(collection_id, lock=True)
        collection.stage_timeouts = stage_timeouts
        s.flush()
        audit(request, s, "collection.update", collection_id=collection_id, target=("collection", collection_id),
              details={"stage_timeouts": stage_timeouts})
        return _out(s, collection, reach.access)


@router.post("/{collection_id}/documents", status_code=202, response_model=DocumentsAccepted)
def add_documents(collection_id: uuid.UUID, body: DocumentsIn, user_id: CurrentUser, request: Request,
                  services: AppServices) -> DocumentsAccepted:
    """Store the documents as ``pending`` and queue their indexing; re-sending an id replaces that document."""
    seen: dict[str, int] = {}
    for i, doc in enumerate(body.documents):
        if doc.id in seen:
            raise unprocessable(("body", "documents", i, "id"),
                                f"duplicate document id {doc.id!r} (also at {seen[doc.id]})")
        seen[doc.id] = i
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        groups = [groups_for(collection, doc.access, ("body", "documents", i, "access"))
                  for i, doc in enumerate(body.documents)]
        # A team collection's documents count against the quota of the member who made it, not the sender's.
        existing = documents_within_quota(s, request, collection.user_id, collection_id, list(seen))
        refused_if_hidden(s, existing.values(), collection, user_id)
        rows = []
        for doc in body.documents:
            row = existing.get(doc.id) or DocumentRow(collection_id=collection_id, external_id=doc.id)
            row.title, row.text, row.metadata_ = doc.title, doc.text, doc.metadata
            s.add(row)
            rows.append(row)
        s.flush()
        for row, doc_groups in zip(rows, groups, strict=True):
            # Sent again without access, a document is found by every member again: the request says who finds it.
            if doc_groups or row.external_id in existing:
                set_document_groups(s, row, collection, doc_groups)
        audit(request, s, "document.add", collection_id=collection_id, target=("documents", len(rows)),
              details={"ids": [row.external_id for row in rows[:20]]})
        # Several tasks, not one: each ingest process of every worker host takes a share of the upload.
        tasks = queue_in_tasks(rows, services.settings.ingest_task_documents)
    celery = request.app.state.celery
    for task_id, row_ids in tasks:
        celery.send_task("agentsearch.ingest_documents", args=(str(collection_id), row_ids), task_id=task_id)
    return DocumentsAccepted(collection_id=collection_id, accepted=len(rows), task_id=tasks[0][0],
                             task_ids=[task_id for task_id, _ in tasks])


def refused_if_hidden(s: Session, rows: Iterable[DocumentRow], collection: CollectionRow, user_id: uuid.UUID) -> None:
    refuse_hidden(s, rows, collection, held_tokens(s, user_id))


def documents_within_quota(s: Session, request: Request, user_id: uuid.UUID, collection_id: uuid.UUID,
                           document_ids: list[str]) -> dict[str, DocumentRow]:
    """The collection's documents of these ids that exist, by id; refused (the HTTP error of the quota) when the
    others would take the user past the document quota, or the collection holds its chunk limit already. Called
    before anything is written, so a request past either stores none of its documents."""
    existing = documents_by_id(s, collection_id, document_ids)
    adding = len(set(document_ids)) - len(existing)
    check_document_quota(s, user_id, adding=adding, limit=effective_limits(request, user_id).max_documents)
    check_chunk_limit(s, collection_id, adding, services_of(request).settings.max_collection_chunks)
    return existing


@router.delete("/{collection_id}/documents/{document_id:path}", status_code=202)
def delete_document(collection_id: uuid.UUID, document_id: str, user_id: CurrentUser, request: Request,
                    services: AppServices) -> dict:
    """Remove a document: its row now, its vectors by a worker task; the collection's epoch moves on."""
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        collection = reach.collection(collection_id)
        # A document of groups the editor is not in is missing to it, for deleting as for reading.
        row = visible_document(s, collection, reach.access.tokens, document_id)
        if row is None:
            raise not_found("document", document_id)
        remove_document(s, row)
        audit(request, s, "document.delete", collection_id=collection_id, target=("document", document_id))
    result = request.app.state.celery.send_task("agentsearch.delete_documents",
                                                args=(str(collection_id), [document_id]))
    return {"collection_id": str(collection_id), "document_id": document_id, "task_id": result.id}
