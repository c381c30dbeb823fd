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


def _kept_by_matrix(order, vectors, threshold):
    near, kept = NearDuplicates(vectors, threshold), []
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
    kept = _kept_by_matrix(order, vectors, 0.95)
    assert "no-vector" in kept and "zero" in kept
    assert len(kept) < len(order)  # some copies were removed
    assert len(kept) > 120  # and not every one: some lie past the threshold


def test_nothing_is_a_duplicate_before_anything_is_kept_or_without_vectors():
    near = NearDuplicates({"a": [1.0, 0.0], "b": [1.0, 0.0]}, 0.95)
    assert not near.of_kept("b")
    near.keep("a")
    assert near.of_kept("b") and not near.of_kept("unknown")
    assert not NearDuplicates({}, 0.95).of_kept("a")
