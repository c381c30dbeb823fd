"""Search jobs: submit, read status and the final response, download artifacts."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from datetime import timedelta

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from api.auth import CurrentUser
from api.errors import from_validation_error, not_found, unprocessable
from api.request_guard import GuardedRoute
from api.routes.collections import get_collection
from api.routes.profiles import agentic_spec
from api.schemas import SearchRequest
from pipeline.job.state import AgentSpec, JobState
from pipeline.job.store import TERMINAL, JobStore
from pipeline.platform.db import AgentConfigRow, CollectionAgent, Job, utcnow
from pipeline.platform.kv import canonical_hash
from pipeline.retrieval.config import SearchConfig
from worker.submit import enqueue_job

router = APIRouter(tags=["jobs"], route_class=GuardedRoute)
log = logging.getLogger("agentsearch.api")
# How often a waiting request or an event stream reads its job: a few reads a second per waiter keeps the
# database load of many waiters small and adds at most this much to what a waiter sees.
WAIT_POLL_S = 0.2


def collection_specs(s, collection_id: uuid.UUID, registry) -> list[AgentSpec]:
    rows = s.execute(
        select(AgentConfigRow, CollectionAgent)
        .join(CollectionAgent, CollectionAgent.agent_config_id == AgentConfigRow.id)
        .where(CollectionAgent.collection_id == collection_id, CollectionAgent.enabled, AgentConfigRow.enabled)
    ).all()
    return [
        AgentSpec(
            agent_id=cfg.agent_id,
            stage=cfg.trigger_stage,
            config=cfg.config,
            config_id=str(cfg.id),
            priority=link.priority if link.priority is not None else cfg.priority,
            # Resolved now, so the snapshot says what ran and Celery's backstop limits follow the agent's deadline.
            timeout_s=cfg.timeout_s or registry.get(cfg.agent_id).default_timeout_s,
            cache_ttl_s=cfg.cache_ttl_s,
            breaker_fail_max=cfg.breaker_fail_max,
            breaker_reset_timeout_s=cfg.breaker_reset_timeout_s,
        )
        for cfg, link in rows
    ]


@router.post("/v1/search", status_code=202, responses={200: {"description": "an existing or cached job"}})
async def submit_search(
    body: SearchRequest,
    user_id: CurrentUser,
    request: Request,
    wait: float = Query(0, ge=0, le=60, description="Seconds to wait for the result before answering 202."),
    idempotency_key: str | None = Header(None, max_length=255),
) -> JSONResponse:
    """Submit a search job. The same ``Idempotency-Key`` returns the same job; an identical earlier job (same
    query, options, agent configs and collection epochs) answers at once from its stored response.

    With ``wait``, the request waits for the job without holding a thread (a sleeping coroutine between short
    reads), so waiting clients never take the threads other requests run on; past the user's share of waits
    (``AGENTSEARCH_MAX_WAITS_PER_USER``) it answers 202 at once and the client polls.
    """
    services = request.app.state.services
    answered, job_id = await run_in_threadpool(_submit, body, user_id, services, idempotency_key)
    if answered is not None:
        return answered
    slots = request.app.state.waits
    if wait and slots.acquire(user_id):
        try:
            finished = await _wait_for(services, job_id, wait)
        finally:
            slots.release(user_id)
        if finished is not None:
            return JSONResponse(jsonable_encoder(finished), status_code=200)
    return await run_in_threadpool(_accepted_by_id, services, job_id)


async def _wait_for(services, job_id: uuid.UUID, wait_s: float) -> dict | None:
    """The job's view once it has ended, or None after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        status = await run_in_threadpool(JobStore(services.db).status, str(job_id))
        if status in TERMINAL:
            return await run_in_threadpool(_view_by_id, services, job_id)
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))


def _view_by_id(services, job_id: uuid.UUID) -> dict:
    with services.db.session() as s:
        return job_view(services, s.get(Job, job_id))


def _accepted_by_id(services, job_id: uuid.UUID) -> JSONResponse:
    with services.db.session() as s:
        return _accepted(s.get(Job, job_id), status_code=202)


