"""Search jobs: submit, read status and the final response, download artifacts.

What a submit decides (checks, idempotency, the cache, the job's row and first state) is
``agentsearch.pipeline.job.submit``; this route parses the request, puts a new job on the queues and waits for it when
asked to.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from agentsearch.api.audit import actor_of
from agentsearch.api.auth import CurrentUser, key_limits, still_valid
from agentsearch.api.errors import not_found
from agentsearch.api.job_events import WAIT_POLL_S, JobEvents
from agentsearch.api.rate_limits import job_admission
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.schemas import JobOut
from agentsearch.api.security_headers import attachment
from agentsearch.api.services import AppServices
from agentsearch.api.worker_side import enqueue_job
from agentsearch.pipeline.ingestion.cited import stale_marks
from agentsearch.pipeline.job.artifacts import ArtifactStore
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import TERMINAL, JobStore
from agentsearch.pipeline.job.request import SearchRequest
from agentsearch.pipeline.job.submit import Submission, audit_search, submit_job
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.records.job_response import JobResponse
from agentsearch.pipeline.security.audit import Actor
from agentsearch.pipeline.security.rate_windows import Admission
from agentsearch.pipeline.services import Services

router = APIRouter(tags=["jobs"], route_class=GuardedRoute)
log = logging.getLogger("agentsearch.api")
# A waiting request reads its job as often as an event stream does (``agentsearch.api.job_events.WAIT_POLL_S``). In the
# embedded mode the database is a local file of one process's, and a job with no agents ends in about 0.1 s
# (BENCHMARKS.md, the embedded mode's hops): a waiter reads it ten times as often, rather than wait twice the job.
EMBEDDED_WAIT_POLL_S = 0.02


@router.post("/v1/search", status_code=202, responses={200: {"description": "an existing or cached job"}})
async def submit_search(
    body: SearchRequest,
    user_id: CurrentUser,
    request: Request,
    services: AppServices,
    wait: float = Query(0, ge=0, le=60, description="Seconds to wait for the result before answering 202."),
    idempotency_key: str | None = Header(None, max_length=255),
) -> JSONResponse:
    """Submit a search job. The same ``Idempotency-Key`` returns the same job; an identical earlier job (same
    query, options, agent configs and collection epochs) answers at once from its stored response.

    With ``wait``, the request waits for the job without holding a thread (a sleeping coroutine between short
    reads), so waiting clients never take the threads other requests run on; past the user's share of waits
    (``AGENTSEARCH_MAX_WAITS_PER_USER``) it answers 202 at once and the client polls.
    """
    within = key_limits(request).collections
    submitted = await run_in_threadpool(_submit, services, user_id, body, idempotency_key, within, actor_of(request),
                                        job_admission(request))
    if not submitted.audited:
        await run_in_threadpool(_audit_search, request, services, body, submitted)
    if submitted.state is None:
        # An earlier job answered. A cache hit is counted after the response is sent: the hit's latency is the
        # point of the cache (-10% p50).
        counted = BackgroundTask(services.metrics.record_cache, "job", True) if submitted.cache_hit else None
        return _accepted(submitted.job_id, submitted.status, submitted.cached, 200, background=counted)
    slots = request.app.state.waits
    if wait and slots.acquire(user_id):
        try:
            finished = await _wait_for(request, services, submitted.job_id, wait, user_id)
        finally:
            slots.release(user_id)
        if finished is not None:
            return JSONResponse(jsonable_encoder(finished), status_code=200)
    return await run_in_threadpool(_accepted_by_id, services, submitted.job_id)


def _submit(services: Services, user_id: uuid.UUID, body: SearchRequest, idempotency_key: str | None,
            within: frozenset[uuid.UUID] | None = None, actor: Actor | None = None,
            admission: Admission | None = None) -> Submission:
    """The job submitted and, when it is a new one, on the queues; answered by an earlier job, it is audited in
    the submission's transaction when ``actor`` is given (``Submission.audited``). ``admission`` is released
    once the submission has committed: the job's row counts it among the user's running jobs from then on, also
    while the request waits for it (released in this thread, not another one's hop)."""
    try:
        submitted = submit_job(services, user_id, body, idempotency_key, within=within, actor=actor)
    finally:
        if admission is not None:
            admission.release()
    if submitted.state is not None:
        enqueue(services, str(submitted.job_id), submitted.specs, submitted.state)
    return submitted


def _audit_search(request: Request, services: Services, body: SearchRequest, submitted: Submission) -> None:
    """A new job's search in the trail, in a transaction of its own once the job is on the queues (``submit_job``
    commits its own, and a job the queue refused is taken back): a row that cannot be written answers 500 rather
    than a search nobody can find in the trail."""
    with services.db.session() as s:
        audit_search(s, actor_of(request), body, submitted)


def enqueue(services: Services, job_id: str, specs: list[AgentSpec], state: JobState) -> None:
    """Put a created job on the queues and keep its task ids (for cancel); with the broker down the job is taken
    back and the client told to come back (503), so no row waits for a worker that will never hear of it."""
    try:
        task_ids = enqueue_job(job_id, specs, state, services.settings.default_agent_timeout_s)
    except Exception as exc:  # the broker is down: take the job back, tell the client
        log.exception("could not enqueue job %s", job_id)
        JobStore(services.db).discard(job_id)
        # Retry-After: a broker restart takes seconds; the client sends again with its Idempotency-Key.
        raise HTTPException(status_code=503, detail=f"the job queue is unavailable: {type(exc).__name__}",
                            headers={"Retry-After": "5"}) from None
    JobStore(services.db).record_tasks(job_id, task_ids)


async def _wait_for(request: Request, services: Services, job_id: uuid.UUID, wait_s: float,
                    user_id: uuid.UUID) -> dict | None:
    """The job's view once it has ended, or None after ``wait_s`` (or when the user may no longer read it)."""
    deadline = time.monotonic() + wait_s
    poll_s = EMBEDDED_WAIT_POLL_S if services.settings.embedded else WAIT_POLL_S
    while True:
        status = await run_in_threadpool(JobStore(services.db).status, str(job_id))
        if status in TERMINAL:
            return await run_in_threadpool(_view_by_id, request, services, job_id, user_id)
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def _view_by_id(request: Request, services: Services, job_id: uuid.UUID, user_id: uuid.UUID) -> dict | None:
    """The ended job's view for its submitter; None when it may not read it now (a document group it left, or one
    a source of the job moved into while it ran): it gets the 202 of an id, and reading that answers 404."""
    with services.db.session() as s:
        job = Reach(request, s, user_id).seen_job(job_id)
        return job_view(services, job, stale_marks(s, [job.id]).get(job.id)) if job is not None else None


def _accepted_by_id(services: Services, job_id: uuid.UUID) -> JSONResponse:
    job = JobStore(services.db).get(str(job_id))
    assert job is not None  # submitted a moment ago: a job's row outlives any wait for it
    return _accepted(job.id, job.status, job.cached_from is not None, 202)


def _accepted(job_id: uuid.UUID, status: str, cached: bool, status_code: int,
              background: BackgroundTask | None = None) -> JSONResponse:
    body: dict[str, Any] = {"job_id": str(job_id), "status": status, "cached": cached, "url": f"/v1/jobs/{job_id}"}
    return JSONResponse(body, status_code=status_code, headers={"Location": body["url"]}, background=background)


def job_view(services: Services, job: JobRow, stale: dict[str, str] | None = None) -> dict:
    """A job as the API shows it; artifacts inlined as base64 (stored once, in the job that made them); ``stale``:
    its cited documents changed or deleted since (``agentsearch.pipeline.ingestion.cited.stale_marks``)."""
    view = {
        "job_id": str(job.id),
        "collection_id": str(job.collection_id),
        "query": job.query,
        "status": job.status,
        "stage": job.stage,
        "error": job.error,
        "cached": job.cached_from is not None,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "config_snapshot": job.config_snapshot,
        "agents": job.agent_runs,
        "timings_ms": job.timings_ms,
        "stale": stale or None,
        "response": None,
    }
    if not job.response:
        return view
    # The artifacts' bytes are stored once, in the job that made them (a cached copy's are its source's).
    rows = ArtifactStore.of(services).for_job(str(job.cached_from or job.id))
    stored = JobResponse.load(job.response)
    view["response"] = stored.with_artifacts_inlined({ref: row.data for ref, row in rows.items()}, str(job.id)).dump()
    return view


@router.get("/v1/jobs")
def list_jobs(
    user_id: CurrentUser,
    request: Request,
    services: AppServices,
    status: str | None = Query(None, pattern="^(queued|running|succeeded|failed|cancelled)$"),
    limit: int = Query(20, ge=1, le=200),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict:
    """Newest first; without responses (read one job for that): the jobs the caller reads, its own and every
    member's over its teams' collections. ``total`` counts exactly what the pages list: not a job over a team the
    caller has left, nor one that also searched what the caller (or its key, limited to collections) does not
    reach."""
    limits = key_limits(request)
    with services.db.session() as s:
        total, jobs = Reach(request, s, user_id).access.job_page(status, limits.collections, limit, offset)
        items = [
            {"job_id": str(j.id), "collection_id": str(j.collection_id), "query": j.query, "status": j.status,
             "stage": j.stage, "cached": j.cached_from is not None, "created_at": j.created_at,
             "finished_at": j.finished_at}
            for j in jobs
        ]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/v1/jobs/{job_id}", response_model=JobOut)
def read_job(job_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> dict:
    """The job, its response once it has one, and ``stale``: the cited documents changed or deleted since."""
    with services.db.session() as s:
        job = Reach(request, s, user_id).job(job_id)
        return job_view(services, job, stale_marks(s, [job.id]).get(job.id))


@router.delete("/v1/jobs/{job_id}", status_code=202)
def cancel_job(job_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> dict:
    """Cancel a job: its remaining steps do no work (running agents stop at their next boundary)."""
    with services.db.session() as s:
        job = Reach(request, s, user_id).job(job_id)
        if job.status in TERMINAL:
            raise HTTPException(status_code=409, detail=f"job {job_id} already {job.status}")
    jobs = JobStore(services.db)
    if jobs.cancel(str(job_id)):
        try:
            # Queued steps are dropped by the workers; a step already running finds the job cancelled at its
            # next boundary (the check every step makes), so nothing runs after either way.
            request.app.state.celery.control.revoke(jobs.task_ids(str(job_id)))
        except Exception:  # the broker is unreachable: the boundary checks still stop the job
            log.warning("could not revoke the tasks of cancelled job %s", job_id, exc_info=True)
    return {"job_id": str(job_id), "status": "cancelled"}


@router.get("/v1/jobs/{job_id}/events")
async def job_events(job_id: uuid.UUID, user_id: CurrentUser, request: Request,
                     services: AppServices) -> StreamingResponse:
    """Server-sent events: one per stage and per agent as they happen, the answer as it is written
    (``answer.delta``, then ``answer``: ``agentsearch.api.answer_events``), then the final status.

    The key is checked on the way in like any request's, and again while the stream is open
    (``agentsearch.api.job_events``): a stream outlives its request's check by as long as the job runs, and a revoked
    key must stop reading. A key found revoked ends the stream with an ``error`` event (``{"status": 401, "detail":
    ...}``) and no ``done``; a
    member removed from the team of the job's collection, with ``{"status": 404, ...}``."""

    def refusal() -> dict | None:
        """Why the stream must end now: its key revoked, or the job no longer seen (a member removed from the
        team stops reading at once, as its next request would)."""
        if not still_valid(request, user_id):
            return {"status": 401, "detail": "the API key is no longer valid; the stream ends"}
        with services.db.session() as s:
            if Reach(request, s, user_id).seen_job(job_id) is None:
                return {"status": 404, "detail": f"job {job_id} not found; the stream ends"}
        return None

    await run_in_threadpool(_reached_job, request, services, job_id, user_id)  # not on the event loop
    slots = request.app.state.waits
    if not slots.acquire(user_id):
        raise HTTPException(status_code=429, headers={"Retry-After": "5"},
                            detail=f"at most {slots.per_user} event streams and waiting requests at once per user")
    events = JobEvents(services, job_id, refusal=refusal, disconnected=request.is_disconnected)
    return StreamingResponse(events.stream(on_close=lambda: slots.release(user_id)), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


def _reached_job(request: Request, services: Services, job_id: uuid.UUID, user_id: uuid.UUID) -> None:
    with services.db.session() as s:
        Reach(request, s, user_id).job(job_id)


@router.get("/v1/jobs/{job_id}/artifacts/{filename}")
def download_artifact(job_id: uuid.UUID, filename: str, user_id: CurrentUser, request: Request,
                      services: AppServices) -> Response:
    """The artifact's bytes as a download: ``attachment``, its name safely quoted; ``nosniff``, on every answer
    (``agentsearch.api.security_headers``), keeps a browser from showing an artifact as a page of the API's origin."""
    with services.db.session() as s:
        job = Reach(request, s, user_id).job(job_id)
        owner = job.cached_from or job.id
    row = ArtifactStore.of(services).get(str(owner), filename)
    if row is None:
        raise not_found("artifact", filename)
    return Response(
        content=row.data,
        media_type=row.content_type,
        headers={"Content-Disposition": attachment(row.filename)},
    )
