"""Near-duplicate removal of a ranked list: a document whose chunk's vector is within a cosine threshold of a chunk
already kept is dropped.

The cosines of every pair come from one matrix product: a pure-Python cosine per pair (384 products and two norms
each) was 83% of a search's time over SciFact (top 100, so up to 4,950 pairs; BENCHMARKS.md, "one search's time
and the retrieval regression guard"). The vectors are read in two steps: the first ``first`` candidates' (a little
past ``top_k``, which is as far as the list is usually read), and the rest only when a candidate past those is
asked about, since reading a vector from Milvus costs more than comparing it. Which documents are kept is the same
as comparing pair by pair: a candidate is checked against the chunks kept before it, in rank order.

Usage::

    duplicates = NearDuplicates(lambda ids: store.vectors("c_ab12", ids), ["c1", "c2", "c3"], 0.95, first=2)
    duplicates.of_kept("c2")      # True when c2 is within 0.95 of a chunk already kept
    duplicates.keep("c2")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

Read = Callable[[list[str]], Mapping[str, Sequence[float]]]


class NearDuplicates:
    """The candidates' chunk ids in rank order, their vectors read through ``read`` as needed, and the chunks kept
    so far, for ``of_kept`` questions in rank order. A failed read leaves those chunks without vectors: they are
    never near duplicates (exact ones are the caller's to find)."""

    def __init__(self, read: Read, order: Sequence[str], threshold: float, first: int) -> None:
        self._read, self._order, self._threshold = read, list(order), threshold
        self._position = {chunk_id: i for i, chunk_id in enumerate(self._order)}
        self._vectors: dict[str, Sequence[float]] = {}
        self._kept_ids: list[str] = []
        self._read_up_to = 0
        self._load(min(first, len(self._order)))

    def _load(self, up_to: int) -> None:
        try:
            self._vectors.update(self._read(self._order[self._read_up_to:up_to]))
        except Exception:  # noqa: BLE001 - without vectors only exact duplicates are removed
            pass
        self._read_up_to = up_to
        self._row = {chunk_id: i for i, chunk_id in enumerate(self._vectors)}
        if self._vectors:
            matrix = np.asarray(list(self._vectors.values()), dtype=np.float64)
            norms = np.linalg.norm(matrix, axis=1)
            # A zero vector's cosine is 0 with everything, as a pair-by-pair cosine has it: its row stays zero.
            unit = np.divide(matrix, norms[:, None], out=np.zeros_like(matrix), where=norms[:, None] > 0)
            self._cosines = unit @ unit.T
        else:
            self._cosines = np.zeros((0, 0))
        self._kept = [self._row[c] for c in self._kept_ids if c in self._row]

    def of_kept(self, chunk_id: str) -> bool:
        """Whether ``chunk_id`` is within the threshold of a chunk kept so far (False when its vector is unknown)."""
        if self._position.get(chunk_id, -1) >= self._read_up_to:
            self._load(len(self._order))
        row = self._row.get(chunk_id)
        if row is None or not self._kept:
            return False
        return bool((self._cosines[row, self._kept] >= self._threshold).any())

    def keep(self, chunk_id: str) -> None:
        """``chunk_id`` is kept: later candidates are compared with it (when its vector is known)."""
        self._kept_ids.append(chunk_id)
        if (row := self._row.get(chunk_id)) is not None:
            self._kept.append(row)
