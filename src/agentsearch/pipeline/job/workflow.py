"""A job's graph, read top to bottom: its steps in the order a job runs them, each a named function of the state.

    pre_search_agent*  ->  core_search (or per collection, side by side, then merge_search)  ->  post_search_agent*
      ->  generate_answer  ->  response_agent* (side by side: a chord)  ->  assemble (the chord's callback: the end)

The iterative mode runs the same steps with its loops in place of the search (``ITERATIVE_*`` below)::

    pre_search_agent*  ->  agentic_begin  ->  agentic_iteration* per loop (each enqueues the next)  ->  agentic_finish
      ->  post_search_agent*  ->  agentic_compress  ->  generate_answer  ->  response_agent*  ->  assemble

Each step is a ``Step`` (``agentsearch.pipeline.job.step_protocol``): its stage, its ledger key and its work, a plain
function ``(StepCall, input) -> output`` defined here. The search and the answer are written out below; an agent runs
through the one wrapper around every agent call (``agentsearch.pipeline.job.agent_call``); the end's work is
``agentsearch.pipeline.job.assembly``'s and the loops' ``agentsearch.pipeline.job.iterative``'s. ``run_step`` runs
every one in the same frame (the job's check, the step ledger, the time). Each graph is a tuple of ``Node``: the Celery
task that runs a step, and how many (one; one per agent of a stage, in order or side by side; one per collection).
``agentsearch.worker.job_tasks`` makes each node's task and the job's canvas from these tuples, mechanically: a new
step is a function and a node here, then its task there.

A search that failed outright (nothing found, Milvus errors: ``agentsearch.pipeline.retrieval.outcome``) is not handed
on as "no documents matched": ``search_or_retry`` asks for the step again with backoff for ``MILVUS_RETRY_S`` (a Milvus
restart), then fails the job with the search's error. One collection of several hands its failure on to the merge,
which fails the job only if no collection found anything. A search that failed in part makes the response
``degraded``. ``answer_step`` takes what it needs passed in (an LLM client, an ``embed``, a stream), so the answer's
benchmarks and tests call it alone; ``answer`` is the step of a job, its parts from this process's services.

Usage::

    for node in JOB:                     # the job's graph, in order
        node.task, node.step.stage       # "agentsearch.pre_search_agent", "pre_search"
    run_step(ANSWER.step, StepCall(services, ledger), state.dump())
    state = core_search_step(state, services)                          # one search, alone
    state = answer_step(state, LLMClient.from_settings(settings), answer_embedder(services, state))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentsearch.pipeline.agents.base import AgentArtifact, Stage
from agentsearch.pipeline.agents.runner import worker_name
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job import assembly, iterative
from agentsearch.pipeline.job.agent_call import SavesArtifacts, post_search_step, pre_search_step, response_step
from agentsearch.pipeline.job.answer import ANSWER_LLM_TIMEOUT_S, generate_answer
from agentsearch.pipeline.job.answer.citations import (
    CITATION_LLM_TIMEOUT_S,
    CitationCheck,
    citation_summary,
    verify_citations,
)
from agentsearch.pipeline.job.answer_stream import AnswerChannel
from agentsearch.pipeline.job.artifacts import ArtifactStore
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.step_protocol import (
    DATABASE_AWAY,
    DATABASE_RETRIES,
    LONGEST_RETRY_DELAY_S,
    Cancelled,
    Retry,
    Step,
    StepCall,
    status_check,
)
from agentsearch.pipeline.observability.tracing import traced_stage
from agentsearch.pipeline.platform.backoff import backoff_delay
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec, ArtifactRef
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.outcome import SearchFailed, SearchOutcome
from agentsearch.pipeline.retrieval.sentence_vectors import KnownVectors, stored_for
from agentsearch.pipeline.retrieval.translations import Translations

if TYPE_CHECKING:  # types only: the steps get their parts passed in, and the tests hand in fakes
    from agentsearch.pipeline.services import Services

log = logging.getLogger("agentsearch.worker")

# How long a finished response agent's artifact waits for the database to come back before it is given up.
ARTIFACT_SAVE_WAIT_S = 30.0


# The pre-search chain: one step per agent, in order.


def pre_search_agent(call: StepCall, state: JobState) -> JobState:
    """One pre-search agent on the query; ``call.peers`` are its stage's agents, which its route may name."""
    return pre_search_step(state, call.agent, call.services.runner, stage_agents=list(call.peers),
                           default_timeout_s=call.services.settings.default_agent_timeout_s)


# The search: the job's collection, or each of several side by side and then merged.


def core_search(call: StepCall, state: JobState) -> JobState | Retry:
    """One collection searched; a search that failed outright asks to run again (``search_or_retry``)."""
    return search_or_retry(state, call.services, call.collection_id, call.retries)


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


