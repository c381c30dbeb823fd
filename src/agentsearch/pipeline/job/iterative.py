"""The iterative mode's steps: the loops begun, one iteration of a loop, the loops' results merged, and the
documents compressed before the answer (``agentsearch.pipeline.job.workflow`` puts them in order).

The loop itself (what an iteration searches, judges and refines, and when it stops) is
``agentsearch.pipeline.agentic.loop``; here is what a job does with it: which loops it runs (one per profile, or one for
the query), the tools an iteration gets (the job's filter holds for every search; what the user has seen is skipped),
and what the loops hand on to the rest of the job. Nothing here enqueues anything: ``agentsearch.worker.agentic_tasks``
applies each next task.

Usage::

    running, fresh = loops_to_run(services, state)   # {profile: loop state} running, and whether one is new
    loop = iterate(services, job_state, profile, loop)
    state = merge_loops(services, jobs, job_id)      # the state the tail works on
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from agentsearch.pipeline.agentic.compress import compress_documents
from agentsearch.pipeline.agentic.loop import LoopState, final_documents, run_iteration
from agentsearch.pipeline.agentic.runtime import build_compressor, build_tools, job_filter, vectors_function
from agentsearch.pipeline.agentic.seen import SeenFilter, SqlSeenStore
from agentsearch.pipeline.agentic.spec import AgenticSpec, LoopPlan, LoopStore, job_documents
from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.stage_budget import start_clock
from agentsearch.pipeline.job.step_protocol import StepCall
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.outcome import SearchOutcome

if TYPE_CHECKING:  # types only: the steps get this process's services handed in
    from agentsearch.pipeline.services import Services


def spec_of(state: JobState) -> AgenticSpec:
    return AgenticSpec.model_validate(state.agentic or {})


def stage_of(profile: str, iteration: int) -> str:
    """The stage a job shows during an iteration: ``iteration:<n>``, or ``<profile>:iteration:<n>``."""
    return f"{profile}:iteration:{iteration}" if profile else f"iteration:{iteration}"


def begin(call: StepCall, state: JobState) -> JobState:
    """The loops' start: the state kept in the job's row as it is, for the finish (which the last loop enqueues
    long after this step's output is gone); the loops themselves are started after it (``loops_to_run``)."""
    return state


def loops_to_run(services: Services, state: JobState) -> tuple[dict[str, dict], bool]:
    """Every loop of the job that has not ended, by profile, started now if new, and whether one was new. Run on
    every delivery that finds the job going on, the ledger's stored output included, so a job retried after its
    worker was lost finds its loops started, and they go on from their last saved iteration. A redelivered copy
    may fork a loop that way; the fork's first save is refused. No loop running and none new: the finish is next."""
    store = LoopStore(services.db)
    plans = spec_of(state).plans(state.query, state.collections, services.settings.test_mode)
    fresh = [p.profile for p in plans if store.start(state.job_id, p.profile, LoopState.start(p.query, p.config))]
    return {profile: loop.dump() for profile, loop in store.running(state.job_id).items()}, bool(fresh)


def plan_of(services: Services, state: JobState, profile: str) -> LoopPlan:
    return next(p for p in spec_of(state).plans(state.query, state.collections, services.settings.test_mode)
                if p.profile == profile)


def iterate(services: Services, state: JobState, profile: str, loop: LoopState) -> LoopState:
    """One iteration of the loop of ``profile``, with its tools: the job's metadata filter (kept with its search
    overrides) on every search, and what this user was shown before skipped when the job asks for it."""
    plan, spec = plan_of(services, state, profile), spec_of(state)
    llm = LLMClient.from_settings(services.settings)
    skip = None
    if spec.seen.enabled and state.user_id:
        skip = SeenFilter(SqlSeenStore(services.db), uuid.UUID(state.user_id), profile, spec.seen,
                          vectors=vectors_function(services.retriever))
    defaults = {**services.settings.search_defaults(), **job_filter(state.search)}
    tools = build_tools(services.retriever, services.analyzer, plan.targets, loop.config,
                        model=services.settings.embedding_model, defaults=defaults, llm=llm, skip_seen=skip)
    return run_iteration(loop, tools)


def merge_loops(services: Services, jobs: JobStore, job_id: str) -> JobState:
    """The state the tail works on: the loops' documents merged (by category for profiles), what the user is shown
    recorded as seen, the loops' time, and the post-search agents' clock started (the loops hand over)."""
    started = time.perf_counter()
    state = jobs.load_state(job_id)
    spec = spec_of(state)
    states = LoopStore(services.db).states(job_id)
    documents, summary = job_documents(spec, states, services.settings.max_top_k)
    state.documents = documents
    state.metadata["agentic"] = summary
    SearchOutcome(mode=spec.mode, returned=len(documents),
                  iterations={p or "query": s.iteration for p, s in states.items()}).write(state.metadata)
    if state.user_id:
        record_seen(services, state, spec, states, documents)
    state.timings_ms["agentic"] = round(sum(r.duration_ms for s in states.values() for r in s.history), 3)
    state.timings_ms["agentic_merge"] = round((time.perf_counter() - started) * 1000, 3)
    start_clock(state, Stage.POST_SEARCH)
    return state


def record_seen(services: Services, state: JobState, spec: AgenticSpec, states: dict[str, LoopState],
                returned: list[Document]) -> None:
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
        store.record(uuid.UUID(state.user_id or ""), profile, source, docs, found, job_id=uuid.UUID(state.job_id))


def compresses(state: JobState) -> bool:
    return spec_of(state).iterative.compress and bool(state.documents)


def compress(call: StepCall, state: JobState) -> JobState:
    """Before the answer: long documents cut to their query-relevant sentences (when the job asks for it)."""
    if not compresses(state):
        return state
    config = spec_of(state).iterative
    compressor = build_compressor(call.services.analyzer, config, LLMClient.from_settings(call.services.settings))
    state.documents, records = compress_documents(state.original_query or state.query, state.documents,
                                                  compressor, config.compress_concurrency)
    state.metadata["compression"] = [r.model_dump() for r in records if r.method != "unchanged"]
    return state


def compress_timed_as(state: JobState) -> str:
    """The compression is timed only when there is something to cut."""
    return "compress" if compresses(state) else ""
