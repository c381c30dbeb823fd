"""The job's step tasks: each loads the state it was handed, calls ``pipeline.job.stages`` and hands the state on.

    pre_search_agent*  ->  core_search (or per collection, then merge_search)  ->  post_search_agent*
      [-> agentic_compress]  ->  generate_answer  ->  response_agent* (a chord)  ->  assemble
    job_failed: the canvas's errback

The state travels as the task's argument and return value (small JSON); artifacts travel by reference. Every step
that hands the state on runs ``run_step``: the progress write (which is also the cancellation check), the step
ledger (a step run again hands on its first output), the work, its time, the ledger write. The response-agent task
never raises, so the chord's callback always runs; it adds its record to the job's as it ends, so the job's events
show each response agent then, not all at assembly. ``worker.canvas`` puts these tasks in order.

Usage (what a worker does with a message; a test calls the task the same way)::

    state = pre_search_agent(state.dump(), spec.model_dump(mode="json"))
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from pipeline.agentic.compress import compress_documents
from pipeline.agentic.runtime import build_compressor
from pipeline.agentic.spec import AgenticSpec
from pipeline.agents.base import Stage
from pipeline.agents.runner import worker_name
from pipeline.job import stages
from pipeline.job.answer_stream import AnswerChannel
from pipeline.job.ledger import StepLedger
from pipeline.job.stage_budget import start_clock
from pipeline.job.state import AgentRun, AgentSpec, JobState
from pipeline.job.store import TERMINAL, JobStore
from pipeline.platform import overlap
from pipeline.platform.backoff import backoff_delay
from pipeline.platform.kv import connect_redis
from pipeline.platform.llm import LLMClient
from pipeline.retrieval.outcome import SearchFailed, SearchOutcome
from pipeline.services import Services, get_services
from worker.app import DB_RETRY, DB_UNAVAILABLE, LONGEST_RETRY_DELAY_S, app
from worker.observability import end_job_trace

log = logging.getLogger("agentsearch.worker")

# How long assemble waits for a response agent's record the chord did not bring: 10 tries, 2 s apart (within
# DB_RETRY's max_retries, whose count it shares).
ASSEMBLE_WAITS, ASSEMBLE_WAIT_S = 10, 2
# How long a finished response agent's artifact waits for the database to come back before it is given up.
ARTIFACT_SAVE_WAIT_S = 30.0

_ledgers: dict[int, StepLedger] = {}
_ledgers_lock = threading.Lock()  # a thread-pool worker's steps ask for it at once


def step_ledger() -> StepLedger:
    """This process's step ledger, in the result backend's Redis (which never evicts, unlike a cache instance).

    Embedded mode has no redelivery and no second process, so nothing can run twice: the ledger is off there.
    """
    pid = os.getpid()  # a forked process must not use its parent's connection
    with _ledgers_lock:
        if pid not in _ledgers:
            settings = get_services().settings
            url = next((u for u in (settings.result_backend, settings.broker_url) if str(u).startswith("redis")),
                       None)
            client = None if settings.embedded or url is None else connect_redis(url)
            _ledgers[pid] = StepLedger(client, ttl_s=max(3600.0, settings.job_deadline_s * 4))
        return _ledgers[pid]


def step_key(stage: Stage, spec: AgentSpec) -> str:
    # One agent may run twice in a job with different configs, never twice with the same config and priority.
    return f"{stage.value}:{spec.agent_id}:{spec.config_id or ''}:{spec.priority}"


def ordered(specs: Iterable[AgentSpec], stage: Stage) -> list[AgentSpec]:
    """The agents of one stage in the order the job runs them: by priority, then agent id."""
    return sorted((s for s in specs if s.stage == stage), key=lambda s: (s.priority, s.agent_id))


def _timed(state: JobState, stage: str, started: float) -> None:
    state.timings_ms[stage] = round(state.timings_ms.get(stage, 0.0) + (time.perf_counter() - started) * 1000, 3)


def run_step(services: Services, state: dict[str, Any], stage: str, key: str, work: Callable[[JobState], JobState],
             timed_as: str | None = None, keep_state: bool = False) -> dict[str, Any]:
    """One step that hands the job's state on, run at most once per job however often its message arrives.

    ``stage`` is what the job shows while the step runs, ``key`` names the step in the ledger, ``work`` is the
    step itself and ``timed_as`` the entry of ``timings_ms`` its time is added to (``stage`` if not given);
    ``keep_state`` saves the state the step begins with in the job's row.
    Returns the state to hand on: the step's output (or the one stored by its first run), or ``state`` itself, the
    very object it was given, when the job was cancelled or has ended.
    """
    started = time.perf_counter()
    current = JobState.load(state)
    ledger = step_ledger()
    # Asked before the progress write and read after it: the two round trips are waited for together.
    answer = ledger.ask(current.job_id, key)
    try:
        # One write per step: the stage it begins, the records of the steps before it (the state it was handed)
        # and the cancellation check. Its own record is written by the next step, which receives it: a second
        # write at the end made every agent step wait for the database twice.
        going_on = JobStore(services.db).progress(current.job_id, stage, current, keep_state=keep_state)
    finally:
        done = answer()
    if not going_on:
        return state  # cancelled or ended: the rest of the chain passes through without work
    if done is None:  # not run before for this job (a redelivered message or a retried job finds it done)
        # The agent runner's writes to the cache's Redis are sent as it ends and their answers read after the
        # ledger's write: the two round trips are waited for together.
        with overlap.scope():
            current = work(current)
            _timed(current, timed_as or stage, started)
            done = ledger.put(current.job_id, key, current.dump())
    return done


def _agent_step(step, stage: Stage, state: dict[str, Any], spec: dict[str, Any],
                peers: list[list[str | None]] | None) -> dict[str, Any]:
    services = get_services()
    agent_spec = AgentSpec.model_validate(spec)
    stage_peers = [(agent_id, config_id) for agent_id, config_id in peers or []]
    return run_step(services, state, f"{stage.value}:{agent_spec.agent_id}", step_key(stage, agent_spec),
                    lambda current: step(current, agent_spec, services.runner, peers=stage_peers,
                                         default_timeout_s=services.settings.default_agent_timeout_s),
                    timed_as=stage.value)


@app.task(name="agentsearch.pre_search_agent", **DB_RETRY)
def pre_search_agent(state: dict[str, Any], spec: dict[str, Any],
                     peers: list[list[str | None]] | None = None) -> dict[str, Any]:
    """One pre-search agent; ``peers`` are its stage's agents in order, which its ``next_agent_id`` may name."""
    return _agent_step(stages.pre_search_step, Stage.PRE_SEARCH, state, spec, peers)