def search_or_retry(state: JobState, services: Services, collection_id: str | None, retries: int) -> JobState | Retry:
    """The search of a step that ran ``retries`` times before: its state, or a ``Retry`` while a failed search may
    still try again (see the module's docstring). Raises ``SearchFailed`` once it may not, for the job's own
    collection."""
    state = core_search_step(state, services, collection_id)
    search = SearchOutcome.read(state.metadata)
    services.metrics.record_search(search)
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


def merged_search(call: StepCall, handed: list[dict[str, Any]]) -> JobState:
    """The merge step's input, from the searches its chord gathered, merged: timed as the slowest one."""
    searched = [JobState.load(s) for s in handed]
    merged = merge_search_step(searched)
    merged.timings_ms["core_search"] = max(s.timings_ms.get("core_search", 0.0) for s in searched)
    return merged


def merge_search(call: StepCall, state: JobState) -> JobState:
    """The merged searches, unless no collection found anything: then the job fails with why."""
    if reason := SearchOutcome.read(state.metadata).failure(len(state.documents)):
        raise SearchFailed(reason)
    return state


# The post-search chain: one step per agent, in order.


def post_search_agent(call: StepCall, state: JobState) -> JobState:
    """One post-search agent on the documents; ``call.peers`` are its stage's agents, which its route may name."""
    return post_search_step(state, call.agent, call.services.runner, stage_agents=list(call.peers),
                            default_timeout_s=call.services.settings.default_agent_timeout_s)


# The answer: written from the documents, with citations, streamed to the job's events as it is made.


def answer(call: StepCall, state: JobState) -> JobState:
    """A job's answer, with this process's LLM, its budgets and language, the stored sentence vectors
    (``answer_embedder``) and the stream of the job's events (``answer.delta``)."""
    settings = call.services.settings
    answered = answer_step(state, llm=LLMClient.from_settings(settings), embed=answer_embedder(call.services, state),
                           embedding_model=settings.embedding_model, language=settings.keyword_language,
                           timeout_s=settings.answer_llm_timeout_s, judge_timeout_s=settings.judge_llm_timeout_s,
                           stream=AnswerChannel(call.services.redis, state.job_id,
                                                ttl_s=settings.retention_answer_streams_s))
    call.services.metrics.record_answer(answered.collection_id, answered.metadata["answer"])
    return answered


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

    With ``stream`` (a ``agentsearch.pipeline.job.answer_stream.AnswerChannel``) the text is written to it as it is made
    and the validated answer ends it, so the job's events carry the answer before the job ends."""
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
        # An LLM answer: every sentence was judged before it was delivered (agentsearch.pipeline.job.answer.grounding).
        check = CitationCheck(answer.citations, citation_summary(answer.citations, answer.info.get("check", {})))
    else:
        # The extractive answer quotes its sources, so the offline check finds each sentence verbatim.
        check = verify_citations(answer.text, state.documents, embed=embed, language=language)
    state.citations = check.citations
    state.metadata["citations"] = check.info
    return state


def keep_for_assembly(call: StepCall, done: dict[str, Any]) -> None:
    """The answered state saved for the chord's callback, which receives only the response agents' records."""
    JobStore(call.services.db).progress(done["job_id"], "response", JobState.load(done), keep_state=True)


# The response chord: one step per response agent, side by side; each never raises, so the chord always ends.


def response_agent(call: StepCall, state: JobState) -> AgentRun:
    """One response agent: its artifact stored (named by ``call.name_rank``), its record handed to the chord."""
    artifacts = RetryingArtifacts(ArtifactStore.of(call.services), ARTIFACT_SAVE_WAIT_S)
    return response_step(state, call.agent, call.services.runner, artifacts, name_rank=call.name_rank,
                         default_timeout_s=call.services.settings.default_agent_timeout_s)


def response_error(call: StepCall, exc: BaseException) -> AgentRun | Retry:
    """A response agent's error outside its runner is its record, never the chord's: only a database outage asks
    for the task again first (a retry is not a failure: the chord counts this header task when the retry returns)."""
    if isinstance(exc, DATABASE_AWAY):
        if call.retries < DATABASE_RETRIES:
            return Retry(min(2 ** call.retries, LONGEST_RETRY_DELAY_S), cause=exc)
        return failed_run(call.agent, "error", exc)
    log.exception("response agent %s failed outside the runner", call.agent.agent_id)
    # Celery's soft time limit, told by name: the worker's exception, which this layer does not import.
    return failed_run(call.agent, "timeout" if type(exc).__name__ == "SoftTimeLimitExceeded" else "error", exc)


def announce(call: StepCall, record: dict[str, Any]) -> None:
    """The agent's record (and its stand-in's) added to the job's records now, so the job's events carry it as
    this agent ends rather than when the last one does. Best effort: assembly records it in any case."""
    job_id = call.job_id or ""
    try:
        JobStore(call.services.db).record_runs(job_id, AgentRun.model_validate(record).flat())
    except Exception:  # the chord must get the record whatever the database does
        log.warning("job %s: the record of %s did not reach the job's events early", job_id,
                    record.get("agent_id"), exc_info=True)


