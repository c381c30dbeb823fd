"""The job's end, its last step (``agentsearch.pipeline.job.workflow.ASSEMBLE``, the response chord's callback): one
record per response agent, the job's response assembled from what its steps left, and the job ended, succeeded or
failed.

The response itself (``JobResponse``) is a record below the job (``agentsearch.pipeline.records.job_response``), read by
the API, the MCP tools and the webhooks; what makes one of a job's state is here, with the job.

The end runs in the frame of every step (``run_step``): its input is the job as it reads it in one round trip
(``for_assembly``: status, the state the answer kept, the agents) beside the chord's records; its check is the
status it read (``assembly_check``: a job cancelled or ended already is not assembled again); its work is
``assemble``. It is not kept in the step ledger: a second run finds the job ended.

Usage::

    response = job_response(state, response_runs)            # state as the answer left it
    jobs.succeed(job_id, response.dump(), runs, timings)     # the JSON the job's row keeps
    ended = assemble(call, for_assembly(call, records))      # Ended(job_id, "succeeded"), or Retry while a record
                                                             # is nowhere yet
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.agents.fallback import critical_reason, failed
from agentsearch.pipeline.ingestion.cited import Cited, chunk_version
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import TERMINAL, JobStore, MissingState
from agentsearch.pipeline.job.ledger import step_key
from agentsearch.pipeline.job.routing import ordered
from agentsearch.pipeline.job.stage_budget import stage_timed_out
from agentsearch.pipeline.job.step_protocol import Cancelled, Retry, Step, StepCall
from agentsearch.pipeline.observability import tracing
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec
from agentsearch.pipeline.records.job_response import AgentLine, JobResponse
from agentsearch.pipeline.retrieval.outcome import SearchOutcome

log = logging.getLogger("agentsearch.worker")

# How long assemble waits for a response agent's record the chord did not bring: 10 tries, 2 s apart (within the
# task's database retries, whose count it shares).
ASSEMBLE_WAITS, ASSEMBLE_WAIT_S = 10, 2


def job_response(state: JobState, response_runs: list[AgentRun]) -> JobResponse:
    """The response of a job whose steps have all run: ``state`` as the answer left it, ``response_runs`` the
    response agents' records (a fallback's run beside the run it stood in for)."""
    runs = [*state.agent_runs, *response_runs]
    # A search that failed outright never gets here (the job fails); one that failed in part is said to be so,
    # and so is an answer the configured LLM failed to give (the offline answer stood in).
    degraded = SearchOutcome.read(state.metadata).degraded_reasons()
    answer = state.metadata.get("answer") or {}
    if answer.get("degraded"):
        degraded = [*degraded,
                    f"answer: the LLM failed, the offline answer was given ({answer.get('fallback_reason')})"]
    # Nested records go in as JSON, so every key of theirs is one the response was written with (``dump``).
    return JobResponse.model_validate({
        "job_id": state.job_id,
        # Only a complete response is reused by the whole-job cache (JobStore.find_cached). An agent the
        # stage's budget skipped or cut may run in full next time: such a response is not reused.
        "complete": not degraded and all(r.status in ("ok", "skipped") and not stage_timed_out(r) for r in runs),
        "degraded": bool(degraded),
        "degraded_reasons": degraded,
        "query": state.original_query or state.query,
        "search_query": state.query,
        "answer": state.answer,
        "sources": [s.model_dump(mode="json") for s in state.sources],
        "cot_steps": [c.model_dump(mode="json") for c in state.cot_steps] if state.cot else None,
        "citations": [c.model_dump(mode="json") for c in state.citations],
        "agent_artifacts": [r.artifact.model_dump(mode="json") for r in response_runs if r.artifact is not None],
        "agents": [AgentLine.of(r) for r in runs],
        "skipped": [{"agent_id": r.agent_id, "stage": r.stage, "status": r.status,
                     "reason": (r.errors or [""])[0]} for r in runs if r.status != "ok"],
        "metadata": state.metadata,
        "timings_ms": state.timings_ms,
        **({"stage_timeouts": state.stage_timeouts} if state.stage_timeouts else {}),
        **({"document_versions": versions} if (versions := {c.document_id: c.version for c in cited_documents(state)
                                                            if c.version}) else {}),
    })


def cited_documents(state: JobState) -> list[Cited]:
    """The documents the answer cites (its sources) that the search found in a collection, each with that
    collection and the version of the chunk it read (``chunk_id`` in the passage's metadata, as the search left
    it). A passage without a chunk (one an agent brought, a tool's result) is no collection's document: nothing
    ingested can change it."""
    passages = {d.id: d.metadata for d in state.documents}
    cited: dict[tuple[str, str], Cited] = {}
    for source in state.sources:
        metadata = passages.get(source.document_id, {})
        chunk_id = metadata.get("chunk_id")
        if not isinstance(chunk_id, str):
            continue
        try:
            collection = uuid.UUID(str(metadata.get("collection_id") or state.collection_id))
        except ValueError:
            continue
        cited.setdefault((str(collection), source.document_id),
                         Cited(collection, source.document_id, chunk_version(chunk_id)))
    return list(cited.values())


@dataclass(frozen=True)
class Assembly:
    """The end's input: the job as its last step reads it (status, kept state, agents) and the chord's records."""

    job_id: str
    status: str | None
    state: JobState | None
    snapshot: list[dict[str, Any]]
    records: list[dict[str, Any]]


class Ended(BaseModel):
    """What the end hands back: the job and how it ended."""

    job_id: str
    status: str


def for_assembly(call: StepCall, records: list[dict[str, Any]]) -> Assembly:
    """The end's input, read in one round trip."""
    job_id = call.job_id or ""
    status, state, snapshot = JobStore(call.services.db).for_assembly(job_id)
    return Assembly(job_id, status, state, snapshot, records)


def assembly_check(step: Step, call: StepCall, job: Assembly, jobs: JobStore) -> Cancelled | None:
    """The end's check, on the status its input read: a job cancelled or already ended is not assembled again."""
    if job.status == "cancelled" or job.status in TERMINAL:
        return Cancelled(job.status)  # a second run: the first one already ended the job
    if job.state is None:
        raise MissingState(job.job_id, job.status)
    return None


def assemble(call: StepCall, job: Assembly) -> Ended | Retry:
    """The job's response from its kept state and one record per response agent, and the job ended: succeeded, or
    failed when a critical response agent failed. A record nowhere yet is waited for, then recorded as lost."""
    jobs, state = JobStore(call.services.db), job.state
    assert state is not None  # assembly_check
    runs, missing = response_runs(call, job)
    if missing:
        if call.retries < ASSEMBLE_WAITS:
            return Retry(ASSEMBLE_WAIT_S)
        log.error("job %s assembled without the records of %s", job.job_id, missing)
        runs += [AgentRun(agent_id=a, stage=Stage.RESPONSE, success=False, status="error",
                          errors=["its record never reached the job"]) for a in missing]
    specs = ordered([AgentSpec.model_validate(s) for s in job.snapshot], Stage.RESPONSE)
    if reason := critical_response_failure(specs, runs):
        jobs.fail(job.job_id, reason)
        end_job(call, jobs, job.job_id)
        return Ended(job_id=job.job_id, status="failed")
    runs = [flat for run in runs for flat in run.flat()]  # a fallback's run beside the run it stood in for
    if runs:
        state.timings_ms["response"] = max(r.duration_ms for r in runs)
    response = assemble_response(state, runs)
    state.timings_ms["assemble"] = round((time.perf_counter() - call.started) * 1000, 3)
    response["timings_ms"] = state.timings_ms
    if jobs.succeed(job.job_id, response, [*state.agent_runs, *runs], state.timings_ms,
                    cited=cited_documents(state)):
        end_job(call, jobs, job.job_id)
    return Ended(job_id=job.job_id, status="succeeded")


def assembly_ended(call: StepCall, outcome: Cancelled) -> Ended:
    """The end's record of a job that was cancelled (its trace then ends) or had ended already."""
    if outcome.status == "cancelled":
        end_job_trace(JobStore(call.services.db), call.job_id or "")
    return Ended(job_id=call.job_id or "", status=outcome.status or "gone")


def response_runs(call: StepCall, job: Assembly) -> tuple[list[AgentRun], list[str]]:
    """The response agents' records, exactly one per agent of the job, in the canvas's order.

    Each comes from the ledger (the first record its agent stored), else from the chord. The chord's list is not
    trusted alone: a result backend that counted a header task's duplicate (Celery's Redis backend before 5.7)
    fires the callback with a record twice and another missing. The missing agents are named for the caller.
    """
    chord_records: dict[tuple, dict[str, Any]] = {}
    for record in job.records:
        if record:
            chord_records.setdefault((record.get("agent_id"), record.get("config_id")), record)
    specs = ordered([AgentSpec.model_validate(s) for s in job.snapshot], Stage.RESPONSE)
    if not specs:
        return [AgentRun.model_validate(r) for r in chord_records.values()], []
    stored = call.ledger.steps(job.job_id)
    runs: list[AgentRun] = []
    missing: list[str] = []
    for spec in specs:
        found = stored.get(step_key(Stage.RESPONSE, spec)) or chord_records.get((spec.agent_id, spec.config_id))
        if found is None:
            missing.append(spec.agent_id)
        else:
            runs.append(AgentRun.model_validate(found))
    return runs, missing


def critical_response_failure(specs: list[AgentSpec], records: list[AgentRun]) -> str | None:
    """Why the job fails at assembly, or None: a critical response agent whose last run (its fallback's, if one
    stood in) failed. ``records`` are the steps' records, each the agent's own run carrying its stand-in's."""
    by_step = {(r.agent_id, r.config_id): r for r in records}
    for spec in specs:
        record = by_step.get((spec.agent_id, spec.config_id))
        if spec.critical and record is not None and failed(record.flat()[-1]):
            return critical_reason(spec, [r for r in record.flat() if failed(r)])
    return None


def assemble_response(state: JobState, response_runs: list[AgentRun]) -> dict:
    """The job's response (answer, sources, reasoning steps, every agent's outcome, artifacts, metadata, timings),
    with artifacts by reference (the API inlines their bytes): ``job_response``, as the job's row keeps it."""
    return job_response(state, response_runs).dump()


def end_job(call: StepCall, jobs: JobStore, job_id: str) -> None:
    """The job has ended: its trace's root span emitted, its ledger cleared (a late copy of any step now stops at
    its first check)."""
    end_job_trace(jobs, job_id)
    call.ledger.clear(job_id)


def end_job_trace(jobs: JobStore, job_id: str) -> None:
    """Emit the job's root span from its row (submission to end, final status); never raises into the task."""
    if not tracing.enabled():
        return
    try:
        timeline = jobs.timeline(job_id)
        if timeline is not None:
            tracing.emit_job_span(job_id, timeline.status, timeline.created_at, timeline.finished_at,
                                  timeline.traceparent, timeline.error)
    except Exception:  # a lost span must not fail the job's last step
        log.debug("job span of %s not emitted", job_id, exc_info=True)
