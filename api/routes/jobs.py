"""Search jobs: submit, read status and the final response, download artifacts."""

from __future__ import annotations

import base64
import logging
import uuid
from datetime import timedelta

from fastapi import APIRouter, HTTPException, Request, Response
from sqlalchemy import select

from pydantic import ValidationError

from api.errors import from_validation_error, not_found, unprocessable
from api.routes.collections import get_collection
from api.schemas import JobAccepted, SearchRequest
from pipeline.db import DEFAULT_USER_ID, AgentConfigRow, CollectionAgent, Job, utcnow
from pipeline.retrieval.config import SearchConfig
from pipeline.state import AgentSpec, JobState
from worker.canvas import build_job_canvas

router = APIRouter(tags=["jobs"])
log = logging.getLogger("agentsearch.api")


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


@router.post("/v1/search", status_code=202, response_model=JobAccepted)
def submit_search(body: SearchRequest, request: Request, response: Response) -> JobAccepted:
    services = request.app.state.services
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

    collection_ids = list(dict.fromkeys([body.collection_id, *(body.also_search or [])]))
    job_id = uuid.uuid4()
    with services.db.session() as s:
        epochs = {}
        for i, collection_id in enumerate(collection_ids):
            try:
                collection = get_collection(s, collection_id)
            except HTTPException:
                if i == 0:
                    raise
                raise unprocessable(("body", "also_search", i - 1), f"collection {collection_id} not found") from None
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
        s.add(
            Job(
                id=job_id,
                user_id=DEFAULT_USER_ID,
                collection_id=body.collection_id,
                query=query,
                status="queued",
                request=body.model_dump(mode="json"),
                config_snapshot=[spec.model_dump(mode="json") for spec in specs],
                deadline_at=utcnow() + timedelta(seconds=settings.job_deadline_s),
            )
        )
    state = JobState(
        job_id=str(job_id),
        collection_id=str(body.collection_id),
        user_id=str(DEFAULT_USER_ID),
        query=query,
        original_query=query,
        top_k=top_k,
        cot=body.cot,
        search=search,
        collections=epochs,
    )
    canvas = build_job_canvas(str(job_id), specs, settings.default_agent_timeout_s, list(epochs))
    try:
        canvas.apply_async((state.dump(),))
    except Exception as exc:  # noqa: BLE001 - the broker is down: take the job back, tell the client
        log.exception("could not enqueue job %s", job_id)
        with services.db.session() as s:
            job = s.get(Job, job_id)
            if job is not None:
                s.delete(job)
        raise HTTPException(status_code=503, detail=f"the job queue is unavailable: {type(exc).__name__}") from None
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    return JobAccepted(job_id=job_id, status="queued", url=f"/v1/jobs/{job_id}")


def _job(s, job_id: uuid.UUID) -> Job:
    job = s.get(Job, job_id)
    if job is None or job.user_id != DEFAULT_USER_ID:
        raise not_found("job", job_id)
    return job


@router.get("/v1/jobs/{job_id}")
def read_job(job_id: uuid.UUID, request: Request) -> dict:
    services = request.app.state.services
    with services.db.session() as s:
        job = _job(s, job_id)
        view = {
            "job_id": str(job.id),
            "collection_id": str(job.collection_id),
            "query": job.query,
            "status": job.status,
            "stage": job.stage,
            "error": job.error,
            "created_at": job.created_at,
            "started_at": job.started_at,
            "finished_at": job.finished_at,
            "config_snapshot": job.config_snapshot,
            "agents": job.agent_runs,
            "timings_ms": job.timings_ms,
            "response": None,
        }
        response = dict(job.response) if job.response else None
    if response is not None:
        rows = services.artifacts.for_job(str(job_id))
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
                    "url": f"/v1/jobs/{job_id}/artifacts/{ref['filename']}",
                }
            )
        response["agent_artifacts"] = inlined
        view["response"] = response
    return view


@router.get("/v1/jobs/{job_id}/artifacts/{filename}")
def download_artifact(job_id: uuid.UUID, filename: str, request: Request) -> Response:
    services = request.app.state.services
    with services.db.session() as s:
        _job(s, job_id)
    row = services.artifacts.get(str(job_id), filename)
    if row is None:
        raise not_found("artifact", filename)
    return Response(
        content=row.data,
        media_type=row.content_type,
        headers={"Content-Disposition": f'attachment; filename="{row.filename}"'},
    )