def response_skipped(call: StepCall, outcome: Cancelled) -> AgentRun:
    """A response agent's record of a job that did not wait for it."""
    why = "job cancelled" if outcome.status == "cancelled" else f"job already {outcome.status}"
    return AgentRun(agent_id=call.agent.agent_id, config_id=call.agent.config_id, stage=Stage.RESPONSE,
                    success=False, status="skipped", errors=[why])


def failed_run(spec: AgentSpec, status: str, exc: BaseException) -> AgentRun:
    return AgentRun(agent_id=spec.agent_id, config_id=spec.config_id, stage=Stage.RESPONSE, success=False,
                    status=status, errors=[f"{type(exc).__name__}: {exc}"], worker=worker_name())


class RetryingArtifacts:
    """Artifact storage whose ``save`` waits out a short database outage instead of losing a finished agent's
    artifact.

    Measured in the PostgreSQL drill (docs/reliability.md): 1 of 12 jobs in flight lost its artifact, recorded as
    the agent's error, because the database went away while the agent was rendering. Retrying the whole task would
    call the agent again; waiting here keeps its work. The task's soft time limit still bounds the wait.
    """

    def __init__(self, store: SavesArtifacts, wait_s: float) -> None:
        self.store, self.wait_s = store, wait_s

    def save(self, job_id: str, artifact: AgentArtifact) -> ArtifactRef:
        deadline, delay = time.monotonic() + self.wait_s, 0.5
        while True:
            try:
                return self.store.save(job_id, artifact)
            except DATABASE_AWAY:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def __getattr__(self, name: str):
        return getattr(self.store, name)


# The graph, as data: the steps above in order, each with the task that runs it.

Each = Literal["one", "agent", "collection"]


@dataclass(frozen=True)
class Node:
    """One place in a job's graph: the Celery task ``task`` running ``step``, once (``each="one"``), once per agent
    of ``step.agent_stage`` (one after another, or ``side_by_side``), or once per collection searched (side by
    side). ``joined_by`` is the node a side-by-side group's outputs go to (its chord's callback). ``limit`` is the
    time limit the task gets: an agent's (its timeout), a step's, the answer's (its LLM's budgets) or a loop's."""

    task: str
    step: Step
    each: Each = "one"
    side_by_side: bool = False
    joined_by: Node | None = None
    limit: Literal["agent", "step", "answer", "loop"] = "step"


PRE_SEARCH_AGENT = Node("agentsearch.pre_search_agent", Step(
    "pre_search", "", pre_search_agent, agent_stage=Stage.PRE_SEARCH), each="agent", limit="agent")
MERGE_SEARCH = Node("agentsearch.merge_search", Step(
    "core_search", "merge_search", merge_search, load=merged_search, timed_as="", hands_over=Stage.POST_SEARCH))
CORE_SEARCH = Node("agentsearch.core_search", Step(
    "core_search", "core_search", core_search, per_collection=True, hands_over=Stage.POST_SEARCH),
    each="collection", joined_by=MERGE_SEARCH)
POST_SEARCH_AGENT = Node("agentsearch.post_search_agent", Step(
    "post_search", "", post_search_agent, agent_stage=Stage.POST_SEARCH), each="agent", limit="agent")
ANSWER = Node("agentsearch.generate_answer", Step(
    "answer", "answer", answer, keep_state=True, hands_over=Stage.RESPONSE, then=keep_for_assembly), limit="answer")
ASSEMBLE = Node("agentsearch.assemble", Step(
    "assemble", "", assembly.assemble, load=assembly.for_assembly, check=assembly.assembly_check,
    cancelled=assembly.assembly_ended))
RESPONSE_AGENT = Node("agentsearch.response_agent", Step(
    "response", "", response_agent, agent_stage=Stage.RESPONSE, check=status_check, on_error=response_error,
    then=announce, cancelled=response_skipped), each="agent", side_by_side=True, joined_by=ASSEMBLE, limit="agent")

# A job, top to bottom.
JOB = (PRE_SEARCH_AGENT, CORE_SEARCH, POST_SEARCH_AGENT, ANSWER, RESPONSE_AGENT)

# The iterative mode: the head applied at submission, its loops (each iteration enqueues the next, the last loop to
# end the finish), and the tail the finish applies.
AGENTIC_BEGIN = Node("agentsearch.agentic_begin", Step(
    "agentic", "agentic_begin", iterative.begin, timed_as="", keep_state=True), limit="loop")
AGENTIC_ITERATION = "agentsearch.agentic_iteration"  # iterative.iterate, one iteration of one loop per task
AGENTIC_FINISH = "agentsearch.agentic_finish"  # iterative.merge_loops, then the tail
AGENTIC_COMPRESS = Node("agentsearch.agentic_compress", Step(
    "compress", "compress", iterative.compress, timed_as=iterative.compress_timed_as))
ITERATIVE_HEAD = (PRE_SEARCH_AGENT, AGENTIC_BEGIN)
ITERATIVE_TAIL = (POST_SEARCH_AGENT, AGENTIC_COMPRESS, ANSWER, RESPONSE_AGENT)
