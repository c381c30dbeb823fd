"""What each step of a job does, as plain functions of the job state: the Celery tasks only call these.

Each function takes the state it is given and returns a new one (or a record), so a step that runs twice with the
same input gives the same output: the canvas can deliver at least once without double counting. Each step runs
in a span of the job's trace (``observability.tracing.traced_stage``), whose context the returned state carries.

Usage::

    state = pre_search_step(state, spec, services.runner, peers=[("intent_classifier", "c1"), ...])
    state = core_search_step(state, services)
    state = post_search_step(state, spec, services.runner)
    state = answer_step(state, LLMClient.from_settings(services.settings), known_embed(services, state),
                        stream=AnswerChannel(services.redis, state.job_id))
    run = response_step(state, spec, services.runner, services.artifacts)
    response = assemble_response(state, [run])

A search that failed outright (``pipeline.retrieval.outcome``) is not decided here: the search step hands its state
on, and the task around it retries or fails the job. A search that failed in part makes the response ``degraded``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from pipeline.agents.base import AgentArtifact, ResponseAgentInput, Stage
from pipeline.agents.fallback import critical_reason, failed
from pipeline.agents.records import AgentRun, AgentSpec
from pipeline.agents.runner import AgentRunner
from pipeline.documents import Document
from pipeline.job.agent_call import agent_stage_step, call_agent
from pipeline.job.answer import generate_answer
from pipeline.job.answer.citations import CitationCheck, citation_summary, verify_citations
from pipeline.job.artifact_names import numbered
from pipeline.job.artifacts import ArtifactStore, JobEnded
from pipeline.job.response import JobResponse
from pipeline.job.routing import Peer
from pipeline.job.state import JobState
from pipeline.observability.tracing import traced_stage
from pipeline.platform.db import milvus_collection_name
from pipeline.retrieval.config import SearchConfig
from pipeline.retrieval.outcome import SearchOutcome
from pipeline.retrieval.sentence_vectors import KnownVectors, stored_for
from pipeline.retrieval.translations import Translations

if TYPE_CHECKING:  # types only: steps get their parts passed in, and the tests hand in fakes
    from pipeline.services import Services


@traced_stage("pre_search")
def pre_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner, peers: Sequence[Peer] | None = None,
                    default_timeout_s: float = 30.0) -> JobState:
    """One pre-search agent (``pipeline.job.agent_call``). ``peers`` are the stage's agents in order
    ((agent_id, config_id)), for its routing."""
    return agent_stage_step(state, Stage.PRE_SEARCH, spec, runner, peers, default_timeout_s)


def search_config(state: JobState, defaults: dict) -> SearchConfig:
    return SearchConfig(**{**defaults, **state.search, "top_k": state.top_k})


@traced_stage("core_search")
def core_search_step(state: JobState, services: Services, collection_id: str | None = None) -> JobState:
    """Search one collection (the job's own by default) and keep the top-k documents."""
    state = state.model_copy(deep=True)
    if state.skip_search:
        state.documents = []
        SearchOutcome.skipped_by_agent().write(state.metadata)
        return state
    collection_id = collection_id or state.collection_id
    # After the translator the search runs the question as asked and each translation, so it meets documents in
    # its own language and in the collection's; otherwise the current query alone.
    translations = Translations.of_translator(state.metadata, state.query)
    result = services.retriever.search(
        milvus_collection_name(collection_id),
        translations.original if translations is not None else state.query,
        search_config(state, services.settings.search_defaults()),
        epoch=state.collections.get(collection_id, 0),
        model=services.settings.embedding_model,
        **({"translations": translations} if translations is not None else {}),
    )
    state.documents = [
        d.model_copy(update={"metadata": {**d.metadata, "collection_id": collection_id}}) for d in result.documents
    ]
    SearchOutcome.of_collection(result.metrics, collection_id, result.warnings, result.suggestions).write(
        state.metadata)
    return state


def merge_search_step(states: list[JobState]) -> JobState:
    """Join the searches of several collections: dedupe by document id (best score wins), sort, cut to top-k."""
    merged = states[0].model_copy(deep=True)
    best: dict[str, Document] = {}
    for state in states:
        for doc in state.documents:
            if doc.id not in best or doc.score > best[doc.id].score:
                best[doc.id] = doc
    merged.documents = sorted(best.values(), key=lambda d: d.score, reverse=True)[: merged.top_k]
    searches = [SearchOutcome.read(s.metadata) for s in states]
    per_collection = {
        (search.collection_id or (s.documents[0].metadata["collection_id"] if s.documents else f"#{i}")): search
        for i, (s, search) in enumerate(zip(states, searches, strict=True))
    }
    SearchOutcome.merged(
        per_collection,
        returned=len(merged.documents),
        duplicates=sum(len(s.documents) for s in states) - len(best),
        average_relevance=round(sum(d.score for d in merged.documents) / len(merged.documents), 6)
        if merged.documents else 0.0,
    ).write(merged.metadata)
    return merged


@traced_stage("post_search")
def post_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner, peers: Sequence[Peer] | None = None,
                     default_timeout_s: float = 30.0) -> JobState:
    """One post-search agent (``pipeline.job.agent_call``), the pre-search agents' step on the documents."""
    return agent_stage_step(state, Stage.POST_SEARCH, spec, runner, peers, default_timeout_s)