@app.task(name="agentsearch.post_search_agent", **DB_RETRY)
def post_search_agent(state: dict[str, Any], spec: dict[str, Any],
                      peers: list[list[str | None]] | None = None) -> dict[str, Any]:
    return _agent_step(stages.post_search_step, Stage.POST_SEARCH, state, spec, peers)


@app.task(name="agentsearch.core_search", bind=True, **DB_RETRY)
def core_search(self, state: dict[str, Any], collection_id: str | None = None) -> dict[str, Any]:
    """Search the job's collection (or one of several: ``collection_id``).

    A search that failed outright (nothing found, Milvus errors: ``pipeline.retrieval.outcome``) is not handed on
    as "no documents matched": the step runs again with backoff for ``MILVUS_RETRY_S`` (a Milvus restart), then
    the job fails with the search's error. One collection of several hands its failure on to ``merge_search``,
    which fails the job only if no collection found anything.
    """
    services = get_services()

    def search_collection(current: JobState) -> JobState:
        current = stages.core_search_step(current, services, collection_id)
        start_clock(current, Stage.POST_SEARCH)  # the search hands over: the post-search agents' clock starts
        search = SearchOutcome.read(current.metadata)
        services.metrics.record_search(search)
        if self.request.retries:
            search.attempts = self.request.retries + 1
            search.write(current.metadata)
        if reason := search.failure(len(current.documents)):
            # Raised before the ledger write: a redelivered copy must search again, not hand on the failure.
            delay = backoff_delay(self.request.retries, services.settings.milvus_retry_s)
            if delay is not None:
                log.warning("job %s: %s; searching again in %g s", current.job_id, reason, delay)
                raise self.retry(countdown=delay, max_retries=self.request.retries + 1)
            if collection_id is None:
                raise SearchFailed(f"{reason} (after {self.request.retries + 1} attempts)")
        return current

    # The progress write is also the cancellation check of each retry.
    return run_step(services, state, "core_search", f"core_search:{collection_id or ''}", search_collection)


