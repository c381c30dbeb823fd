"""Profile sets: a user's specialist profiles, run on demand or on a schedule, with every run's results listed.

Also what ``POST /v1/search`` needs for ``mode: "iterative"``: the request's agentic part, validated, with errors
that point at the field.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from api.auth import CurrentUser
from api.errors import from_validation_error, not_found, unprocessable
from api.request_guard import GuardedRoute
from api.routes.collections import get_collection
from api.schemas import ProfileSetCreate
from pipeline.agentic.config import IterativeConfig
from pipeline.agentic.profiles import ProfileSet
from pipeline.agentic.schedule import create_run
from pipeline.agentic.seen import SeenPolicy
from pipeline.agentic.spec import AgenticSpec
from pipeline.job.store import JobStore
from pipeline.platform.db import Job, ProfileRun, ProfileSetRow, utcnow
from pipeline.platform.settings import Settings
from worker.submit import enqueue_job

router = APIRouter(prefix="/v1/profile-sets", tags=["profiles"], route_class=GuardedRoute)
log = logging.getLogger("agentsearch.api")


def _validated(iterative: dict | None, profiles: list[dict] | None, seen: dict | None, settings: Settings,
               source: str = "job") -> AgenticSpec:
    """Each part on its own first, so a 422 names the field that is wrong."""
    for loc, check in ((("body", "iterative"), lambda: IterativeConfig.model_validate(iterative or {})),
                       (("body", "seen"), lambda: SeenPolicy.model_validate(seen or {}))):
        try:
            check()
        except ValidationError as exc:
            raise from_validation_error(loc, exc) from None
    if profiles:
        try:
            ProfileSet(profiles=profiles)
        except ValidationError as exc:
            raise from_validation_error(("body",), exc) from None
    try:
        return AgenticSpec.for_request(iterative, profiles, seen, settings.test_mode, settings.seen_window_days,
                                       settings.seen_near_duplicate, source=source)
    except ValidationError as exc:  # a profile's overrides that do not fit the iterative settings
        raise from_validation_error(("body", "profiles"), exc) from None


def agentic_spec(body, settings: Settings) -> AgenticSpec | None:
    """The agentic part of a search request; None for the single pass."""
    if body.mode != "iterative":
        for name in ("iterative", "profiles", "seen"):
            if getattr(body, name) is not None:
                raise unprocessable(("body", name), f"{name} needs mode 'iterative'")
        return None
    return _validated(body.iterative, body.profiles, body.seen, settings)


class ScheduleTicker:
    """Embedded mode's stand-in for Celery beat's profile schedule: calls ``tick`` every ``interval_s``."""

    def __init__(self, tick: Callable[[], Any], interval_s: float) -> None:
        self.tick, self.interval_s = tick, interval_s
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="agentsearch-profile-schedule", daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - retried at the next tick
                log.exception("profile schedule tick failed")

    def stop(self) -> None:
        self._stop.set()


def _out(row: ProfileSetRow) -> dict[str, Any]:
    options = row.options or {}
    return {
        "id": str(row.id), "name": row.name, "collection_id": str(row.collection_id), "query": row.query,
        "profiles": row.profiles, "iterative": options.get("iterative"), "seen": options.get("seen"),
        "schedule_s": row.schedule_s, "enabled": row.enabled, "next_run_at": row.next_run_at,
        "last_run_at": row.last_run_at, "created_at": row.created_at,
    }


def _owned(s, set_id: uuid.UUID, user_id: uuid.UUID) -> ProfileSetRow:
    row = s.get(ProfileSetRow, set_id)
    if row is None or row.user_id != user_id:
        raise not_found("profile set", set_id)
    return row


@router.post("", status_code=201)
def create_profile_set(body: ProfileSetCreate, user_id: CurrentUser, request: Request) -> dict[str, Any]:
    services = request.app.state.services
    spec = _validated(body.iterative, body.profiles, body.seen, services.settings)
    with services.db.session() as s:
        get_collection(s, body.collection_id, user_id)
        for i, profile in enumerate(spec.profiles):
            for j, collection_id in enumerate(profile.collections):
                try:
                    get_collection(s, collection_id, user_id)
                except HTTPException:
                    raise unprocessable(("body", "profiles", i, "collections", j),
                                        f"collection {collection_id} not found") from None
        now = utcnow()
        row = ProfileSetRow(
            user_id=user_id, name=body.name, collection_id=body.collection_id, query=body.query.strip(),
            profiles=[p.model_dump(mode="json", exclude_defaults=True) for p in spec.profiles],
            options={"iterative": body.iterative, "seen": body.seen}, schedule_s=body.schedule_s,
            enabled=body.enabled, next_run_at=now + timedelta(seconds=body.schedule_s) if body.schedule_s else None,
        )
        s.add(row)
        try:
            s.flush()
        except IntegrityError:
            raise HTTPException(status_code=409, detail=f"a profile set named {body.name!r} exists") from None
        return _out(row)


@router.get("")
def list_profile_sets(user_id: CurrentUser, request: Request) -> list[dict[str, Any]]:
    with request.app.state.services.db.session() as s:
        rows = s.scalars(select(ProfileSetRow).where(ProfileSetRow.user_id == user_id)
                         .order_by(ProfileSetRow.created_at, ProfileSetRow.id)).all()
        return [_out(r) for r in rows]


@router.get("/{set_id}")
def read_profile_set(set_id: uuid.UUID, user_id: CurrentUser, request: Request) -> dict[str, Any]:
    with request.app.state.services.db.session() as s:
        return _out(_owned(s, set_id, user_id))


@router.delete("/{set_id}", status_code=204)
def delete_profile_set(set_id: uuid.UUID, user_id: CurrentUser, request: Request) -> Response:
    with request.app.state.services.db.session() as s:
        s.delete(_owned(s, set_id, user_id))
    return Response(status_code=204)


@router.post("/{set_id}/runs", status_code=202)
def run_profile_set(set_id: uuid.UUID, user_id: CurrentUser, request: Request) -> dict[str, Any]:
    """Run the set now; the run's job is listed under the set and readable at /v1/jobs/{job_id}."""
    services = request.app.state.services
    created = create_run(services.db, services.settings, set_id, trigger="manual", user_id=user_id)
    if created is None:
        raise not_found("profile set", set_id)
    job_id, state = created
    try:
        task_ids = enqueue_job(job_id, [], state, services.settings.default_agent_timeout_s)
    except Exception as exc:  # noqa: BLE001 - the broker is down: take the run back, tell the client
        log.exception("could not enqueue profile set run %s", job_id)
        with services.db.session() as s:
            job = s.get(Job, uuid.UUID(job_id))
            if job is not None:
                s.delete(job)
        raise HTTPException(status_code=503, detail=f"the job queue is unavailable: {type(exc).__name__}") from None
    JobStore(services.db).record_tasks(job_id, task_ids)
    return {"job_id": job_id, "status": "queued", "url": f"/v1/jobs/{job_id}"}


@router.get("/{set_id}/runs")
def list_runs(set_id: uuid.UUID, user_id: CurrentUser, request: Request, limit: int = Query(20, ge=1, le=200),
              offset: int = Query(0, ge=0)) -> dict[str, Any]:
    """Newest first, each with its results merged by category once the run has ended."""
    with request.app.state.services.db.session() as s:
        _owned(s, set_id, user_id)
        query = (select(ProfileRun, Job).join(Job, Job.id == ProfileRun.job_id)
                 .where(ProfileRun.profile_set_id == set_id))
        total = s.scalar(select(func.count()).select_from(query.subquery()))
        rows = s.execute(query.order_by(ProfileRun.created_at.desc(), ProfileRun.id).limit(limit).offset(offset)).all()
        items = []
        for run, job in rows:
            agentic = ((job.response or {}).get("metadata") or {}).get("agentic") or {}
            items.append({
                "run_id": str(run.id), "job_id": str(job.id), "trigger": run.trigger, "status": job.status,
                "stage": job.stage, "error": job.error, "created_at": run.created_at, "finished_at": job.finished_at,
                "results": agentic.get("results"),
            })
    return {"items": items, "total": total, "limit": limit, "offset": offset}
