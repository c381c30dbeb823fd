"""The search of a job's step: one collection searched, several merged, and what a failed search does.

A search that failed outright (nothing found, Milvus errors: ``agentsearch.pipeline.retrieval.outcome``) is not handed
on as "no documents matched": ``search_or_retry`` asks for the step again with backoff for ``MILVUS_RETRY_S`` (a Milvus
restart), then fails the job with the search's error. One collection of several hands its failure on to the merge,
which fails the job only if no collection found anything (``found_in_some``). A search that failed in part makes
the response ``degraded``.

Usage::

    state = core_search_step(state, services)                          # the job's own collection
    state = search_or_retry(state, services, collection_id=None, retries=0)   # a JobState, or Retry(delay)
    merged = merge_search_step([state_a, state_b])
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.step_protocol import Retry
from agentsearch.pipeline.observability.tracing import traced_stage
from agentsearch.pipeline.platform.backoff import backoff_delay
from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.outcome import SearchFailed, SearchOutcome
from agentsearch.pipeline.retrieval.translations import Translations

if TYPE_CHECKING:  # types only: the search gets its parts passed in, and the tests hand in fakes
    from agentsearch.pipeline.services import Services

log = logging.getLogger("agentsearch.worker")


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


def merged_searches(handed: list[dict]) -> JobState:
    """The state the merge step works on, from the searches its chord gathered: timed as the slowest one."""
    searched = [JobState.load(s) for s in handed]
    merged = merge_search_step(searched)
    merged.timings_ms["core_search"] = max(s.timings_ms.get("core_search", 0.0) for s in searched)
    return merged


def found_in_some(state: JobState) -> JobState:
    """The merged search, unless no collection found anything: then the job fails with why."""
    if reason := SearchOutcome.read(state.metadata).failure(len(state.documents)):
        raise SearchFailed(reason)
    return state
