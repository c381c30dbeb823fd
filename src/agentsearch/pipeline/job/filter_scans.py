"""A filter Milvus can answer only by reading every chunk's metadata, refused over a collection too large to scan
within a search's deadline.

Milvus Lite answers the users' common clauses from plain fields (``agentsearch.pipeline.retrieval.metadata_index``:
``eq``/``ne``/``in`` on strings, ``exists``, a date range on ``published``) at about the cost of the search; any
other clause (a number or boolean compared, a numeric range, a date range on another key) makes it parse every
row's JSON for the whole expression: 1.45 s p50 for a hybrid search of 10,000 chunks, past the 10 s read deadline
at 100,000 (BENCHMARKS.md, "Scale"). Rather than a search that fails after its deadline, or one that runs for
minutes, such a filter is refused with 422 when a collection searched holds more than ``max_scan_chunks``, naming
the clause. ``not`` is no reason by itself: ``not`` of an indexed clause stays on the fields.

Usage::

    scanning_clause({"and": [{"eq": {"key": "region", "value": "emea"}}, {"range": {"key": "pages", "gt": 2}}]})
    # ("and", 1, "range"): the first clause that reads the JSON; None when none does
    refuse_scanning_filter(s, raw_filter, [collection.id], settings.max_scan_chunks)   # a 422 Refusal, or nothing
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from agentsearch.pipeline.refusal import invalid
from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD
from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.retrieval.metadata_index import INDEXED_FIELDS
from agentsearch.pipeline.security.quotas import chunks_stored

# The fields of a collection made with the current schema (older ones scan every filter until `agentsearch reindex`,
# each search held to the store's read deadline).
SEARCHED_FIELDS = INDEXED_FIELDS | {ACCESS_FIELD}


def scanning_clause(raw: dict[str, Any], path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The path inside a valid filter of its first clause that reads each row's metadata JSON; None when none does."""
    ((op, operand),) = raw.items()
    if op in ("and", "or"):
        for i, child in enumerate(operand):
            found = scanning_clause(child, (*path, op, i))
            if found is not None:
                return found
        return None
    if op == "not":
        return scanning_clause(operand, (*path, op))
    return (*path, op) if MetadataFilter.model_validate(raw).scans(SEARCHED_FIELDS) else None


def refuse_scanning_filter(s: Session, raw: dict[str, Any] | None, collection_ids: Sequence[uuid.UUID],
                           limit: int) -> None:
    """Refuse (422) a filter with a clause that scans when a collection searched holds more than ``limit`` chunks."""
    where = scanning_clause(raw) if raw is not None else None
    if where is None:
        return
    largest = max((chunks_stored(s, [c]) for c in collection_ids), default=0)
    if largest <= limit:
        return
    message = (f"this clause is answered only by reading every chunk's metadata (indexed: eq, ne and in on strings, "
               f"exists, a date range on published), and a collection searched holds {largest:,} chunks, past the "
               f"{limit:,} a filter may scan within a search's deadline; write it with indexed clauses or search a "
               "smaller collection")
    raise invalid(("body", "filter", *where), message)
