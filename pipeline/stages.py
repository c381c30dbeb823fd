"""What each step of a job does, as plain functions of the job state: the Celery tasks only call these.

Each function takes the state it is given and returns a new one (or a record), so a step that runs twice with the
same input gives the same output: the canvas can deliver at least once without double counting.

Usage::

    state = pre_search_step(state, spec, services.runner)
    state = core_search_step(state, services)
    state = post_search_step(state, spec, services.runner)
    state = answer_step(state)
    run = response_step(state, spec, services.runner, services.artifacts)
    response = assemble_response(state, [run])
"""

from __future__ import annotations

import time
import uuid

from pipeline.agents.base import (
    AgentContext,
    Document,
    PostSearchInput,
    PreSearchInput,
    ResponseAgentInput,
    Stage,
)
from pipeline.answer import extractive_answer
from pipeline.artifacts import ArtifactStore
from pipeline.runner import AgentRunner
from pipeline.state import AgentRun, AgentSpec, JobState


def milvus_collection_name(collection_id: str) -> str:
    return f"c_{uuid.UUID(collection_id).hex}"


def _context(state: JobState, stage: Stage) -> AgentContext:
    return AgentContext(
        collection_id=state.collection_id,
        user_id=state.user_id,
        query=state.query,
        retrieved_documents=state.documents if stage != Stage.PRE_SEARCH else None,
        search_metadata=state.metadata,
        pipeline_stage=stage,
        previous_agent_results=state.runs_in(stage),
    )


def pre_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner) -> JobState:
    state = state.model_copy(deep=True)
    inp = PreSearchInput(
        query=state.query, collection_id=state.collection_id, user_id=state.user_id, metadata=state.metadata
    )
    run, out = runner.run(spec, inp, _context(state, Stage.PRE_SEARCH))
    if out is not None:
        run.data = {"query": out.query, "skip_search": out.skip_search}
        run.metadata = out.metadata
        state.query = out.query
        state.metadata.update(out.metadata)
        state.skip_search = state.skip_search or out.skip_search
    state.agent_runs.append(run)
    return state


def core_search_step(state: JobState, services) -> JobState:
    """Embed the query and search the collection's Milvus collection; best chunk per document, top-k."""
    state = state.model_copy(deep=True)
    if state.skip_search:
        state.documents = []
        state.metadata["search"] = {"skipped": True, "reason": "a pre-search agent asked to skip search"}
        return state
    started = time.perf_counter()
    vector = services.embedder.embed([state.query])[0]
    embedded = time.perf_counter()
    # More candidates than top_k: several chunks of one document collapse into one result.
    hits = services.vector_store.search(milvus_collection_name(state.collection_id), vector, top_k=state.top_k * 4)
    searched = time.perf_counter()
    best: dict[str, Document] = {}
    for hit in hits:
        if hit.document_id not in best or hit.score > best[hit.document_id].score:
            best[hit.document_id] = Document(
                id=hit.document_id, title=hit.title, text=hit.text, score=hit.score, metadata=hit.metadata
            )
    state.documents = sorted(best.values(), key=lambda d: d.score, reverse=True)[: state.top_k]
    state.metadata["search"] = {
        "strategy": "semantic",
        "candidates": len(hits),
        "returned": len(state.documents),
        "embedding_ms": round((embedded - started) * 1000, 3),
        "search_ms": round((searched - embedded) * 1000, 3),
    }
    return state


def post_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner) -> JobState:
    state = state.model_copy(deep=True)
    inp = PostSearchInput(
        documents=state.documents,
        query=state.query,
        collection_id=state.collection_id,
        user_id=state.user_id,
        metadata=state.metadata,
    )
    run, out = runner.run(spec, inp, _context(state, Stage.POST_SEARCH))
    if out is not None:
        run.data = {"documents_in": len(state.documents), "documents_out": len(out.documents)}
        run.metadata = out.metadata
        state.documents = out.documents
        state.metadata.update(out.metadata)
    state.agent_runs.append(run)
    return state


def answer_step(state: JobState) -> JobState:
    state = state.model_copy(deep=True)
    answer = extractive_answer(state.query, state.documents, with_cot=state.cot)
    state.answer = answer.text
    state.sources = answer.sources
    state.cot_steps = answer.cot_steps
    state.metadata["answer"] = {"method": "extractive"}
    return state


def response_step(state: JobState, spec: AgentSpec, runner: AgentRunner, artifacts: ArtifactStore) -> AgentRun:
    """Run one response agent and store its artifact. Never raises: the chord's callback must always run."""
    inp = ResponseAgentInput(
        answer=state.answer or "",
        sources=state.sources,
        query=state.original_query or state.query,
        documents=state.documents,
        collection_id=state.collection_id,
        user_id=state.user_id,
        cot_steps=state.cot_steps or None,
        metadata=state.metadata,
    )
    run, artifact = runner.run(spec, inp, _context(state, Stage.RESPONSE))
    if artifact is None:
        return run
    try:
        run.artifact = artifacts.save(state.job_id, artifact)
        run.data = {"filename": artifact.filename, "type": artifact.type, "size": len(artifact.data)}
        run.metadata = artifact.metadata
    except Exception as exc:  # noqa: BLE001 - a storage failure is this agent's failure, not the job's
        run.status, run.success = "error", False
        run.errors = [f"{type(exc).__name__}: {exc}"]
    return run


def assemble_response(state: JobState, response_runs: list[AgentRun]) -> dict:
    """The final response in the seed's shape, with artifacts by reference (the API inlines their bytes)."""
    runs = [*state.agent_runs, *response_runs]
    return {
        "job_id": state.job_id,
        "query": state.original_query or state.query,
        "search_query": state.query,
        "answer": state.answer,
        "sources": [s.model_dump(mode="json") for s in state.sources],
        "cot_steps": [c.model_dump(mode="json") for c in state.cot_steps] if state.cot else None,
        "agent_artifacts": [r.artifact.model_dump(mode="json") for r in response_runs if r.artifact is not None],
        "agents": [
            {
                "agent_id": r.agent_id,
                "config_id": r.config_id,
                "stage": r.stage.value,
                "status": r.status,
                "duration_ms": r.duration_ms,
                "cache_hit": r.cache_hit,
                "errors": r.errors,
                "worker": r.worker,
            }
            for r in runs
        ],
        "skipped": [
            {"agent_id": r.agent_id, "stage": r.stage.value, "status": r.status, "reason": (r.errors or [""])[0]}
            for r in runs
            if r.status != "ok"
        ],
        "metadata": state.metadata,
        "timings_ms": state.timings_ms,
    }
