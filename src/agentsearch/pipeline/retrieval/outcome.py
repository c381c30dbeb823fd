"""A search's outcome for its job: whole, degraded (part of it failed, its results kept) or failed.

The retriever never raises: a Milvus error is retried three times and then recorded in the search's metadata
(``errors``), an embedding failure too (with the keyword-only fallback), and a retriever slower than the stage
deadline is left behind (``timed_out``). Read here, that record decides what the job may claim:

- **failed**: nothing found and part of the search failed. "No documents in the collection matched the query"
  would be a false answer, the collection never having been asked: ``agentsearch.pipeline.job.workflow`` retries the
  step with backoff while Milvus may come back (``MILVUS_RETRY_S``), then the job fails with these reasons;
- **degraded**: results, and part of the search failed (one retriever, one collection of several, the query's
  embedding): the job succeeds with ``response.degraded`` and ``degraded_reasons``; it is not ``complete``, so
  the whole-job cache, which reuses complete responses only, never answers from it;
- **whole**: no part failed, whatever was found (nothing included: then nothing matched).

The record is a ``SearchOutcome``: the search step writes one into the job's metadata (``metadata["search"]``, as
JSON, so the job's stored state and its response keep the keys they always had), and every reader reads it back
through the model.

Usage::

    SearchOutcome.of_collection(result.metrics, "c1", result.warnings, result.suggestions).write(state.metadata)
    search = SearchOutcome.read(state.metadata)      # an empty outcome when the job never searched
    if reason := search.failure(found=len(state.documents)):
        raise SearchFailed(reason)
    search.degraded_reasons()                        # [] for a whole search
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from pydantic import Field

from agentsearch.pipeline.platform.json_record import JsonRecord

# The key of a job's metadata the outcome is kept under: the job's response shows its metadata as it is.
METADATA_KEY = "search"


class SearchFailed(RuntimeError):
    """Nothing was found because the search could not be made (Milvus away, every retriever failed)."""


class SearchOutcome(JsonRecord):
    """What a job's search did: one collection's search (the retriever's metrics beside the fields named here),
    the merge of several (``collections``), a search a pre-search agent skipped, or an agentic job's loops.

    Only the keys a search wrote are kept (``dump``): an outcome read from a stored job and written back is the
    JSON it was. The retriever's other metrics (timings, strategy, languages...) are kept as they came.
    """

    skipped: bool | None = Field(None, description="A pre-search agent asked the job not to search.")
    reason: str | None = Field(None, description="Why the search was skipped.")
    collection_id: str | None = Field(None, description="The collection one search asked.")
    sources_found: int | None = None
    returned: int | None = None
    cache_hit: bool | None = Field(None, description="Answered from the search cache; unset: no cache was asked.")
    embedding_cache_hit: bool | None = None
    errors: list[str] | None = Field(None, description="What part of the search failed, one line each.")
    timed_out: list[str] | None = Field(None, description="The retrievers the stage deadline left behind.")
    warnings: list[str] | None = None
    suggestions: list[str] | None = None
    attempts: int | None = Field(None, description="How many times the step searched (set when retried).")
    collections: dict[str, SearchOutcome] | None = Field(None, description="A merged search: each collection's.")
    duplicates_across_collections: int | None = None
    average_relevance: float | None = None
    mode: str | None = Field(None, description="An agentic job's mode (agentsearch.pipeline.agentic.spec).")
    iterations: dict[str, int] | None = Field(None, description="An agentic job's iterations, per profile.")

    @classmethod
    def skipped_by_agent(cls) -> SearchOutcome:
        return cls(skipped=True, reason="a pre-search agent asked to skip search")

    @classmethod
    def of_collection(cls, metrics: Mapping[str, Any], collection_id: str, warnings: list[str] | None = None,
                      suggestions: list[str] | None = None) -> SearchOutcome:
        """One collection's search: the retriever's metrics, the collection, and its warnings and suggestions
        when it has any."""
        return cls.model_validate({**metrics, "collection_id": collection_id,
                                   **({"warnings": warnings} if warnings else {}),
                                   **({"suggestions": suggestions} if suggestions else {})})

    @classmethod
    def merged(cls, per_collection: Mapping[str, SearchOutcome], returned: int, duplicates: int,
               average_relevance: float) -> SearchOutcome:
        """The searches of several collections as one: one collection's failure is the merged search's (degraded
        if the others found documents, failed if not), each reason prefixed with its collection."""
        errors = [f"collection {cid}: {reason}" for cid, outcome in per_collection.items()
                  for reason in outcome.degraded_reasons()]
        return cls.model_validate({
            "collections": dict(per_collection),
            "sources_found": sum(o.sources_found or 0 for o in per_collection.values()),
            "returned": returned,
            "duplicates_across_collections": duplicates,
            "cache_hit": all(o.cache_hit for o in per_collection.values()),
            "average_relevance": average_relevance,
            **({"errors": errors} if errors else {}),
        })

    @classmethod
    def of(cls, search: SearchOutcome | Mapping[str, Any] | None) -> SearchOutcome:
        """``search`` as an outcome: a stored record read, an outcome as it is; None is the empty outcome."""
        if isinstance(search, SearchOutcome):
            return search
        return cls.model_validate(search or {})

    @classmethod
    def read(cls, metadata: Mapping[str, Any]) -> SearchOutcome:
        """The outcome kept in a job's metadata; the empty outcome when the job has not searched."""
        return cls.of(metadata.get(METADATA_KEY))

    def write(self, metadata: MutableMapping[str, Any]) -> None:
        """Keep the outcome in a job's metadata, as the JSON the job stores and its response shows."""
        metadata[METADATA_KEY] = self.dump()

    def degraded_reasons(self) -> list[str]:
        """What part of the search failed, one line each; [] when it ran whole. A merged search holds each
        collection's reasons in its ``errors`` (``merged``)."""
        reasons = [str(e) for e in self.errors or []]
        reasons += [f"{name} search passed the stage deadline" for name in self.timed_out or []]
        return reasons

    def failure(self, found: int) -> str | None:
        """Why the search failed outright (nothing found, part of it failed), or None when its result stands."""
        reasons = self.degraded_reasons()
        if found or not reasons:
            return None
        return "search failed, nothing found: " + "; ".join(reasons)


def degraded_reasons(search: SearchOutcome | Mapping[str, Any]) -> list[str]:
    """What part of a search failed (``SearchOutcome.degraded_reasons``), of an outcome or of the retriever's
    metrics as they are made."""
    return SearchOutcome.of(search).degraded_reasons()


def search_failure(search: SearchOutcome | Mapping[str, Any], found: int) -> str | None:
    """Why the search failed outright (``SearchOutcome.failure``), or None when its result stands."""
    return SearchOutcome.of(search).failure(found)
