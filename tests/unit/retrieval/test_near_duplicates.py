"""Near-duplicate removal by one matrix of cosines keeps exactly what the pair-by-pair comparison kept."""

from __future__ import annotations

import math
import random

from agentsearch.pipeline.retrieval.near_duplicates import NearDuplicates


def _cosine(a, b):  # the comparison the search made pair by pair before
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _kept_pairwise(order, vectors, threshold):
    kept = []
    for chunk in order:
        vec = vectors.get(chunk)
        if vec is not None and any(_cosine(vec, vectors[c]) >= threshold for c in kept if c in vectors):
            continue
        kept.append(chunk)
    return kept


def _kept_by_matrix(order, vectors, threshold, first=None, reads=None):
    def read(ids):
        if reads is not None:
            reads.append(len(ids))
        return {i: vectors[i] for i in ids if i in vectors}

    near, kept = NearDuplicates(read, order, threshold, first=len(order) if first is None else first), []
    for chunk in order:
        if near.of_kept(chunk):
            continue
        near.keep(chunk)
        kept.append(chunk)
    return kept


def test_the_same_chunks_are_kept_as_pair_by_pair_with_planted_duplicates_and_unknown_vectors():
    rng = random.Random(7)
    vectors = {}
    for i in range(120):
        base = [rng.gauss(0, 1) for _ in range(48)]
        vectors[f"c{i}"] = base
        if i % 4 == 0:  # a reworded copy: a little noise on the same vector, some just past the threshold
            vectors[f"c{i}-copy"] = [x + rng.gauss(0, 0.12 + 0.1 * (i % 8 == 0)) for x in base]
    vectors["zero"] = [0.0] * 48
    order = [*vectors, "no-vector"]
    rng.shuffle(order)
    for threshold in (0.95, 0.99, 0.5):
        expected = _kept_pairwise(order, vectors, threshold)
        assert _kept_by_matrix(order, vectors, threshold) == expected
    for first in (0, 1, 40, 200):  # read in two steps: the same kept, whichever step a candidate falls in
        assert _kept_by_matrix(order, vectors, 0.95, first) == _kept_pairwise(order, vectors, 0.95)
    kept = _kept_by_matrix(order, vectors, 0.95)
    assert "no-vector" in kept and "zero" in kept
    assert len(kept) < len(order)  # some copies were removed
    assert len(kept) > 120  # and not every one: some lie past the threshold


def test_the_rest_is_read_only_when_the_list_gets_past_the_first_candidates():
    vectors = {f"c{i}": [float(i == j) for j in range(8)] for i in range(8)}
    reads: list[int] = []
    near = NearDuplicates(lambda ids: reads.append(len(ids)) or {i: vectors[i] for i in ids}, list(vectors), 0.95, 3)
    for chunk in ("c0", "c1", "c2"):
        assert not near.of_kept(chunk)
        near.keep(chunk)
    assert reads == [3]
    assert not near.of_kept("c3")
    assert reads == [3, 5]


def test_nothing_is_a_duplicate_before_anything_is_kept_or_without_vectors():
    vectors = {"a": [1.0, 0.0], "b": [1.0, 0.0]}
    near = NearDuplicates(lambda ids: {i: vectors[i] for i in ids}, ["a", "b"], 0.95, first=2)
    assert not near.of_kept("b")
    near.keep("a")
    assert near.of_kept("b") and not near.of_kept("unknown")

    def failing(ids):
        raise ConnectionError("Milvus away")

    broken = NearDuplicates(failing, ["a", "b"], 0.95, first=1)
    broken.keep("a")
    assert not broken.of_kept("b")
