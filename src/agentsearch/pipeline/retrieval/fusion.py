"""Rank fusion of several result lists: reciprocal rank fusion (RRF) and weighted score fusion.

Pure functions over ``{id: score}`` maps, each map one retriever's results (higher is better).

Usage::

    fused = rrf_fuse([dense, keyword], weights=[1.0, 1.0], k=60)
    fused = weighted_fuse([dense, keyword], weights=[0.6, 0.4])   # scores min-max normalised per list first
    ranked = with_sentence_signal(fused, best_sentence, weight=1.0)  # a third signal, for the documents it covers
"""

from __future__ import annotations

from collections.abc import Sequence


def _ranked(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda i: scores[i], reverse=True)


def rrf_fuse(lists: Sequence[dict[str, float]], weights: Sequence[float] | None = None,
             k: int = 60) -> dict[str, float]:
    weights = weights or [1.0] * len(lists)
    fused: dict[str, float] = {}
    for scores, weight in zip(lists, weights, strict=True):
        for rank, item in enumerate(_ranked(scores), start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


def normalise(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {i: (s - low) / (high - low) for i, s in scores.items()}


def weighted_fuse(lists: Sequence[dict[str, float]], weights: Sequence[float]) -> dict[str, float]:
    """Scores are normalised per list, so BM25's unbounded scale and cosine's [-1, 1] can be mixed; the result is a
    weighted mean, in [0, 1]."""
    total = sum(weights) or 1.0
    fused: dict[str, float] = {}
    for scores, weight in zip(lists, weights, strict=True):
        for item, score in normalise(scores).items():
            fused[item] = fused.get(item, 0.0) + weight * score / total
    return fused


def with_sentence_signal(fused: dict[str, float], sentence: dict[str, float], weight: float) -> dict[str, float]:
    """``fused`` (scores in [0, 1]) plus ``weight`` times the min-max normalised ``sentence`` score, over
    ``1 + weight`` so the result stays in [0, 1]. A document ``sentence`` does not cover gets its lowest (0)."""
    normalised = normalise(sentence)
    return {i: (score + weight * normalised.get(i, 0.0)) / (1 + weight) for i, score in fused.items()}
