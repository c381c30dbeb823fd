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
from sqlalchemy import select, update

from pipeline import stages
from pipeline.agents.base import Stage
from pipeline.db import Collection, DocumentRow
from pipeline.ingest import ChunkingConfig, index_documents
from pipeline.jobs import JobStore
from pipeline.llm import LLMClient
from pipeline.retrieval.vector_store import SchemaMismatch
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
    if not jobs.progress(current.job_id, f"{stage.value}:{agent_spec.agent_id}"):
        return state  # cancelled or ended: the rest of the chain passes through without work
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


@app.task(name="agentsearch.core_search")
def core_search(state: dict[str, Any], collection_id: str | None = None) -> dict[str, Any]:
    services = get_services()
    started = time.perf_counter()
    current = JobState.load(state)
    jobs = JobStore(services.db)
    if not jobs.progress(current.job_id, "core_search"):
        return state
    current = stages.core_search_step(current, services, collection_id)
    _timed(current, "core_search", started)
    jobs.progress(current.job_id, "core_search", current)
    return current.dump()


@app.task(name="agentsearch.merge_search")
def merge_search(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Callback of the per-collection search group."""
    merged = stages.merge_search_step([JobState.load(s) for s in states])
    merged.timings_ms["core_search"] = max(JobState.load(s).timings_ms.get("core_search", 0.0) for s in states)
    JobStore(get_services().db).progress(merged.job_id, "core_search", merged)
    return merged.dump()


@app.task(name="agentsearch.generate_answer")
def generate_answer(state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    if not JobStore(services.db).progress(state["job_id"], "answer"):
        return state
    started = time.perf_counter()
    settings = services.settings
    current = stages.answer_step(JobState.load(state), llm=LLMClient.from_settings(settings),
                                 # Lazy: a model that fails to load costs the answer its embedding score only.
                                 embed=lambda texts: services.embedder.embed(texts),
                                 language=settings.keyword_language)
    _timed(current, "answer", started)
    # Saved for the chord's callback, which receives only the response agents' records.
    JobStore(services.db).progress(current.job_id, "response", current, keep_state=True)
    return current.dump()


@app.task(name="agentsearch.response_agent")
def response_agent(state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    agent_spec = AgentSpec.model_validate(spec)
    try:
        services = get_services()
        if JobStore(services.db).is_cancelled(state["job_id"]):
            return AgentRun(agent_id=agent_spec.agent_id, config_id=agent_spec.config_id, stage=Stage.RESPONSE,
                            success=False, status="skipped", errors=["job cancelled"]).model_dump(mode="json")
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
    if jobs.is_cancelled(job_id):
        return {"job_id": job_id, "status": "cancelled"}
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


@app.task(name="agentsearch.reap_jobs")
def reap_jobs() -> list[str]:
    """Periodic: no job stays queued or running past its deadline (a worker killed mid-job, a lost message)."""
    reaped = JobStore(get_services().db).reap()
    if reaped:
        log.warning("reaped %d overdue jobs: %s", len(reaped), ", ".join(reaped))
    return reaped


@app.task(name="agentsearch.job_failed")
def job_failed(request, exc, traceback, job_id: str) -> None:
    """Errback of the job's canvas: a step outside the agents failed, so the job ends ``failed`` with why."""
    JobStore(get_services().db).fail(job_id, f"{getattr(request, 'task', 'step')} failed: {type(exc).__name__}: {exc}")


@app.task(name="agentsearch.ingest_documents", bind=True, max_retries=3)
def ingest_documents(self, collection_id: str, document_ids: list[str]) -> dict[str, int]:
    """Chunk, embed and index the given document rows; re-indexing a document replaces its earlier chunks."""
    services = get_services()
    settings = services.settings
    ids = [uuid.UUID(d) for d in document_ids]
    with services.db.session() as s:
        collection = s.get(Collection, uuid.UUID(collection_id))
        if collection is None:
            return {"indexed": 0, "failed": len(ids), "chunks": 0}
        rows = s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids), DocumentRow.status == "pending")).all()
        docs = [(r.external_id, r.title, r.text, dict(r.metadata_ or {})) for r in rows]
        milvus_name = collection.milvus_name
    if not docs:
        return {"indexed": 0, "failed": 0, "chunks": 0}  # a redelivered task whose work is already done
    embedder, store = services.embedder, services.vector_store
    try:
        store.ensure_collection(milvus_name, embedder.dimension)
    except SchemaMismatch as exc:
        _mark_documents(services, ids, "failed", str(exc))
        return {"indexed": 0, "failed": len(docs), "chunks": 0}
    chunking = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    chunks = index_documents(docs, embedder.embed, services.analyzer, chunking)
    try:
        store.delete_documents(milvus_name, [d[0] for d in docs])
        store.upsert(milvus_name, chunks)
    except Exception as exc:
        if self.request.retries >= self.max_retries:
            _mark_documents(services, ids, "failed", f"indexing failed: {type(exc).__name__}: {exc}")
            raise
        raise self.retry(exc=exc, countdown=2 ** self.request.retries)
    _mark_documents(services, ids, "indexed", None, bump_epoch=uuid.UUID(collection_id))
    return {"indexed": len(docs), "failed": 0, "chunks": len(chunks)}


@app.task(name="agentsearch.delete_documents", bind=True, max_retries=3)
def delete_documents(self, collection_id: str, external_ids: list[str]) -> dict[str, int]:
    services = get_services()
    try:
        services.vector_store.delete_documents(stages.milvus_collection_name(collection_id), external_ids)
    except Exception as exc:
        raise self.retry(exc=exc, countdown=2 ** self.request.retries)
    # Again now that the vectors are gone: results cached in between may still hold the document.
    _mark_documents(services, [], "indexed", None, bump_epoch=uuid.UUID(collection_id))
    return {"deleted": len(external_ids)}


def _mark_documents(services, ids: list[uuid.UUID], status: str, error: str | None,
                    bump_epoch: uuid.UUID | None = None) -> None:
    with services.db.session() as s:
        for row in s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids))).all():
            row.status, row.error = status, error
        if bump_epoch is not None:
            # Every change to the indexed content invalidates cached searches of the collection.
            s.execute(
                update(Collection).where(Collection.id == bump_epoch).values(index_epoch=Collection.index_epoch + 1)
            )
