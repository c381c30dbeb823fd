"""What each step of a job does, as plain functions of the job state: the Celery tasks only call these.

Each function takes the state it is given and returns a new one (or a record), so a step that runs twice with the
same input gives the same output: the canvas can deliver at least once without double counting. Each step runs
in a span of the job's trace (``observability.tracing.traced_stage``), whose context the returned state carries.

An agent's step (pre-search, post-search, response) calls its agent through ``call_agent``, the runner wrapped in one
order, from the inside out:

1. the stage's budget (``pipeline.job.stage_budget``): each run, a fallback's included, is skipped when the stage's
   time is spent and gets at most what is left otherwise;
2. the fallback (``pipeline.agents.fallback``): a failed agent's fallback stands in with the same input;
3. the route (``pipeline.job.routing``): the ``next_agent_id`` the output names is followed, or is the last run's
   error when the stage may not follow it (pre- and post-search agents only; response agents run side by side).

A pre-search and a post-search agent's step are one implementation (``agent_stage_step``): the two differ only in
the input they build from the state and in what they take back from the output (``STAGE_IO``).

Usage::

    state = pre_search_step(state, spec, services.runner, stage_agents=[("intent_classifier", "c1"), ...])
    state = core_search_step(state, services)
    state = post_search_step(state, spec, services.runner)
    state = answer_step(state, LLMClient.from_settings(services.settings), answer_embedder(services, state),
                        stream=AnswerChannel(services.redis, state.job_id))
    run = response_step(state, spec, services.runner, services.artifacts)
    response = assemble_response(state, [run])
    outcome = call_agent(state, Stage.RESPONSE, spec, services.runner, inp, default_timeout_s=30.0)

A search that failed outright (``pipeline.retrieval.outcome``) is not decided here: the search step hands its state
on, and the task around it retries or fails the job. A search that failed in part makes the response ``degraded``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from pipeline.agents.base import AgentArtifact, AgentContext, PostSearchInput, PreSearchInput, ResponseAgentInput, Stage
from pipeline.agents.fallback import FallbackOutcome, critical_reason, failed, run_with_fallback
from pipeline.agents.records import AgentRun, AgentSpec
from pipeline.agents.runner import AgentRunner
from pipeline.documents import Document
from pipeline.job.answer import ANSWER_LLM_TIMEOUT_S, generate_answer
from pipeline.job.answer.citations import CITATION_LLM_TIMEOUT_S, CitationCheck, citation_summary, verify_citations
from pipeline.job.artifact_names import numbered
from pipeline.job.artifacts import ArtifactStore, JobEnded
from pipeline.job.response import JobResponse
from pipeline.job.routing import StageAgent, follow, passed_over
from pipeline.job.stage_budget import StageBudget
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
def pre_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner,
                    stage_agents: Sequence[StageAgent] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One pre-search agent (``agent_stage_step``). ``stage_agents`` are the stage's agents in order
    ((agent_id, config_id)), for its routing."""
    return agent_stage_step(state, Stage.PRE_SEARCH, spec, runner, stage_agents, default_timeout_s)


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
def post_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner,
                     stage_agents: Sequence[StageAgent] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One post-search agent (``agent_stage_step``), the pre-search agents' step on the documents."""
    return agent_stage_step(state, Stage.POST_SEARCH, spec, runner, stage_agents, default_timeout_s)


