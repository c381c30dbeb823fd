"""Profile sets: a user's specialist profiles, run on demand or on a schedule, with every run's results listed and,
when the set names response agents (``agents``), its briefing (``agentsearch.pipeline.job.briefing``).

A set's profiles are checked as a search request's are (``agentsearch.pipeline.agentic.spec.checked_spec``), with errors
that point at the field.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from sqlalchemy.exc import IntegrityError

from agentsearch.api.audit import audit_reads
from agentsearch.api.auth import CurrentUser
from agentsearch.api.errors import not_found, unprocessable
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.routes.jobs import enqueue
from agentsearch.api.schemas import ProfileSetCreate
from agentsearch.api.services import AppServices
from agentsearch.pipeline.agentic.spec import checked_spec
from agentsearch.pipeline.job.briefing import checked_agents
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.profile_sets import create_run, profile_sets_of, remove_profile_set, run_page
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.agentic import ProfileSetRow
from agentsearch.pipeline.refusal import Refusal

router = APIRouter(prefix="/v1/profile-sets", tags=["profiles"], route_class=GuardedRoute)
log = logging.getLogger("agentsearch.api")


def _out(row: ProfileSetRow) -> dict[str, Any]:
    options = row.options or {}
    return {
        "id": str(row.id), "name": row.name, "collection_id": str(row.collection_id), "query": row.query,
        "profiles": row.profiles, "iterative": options.get("iterative"), "seen": options.get("seen"),
        "agents": options.get("agents") or [], "schedule_s": row.schedule_s, "enabled": row.enabled,
        "next_run_at": row.next_run_at,
        "last_run_at": row.last_run_at, "created_at": row.created_at,
    }


@router.post("", status_code=201)
def create_profile_set(body: ProfileSetCreate, user_id: CurrentUser, request: Request,
                       services: AppServices) -> dict[str, Any]:
    spec = checked_spec(body.iterative, body.profiles, body.seen, services.settings)
    agents = checked_agents(body.agents, services.registry)
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        reach.collection(body.collection_id)
        for i, profile in enumerate(spec.profiles):
            for j, collection_id in enumerate(profile.collections):
                try:
                    reach.collection(collection_id)
                except Refusal:  # not reached here (missing, another user's, short of the role): the field named
                    raise unprocessable(("body", "profiles", i, "collections", j),
                                        f"collection {collection_id} not found") from None
        now = utcnow()
        row = ProfileSetRow(
            user_id=user_id, name=body.name, collection_id=body.collection_id, query=body.query.strip(),
            profiles=[p.model_dump(mode="json", exclude_defaults=True) for p in spec.profiles],
            options={"iterative": body.iterative, "seen": body.seen, "agents": agents}, schedule_s=body.schedule_s,
            enabled=body.enabled, next_run_at=now + timedelta(seconds=body.schedule_s) if body.schedule_s else None,
        )
        s.add(row)
        try:
            s.flush()
        except IntegrityError:
            raise HTTPException(status_code=409, detail=f"a profile set named {body.name!r} exists") from None
        return _out(row)


@router.get("")
def list_profile_sets(user_id: CurrentUser, services: AppServices) -> list[dict[str, Any]]:
    with services.db.session() as s:
        return [_out(r) for r in profile_sets_of(s, user_id)]


@router.get("/{set_id}")
def read_profile_set(set_id: uuid.UUID, user_id: CurrentUser, request: Request,
                     services: AppServices) -> dict[str, Any]:
    with services.db.session() as s:
        return _out(Reach(request, s, user_id).owned(ProfileSetRow, set_id, "profile set"))


@router.delete("/{set_id}", status_code=204)
def delete_profile_set(set_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> Response:
    with services.db.session() as s:
        remove_profile_set(s, Reach(request, s, user_id).owned(ProfileSetRow, set_id, "profile set"))
    return Response(status_code=204)


@router.post("/{set_id}/runs", status_code=202)
def run_profile_set(set_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> dict[str, Any]:
    """Run the set now; the run's job is listed under the set and readable at /v1/jobs/{job_id}."""
    created = create_run(services.db, services.settings, set_id, services.registry, trigger="manual", user_id=user_id)
    if created is None:
        raise not_found("profile set", set_id)
    job_id, state, specs = created
    enqueue(services, job_id, specs, state)  # with the broker down, the run is taken back and the client told (503)
    job = JobStore(services.db).get(str(job_id))
    assert job is not None  # made a moment ago: a run's job outlives this request
    with services.db.session() as s:  # a run is a search, in the trail of each collection it reads as POST /v1/search
        audit_reads(request, s, "search", [job.collection_id, *map(uuid.UUID, state.collections)],
                    target=("job", job_id), details={"profile_set": str(set_id)})
    return {"job_id": job_id, "status": "queued", "url": f"/v1/jobs/{job_id}"}


@router.get("/{set_id}/runs")
def list_runs(set_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices,
              limit: int = Query(20, ge=1, le=200),
              offset: int = Query(0, ge=0)) -> dict[str, Any]:
    """Newest first, each with its results merged by category once the run has ended."""
    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        reach.owned(ProfileSetRow, set_id, "profile set")
        total, rows = run_page(s, set_id, limit, offset)
        items, access = [], reach.access
        for run, job in rows:
            # A run's results are its job's: shown while the user may read that job (its document groups).
            shown = access.sees_job(job)
            agentic = (((job.response or {}).get("metadata") or {}).get("agentic") or {}) if shown else {}
            items.append({
                "run_id": str(run.id), "job_id": str(job.id), "trigger": run.trigger, "status": job.status,
                "stage": job.stage, "error": job.error, "created_at": run.created_at, "finished_at": job.finished_at,
                "results": agentic.get("results"),
            })
    return {"items": items, "total": total, "limit": limit, "offset": offset}
