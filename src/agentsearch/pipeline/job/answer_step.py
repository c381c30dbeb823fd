"""The answer of a job's step: written from the state's documents, with citations, streamed as it is made.

``answer_step`` takes what it needs passed in (an LLM client, an ``embed``, a stream), so the answer's benchmarks
and tests call it alone; ``answer_with_settings`` is the step of a job, its parts from this process's services.

Usage::

    state = answer_step(state, LLMClient.from_settings(settings), answer_embedder(services, state),
                        stream=AnswerChannel(services.redis, state.job_id))
    state = answer_with_settings(services, state)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentsearch.pipeline.job.answer import ANSWER_LLM_TIMEOUT_S, generate_answer
from agentsearch.pipeline.job.answer.citations import (
    CITATION_LLM_TIMEOUT_S,
    CitationCheck,
    citation_summary,
    verify_citations,
)
from agentsearch.pipeline.job.answer_stream import AnswerChannel
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.observability.tracing import traced_stage
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.retrieval.sentence_vectors import KnownVectors, stored_for

if TYPE_CHECKING:  # types only: the answer gets its parts passed in, and the tests hand in fakes
    from agentsearch.pipeline.services import Services


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


def answer_with_settings(services: Services, state: JobState) -> JobState:
    """A job's answer, with this process's LLM, its budgets and language, the stored sentence vectors
    (``answer_embedder``) and the stream of the job's events (``answer.delta``)."""
    settings = services.settings
    return answer_step(state, llm=LLMClient.from_settings(settings), embed=answer_embedder(services, state),
                       embedding_model=settings.embedding_model, language=settings.keyword_language,
                       timeout_s=settings.answer_llm_timeout_s, judge_timeout_s=settings.judge_llm_timeout_s,
                       stream=AnswerChannel(services.redis, state.job_id, ttl_s=settings.retention_answer_streams_s))
