"""A finished job's response assembled from what its steps left: the job's last step.

The response itself (``JobResponse``) is a record below the job (``pipeline.records.job_response``), read by the API,
the MCP tools and the webhooks; what makes one of a job's state is here, with the job.

Usage::

    response = job_response(state, response_runs)            # state as the answer left it
    jobs.succeed(job_id, response.dump(), runs, timings)     # the JSON the job's row keeps
"""

from __future__ import annotations

from pipeline.job.job_state import JobState
from pipeline.job.stage_budget import stage_timed_out
from pipeline.records.agent_runs import AgentRun
from pipeline.records.job_response import AgentLine, JobResponse
from pipeline.retrieval.outcome import SearchOutcome


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
    })
