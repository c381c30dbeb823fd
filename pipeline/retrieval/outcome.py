"""A search's outcome for its job: whole, degraded (part of it failed, its results kept) or failed.

The retriever never raises: a Milvus error is retried three times and then recorded in the search's metadata
(``errors``), an embedding failure too (with the keyword-only fallback), and a retriever slower than the stage
deadline is left behind (``timed_out``). Read here, that record decides what the job may claim:

- **failed**: nothing found and part of the search failed. "No documents in the collection matched the query"
  would be a false answer, the collection never having been asked: ``worker.job_tasks.core_search`` retries the step
  with backoff while Milvus may come back (``MILVUS_RETRY_S``), then the job fails with these reasons;
- **degraded**: results, and part of the search failed (one retriever, one collection of several, the query's
  embedding): the job succeeds with ``response.degraded`` and ``degraded_reasons``; it is not ``complete``, so
  the whole-job cache, which reuses complete responses only, never answers from it;
- **whole**: no part failed, whatever was found (nothing included: then nothing matched).

Usage::

    search = state.metadata["search"]
    if reason := search_failure(search, found=len(state.documents)):
        raise SearchFailed(reason)
    reasons = degraded_reasons(search)      # [] for a whole search
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SearchFailed(RuntimeError):
    """Nothing was found because the search could not be made (Milvus away, every retriever failed)."""


def degraded_reasons(search: Mapping[str, Any]) -> list[str]:
    """What part of a search failed, one line each; [] when it ran whole.

    ``search`` is one collection's search metadata or the merged one of several (``merge_search_step`` lifts each
    collection's reasons into its ``errors``, prefixed with the collection).
    """
    reasons = [str(e) for e in search.get("errors") or []]
    reasons += [f"{name} search passed the stage deadline" for name in search.get("timed_out") or []]
    return reasons


def search_failure(search: Mapping[str, Any], found: int) -> str | None:
    """Why the search failed outright (nothing found, part of it failed), or None when its result stands."""
    reasons = degraded_reasons(search)
    if found or not reasons:
        return None
    return "search failed, nothing found: " + "; ".join(reasons)