def _submit(body: SearchRequest, user_id: uuid.UUID, services, idempotency_key: str | None
            ) -> tuple[JSONResponse | None, uuid.UUID | None]:
    """Validate, answer from an earlier job when one fits, else create and enqueue the job: (answer, None) or
    (None, id of the job enqueued)."""
    settings = services.settings
    query = body.query.strip()
    if not query:
        raise unprocessable(("body", "query"), "query must not be empty")
    if len(query) > settings.max_query_chars:
        raise unprocessable(("body", "query"), f"query is {len(query)} characters; the limit is {settings.max_query_chars}")
    top_k = body.top_k or settings.default_top_k
    if top_k > settings.max_top_k:
        raise unprocessable(("body", "top_k"), f"top_k may be at most {settings.max_top_k}")
    if body.agents is not None:
        for i, agent_id in enumerate(body.agents):
            if agent_id not in services.registry:
                raise unprocessable(("body", "agents", i), f"unknown agent id {agent_id!r}")
        if len(set(body.agents)) != len(body.agents):
            raise unprocessable(("body", "agents"), "an agent is listed twice")

    search = dict(body.search or {})
    if "top_k" in search:
        raise unprocessable(("body", "search", "top_k"), "set top_k at the top level of the request")
    try:
        SearchConfig(**{**settings.search_defaults(), **search, "top_k": top_k})
    except ValidationError as exc:
        raise from_validation_error(("body", "search"), exc) from None
    agentic = agentic_spec(body, settings)

    # Where each collection was named, for an error that points at the right list entry.
    named_at: dict[uuid.UUID, tuple] = {body.collection_id: ("body", "collection_id")}
    for i, extra in enumerate(body.also_search or []):
        named_at.setdefault(extra, ("body", "also_search", i))
    for i, profile in enumerate(agentic.profiles if agentic else []):
        for j, extra in enumerate(profile.collections):
            named_at.setdefault(extra, ("body", "profiles", i, "collections", j))
    collection_ids = list(named_at)
    with services.db.session() as s:
        if idempotency_key:
            earlier = s.scalar(
                select(Job).where(Job.user_id == user_id, Job.idempotency_key == idempotency_key)
            )
            if earlier is not None:
                return _accepted(earlier, status_code=200), None
        epochs = {}
        for i, collection_id in enumerate(collection_ids):
            try:
                collection = get_collection(s, collection_id, user_id)
            except HTTPException:
                if i == 0:
                    raise
                raise unprocessable(named_at[collection_id], f"collection {collection_id} not found") from None
            if collection.embedding_model != settings.embedding_model:
                raise HTTPException(
                    status_code=409,
                    detail=f"collection {collection.name!r} was indexed with {collection.embedding_model!r} but the "
                    f"service embeds queries with {settings.embedding_model!r}; re-ingest it or configure that model",
                )
            epochs[str(collection_id)] = collection.index_epoch
        if body.agents is not None:
            # Ad-hoc agents run with their default configs, in the order given.
            specs = [
                AgentSpec(
                    agent_id=a,
                    stage=services.registry.get(a).stage,
                    priority=i * 10,
                    timeout_s=services.registry.get(a).default_timeout_s,
                )
                for i, a in enumerate(body.agents)
            ]
        else:
            specs = collection_specs(s, body.collection_id, services.registry)
        snapshot = [spec.model_dump(mode="json") for spec in specs]
        cache_key = canonical_hash(
            [query, top_k, body.cot, search, snapshot, epochs, settings.embedding_model, settings.openai_model,
             *([agentic.model_dump(mode="json")] if agentic else [])]
        )
        job = Job(
            # Chosen here, not by the database, so a cached response can name its job in the same INSERT.
            id=uuid.uuid4(),
            user_id=user_id,
            collection_id=body.collection_id,
            query=query,
            status="queued",
            request=body.model_dump(mode="json"),
            config_snapshot=snapshot,
            deadline_at=utcnow() + timedelta(seconds=settings.job_deadline_s),
            idempotency_key=idempotency_key,
            cache_key=cache_key,
        )
        hit = None
        # Skipping what was seen makes each run's answer depend on the runs before it: never answered from cache.
        if body.use_cache and not (agentic and agentic.seen.enabled):
            candidates = s.scalars(
                select(Job)
                .where(Job.user_id == user_id, Job.cache_key == cache_key, Job.status == "succeeded",
                       Job.cached_from.is_(None))
                .order_by(Job.finished_at.desc())
                .limit(5)
            ).all()
            # Only a complete answer is reused: one with a failed agent or search error deserves a new try.
            hit = next((c for c in candidates if c.response and c.response.get("complete")), None)
            if hit is None:
                services.metrics.record_cache("job", False)
        if hit is not None:
            # The whole job is answered from the stored response: no Celery, no agents.
            now = utcnow()
            job.status, job.stage, job.cached_from = "succeeded", "done", hit.id
            job.stage_log = [{"stage": "done", "at": now.isoformat(), "cached": True}]
            job.response = {**hit.response, "job_id": str(job.id), "cached": True,
                            "cached_from": str(hit.id)}
            job.agent_runs, job.timings_ms = hit.agent_runs, {}
            job.started_at = job.finished_at = now
            if s.bind.dialect.name == "postgresql":
                # This row only points at a stored response, so it need not wait for its WAL flush: -16% p50 in
                # bench/cache_hit.py. A server crash in the next few hundred ms may lose the pointer, never a job's work.
                s.execute(text("SET LOCAL synchronous_commit TO OFF"))
        s.add(job)
        try:
            s.flush()
        except IntegrityError:
            raise HTTPException(status_code=409, detail="a job with this Idempotency-Key is being created") from None
        job_id = job.id
        if job.response is not None:
            # Counted after the response is sent: the hit's latency is the point of the cache (-10% p50).
            return _accepted(job, status_code=200,
                             background=BackgroundTask(services.metrics.record_cache, "job", True)), None
        state = JobState(
            job_id=str(job_id),
            collection_id=str(body.collection_id),
            user_id=str(user_id),
            query=query,
            original_query=query,
            top_k=top_k,
            cot=body.cot,
            search=search,
            collections=epochs,
            agentic=agentic.model_dump(mode="json") if agentic else None,
        )
        job.initial_state = state.dump()
    try:
        task_ids = enqueue_job(str(job_id), specs, state, settings.default_agent_timeout_s)
    except Exception as exc:  # noqa: BLE001 - the broker is down: take the job back, tell the client
        log.exception("could not enqueue job %s", job_id)
        with services.db.session() as s:
            job = s.get(Job, job_id)
            if job is not None:
                s.delete(job)
        raise HTTPException(status_code=503, detail=f"the job queue is unavailable: {type(exc).__name__}") from None
    JobStore(services.db).record_tasks(str(job_id), task_ids)
    return None, job_id