def answer_embedder(services: Services, state: JobState) -> Callable[[list[str]], list[list[float]]]:
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
                embedding_model: str | None = None, timeout_s: float = ANSWER_LLM_TIMEOUT_S,
                judge_timeout_s: float = CITATION_LLM_TIMEOUT_S) -> JobState:
    """The answer with citations: the LLM's when ``llm`` is given (an ``LLMClient``), else, or when it fails,
    the extractive one (sentences scored with ``embed``, the vectors of ``embedding_model``, when given).
    ``metadata.answer`` records which and why. ``timeout_s`` and ``judge_timeout_s`` are the LLM's budgets for the
    answer and for its verdicts on the answer's sentences (``AGENTSEARCH_ANSWER_LLM_TIMEOUT_S``, ``_JUDGE_...``).

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
                             embedding_model=embedding_model, timeout_s=timeout_s, judge_timeout_s=judge_timeout_s)
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


# One agent called for a step: the runner wrapped in the one order every agent step uses (see the docstring).


def agent_context(state: JobState, stage: Stage) -> AgentContext:
    return AgentContext(
        collection_id=state.collection_id,
        user_id=state.user_id,
        query=state.query,
        retrieved_documents=state.documents if stage != Stage.PRE_SEARCH else None,
        search_metadata=state.metadata,
        pipeline_stage=stage,
        previous_agent_results=state.runs_in(stage),
        collection_epoch=state.collections.get(state.collection_id, 0),
        search_filter=state.search.get("filter"),
        access_tokens=state.access_tokens,
        conversation_id=state.conversation_id,
        conversation_history=state.history,
    )


def call_agent(state: JobState, stage: Stage, spec: AgentSpec, runner: AgentRunner, inp: BaseModel,
               default_timeout_s: float, stage_agents: Sequence[StageAgent] | None = None) -> FallbackOutcome:
    """The agent of ``spec`` run on ``inp`` in ``stage``: held to the stage's budget, its fallback standing in if it
    fails, and (given ``stage_agents``, its stage's agents in order) its route followed, recorded in ``state``."""
    budget = StageBudget.of(state, stage)
    held = runner if budget is None else budget.runner(runner, default_timeout_s)
    outcome = run_with_fallback(held, spec, inp, agent_context(state, stage))
    return outcome if stage_agents is None else _routed(state, spec, outcome, stage_agents)


def _routed(state: JobState, spec: AgentSpec, outcome: FallbackOutcome,
            stage_agents: Sequence[StageAgent]) -> FallbackOutcome:
    """The outcome after the ``next_agent_id`` its output named: recorded in the state's routes, or, when the stage
    may not follow it, the last run's error (its output then goes unused)."""
    name = getattr(outcome.output, "next_agent_id", None)
    if not name:
        return outcome
    run = outcome.last
    run.next_agent_id = name
    problem = follow(state, spec, stage_agents, name)
    if problem is None:
        return outcome
    run.status, run.success, run.errors = "error", False, [*(run.errors or []), problem]
    return dataclasses.replace(outcome, output=None)


@dataclass(frozen=True)
class StageIO:
    """What a stage's agent is given from the state, and what the state takes back from its output (``data`` is
    the record's summary of it)."""

    given: Callable[[JobState], BaseModel]
    take: Callable[[JobState, Any], dict]
    copies_documents: bool = False  # the documents are the agent's input, which it may change in place


def _pre_search_input(state: JobState) -> BaseModel:
    return PreSearchInput(query=state.query, collection_id=state.collection_id, user_id=state.user_id,
                          metadata=state.metadata)


def _take_query(state: JobState, out) -> dict:
    state.query = out.query
    state.skip_search = state.skip_search or out.skip_search
    return {"query": out.query, "skip_search": out.skip_search}


def _post_search_input(state: JobState) -> BaseModel:
    return PostSearchInput(documents=state.documents, query=state.query, collection_id=state.collection_id,
                           user_id=state.user_id, metadata=state.metadata)


def _take_documents(state: JobState, out) -> dict:
    data = {"documents_in": len(state.documents), "documents_out": len(out.documents)}
    state.documents = out.documents
    return data


STAGE_IO: dict[Stage, StageIO] = {
    Stage.PRE_SEARCH: StageIO(_pre_search_input, _take_query),
    Stage.POST_SEARCH: StageIO(_post_search_input, _take_documents, copies_documents=True),
}


def agent_stage_step(state: JobState, stage: Stage, spec: AgentSpec, runner: AgentRunner,
                     stage_agents: Sequence[StageAgent] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One pre- or post-search agent (``stage``) on a new state; the state it was handed stays as it was.
    ``stage_agents`` are the stage's agents in order ((agent_id, config_id)), for its routing. A critical failure
    raises, failing the job."""
    io = STAGE_IO[stage]
    # A new state whose own containers are the ones this step changes (metadata, records, routes, clocks): a deep
    # copy of all of it took longer than the rest of a no-op agent's step.
    update = {"metadata": copy.deepcopy(state.metadata), "agent_runs": list(state.agent_runs),
              "routes": dict(state.routes), "stage_clock": dict(state.stage_clock)}
    if io.copies_documents:
        update["documents"] = copy.deepcopy(state.documents)
    state = state.model_copy(update=update)
    if (skip := passed_over(state, spec)) is not None:
        state.agent_runs.append(skip)  # an earlier agent of the stage routed past it: a no-op hop
        return state
    outcome = call_agent(state, stage, spec, runner, io.given(state), default_timeout_s, stage_agents or [])
    outcome.raise_if_critical()
    run = outcome.last
    out: Any = outcome.output  # the stage's output model: PreSearchOutput or PostSearchOutput
    if out is not None:
        run.data = io.take(state, out)
        run.metadata = out.metadata
        state.metadata.update(out.metadata)
    state.agent_runs.extend(outcome.runs)
    return state