def known_embed(services: Services, state: JobState) -> Callable[[list[str]], list[list[float]]]:
    """The answer's ``embed``: the sentence vectors stored with the job's documents and the query's embedding the
    search cached are read; only the other texts reach the model. Lazy: nothing is read or loaded until the answer
    embeds, and a model that fails to load costs the answer its embedding score only."""

    def embed(texts: list[str]) -> list[list[float]]:
        # Only the job's own collections (checked when it was submitted): a document's metadata may have been
        # rewritten by an agent on the way.
        searched = [d for d in state.documents
                    if (d.metadata.get("collection_id") or state.collection_id) in state.collections]
        stored = stored_for(services.vector_store, searched, milvus_collection_name, state.collection_id)
        model = services.settings.embedding_model
        known = KnownVectors(lambda rest: services.embedder.embed(rest), stored,
                             lambda text: services.retriever.cached_embedding(text, model))
        return known.embed(texts)

    return embed


@traced_stage("answer")
def answer_step(state: JobState, llm=None, embed=None, language: str = "english", stream=None,
                embedding_model: str | None = None) -> JobState:
    """The answer with citations: the LLM's when ``llm`` is given (an ``LLMClient``), else, or when it fails,
    the extractive one (sentences scored with ``embed``, the vectors of ``embedding_model``, when given).
    ``metadata.answer`` records which and why.

    With ``stream`` (a ``pipeline.job.answer_stream.AnswerChannel``) the text is written to it as it is made and
    the validated answer ends it, so the job's events carry the answer before the job ends."""
    state = state.model_copy(deep=True)
    # The user's question is what is answered; the search query (maybe translated or expanded) is what matched.
    question = state.original_query or state.query
    query = question if state.query == question else f"{question}\n(searched as: {state.query})"
    if stream is not None:
        stream.start()
    answer = generate_answer(query if llm is not None else state.query, state.documents, with_cot=state.cot,
                             llm=llm, embed=embed, language=language, stream=stream,
                             embedding_model=embedding_model)
    if stream is not None:
        stream.finish(answer.text, method=answer.method, fallback_reason=answer.fallback_reason)
    state.answer = answer.text
    state.sources = answer.sources
    state.cot_steps = answer.cot_steps
    state.metadata["answer"] = answer.metadata()
    if answer.citations is not None:
        # An LLM answer: every sentence was judged before it was delivered (pipeline.job.answer.grounding).
        check = CitationCheck(answer.citations, citation_summary(answer.citations, answer.info.get("check", {})))
    else:
        # The extractive answer quotes its sources, so the offline check finds each sentence verbatim.
        check = verify_citations(answer.text, state.documents, embed=embed, language=language)
    state.citations = check.citations
    state.metadata["citations"] = check.info
    return state


@traced_stage("response")
def response_step(state: JobState, spec: AgentSpec, runner: AgentRunner, artifacts: ArtifactStore,
                  name_rank: int = 1, default_timeout_s: float = 30.0) -> AgentRun:
    """Run one response agent and store its artifact. Never raises: the chord's callback must always run.

    ``name_rank`` is the step's rank among the job's steps of the same agent (``pipeline.job.artifact_names``): the
    artifact of a second config of one agent is stored as ``summary-2.txt`` beside the first one's ``summary.txt``.
    """
    inp = ResponseAgentInput(
        answer=state.answer or "",
        sources=state.sources,
        query=state.original_query or state.query,
        documents=state.documents,
        collection_id=state.collection_id,
        user_id=state.user_id,
        cot_steps=state.cot_steps or None,
        metadata=state.metadata,
        citations=state.citations,
    )
    # A critical failure is not raised here (the chord must complete): assembly decides it from the records.
    # Held to the stage's budget: the chord then assembles what finished inside it, and records the rest.
    outcome = call_agent(state, Stage.RESPONSE, spec, runner, inp, default_timeout_s)
    first, run = outcome.runs[0], outcome.last
    artifact = cast("AgentArtifact | None", outcome.output)  # a response agent's output model
    if run is not first:
        first.stand_in = run  # the step's record is the agent's own run, carrying its stand-in's
    if artifact is None:
        return first
    if name_rank > 1:
        artifact = artifact.model_copy(update={"filename": numbered(artifact.filename, name_rank)})
    try:
        run.artifact = artifacts.save(state.job_id, artifact)
        run.data = {"filename": artifact.filename, "type": artifact.type, "size": len(artifact.data)}
        run.metadata = artifact.metadata
    except JobEnded as exc:
        # Cancelled while the agent rendered: the store refused the artifact, and nobody waits for it any more.
        run.status, run.success = "skipped", False
        run.errors = [str(exc)]
    except Exception as exc:  # noqa: BLE001 - a storage failure is this agent's failure, not the job's
        run.status, run.success = "error", False
        run.errors = [f"{type(exc).__name__}: {exc}"]
    return first


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
    with artifacts by reference (the API inlines their bytes): ``JobResponse.assemble``, as the job's row keeps it."""
    return JobResponse.assemble(state, response_runs).dump()