def _accepted(job: Job, status_code: int, background: BackgroundTask | None = None) -> JSONResponse:
    body = {
        "job_id": str(job.id),
        "status": job.status,
        "cached": job.cached_from is not None,
        "url": f"/v1/jobs/{job.id}",
    }
    return JSONResponse(body, status_code=status_code, headers={"Location": body["url"]}, background=background)


def _job(s, job_id: uuid.UUID, user_id: uuid.UUID) -> Job:
    job = s.get(Job, job_id)
    if job is None or job.user_id != user_id:
        raise not_found("job", job_id)
    return job


def job_view(services, job: Job) -> dict:
    """A job as the API shows it; artifacts inlined as base64 (stored once, in the job that made them)."""
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
        "response": None,
    }
    if not job.response:
        return view
    response = dict(job.response)
    rows = services.artifacts.for_job(str(job.cached_from or job.id))
    inlined = []
    for ref in response.get("agent_artifacts", []):
        row = rows.get(ref["id"])
        if row is None:
            continue
        inlined.append(
            {
                "agent_id": ref["agent_id"],
                "type": ref["type"],
                "data": base64.b64encode(row.data).decode("ascii"),
                "filename": ref["filename"],
                "content_type": ref["content_type"],
                "size": ref["size"],
                "metadata": ref["metadata"],
                "url": f"/v1/jobs/{job.id}/artifacts/{ref['filename']}",
            }
        )
    response["agent_artifacts"] = inlined
    view["response"] = response
    return view


