"""The settings that hold a collection to what its search can bear at scale (BENCHMARKS.md, "Scale"): how many
chunks one collection may hold, and how many a filter Milvus can only answer by reading every row's metadata may
cover. ``Settings`` inherits them, read from the same ``AGENTSEARCH_*`` variables.

Usage::

    settings.max_collection_chunks   # 1,000,000: adding documents to a collection holding this many is refused (413)
    settings.max_scan_chunks         # 25,000: a search whose filter scans collections holding more is refused (422)
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ScaleSettings(BaseModel):
    max_collection_chunks: int = Field(
        1_000_000, ge=1, le=2**31 - 1, description="Chunks one collection may hold: once it holds this many, adding "
        "documents to it is refused with 413 and stores nothing (documents already sent still finish).")
    # A scan of every row's metadata JSON took 1.45 s p50 (2.3 s p95) for a hybrid search of 10,000 chunks at load 12
    # and passed the 10 s read deadline at 100,000: 25,000 keeps it to a few seconds, within a search's deadline.
    max_scan_chunks: int = Field(
        25_000, ge=0, le=2**31 - 1, description="Chunks the searched collections may hold in all for a filter that "
        "Milvus answers only by reading every chunk's metadata (docs/filters.md, \"Which filters are indexed and "
        "which scan\"); past it such a search is refused with 422 saying which clause scans.")
