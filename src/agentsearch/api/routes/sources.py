"""A collection's sources: where its documents come from, read on a schedule or when asked, and their runs.

The work is ``agentsearch.pipeline.sources``; a route parses, finds the collection with the role the route table
gives it (an editor of a team collection manages its sources, a viewer reads them), audits and answers. A source's
credentials (its kind's ``password``, ``secret_key``, ``token`` fields) are write-only: answered as ``"set"``.

Usage::

    POST   /v1/collections/{id}/sources {"kind": "web", "config": {"url": "https://example.org/docs/"},
                                        "schedule_s": 3600}                -> 201 the source
    GET    /v1/collections/{id}/sources                                     -> {"items": [...]}
    GET    /v1/collections/{id}/sources/{sid}                               -> the source, with its last run
    PATCH  /v1/collections/{id}/sources/{sid} {"config": {...}, "enabled": false}
    DELETE /v1/collections/{id}/sources/{sid}                               -> 202, its documents removed
    POST   /v1/collections/{id}/sources/{sid}/runs                          -> 202 the run, queued
    GET    /v1/collections/{id}/sources/{sid}/runs?limit=20                 -> {"items": [...]} newest first
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.services import AppServices
from agentsearch.pipeline.sources.ingest import remove
from agentsearch.pipeline.sources.store import (
    create_source,
    document_ids,
    new_run,
    runs_of,
    shown,
    shown_run,
    source_of,
    sources_of,
    update_source,
)

router = APIRouter(prefix="/v1/collections", tags=["sources"], route_class=GuardedRoute)
SOURCES = "/{collection_id}/sources"
SOURCE = SOURCES + "/{source_id}"


class SourceIn(BaseModel):
    kind: str = Field(max_length=40, description="web, feed or git (docs/sources.md).")
    config: dict[str, Any] = Field(description="The kind's settings; its credentials are write-only.")
    schedule_s: int | None = Field(None, description="Seconds between runs (null: only when asked).")
    enabled: bool = True


class SourceChange(BaseModel):
    config: dict[str, Any] | None = Field(None, description="Merged over the source's: a credential left out is kept.")
    schedule_s: int | None = None
    enabled: bool | None = None


def _last_runs(s, rows) -> dict:
    return {row.id: next(iter(runs_of(s, row.id, 1)), None) for row in rows}


@router.post(SOURCES, status_code=201)
def add_source(collection_id: uuid.UUID, body: SourceIn, user_id: CurrentUser, request: Request,
               services: AppServices) -> dict:
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        row = create_source(s, services.settings, collection, user_id, body.kind, body.config, body.schedule_s,
                            body.enabled)
        audit(request, s, "source.create", collection_id=collection_id, target=("source", row.id),
              details={"kind": row.kind, "schedule_s": row.schedule_s})
        return shown(row)


@router.get(SOURCES)
def list_sources(collection_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> dict:
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        rows = sources_of(s, collection_id)
        last = _last_runs(s, rows)
        return {"items": [shown(row, last[row.id]) for row in rows]}


@router.get(SOURCE)
def read_source(collection_id: uuid.UUID, source_id: uuid.UUID, user_id: CurrentUser, request: Request,
                services: AppServices) -> dict:
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        row = source_of(s, collection_id, source_id)
        return shown(row, _last_runs(s, [row])[row.id])


@router.patch(SOURCE)
def change_source(collection_id: uuid.UUID, source_id: uuid.UUID, body: SourceChange, user_id: CurrentUser,
                  request: Request, services: AppServices) -> dict:
    changes = body.model_dump(exclude_unset=True)
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        row = update_source(s, services.settings, source_of(s, collection_id, source_id, lock=True), changes)
        audit(request, s, "source.update", collection_id=collection_id, target=("source", source_id),
              details={"changed": sorted(changes)})
        return shown(row)


@router.delete(SOURCE, status_code=202)
def delete_source(collection_id: uuid.UUID, source_id: uuid.UUID, user_id: CurrentUser, request: Request,
                  services: AppServices) -> dict:
    """The source gone, and the documents it brought removed (their vectors by a worker's task)."""
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        row = source_of(s, collection_id, source_id, lock=True)
        tasks = remove(s, collection_id, document_ids(row))
        s.delete(row)
        audit(request, s, "source.delete", collection_id=collection_id, target=("source", source_id),
              details={"documents": sum(len(args[1]) for _, args, _ in tasks)})
    for name, args, task_id in tasks:
        request.app.state.celery.send_task(name, args=args, task_id=task_id)
    return {"id": str(source_id), "removed": sum(len(args[1]) for _, args, _ in tasks)}


@router.post(SOURCE + "/runs", status_code=202)
def start_run(collection_id: uuid.UUID, source_id: uuid.UUID, user_id: CurrentUser, request: Request,
              services: AppServices) -> dict:
    """A run queued now, on the ingest workers; one already under way makes it end ``skipped``."""
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        run = new_run(s, source_of(s, collection_id, source_id), "manual")
        audit(request, s, "source.run", collection_id=collection_id, target=("source", source_id),
              details={"run": str(run.id)})
        answer = shown_run(run)
    request.app.state.celery.send_task("agentsearch.run_source", args=(answer["id"],), queue="ingest")
    return answer


@router.get(SOURCE + "/runs")
def list_runs(collection_id: uuid.UUID, source_id: uuid.UUID, user_id: CurrentUser, request: Request,
              services: AppServices, limit: int = Query(20, ge=1, le=200)) -> dict:
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        return {"items": [shown_run(run) for run in runs_of(s, source_of(s, collection_id, source_id).id, limit)]}
