"""Near-duplicate removal of a ranked list: a document whose chunk's vector is within a cosine threshold of a chunk
already kept is dropped.

The cosines of every pair in the window come from one matrix product: a pure-Python cosine per pair (384 products
and two norms each) cost a search over SciFact (top 100, so up to 4,950 pairs) more than the rest of its work
(BENCHMARKS.md, "Retrieval"). Which documents are kept is the same as comparing pair by pair: a candidate is checked
against the chunks kept before it, in rank order.

Usage::

    duplicates = NearDuplicates({"c1": [...], "c2": [...]}, threshold=0.95)
    duplicates.of_kept("c2")      # True when c2 is within 0.95 of a chunk already kept
    duplicates.keep("c2")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


class NearDuplicates:
    """Chunks' vectors (chunk id -> vector) and the ones kept so far, for ``of_kept`` questions in rank order."""

    def __init__(self, vectors: Mapping[str, Sequence[float]], threshold: float) -> None:
        self._threshold = threshold
        self._row = {chunk_id: i for i, chunk_id in enumerate(vectors)}
        if vectors:
            matrix = np.asarray(list(vectors.values()), dtype=np.float64)
            norms = np.linalg.norm(matrix, axis=1)
            # A zero vector's cosine is 0 with everything, as before: its row is left at zero.
            unit = np.divide(matrix, norms[:, None], out=np.zeros_like(matrix), where=norms[:, None] > 0)
            self._cosines = unit @ unit.T
        else:
            self._cosines = np.zeros((0, 0))
        self._kept: list[int] = []

    def of_kept(self, chunk_id: str) -> bool:
        """Whether ``chunk_id`` is within the threshold of a chunk kept so far (False when its vector is unknown)."""
        row = self._row.get(chunk_id)
        if row is None or not self._kept:
            return False
        return bool((self._cosines[row, self._kept] >= self._threshold).any())

    def keep(self, chunk_id: str) -> None:
        """``chunk_id`` is kept: later candidates are compared with it (when its vector is known)."""
        row = self._row.get(chunk_id)
        if row is not None:
            self._kept.append(row)