@router.get("/v1/jobs")
def list_jobs(
    user_id: CurrentUser,
    request: Request,
    status: str | None = Query(None, pattern="^(queued|running|succeeded|failed|cancelled)$"),
    limit: int = Query(20, ge=1, le=200),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict:
    """Newest first; without responses (read one job for that)."""
    with request.app.state.services.db.session() as s:
        query = select(Job).where(Job.user_id == user_id)
        if status:
            query = query.where(Job.status == status)
        total = s.scalar(select(func.count()).select_from(query.subquery()))
        jobs = s.scalars(query.order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset)).all()
        items = [
            {"job_id": str(j.id), "collection_id": str(j.collection_id), "query": j.query, "status": j.status,
             "stage": j.stage, "cached": j.cached_from is not None, "created_at": j.created_at,
             "finished_at": j.finished_at}
            for j in jobs
        ]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/v1/jobs/{job_id}")
def read_job(job_id: uuid.UUID, user_id: CurrentUser, request: Request) -> dict:
    services = request.app.state.services
    with services.db.session() as s:
        return job_view(services, _job(s, job_id, user_id))


@router.delete("/v1/jobs/{job_id}", status_code=202)
def cancel_job(job_id: uuid.UUID, user_id: CurrentUser, request: Request) -> dict:
    """Cancel a job: its remaining steps do no work (running agents stop at their next boundary)."""
    services = request.app.state.services
    with services.db.session() as s:
        job = _job(s, job_id, user_id)
        if job.status in TERMINAL:
            raise HTTPException(status_code=409, detail=f"job {job_id} already {job.status}")
    jobs = JobStore(services.db)
    if jobs.cancel(str(job_id)):
        try:
            # Queued steps are dropped by the workers; a step already running finds the job cancelled at its
            # next boundary (the check every step makes), so nothing runs after either way.
            request.app.state.celery.control.revoke(jobs.task_ids(str(job_id)))
        except Exception:  # noqa: BLE001 - the broker is unreachable: the boundary checks still stop the job
            log.warning("could not revoke the tasks of cancelled job %s", job_id, exc_info=True)
    return {"job_id": str(job_id), "status": "cancelled"}


@router.get("/v1/jobs/{job_id}/events")
async def job_events(job_id: uuid.UUID, user_id: CurrentUser, request: Request) -> StreamingResponse:
    """Server-sent events: one per stage and per agent as they happen, then the final status."""
    services = request.app.state.services

    def check_owner() -> None:
        with services.db.session() as s:
            _job(s, job_id, user_id)

    await run_in_threadpool(check_owner)  # the database is not read on the event loop
    slots = request.app.state.waits
    if not slots.acquire(user_id):
        raise HTTPException(status_code=429, headers={"Retry-After": "5"},
                            detail=f"at most {slots.per_user} event streams and waiting requests at once per user")

    def snapshot() -> tuple[str, list[dict], list[dict], str | None]:
        with services.db.session() as s:
            job = s.get(Job, job_id)
            return job.status, list(job.stage_log or []), list(job.agent_runs or []), job.error

    async def stream():
        try:
            async for event in events():
                yield event
        finally:
            slots.release(user_id)

    async def events():
        seen_stages, seen_runs, seen_status = 0, 0, None
        deadline = time.monotonic() + services.settings.job_deadline_s + 60
        while time.monotonic() < deadline:
            status, stages, runs, error = await run_in_threadpool(snapshot)
            if status != seen_status:
                seen_status = status
                yield _sse("status", {"status": status})
            # Replayed from the job's stage log, so a stage shorter than the polling interval is not missed.
            for entry in stages[seen_stages:]:
                yield _sse("stage", entry)
            seen_stages = max(seen_stages, len(stages))
            for run in runs[seen_runs:]:
                yield _sse("agent", {k: run.get(k) for k in ("agent_id", "stage", "status", "duration_ms",
                                                              "cache_hit", "errors")})
            seen_runs = max(seen_runs, len(runs))
            if status in TERMINAL:
                yield _sse("done", {"status": status, "error": error})
                return
            if await request.is_disconnected():
                return
            await asyncio.sleep(WAIT_POLL_S)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


@router.get("/v1/jobs/{job_id}/artifacts/{filename}")
def download_artifact(job_id: uuid.UUID, filename: str, user_id: CurrentUser, request: Request) -> Response:
    services = request.app.state.services
    with services.db.session() as s:
        job = _job(s, job_id, user_id)
        owner = job.cached_from or job.id
    row = services.artifacts.get(str(owner), filename)
    if row is None:
        raise not_found("artifact", filename)
    return Response(
        content=row.data,
        media_type=row.content_type,
        headers={"Content-Disposition": f'attachment; filename="{row.filename}"'},
    )
