"""Thin Celery tasks: load the state, call ``pipeline``, record progress, pass the state on.

The state travels as the task's argument and return value (small JSON). Artifacts travel by reference. The
response-agent task never raises, so the chord's callback always runs.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import select

from pipeline import stages
from pipeline.agents.base import Stage
from pipeline.db import Collection, DocumentRow
from pipeline.ingest import build_chunks
from pipeline.jobs import JobStore
from pipeline.runner import worker_name
from pipeline.services import get_services
from pipeline.state import AgentRun, AgentSpec, JobState
from worker.app import app

log = logging.getLogger("agentsearch.worker")


def _timed(state: JobState, stage: str, started: float) -> None:
    state.timings_ms[stage] = round(state.timings_ms.get(stage, 0.0) + (time.perf_counter() - started) * 1000, 3)


def _agent_task(step, stage: Stage, state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    started = time.perf_counter()
    current = JobState.load(state)
    jobs = JobStore(services.db)
    agent_spec = AgentSpec.model_validate(spec)
    jobs.progress(current.job_id, f"{stage.value}:{agent_spec.agent_id}")
    current = step(current, agent_spec, services.runner)
    _timed(current, stage.value, started)
    jobs.progress(current.job_id, f"{stage.value}:{agent_spec.agent_id}", current)
    return current.dump()


@app.task(name="agentsearch.pre_search_agent")
def pre_search_agent(state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return _agent_task(stages.pre_search_step, Stage.PRE_SEARCH, state, spec)


@app.task(name="agentsearch.post_search_agent")
def post_search_agent(state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return _agent_task(stages.post_search_step, Stage.POST_SEARCH, state, spec)


@app.task(name="agentsearch.core_search", autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=3)
def core_search(state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    started = time.perf_counter()
    current = JobState.load(state)
    jobs = JobStore(services.db)
    jobs.progress(current.job_id, "core_search")
    current = stages.core_search_step(current, services)
    _timed(current, "core_search", started)
    jobs.progress(current.job_id, "core_search", current)
    return current.dump()


@app.task(name="agentsearch.generate_answer")
def generate_answer(state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    started = time.perf_counter()
    current = stages.answer_step(JobState.load(state))
    _timed(current, "answer", started)
    # Saved for the chord's callback, which receives only the response agents' records.
    JobStore(services.db).progress(current.job_id, "response", current, keep_state=True)
    return current.dump()


@app.task(name="agentsearch.response_agent")
def response_agent(state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    agent_spec = AgentSpec.model_validate(spec)
    try:
        services = get_services()
        run = stages.response_step(JobState.load(state), agent_spec, services.runner, services.artifacts)
    except BaseException as exc:  # noqa: BLE001 - never raise into the chord (SoftTimeLimitExceeded included)
        log.exception("response agent %s failed outside the runner", agent_spec.agent_id)
        status = "timeout" if isinstance(exc, SoftTimeLimitExceeded) else "error"
        run = AgentRun(
            agent_id=agent_spec.agent_id,
            config_id=agent_spec.config_id,
            stage=Stage.RESPONSE,
            success=False,
            status=status,
            errors=[f"{type(exc).__name__}: {exc}"],
            worker=worker_name(),
        )
    return run.model_dump(mode="json")


@app.task(name="agentsearch.assemble")
def assemble(records: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    services = get_services()
    jobs = JobStore(services.db)
    started = time.perf_counter()
    state = jobs.load_state(job_id)
    runs = [AgentRun.model_validate(r) for r in records if r]
    if runs:
        state.timings_ms["response"] = max(r.duration_ms for r in runs)
    response = stages.assemble_response(state, runs)
    _timed(state, "assemble", started)
    response["timings_ms"] = state.timings_ms
    jobs.succeed(job_id, response, [*state.agent_runs, *runs], state.timings_ms)
    return {"job_id": job_id, "status": "succeeded"}


@app.task(name="agentsearch.job_failed")
def job_failed(request, exc, traceback, job_id: str) -> None:
    """Errback of the job's canvas: a step outside the agents failed, so the job ends ``failed`` with why."""
    JobStore(get_services().db).fail(job_id, f"{getattr(request, 'task', 'step')} failed: {type(exc).__name__}: {exc}")


@app.task(name="agentsearch.ingest_documents", bind=True, max_retries=3)
def ingest_documents(self, collection_id: str, document_ids: list[str]) -> dict[str, int]:
    """Embed and index the given document rows; re-indexing a document replaces its earlier chunks."""
    services = get_services()
    ids = [uuid.UUID(d) for d in document_ids]
    with services.db.session() as s:
        collection = s.get(Collection, uuid.UUID(collection_id))
        if collection is None:
            return {"indexed": 0, "failed": len(ids)}
        rows = s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids))).all()
        docs = [(r.id, r.external_id, r.title, r.text, dict(r.metadata_ or {})) for r in rows]
        milvus_name = collection.milvus_name
    embedder, store = services.embedder, services.vector_store
    store.ensure_collection(milvus_name, embedder.dimension)
    chunks, failed = [], {}
    for row_id, external_id, title, text, metadata in docs:
        try:
            chunks.extend(build_chunks(external_id, title, text, metadata, embedder.embed))
        except Exception as exc:  # noqa: BLE001 - one bad document must not sink the batch
            failed[row_id] = f"{type(exc).__name__}: {exc}"
    try:
        store.delete_documents(milvus_name, [d[1] for d in docs])
        store.upsert(milvus_name, chunks)
    except Exception as exc:
        raise self.retry(exc=exc, countdown=2 ** self.request.retries)
    with services.db.session() as s:
        for row in s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids))).all():
            row.status, row.error = ("failed", failed[row.id]) if row.id in failed else ("indexed", None)
        collection = s.get(Collection, uuid.UUID(collection_id))
        collection.index_epoch += 1
    return {"indexed": len(docs) - len(failed), "failed": len(failed), "chunks": len(chunks)}
