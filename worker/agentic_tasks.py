"""Thin Celery tasks of the agentic modes: one iteration per task, each enqueuing its successor; none waits.

- ``agentic_begin`` (end of the head canvas): keeps the job state for the end, starts one loop per profile;
- ``agentic_iteration``: reports ``iteration:<n>`` (or ``<profile>:iteration:<n>``) as the job's stage, runs one
  iteration, stores the loop's state, then enqueues the next iteration, or — when its loop is the last one to
  stop — ``agentic_finish``;
- ``agentic_finish``: merges the loops' results, records what the user is shown (seen content), applies the tail;
- ``run_due_profile_sets`` (Celery beat): a job for every scheduled profile set whose time has come.

The steps the tail shares with every job (agents, ``agentic_compress``, the answer, the response agents) are in
``worker.job_tasks``. ``agentic_begin`` is a step of the job like those, run by their one wrapper
(``worker.job_tasks.step_task``); the loop's tasks are not, since they are handed a loop's state rather than the job's
(which they read from its row after the check), a duplicate of theirs is refused by the loop store rather than
the step ledger, and they hand nothing on but enqueue their successor; the beat task belongs to no job.

Usage: nothing to call; ``worker.canvas`` builds the canvases these tasks apply.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from celery import Task

from pipeline.agentic.loop import LoopState, final_documents, next_action, run_iteration
from pipeline.agentic.runtime import build_tools, job_filter, vectors_function
from pipeline.agentic.schedule import claim_due, create_run
from pipeline.agentic.seen import SeenFilter, SqlSeenStore
from pipeline.agentic.spec import AgenticSpec, LoopPlan, LoopStore, job_documents
from pipeline.agents.base import Stage
from pipeline.agents.records import AgentSpec
from pipeline.job.stage_budget import start_clock
from pipeline.job.state import JobState
from pipeline.job.step_protocol import Step
from pipeline.job.store import JobStore, MissingState
from pipeline.platform.llm import LLMClient
from pipeline.retrieval.outcome import SearchOutcome
from pipeline.services import Services, get_services
from worker.app import app
from worker.canvas import (
    AGENTIC_BEGIN,
    AGENTIC_ITERATION,
    build_agentic_tail,
    build_loops,
    enqueue_job,
    iteration_signature,
)
from worker.job_tasks import step_task
from worker.missing_state import ends_without_state

log = logging.getLogger("agentsearch.worker")


def _spec(state: JobState) -> AgenticSpec:
    return AgenticSpec.model_validate(state.agentic or {})


def _plan(services: Services, state: JobState, profile: str) -> LoopPlan:
    spec = _spec(state)
    return next(p for p in spec.plans(state.query, state.collections, services.settings.test_mode)
                if p.profile == profile)


def _stage(profile: str, iteration: int) -> str:
    return f"{profile}:iteration:{iteration}" if profile else f"iteration:{iteration}"


@app.task(name=AGENTIC_BEGIN, bind=True)
def agentic_begin(self: Task, state: dict[str, Any]) -> dict[str, Any]:
    return step_task(self, state, lambda services, _: Step(
        "agentic", "agentic_begin", lambda current: current, timed_as="", keep_state=True,
        then=lambda begun: _start_loops(services, JobState.load(begun))))


def _start_loops(services: Services, state: JobState) -> None:
    """One loop per profile, started from the state the job keeps for ``agentic_finish`` (which the last loop
    enqueues long after this task's return value is gone). Run on every delivery that finds the job going on, the
    ledger's stored output included: a job retried after its worker was lost finds its loops started, and they go
    on from their last saved iteration. A redelivered copy may fork a loop that way; the fork's first save is
    refused."""
    store = LoopStore(services.db)
    plans = _spec(state).plans(state.query, state.collections, services.settings.test_mode)
    fresh = [p.profile for p in plans if store.start(state.job_id, p.profile, LoopState.start(p.query, p.config))]
    running = store.running(state.job_id)
    if running:
        build_loops(state.job_id, {p: s.dump() for p, s in running.items()}).apply_async()
    elif not fresh:
        agentic_finish.si(state.job_id).apply_async()


@app.task(name=AGENTIC_ITERATION)
@ends_without_state
def agentic_iteration(job_id: str, profile: str, loop_state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    jobs = JobStore(services.db)
    loop = LoopState.load(loop_state)
    if not jobs.progress(job_id, _stage(profile, loop.iteration + 1)):
        return {"job_id": job_id, "profile": profile, "status": "ended"}  # cancelled or reaped: no successor
    try:
        job_state = jobs.load_state(job_id)
        plan = _plan(services, job_state, profile)
        spec = _spec(job_state)
        llm = LLMClient.from_settings(services.settings)
        skip = None
        if spec.seen.enabled and job_state.user_id:
            skip = SeenFilter(SqlSeenStore(services.db), uuid.UUID(job_state.user_id), profile, spec.seen,
                              vectors=vectors_function(services.retriever))
        # The job's metadata filter (kept with its search overrides) holds for every search of every iteration.
        defaults = {**services.settings.search_defaults(), **job_filter(job_state.search)}
        tools = build_tools(services.retriever, services.analyzer, plan.targets, loop.config,
                            model=services.settings.embedding_model, defaults=defaults, llm=llm, skip_seen=skip)
        loop = run_iteration(loop, tools)
    except MissingState:
        raise  # not an iteration that failed: the job has no state to iterate on (ends_without_state)
    except Exception as exc:
        log.exception("iteration of job %s (%s) failed", job_id, profile or "query")
        jobs.fail(job_id, f"agentic iteration failed: {type(exc).__name__}: {exc}")
        raise
    store = LoopStore(services.db)
    if not store.save(job_id, profile, loop):
        return {"job_id": job_id, "profile": profile, "status": "duplicate"}  # a redelivered task: already done
    if next_action(loop).action == "continue":
        iteration_signature(job_id, profile, loop.dump()).apply_async()
    elif store.finish(job_id, profile, loop):
        agentic_finish.si(job_id).apply_async()
    return {"job_id": job_id, "profile": profile, "iteration": loop.iteration, "stop_reason": loop.stop_reason}


@app.task(name="agentsearch.agentic_finish")
@ends_without_state
def agentic_finish(job_id: str) -> dict[str, Any]:
    services = get_services()
    jobs = JobStore(services.db)
    if not jobs.progress(job_id, "agentic_merge"):
        return {"job_id": job_id, "status": "ended"}
    started = time.perf_counter()
    state = jobs.load_state(job_id)
    spec = _spec(state)
    states = LoopStore(services.db).states(job_id)
    documents, summary = job_documents(spec, states, services.settings.max_top_k)
    state.documents = documents
    state.metadata["agentic"] = summary
    SearchOutcome(mode=spec.mode, returned=len(documents),
                  iterations={p or "query": s.iteration for p, s in states.items()}).write(state.metadata)
    if state.user_id:
        _record_seen(services, state, spec, states, documents)
    state.timings_ms["agentic"] = round(sum(r.duration_ms for s in states.values() for r in s.history), 3)
    state.timings_ms["agentic_merge"] = round((time.perf_counter() - started) * 1000, 3)
    start_clock(state, Stage.POST_SEARCH)  # the loops hand over: the post-search agents' clock starts
    jobs.progress(job_id, "agentic_merge", state)
    _, snapshot = jobs.initial_state(job_id)
    specs = [AgentSpec.model_validate(s) for s in snapshot]
    build_agentic_tail(job_id, specs, services.settings.default_agent_timeout_s).apply_async((state.dump(),))
    return {"job_id": job_id, "documents": len(documents)}


def _record_seen(services: Services, state: JobState, spec: AgenticSpec, states: dict[str, LoopState],
                 returned) -> None:
    """What the job returns, per profile, so later runs of this user can skip it. A document several profiles
    found is returned once, in the category where it scored best, and recorded for that profile alone."""
    returned_keys = {(d.metadata.get("collection_id"), d.id, d.metadata.get("category", "")) for d in returned}
    store = SqlSeenStore(services.db)
    vectors = vectors_function(services.retriever)
    for profile, loop in states.items():
        docs = [j.document for j in final_documents(loop)
                if (j.document.metadata.get("collection_id"), j.document.id, profile) in returned_keys]
        if not docs:
            continue
        try:
            found = vectors(docs)
        except Exception:  # noqa: BLE001 - recorded without vectors, ids and URLs still match later
            found = {}
        source = f"job:{state.job_id}" if spec.source == "job" else spec.source
        store.record(uuid.UUID(state.user_id), profile, source, docs, found, job_id=uuid.UUID(state.job_id))


@app.task(name="agentsearch.run_due_profile_sets")
def run_due_profile_sets() -> list[str]:
    """Periodic (Celery beat): one job per scheduled profile set that is due."""
    services = get_services()
    started: list[str] = []
    for set_id in claim_due(services.db):
        created = create_run(services.db, services.settings, set_id, trigger="schedule")
        if created is None:
            continue
        job_id, state = created
        try:
            JobStore(services.db).record_tasks(job_id, enqueue_job(job_id, [], state,
                                                                   services.settings.default_agent_timeout_s))
            started.append(job_id)
        except Exception as exc:  # noqa: BLE001 - the run is failed with why; the schedule goes on
            JobStore(services.db).fail(job_id, f"scheduled run could not be enqueued: {type(exc).__name__}: {exc}")
    if started:
        log.info("profile sets: started %d scheduled runs", len(started))
    return started
