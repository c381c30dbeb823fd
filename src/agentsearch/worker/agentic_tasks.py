"""Thin Celery tasks of the agentic modes: one iteration per task, each enqueuing its successor; none waits.

- ``agentic_begin`` (end of the head canvas): a step of the job (``agentsearch.pipeline.job.workflow.AGENTIC_BEGIN``),
  run by the one wrapper of every step (``agentsearch.worker.job_tasks.step_task``), then starts one loop per profile;
- ``agentic_iteration``: reports ``iteration:<n>`` (or ``<profile>:iteration:<n>``) as the job's stage, runs one
  iteration (``agentsearch.pipeline.job.iterative.iterate``), stores the loop's state, then enqueues the next iteration,
  or — when its loop is the last one to stop — ``agentic_finish``;
- ``agentic_finish``: merges the loops' results (``agentsearch.pipeline.job.iterative.merge_loops``), applies the tail;
- ``run_due_profile_sets`` (Celery beat): a job for every scheduled profile set whose time has come.

The loop's tasks are not steps: they are handed a loop's state rather than the job's (which they read from its row
after the check), a duplicate of theirs is refused by the loop store rather than the step ledger, and they hand
nothing on but enqueue their successor; the beat task belongs to no job. The steps the tail shares with every job
(agents, ``agentic_compress``, the answer, the response agents) are in ``agentsearch.worker.job_tasks``.

Usage: nothing to call; ``agentsearch.worker.job_tasks`` builds the canvases these tasks apply.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from celery import Task

from agentsearch.pipeline.agentic.loop import LoopState, next_action
from agentsearch.pipeline.agentic.spec import LoopStore
from agentsearch.pipeline.job import iterative, workflow
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore, MissingState
from agentsearch.pipeline.job.profile_sets import claim_due, create_run
from agentsearch.pipeline.job.step_protocol import StepCall
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import app
from agentsearch.worker.job_tasks import build_agentic_tail, build_loops, enqueue_job, iteration_signature, step_task
from agentsearch.worker.missing_state import ends_without_state

log = logging.getLogger("agentsearch.worker")


def start_loops(call: StepCall, begun: dict[str, Any]) -> None:
    """After the begin step (its output stored now or before): the job's loops enqueued, each from its last saved
    iteration (``iterative.loops_to_run``), or the finish when none runs and none is new."""
    state = JobState.load(begun)
    running, fresh = iterative.loops_to_run(call.services, state)
    if running:
        build_loops(state.job_id, running).apply_async()
    elif not fresh:
        agentic_finish.si(state.job_id).apply_async()


# The workflow's begin step, with what the worker does after it: the loops' tasks applied.
BEGIN = replace(workflow.AGENTIC_BEGIN, step=replace(workflow.AGENTIC_BEGIN.step, then=start_loops))


@app.task(name=BEGIN.task, bind=True)
def agentic_begin(self: Task, state: dict[str, Any]) -> dict[str, Any]:
    return step_task(self, state, BEGIN)


@app.task(name=workflow.AGENTIC_ITERATION)
@ends_without_state
def agentic_iteration(job_id: str, profile: str, loop_state: dict[str, Any]) -> dict[str, Any]:
    services = get_services()
    jobs = JobStore(services.db)
    loop = LoopState.load(loop_state)
    if not jobs.progress(job_id, iterative.stage_of(profile, loop.iteration + 1)):
        return {"job_id": job_id, "profile": profile, "status": "ended"}  # cancelled or reaped: no successor
    loop = _iterated(jobs, job_id, profile, loop)
    store = LoopStore(services.db)
    if not store.save(job_id, profile, loop):
        return {"job_id": job_id, "profile": profile, "status": "duplicate"}  # a redelivered task: already done
    if next_action(loop).action == "continue":
        iteration_signature(job_id, profile, loop.dump()).apply_async()
    elif store.finish(job_id, profile, loop):
        agentic_finish.si(job_id).apply_async()
    return {"job_id": job_id, "profile": profile, "iteration": loop.iteration, "stop_reason": loop.stop_reason}


def _iterated(jobs: JobStore, job_id: str, profile: str, loop: LoopState) -> LoopState:
    """One iteration of the loop; one that fails fails the job with why (and raises)."""
    try:
        return iterative.iterate(get_services(), jobs.load_state(job_id), profile, loop)
    except MissingState:
        raise  # not an iteration that failed: the job has no state to iterate on (ends_without_state)
    except Exception as exc:
        log.exception("iteration of job %s (%s) failed", job_id, profile or "query")
        jobs.fail(job_id, f"agentic iteration failed: {type(exc).__name__}: {exc}")
        raise


@app.task(name=workflow.AGENTIC_FINISH)
@ends_without_state
def agentic_finish(job_id: str) -> dict[str, Any]:
    services = get_services()
    jobs = JobStore(services.db)
    if not jobs.progress(job_id, "agentic_merge"):
        return {"job_id": job_id, "status": "ended"}
    state = iterative.merge_loops(services, jobs, job_id)
    jobs.progress(job_id, "agentic_merge", state)
    _, snapshot = jobs.initial_state(job_id)
    specs = [AgentSpec.model_validate(s) for s in snapshot]
    build_agentic_tail(job_id, specs, services.settings.default_agent_timeout_s).apply_async((state.dump(),))
    return {"job_id": job_id, "documents": len(state.documents)}


@app.task(name="agentsearch.run_due_profile_sets")
def run_due_profile_sets() -> list[str]:
    """Periodic (Celery beat): one job per scheduled profile set that is due."""
    services = get_services()
    started: list[str] = []
    for set_id in claim_due(services.db):
        created = create_run(services.db, services.settings, set_id, services.registry, trigger="schedule")
        if created is None:
            continue
        job_id, state, specs = created
        try:
            JobStore(services.db).record_tasks(job_id, enqueue_job(job_id, specs, state,
                                                                   services.settings.default_agent_timeout_s))
            started.append(job_id)
        except Exception as exc:  # noqa: BLE001 - the run is failed with why; the schedule goes on
            JobStore(services.db).fail(job_id, f"scheduled run could not be enqueued: {type(exc).__name__}: {exc}")
    if started:
        log.info("profile sets: started %d scheduled runs", len(started))
    return started
