"""Thin Celery tasks: load the state, call ``pipeline``, record progress, pass the state on.

The state travels as the task's argument and return value (small JSON). Artifacts travel by reference. The
response-agent task never raises, so the chord's callback always runs.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from celery import states
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import exc as sql_errors
from sqlalchemy import select, update

from pipeline.agents.base import Stage
from pipeline.agents.runner import worker_name
from pipeline.ingest import ChunkingConfig, index_documents
from pipeline.job import steps
from pipeline.job.ledger import StepLedger
from pipeline.job.state import AgentRun, AgentSpec, JobState
from pipeline.job.store import TERMINAL, JobStore
from pipeline.platform.backoff import backoff_delay
from pipeline.platform.db import Collection, DocumentRow, milvus_collection_name
from pipeline.platform.kv import connect_redis
from pipeline.platform.llm import LLMClient
from pipeline.retrieval.outcome import SearchFailed, search_failure
from pipeline.retrieval.vector_store import SchemaMismatch
from pipeline.services import get_services
from worker.app import LONGEST_RETRY_DELAY_S, app
from worker.canvas import ordered
from worker.liveness import alive_nodes
from worker.observability import end_job_trace
from worker.submit import enqueue_job

log = logging.getLogger("agentsearch.worker")

# The database going away (a restart, a failover) is waited out by retrying the step with backoff (1, 2, 4 ... 30 s,
# about four minutes in all), not turned into a failed job. A step's output is in the ledger before its last write,
# so a retry after the work is done does not do the work again.
DB_UNAVAILABLE = (sql_errors.OperationalError, sql_errors.InterfaceError, sql_errors.TimeoutError)
DB_RETRY = dict(autoretry_for=DB_UNAVAILABLE, retry_backoff=1, retry_backoff_max=LONGEST_RETRY_DELAY_S,
                retry_jitter=False, max_retries=12)
# How long assemble waits for a response agent's record the chord did not bring: 10 tries, 2 s apart (within
# DB_RETRY's max_retries, whose count it shares).
ASSEMBLE_WAITS, ASSEMBLE_WAIT_S = 10, 2
# How long a finished response agent's artifact waits for the database to come back before it is given up.
ARTIFACT_SAVE_WAIT_S = 30.0

_ledgers: dict[int, StepLedger] = {}


def _ledger() -> StepLedger:
    """This process's step ledger, in the result backend's Redis (which never evicts, unlike a cache instance).

    Embedded mode has no redelivery and no second process, so nothing can run twice: the ledger is off there.
    """
    pid = os.getpid()  # a forked process must not use its parent's connection
    if pid not in _ledgers:
        settings = get_services().settings
        url = next((u for u in (settings.result_backend, settings.broker_url) if str(u).startswith("redis")), None)
        client = None if settings.embedded or url is None else connect_redis(url)
        _ledgers[pid] = StepLedger(client, ttl_s=max(3600.0, settings.job_deadline_s * 4))
    return _ledgers[pid]


def _step_key(stage: Stage, spec: AgentSpec) -> str:
    # One agent may run twice in a job with different configs, never twice with the same config and priority.
    return f"{stage.value}:{spec.agent_id}:{spec.config_id or ''}:{spec.priority}"


def _timed(state: JobState, stage: str, started: float) -> None:
    state.timings_ms[stage] = round(state.timings_ms.get(stage, 0.0) + (time.perf_counter() - started) * 1000, 3)


def _agent_task(step, stage: Stage, state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    started = time.perf_counter()
    current = JobState.load(state)
    jobs = JobStore(services.db)
    agent_spec = AgentSpec.model_validate(spec)
    # One write per step: the stage it begins, the records of the steps before it (the state it was handed) and
    # the cancellation check. Its own record is written by the next step, which receives it: a second write at
    # the end made every agent step wait for the database twice.
    if not jobs.progress(current.job_id, f"{stage.value}:{agent_spec.agent_id}", current):
        return state  # cancelled or ended: the rest of the chain passes through without work
    ledger, key = _ledger(), _step_key(stage, agent_spec)
    done = ledger.get(current.job_id, key)
    if done is None:  # not run before for this job (a redelivered message or a retried job finds it done)
        current = step(current, agent_spec, services.runner)
        _timed(current, stage.value, started)
        done = ledger.put(current.job_id, key, current.dump())
    return done


@app.task(name="agentsearch.pre_search_agent", **DB_RETRY)
def pre_search_agent(state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return _agent_task(steps.pre_search_step, Stage.PRE_SEARCH, state, spec)


@app.task(name="agentsearch.post_search_agent", **DB_RETRY)
def post_search_agent(state: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return _agent_task(steps.post_search_step, Stage.POST_SEARCH, state, spec)


@app.task(name="agentsearch.core_search", bind=True, **DB_RETRY)
def core_search(self, state: dict[str, Any], collection_id: str | None = None) -> dict[str, Any]:
    """Search the job's collection (or one of several: ``collection_id``).

    A search that failed outright (nothing found, Milvus errors: ``pipeline.retrieval.outcome``) is not handed on
    as "no documents matched": the step runs again with backoff for ``MILVUS_RETRY_S`` (a Milvus restart), then
    the job fails with the search's error. One collection of several hands its failure on to ``merge_search``,
    which fails the job only if no collection found anything.
    """
    services = get_services()
    started = time.perf_counter()
    current = JobState.load(state)
    jobs = JobStore(services.db)
    # The records of the agents before it; its own go with the next step's write (see _agent_task). Also the
    # cancellation check of each retry below.
    if not jobs.progress(current.job_id, "core_search", current):
        return state
    ledger, key = _ledger(), f"core_search:{collection_id or ''}"
    done = ledger.get(current.job_id, key)
    if done is None:
        current = steps.core_search_step(current, services, collection_id)
        search = current.metadata.get("search") or {}
        services.metrics.record_search(search)
        if self.request.retries:
            search["attempts"] = self.request.retries + 1
        if reason := search_failure(search, len(current.documents)):
            # Not in the ledger: a redelivered copy must search again, not hand on the failure.
            delay = backoff_delay(self.request.retries, services.settings.milvus_retry_s)
            if delay is not None:
                log.warning("job %s: %s; searching again in %g s", current.job_id, reason, delay)
                raise self.retry(countdown=delay, max_retries=self.request.retries + 1)
            if collection_id is None:
                raise SearchFailed(f"{reason} (after {self.request.retries + 1} attempts)")
        _timed(current, "core_search", started)
        done = ledger.put(current.job_id, key, current.dump())
    return done


@app.task(name="agentsearch.merge_search", **DB_RETRY)
def merge_search(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Callback of the per-collection search group: a failure of every collection fails the job (see core_search),
    a failure of some makes the merged search degraded."""
    merged = steps.merge_search_step([JobState.load(s) for s in states])
    merged.timings_ms["core_search"] = max(JobState.load(s).timings_ms.get("core_search", 0.0) for s in states)
    if reason := search_failure(merged.metadata["search"], len(merged.documents)):
        raise SearchFailed(reason)
    done = _ledger().put(merged.job_id, "merge_search", merged.dump())
    JobStore(get_services().db).progress(merged.job_id, "core_search", JobState.load(done))
    return done


