"""The job's step tasks, each a ``Step`` (``pipeline.job.step_protocol``), and ``step_task``, the one wrapper that
runs them.

    pre_search_agent*  ->  core_search (or per collection, then merge_search)  ->  post_search_agent*
      [-> agentic_compress]  ->  write_answer  ->  response_agent* (a chord)  ->  assemble
    job_failed: the canvas's errback

The state travels as the task's argument and return value (small JSON); artifacts travel by reference. A task's
body only names its step; ``step_task`` loads the state it was handed, runs the step in the frame every step shares
(``run_step``: the progress write, which is also the cancellation check; the step ledger, so a step run again hands
on its first output; the work, its time, the clock of the stage it hands over to) and turns the outcome into the
task's: the output to hand on; for ``Cancelled`` the state as it was handed (the rest of the chain passes through)
or the step's own record of it; for ``Retry`` the task's retry. Around every task ``worker.observability`` binds
the job to its log lines; each stage function opens its span of the job's trace. The response-agent task never
raises, so the chord's callback always runs; it adds its record to the job's as it ends, so the job's events show
each response agent then, not all at assembly. ``worker.canvas`` puts these tasks in order.

``assemble`` and ``job_failed`` are not steps and do not go through ``step_task``: they end the job rather than
hand a state on, so there is no progress to write and no output for the ledger (``assemble`` is handed the chord's
records and reads the job's status with its kept state; ``job_failed`` is an errback, handed a failed request).

Usage (what a worker does with a message; a test calls the task the same way)::

    state = pre_search_agent(state.dump(), spec.model_dump(mode="json"))

    @app.task(name="agentsearch.my_step", bind=True, **DB_RETRY)     # a new step: its body names the step
    def my_step(self: Task, state: dict[str, Any]) -> dict[str, Any]:
        return step_task(self, state, lambda services, _: Step("my_stage", "my_step", my_stage_function))
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from pipeline.agentic.compress import compress_documents
from pipeline.agentic.runtime import build_compressor
from pipeline.agentic.spec import AgenticSpec
from pipeline.agents.base import Stage
from pipeline.agents.records import AgentRun, AgentSpec
from pipeline.agents.runner import worker_name
from pipeline.job import stages
from pipeline.job.answer_stream import AnswerChannel
from pipeline.job.ledger import StepLedger, step_key
from pipeline.job.state import JobState
from pipeline.job.step_protocol import Cancelled, Retry, Step, run_step
from pipeline.job.store import TERMINAL, JobStore, MissingState
from pipeline.platform.backoff import backoff_delay
from pipeline.platform.kv import connect_redis
from pipeline.platform.llm import LLMClient
from pipeline.retrieval.outcome import SearchFailed, SearchOutcome
from pipeline.services import Services, get_services
from worker.app import DB_RETRY, DB_UNAVAILABLE, LONGEST_RETRY_DELAY_S, app
from worker.missing_state import ends_without_state
from worker.observability import end_job_trace

log = logging.getLogger("agentsearch.worker")

# How long assemble waits for a response agent's record the chord did not bring: 10 tries, 2 s apart (within
# DB_RETRY's max_retries, whose count it shares).
ASSEMBLE_WAITS, ASSEMBLE_WAIT_S = 10, 2
# How long a finished response agent's artifact waits for the database to come back before it is given up.
ARTIFACT_SAVE_WAIT_S = 30.0
# The stage function of each stage whose agents hand the state on: one implementation, a span of its own each.
AGENT_STAGE_STEPS = {Stage.PRE_SEARCH: stages.pre_search_step, Stage.POST_SEARCH: stages.post_search_step}


StepBuild = Callable[[Services, JobState], Step]  # the task's step, from this process's services and the state

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


def step_task(task: Task, handed: Any, build: StepBuild, load: Callable[[Any], JobState] = JobState.load) -> Any:
    """The one wrapper of a step's task: ``handed`` (the task's first argument) read by ``load``, the step ``build``
    names run in the frame every step shares (``run_step``), the outcome made the task's: the output to hand on;
    for ``Cancelled`` the state as handed (the merged state for a search group's callback) or the step's own
    record of it; for ``Retry`` the task's retry."""
    started = time.perf_counter()
    services = get_services()
    state = load(handed)
    step = build(services, state)
    out = run_step(step, state, JobStore(services.db), step_ledger(), started)
    if isinstance(out, Retry):
        retry: dict[str, Any] = {"countdown": out.countdown}
        if out.max_retries is not None:
            retry["max_retries"] = out.max_retries
        if out.cause is not None:
            retry["exc"] = out.cause
        raise task.retry(**retry) from out.cause
    if isinstance(out, Cancelled):
        if step.cancelled is not None:
            return step.cancelled(out).model_dump(mode="json")
        return handed if load is JobState.load else state.dump()
    return out


def ordered(specs: Iterable[AgentSpec], stage: Stage) -> list[AgentSpec]:
    """The agents of one stage in the order the job runs them: by priority, then agent id."""
    return sorted((s for s in specs if s.stage == stage), key=lambda s: (s.priority, s.agent_id))


def stage_agent_step(services: Services, stage: Stage, spec: dict[str, Any],
                     peers: list[list[str | None]] | None) -> Step:
    """One pre- or post-search agent's step. ``peers`` (the message's name for them) are its stage's agents in
    order, which its ``next_agent_id`` may name."""
    agent = AgentSpec.model_validate(spec)
    stage_agents = [(agent_id, config_id) for agent_id, config_id in peers or []]
    work = AGENT_STAGE_STEPS[stage]
    return Step(f"{stage.value}:{agent.agent_id}", step_key(stage, agent),
                lambda state: work(state, agent, services.runner, stage_agents=stage_agents,
                                   default_timeout_s=services.settings.default_agent_timeout_s),
                timed_as=stage.value)


@app.task(name="agentsearch.pre_search_agent", bind=True, **DB_RETRY)
def pre_search_agent(self: Task, state: dict[str, Any], spec: dict[str, Any],
                     peers: list[list[str | None]] | None = None) -> dict[str, Any]:
    return step_task(self, state, lambda services, _: stage_agent_step(services, Stage.PRE_SEARCH, spec, peers))


@app.task(name="agentsearch.post_search_agent", bind=True, **DB_RETRY)
def post_search_agent(self: Task, state: dict[str, Any], spec: dict[str, Any],
                      peers: list[list[str | None]] | None = None) -> dict[str, Any]:
    return step_task(self, state, lambda services, _: stage_agent_step(services, Stage.POST_SEARCH, spec, peers))


@app.task(name="agentsearch.core_search", bind=True, **DB_RETRY)
def core_search(self: Task, state: dict[str, Any], collection_id: str | None = None) -> dict[str, Any]:
    """Search the job's collection (or one of several: ``collection_id``); the progress write is also the
    cancellation check of each retry. The search hands over: the post-search agents' clock starts."""
    return step_task(self, state, lambda services, _: Step(
        "core_search", f"core_search:{collection_id or ''}",
        lambda current: _searched(self, services, current, collection_id), hands_over=Stage.POST_SEARCH))


def _searched(task: Task, services: Services, state: JobState, collection_id: str | None) -> JobState | Retry:
    """A search that failed outright (nothing found, Milvus errors: ``pipeline.retrieval.outcome``) is not handed on
    as "no documents matched": the step runs again with backoff for ``MILVUS_RETRY_S`` (a Milvus restart), then
    the job fails with the search's error. One collection of several hands its failure on to ``merge_search``,
    which fails the job only if no collection found anything."""
    state = stages.core_search_step(state, services, collection_id)
    search = SearchOutcome.read(state.metadata)
    services.metrics.record_search(search)
    retries = task.request.retries
    if retries:
        search.attempts = retries + 1
        search.write(state.metadata)
    if reason := search.failure(len(state.documents)):
        # Asked for before the ledger write: a redelivered copy must search again, not hand on the failure.
        delay = backoff_delay(retries, services.settings.milvus_retry_s)
        if delay is not None:
            log.warning("job %s: %s; searching again in %g s", state.job_id, reason, delay)
            return Retry(delay, max_retries=retries + 1)
        if collection_id is None:
            raise SearchFailed(f"{reason} (after {retries + 1} attempts)")
    return state


def _merged(states: list[dict[str, Any]]) -> JobState:
    searched = [JobState.load(s) for s in states]
    merged = stages.merge_search_step(searched)
    merged.timings_ms["core_search"] = max(s.timings_ms.get("core_search", 0.0) for s in searched)
    return merged


def _found_in_some(state: JobState) -> JobState:
    if reason := SearchOutcome.read(state.metadata).failure(len(state.documents)):
        raise SearchFailed(reason)
    return state


@app.task(name="agentsearch.merge_search", bind=True, **DB_RETRY)
def merge_search(self: Task, states: list[dict[str, Any]]) -> dict[str, Any]:
    """Callback of the per-collection search group: a failure of every collection fails the job (see core_search),
    a failure of some makes the merged search degraded. Timed as the slowest collection's search."""
    return step_task(self, states, lambda services, _: Step(
        "core_search", "merge_search", _found_in_some, timed_as="", hands_over=Stage.POST_SEARCH), load=_merged)


@app.task(name="agentsearch.generate_answer", bind=True, **DB_RETRY)
def write_answer(self: Task, state: dict[str, Any]) -> dict[str, Any]:
    return step_task(self, state, _answer)


def _answer(services: Services, state: JobState) -> Step:
    """The answer's step. The documents it is written from are kept in the job's row as it starts: while it is written
    (its events stream it), a reader is checked against them, as against the sources once it is done
    (``pipeline.security.document_access.job_visible``). The answer hands over: the response agents' clock starts."""
    settings = services.settings

    def answer(current: JobState) -> JobState:
        return stages.answer_step(current, llm=LLMClient.from_settings(settings),
                                  # Stored sentence vectors read, the rest embedded lazily (stages.answer_embedder).
                                  embed=stages.answer_embedder(services, current),
                                  embedding_model=settings.embedding_model, language=settings.keyword_language,
                                  timeout_s=settings.answer_llm_timeout_s,
                                  judge_timeout_s=settings.judge_llm_timeout_s,
                                  # The text as it is written, for the job's events (answer.delta).
                                  stream=AnswerChannel(services.redis, current.job_id,
                                                       ttl_s=settings.retention_answer_streams_s))

    def keep_for_assembly(done: dict[str, Any]) -> None:
        # Saved for the chord's callback, which receives only the response agents' records.
        JobStore(services.db).progress(done["job_id"], "response", JobState.load(done), keep_state=True)

    return Step("answer", "answer", answer, keep_state=True, hands_over=Stage.RESPONSE, then=keep_for_assembly)


@app.task(name="agentsearch.agentic_compress", bind=True)
def agentic_compress(self: Task, state: dict[str, Any]) -> dict[str, Any]:
    return step_task(self, state, _compress)


def _compress(services: Services, state: JobState) -> Step:
    """An agentic job's step before the answer: long documents cut to their query-relevant sentences (timed only
    when there is something to cut)."""
    config = AgenticSpec.model_validate(state.agentic or {}).iterative
    if not config.compress or not state.documents:
        return Step("compress", "compress", lambda current: current, timed_as="")

    def compress(current: JobState) -> JobState:
        compressor = build_compressor(services.analyzer, config, LLMClient.from_settings(services.settings))
        current.documents, records = compress_documents(current.original_query or current.query, current.documents,
                                                        compressor, config.compress_concurrency)
        current.metadata["compression"] = [r.model_dump() for r in records if r.method != "unchanged"]
        return current

    return Step("compress", "compress", compress)


@app.task(name="agentsearch.response_agent", bind=True)
def response_agent(self: Task, state: dict[str, Any], spec: dict[str, Any], name_rank: int = 1) -> dict[str, Any]:
    return step_task(self, state, lambda services, current: _respond(self, services, current, spec, name_rank))


def _respond(task: Task, services: Services, state: JobState, spec: dict[str, Any], name_rank: int) -> Step:
    """One response agent: its artifact stored (named by ``name_rank``, see ``pipeline.job.artifact_names``), its
    record returned to the chord. Never raises; reads the job's status rather than writing its stage, beside the
    stage's other agents."""
    agent = AgentSpec.model_validate(spec)
    return Step(
        "response", step_key(Stage.RESPONSE, agent),
        lambda current: stages.response_step(current, agent, services.runner,
                                             RetryingArtifacts(services.artifacts, ARTIFACT_SAVE_WAIT_S),
                                             name_rank=name_rank,
                                             default_timeout_s=services.settings.default_agent_timeout_s),
        beside_others=True,
        on_error=lambda exc: _response_error(task, agent, exc),
        then=lambda record: _announce(state.job_id, record),
        cancelled=lambda outcome: _skipped(agent, outcome),
    )


def _skipped(spec: AgentSpec, outcome: Cancelled) -> AgentRun:
    why = "job cancelled" if outcome.status == "cancelled" else f"job already {outcome.status}"
    return AgentRun(agent_id=spec.agent_id, config_id=spec.config_id, stage=Stage.RESPONSE, success=False,
                    status="skipped", errors=[why])


def _response_error(task: Task, spec: AgentSpec, exc: BaseException) -> AgentRun | Retry:
    """A response agent's error outside its runner is its record, never the chord's: only a database outage asks
    for the task again first (a retry is not a failure: the chord counts this header task when the retry returns)."""
    if isinstance(exc, DB_UNAVAILABLE):
        retries = task.request.retries
        if retries < DB_RETRY["max_retries"]:
            return Retry(min(2 ** retries, LONGEST_RETRY_DELAY_S), cause=exc)
        return _failed_run(spec, "error", exc)
    log.exception("response agent %s failed outside the runner", spec.agent_id)
    return _failed_run(spec, "timeout" if isinstance(exc, SoftTimeLimitExceeded) else "error", exc)


def _announce(job_id: str, record: dict[str, Any]) -> None:
    """The agent's record (and its stand-in's) added to the job's records now, so the job's events carry it as
    this agent ends rather than when the last one does. Best effort: assembly records it in any case."""
    try:
        JobStore(get_services().db).record_runs(job_id, AgentRun.model_validate(record).flat())
    except Exception:  # the chord must get the record whatever the database does
        log.warning("job %s: the record of %s did not reach the job's events early", job_id,
                    record.get("agent_id"), exc_info=True)


class RetryingArtifacts:
    """Artifact storage whose ``save`` waits out a short database outage instead of losing a finished agent's
    artifact.

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
@ends_without_state
def assemble(self, records: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    started = time.perf_counter()  # as every step's time, from the task's start: its reading of the job counts
    services = get_services()
    jobs = JobStore(services.db)
    status, state, snapshot = jobs.for_assembly(job_id)
    if status == "cancelled":
        end_job_trace(jobs, job_id)
        return {"job_id": job_id, "status": "cancelled"}
    if status in TERMINAL:
        return {"job_id": job_id, "status": status}  # a second run: the first one already ended the job
    if state is None:
        raise MissingState(job_id, status)
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
    state.timings_ms["assemble"] = round((time.perf_counter() - started) * 1000, 3)
    response["timings_ms"] = state.timings_ms
    if jobs.succeed(job_id, response, [*state.agent_runs, *runs], state.timings_ms):
        end_job_trace(jobs, job_id)
        # The job has ended: a late copy of any step now stops at its first check.
        step_ledger().clear(job_id)
    return {"job_id": job_id, "status": "succeeded"}


@app.task(name="agentsearch.job_failed", **DB_RETRY)
def job_failed(request, exc, traceback, job_id: str) -> None:
    """Errback of the job's canvas: a step outside the agents failed, so the job ends ``failed`` with why."""
    jobs = JobStore(get_services().db)
    jobs.fail(job_id, f"{getattr(request, 'task', 'step')} failed: {type(exc).__name__}: {exc}")
    end_job_trace(jobs, job_id)