@app.task(name="agentsearch.merge_search", **DB_RETRY)
def merge_search(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Callback of the per-collection search group: a failure of every collection fails the job (see core_search),
    a failure of some makes the merged search degraded."""
    merged = stages.merge_search_step([JobState.load(s) for s in states])
    merged.timings_ms["core_search"] = max(JobState.load(s).timings_ms.get("core_search", 0.0) for s in states)
    start_clock(merged, Stage.POST_SEARCH)
    if reason := SearchOutcome.read(merged.metadata).failure(len(merged.documents)):
        raise SearchFailed(reason)
    done = step_ledger().put(merged.job_id, "merge_search", merged.dump())
    JobStore(get_services().db).progress(merged.job_id, "core_search", JobState.load(done))
    return done


@app.task(name="agentsearch.generate_answer", **DB_RETRY)
def generate_answer(state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    settings = services.settings

    def answer(current: JobState) -> JobState:
        answered = stages.answer_step(current, llm=LLMClient.from_settings(settings),
                                     # Stored sentence vectors read, the rest embedded lazily (stages.known_embed).
                                     embed=stages.known_embed(services, current),
                                     embedding_model=settings.embedding_model,
                                     language=settings.keyword_language,
                                     # The text as it is written, for the job's events (answer.delta).
                                     stream=AnswerChannel(services.redis, current.job_id,
                                                          ttl_s=settings.retention_answer_streams_s))
        start_clock(answered, Stage.RESPONSE)  # the answer hands over: the response agents' clock starts
        return answered

    # The documents the answer is written from are kept in the job's row as it starts: while it is written (its
    # events stream it), a reader is checked against them, as against the sources once it is done
    # (pipeline.security.document_access.job_visible).
    done = run_step(services, state, "answer", "answer", answer, keep_state=True)
    if done is state:
        return state  # cancelled or ended: nothing to save
    # Saved for the chord's callback, which receives only the response agents' records.
    JobStore(services.db).progress(done["job_id"], "response", JobState.load(done), keep_state=True)
    return done


@app.task(name="agentsearch.agentic_compress")
def agentic_compress(state: dict[str, Any]) -> dict[str, Any]:
    """An agentic job's step before the answer: long documents cut to their query-relevant sentences."""
    services = get_services()
    current = JobState.load(state)
    jobs = JobStore(services.db)
    # With the post-search agents' records, which do not write their own (run_step).
    if not jobs.progress(current.job_id, "compress", current):
        return state
    config = AgenticSpec.model_validate(current.agentic or {}).iterative
    if not config.compress or not current.documents:
        return state
    started = time.perf_counter()
    compressor = build_compressor(services.analyzer, config, LLMClient.from_settings(services.settings))
    current.documents, records = compress_documents(current.original_query or current.query, current.documents,
                                                    compressor, config.compress_concurrency)
    current.metadata["compression"] = [r.model_dump() for r in records if r.method != "unchanged"]
    current.timings_ms["compress"] = round((time.perf_counter() - started) * 1000, 3)
    jobs.progress(current.job_id, "compress", current)
    return current.dump()


@app.task(name="agentsearch.response_agent", bind=True)
def response_agent(self, state: dict[str, Any], spec: dict[str, Any], name_rank: int = 1) -> dict[str, Any]:
    """One response agent: its artifact stored (named by ``name_rank``, see ``pipeline.job.artifact_names``), its
    record returned to the chord. Never raises."""
    agent_spec = AgentSpec.model_validate(spec)
    job_id = state["job_id"]
    ledger, key = step_ledger(), step_key(Stage.RESPONSE, agent_spec)

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
        run = stages.response_step(JobState.load(state), agent_spec, services.runner,
                                  _PatientArtifacts(services.artifacts, ARTIFACT_SAVE_WAIT_S), name_rank=name_rank,
                                  default_timeout_s=services.settings.default_agent_timeout_s)
    except DB_UNAVAILABLE as exc:
        if self.request.retries < DB_RETRY["max_retries"]:
            # A retry is not a failure: the chord counts this header task when the retry returns.
            raise self.retry(exc=exc, countdown=min(2 ** self.request.retries, LONGEST_RETRY_DELAY_S)) from exc
        run = _failed_run(agent_spec, "error", exc)
    except BaseException as exc:  # never raise into the chord (SoftTimeLimitExceeded included)
        log.exception("response agent %s failed outside the runner", agent_spec.agent_id)
        run = _failed_run(agent_spec, "timeout" if isinstance(exc, SoftTimeLimitExceeded) else "error", exc)
    done = ledger.put(job_id, key, run.model_dump(mode="json"))
    _announce(job_id, done)
    return done


def _announce(job_id: str, record: dict[str, Any]) -> None:
    """The agent's record (and its stand-in's) added to the job's records now, so the job's events carry it as
    this agent ends rather than when the last one does. Best effort: assembly records it in any case."""
    try:
        JobStore(get_services().db).record_runs(job_id, AgentRun.model_validate(record).flat())
    except Exception:  # the chord must get the record whatever the database does
        log.warning("job %s: the record of %s did not reach the job's events early", job_id,
                    record.get("agent_id"), exc_info=True)


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
    stored = step_ledger().steps(job_id)
    runs, missing = [], []
    for spec in specs:
        record = stored.get(step_key(Stage.RESPONSE, spec)) or chord_records.get((spec.agent_id, spec.config_id))
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
    specs = [AgentSpec.model_validate(s) for s in snapshot]
    if reason := stages.critical_response_failure(ordered(specs, Stage.RESPONSE), runs):
        jobs.fail(job_id, reason)
        end_job_trace(jobs, job_id)
        step_ledger().clear(job_id)
        return {"job_id": job_id, "status": "failed"}
    runs = [flat for run in runs for flat in run.flat()]  # a fallback's run beside the run it stood in for
    if runs:
        state.timings_ms["response"] = max(r.duration_ms for r in runs)
    response = stages.assemble_response(state, runs)
    _timed(state, "assemble", started)
    response["timings_ms"] = state.timings_ms
    if jobs.succeed(job_id, response, [*state.agent_runs, *runs], state.timings_ms):
        end_job_trace(jobs, job_id)
        step_ledger().clear(job_id)  # the job has ended: a late copy of any step now stops at its first check
    return {"job_id": job_id, "status": "succeeded"}


@app.task(name="agentsearch.job_failed", **DB_RETRY)
def job_failed(request, exc, traceback, job_id: str) -> None:
    """Errback of the job's canvas: a step outside the agents failed, so the job ends ``failed`` with why."""
    jobs = JobStore(get_services().db)
    jobs.fail(job_id, f"{getattr(request, 'task', 'step')} failed: {type(exc).__name__}: {exc}")
    end_job_trace(jobs, job_id)