@app.task(name="agentsearch.generate_answer", **DB_RETRY)
def generate_answer(state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    current = JobState.load(state)
    # With the records of the steps before it, which do not write their own (see _agent_task).
    if not JobStore(services.db).progress(current.job_id, "answer", current):
        return state
    ledger = _ledger()
    done = ledger.get(current.job_id, "answer")
    if done is None:
        started = time.perf_counter()
        settings = services.settings
        current = steps.answer_step(current, llm=LLMClient.from_settings(settings),
                                     # Lazy: a model that fails to load costs the answer its embedding score only.
                                     embed=lambda texts: services.embedder.embed(texts),
                                     language=settings.keyword_language)
        _timed(current, "answer", started)
        done = ledger.put(current.job_id, "answer", current.dump())
    # Saved for the chord's callback, which receives only the response agents' records.
    JobStore(services.db).progress(current.job_id, "response", JobState.load(done), keep_state=True)
    return done


@app.task(name="agentsearch.response_agent", bind=True)
def response_agent(self, state: dict[str, Any], spec: dict[str, Any], name_rank: int = 1) -> dict[str, Any]:
    """One response agent: its artifact stored (named by ``name_rank``, see ``pipeline.job.artifact_names``), its record
    returned to the chord. Never raises."""
    agent_spec = AgentSpec.model_validate(spec)
    job_id = state["job_id"]
    ledger, key = _ledger(), _step_key(Stage.RESPONSE, agent_spec)

    def skipped(why: str) -> dict[str, Any]:
        return AgentRun(agent_id=agent_spec.agent_id, config_id=agent_spec.config_id, stage=Stage.RESPONSE,
                        success=False, status="skipped", errors=[why]).model_dump(mode="json")

    try:
        services = get_services()
        status = JobStore(services.db).status(job_id)
        if status == "cancelled":
            return skipped("job cancelled")
        done = ledger.get(job_id, key)
        if done is not None:
            return done  # this agent already made its artifact for this job: it is not called twice
        if status in TERMINAL:
            return skipped(f"job already {status}")  # a late copy: the job no longer waits for it
        run = steps.response_step(JobState.load(state), agent_spec, services.runner,
                                   _PatientArtifacts(services.artifacts, ARTIFACT_SAVE_WAIT_S), name_rank=name_rank)
    except DB_UNAVAILABLE as exc:
        if self.request.retries < DB_RETRY["max_retries"]:
            # A retry is not a failure: the chord counts this header task when the retry returns.
            raise self.retry(exc=exc, countdown=min(2 ** self.request.retries, LONGEST_RETRY_DELAY_S)) from exc
        run = _failed_run(agent_spec, "error", exc)
    except BaseException as exc:  # noqa: BLE001 - never raise into the chord (SoftTimeLimitExceeded included)
        log.exception("response agent %s failed outside the runner", agent_spec.agent_id)
        run = _failed_run(agent_spec, "timeout" if isinstance(exc, SoftTimeLimitExceeded) else "error", exc)
    return ledger.put(job_id, key, run.model_dump(mode="json"))


class _PatientArtifacts:
    """Artifact storage that waits out a short database outage instead of losing a finished agent's artifact.

    Measured in the PostgreSQL drill (docs/reliability.md): 1 of 12 jobs in flight lost its artifact, recorded as
    the agent's error, because the database went away while the agent was rendering. Retrying the whole task would
    call the agent again; waiting here keeps its work. The task's soft time limit still bounds the wait.
    """

    def __init__(self, store, wait_s: float) -> None:
        self.store, self.wait_s = store, wait_s

    def save(self, job_id: str, artifact):
        deadline, delay = time.monotonic() + self.wait_s, 0.5
        while True:
            try:
                return self.store.save(job_id, artifact)
            except DB_UNAVAILABLE:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def __getattr__(self, name: str):
        return getattr(self.store, name)


def _failed_run(spec: AgentSpec, status: str, exc: BaseException) -> AgentRun:
    return AgentRun(agent_id=spec.agent_id, config_id=spec.config_id, stage=Stage.RESPONSE, success=False,
                    status=status, errors=[f"{type(exc).__name__}: {exc}"], worker=worker_name())


def _response_runs(job_id: str, snapshot: list[dict[str, Any]],
                   records: list[dict[str, Any]]) -> tuple[list[AgentRun], list[str]]:
    """The response agents' records, exactly one per agent of the job, in the canvas's order.

    Each comes from the ledger (the first record its agent stored), else from the chord. The chord's list is not
    trusted alone: a result backend that counted a header task's duplicate (Celery's Redis backend before 5.7)
    fires the callback with a record twice and another missing. The missing agents are named for the caller.
    """
    chord_records: dict[tuple, dict[str, Any]] = {}
    for record in records:
        if record:
            chord_records.setdefault((record.get("agent_id"), record.get("config_id")), record)
    specs = ordered([AgentSpec.model_validate(s) for s in snapshot], Stage.RESPONSE)
    if not specs:
        return [AgentRun.model_validate(r) for r in chord_records.values()], []
    stored = _ledger().steps(job_id)
    runs, missing = [], []
    for spec in specs:
        record = stored.get(_step_key(Stage.RESPONSE, spec)) or chord_records.get((spec.agent_id, spec.config_id))
        if record is None:
            missing.append(spec.agent_id)
        else:
            runs.append(AgentRun.model_validate(record))
    return runs, missing


@app.task(name="agentsearch.assemble", bind=True, **DB_RETRY)
def assemble(self, records: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    services = get_services()
    jobs = JobStore(services.db)
    status, state, snapshot = jobs.for_assembly(job_id)
    if status == "cancelled":
        end_job_trace(jobs, job_id)
        return {"job_id": job_id, "status": "cancelled"}
    if status in TERMINAL:
        return {"job_id": job_id, "status": status}  # a second run: the first one already ended the job
    if state is None:
        raise LookupError(f"job {job_id} has no saved state")
    started = time.perf_counter()
    runs, missing = _response_runs(job_id, snapshot, records)
    if missing:
        if self.request.retries < ASSEMBLE_WAITS:
            raise self.retry(countdown=ASSEMBLE_WAIT_S)
        log.error("job %s assembled without the records of %s", job_id, missing)
        runs += [AgentRun(agent_id=a, stage=Stage.RESPONSE, success=False, status="error",
                          errors=["its record never reached the job"]) for a in missing]
    if runs:
        state.timings_ms["response"] = max(r.duration_ms for r in runs)
    response = steps.assemble_response(state, runs)
    _timed(state, "assemble", started)
    response["timings_ms"] = state.timings_ms
    if jobs.succeed(job_id, response, [*state.agent_runs, *runs], state.timings_ms):
        end_job_trace(jobs, job_id)
        _ledger().clear(job_id)  # the job has ended: a late copy of any step now stops at its first check
    return {"job_id": job_id, "status": "succeeded"}


def _started_nodes(task_ids: list[str]) -> set[str]:
    """The nodes these tasks were seen starting on: a started task's result holds its node's name until the task
    ends (task_track_started)."""
    backend = app.backend
    client = getattr(backend, "client", None)
    if client is None or not task_ids:
        return set()
    nodes = set()
    for raw in client.mget([backend.get_key_for_task(t) for t in task_ids]):
        if raw is None:
            continue
        meta = backend.decode_result(raw)
        if meta.get("status") == states.STARTED and isinstance(meta.get("result"), dict):
            nodes.add(meta["result"].get("hostname"))
    return {n for n in nodes if n}


def _held_task_ids() -> set[str]:
    """Task ids whose message a consumer holds unacknowledged (kombu's Redis transport keeps them in the broker's
    ``unacked`` hash until the ack, or until the visibility timeout hands them out again)."""
    url = str(get_services().settings.broker_url)
    if not url.startswith("redis"):
        return set()
    held = set()
    for raw in connect_redis(url).hvals("unacked"):
        try:
            held.add(json.loads(raw)[0]["headers"]["id"])
        except (ValueError, LookupError, TypeError):
            continue
    return held


def _lost_task_nodes() -> Callable[[list[str]], set[str]]:
    """For one sweep: the nodes holding a job's started, unacknowledged tasks.

    A started state alone is not enough. A task killed with its process on a live node goes back to the queue and
    keeps its old started state until it runs again: measured under the kill drill, judging by the state alone
    sent 15 jobs round a second time when the node they had once started on died.
    """
    held: set[str] | None = None

    def nodes(task_ids: list[str]) -> set[str]:
        nonlocal held
        try:
            if held is None:
                held = _held_task_ids()
            return _started_nodes([t for t in task_ids if t in held])
        except Exception:  # noqa: BLE001 - without the answer the reaper goes by the job's last node only
            log.warning("could not tell where the tasks of a job run", exc_info=True)
            return set()

    return nodes


@app.task(name="agentsearch.reap_jobs")
def reap_jobs() -> dict[str, list[str]]:
    """Periodic: a job whose worker died is enqueued again, once; one past its deadline is failed with why.

    A job enqueued again keeps the outputs its steps already stored (the step ledger): it resumes where the lost
    worker stopped instead of calling its agents a second time.
    """
    services = get_services()
    jobs = JobStore(services.db)
    result = jobs.reap(alive_nodes=alive_nodes(), deadline_s=services.settings.job_deadline_s,
                       task_nodes=_lost_task_nodes())
    for job_id in result.failed:
        end_job_trace(jobs, job_id)
    for job_id in result.retried:
        try:
            state, snapshot = jobs.initial_state(job_id)
            specs = [AgentSpec.model_validate(spec) for spec in snapshot]
            jobs.record_tasks(job_id, enqueue_job(job_id, specs, state, services.settings.default_agent_timeout_s))
        except Exception as exc:  # noqa: BLE001 - a retry that cannot be enqueued ends the job with why
            jobs.fail(job_id, f"retry after a lost worker could not be enqueued: {type(exc).__name__}: {exc}")
    if result.failed or result.retried:
        log.warning("reaper: failed %s; retried %s", result.failed, result.retried)
    return {"failed": result.failed, "retried": result.retried}


@app.task(name="agentsearch.job_failed", **DB_RETRY)
def job_failed(request, exc, traceback, job_id: str) -> None:
    """Errback of the job's canvas: a step outside the agents failed, so the job ends ``failed`` with why."""
    jobs = JobStore(get_services().db)
    jobs.fail(job_id, f"{getattr(request, 'task', 'step')} failed: {type(exc).__name__}: {exc}")
    end_job_trace(jobs, job_id)


@app.task(name="agentsearch.ingest_documents", bind=True, **DB_RETRY)
def ingest_documents(self, collection_id: str, document_ids: list[str]) -> dict[str, int]:
    """Chunk, embed and index the given document rows; re-indexing a document replaces its earlier chunks.

    Milvus away (a restart, an outage) is waited out with backoff for ``MILVUS_RETRY_S``; after that the documents
    end ``failed`` with the error, never ``pending`` for good. Making the collection is part of it: outside the
    retries, an ingest sent while Milvus was down left its documents pending forever, with no error anywhere. The
    database away is waited out as by every step (``DB_RETRY``); indexing again replaces what a first try stored.
    """
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
    chunking = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    try:
        store.ensure_collection(milvus_name, embedder.dimension)
        chunks = index_documents(docs, embedder.embed, services.analyzer, chunking)
        store.delete_documents(milvus_name, [d[0] for d in docs])
        store.upsert(milvus_name, chunks)
    except SchemaMismatch as exc:
        _mark_documents(services, ids, "failed", str(exc))  # waiting would not change it
        return {"indexed": 0, "failed": len(docs), "chunks": 0}
    except Exception as exc:
        delay = backoff_delay(self.request.retries, settings.milvus_retry_s)
        if delay is not None:
            raise self.retry(exc=exc, countdown=delay, max_retries=self.request.retries + 1) from exc
        _mark_documents(services, ids, "failed", f"indexing failed after {self.request.retries + 1} attempts over "
                                                 f"{settings.milvus_retry_s:g} s: {type(exc).__name__}: {exc}")
        raise
    _mark_documents(services, ids, "indexed", None, bump_epoch=uuid.UUID(collection_id))
    return {"indexed": len(docs), "failed": 0, "chunks": len(chunks)}


@app.task(name="agentsearch.delete_documents", bind=True, max_retries=3)
def delete_documents(self, collection_id: str, external_ids: list[str]) -> dict[str, int]:
    services = get_services()
    try:
        services.vector_store.delete_documents(milvus_collection_name(collection_id), external_ids)
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
