"""Documents into a stack through its API, waiting until the workers indexed them: what tests and benchmarks share.

Usage::

    with stack.http() as http:
        collection_id = ingest_through_api(http, "docs", documents)     # raises when any document failed
"""

from __future__ import annotations

import time

import httpx


def ingest_through_api(http: httpx.Client, name: str, documents: list[dict], timeout_s: float = 600) -> str:
    """Create a collection, send the documents, wait until the workers indexed them all; the collection id."""
    created = http.post("/v1/collections", json={"name": name})
    created.raise_for_status()
    collection_id = created.json()["id"]
    for start in range(0, len(documents), 256):
        http.post(f"/v1/collections/{collection_id}/documents",
                  json={"documents": documents[start:start + 256]}).raise_for_status()
    deadline = time.monotonic() + timeout_s
    while True:
        counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
        if counts["pending"] == 0:
            if counts.get("failed"):
                raise RuntimeError(f"indexing failed for some documents: {counts}")
            return collection_id
        if time.monotonic() > deadline:
            raise TimeoutError(f"indexing stuck: {counts}")
        time.sleep(0.3)
