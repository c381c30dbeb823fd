"""Do two sets of questions order search settings alike, ties told apart from differences?

Each setting's per-question scores (nDCG@10, the same questions for every setting) are resampled together, questions
drawn with replacement (a paired bootstrap, ``RESAMPLES`` draws, seeded): for each pair of settings the 95% interval
of the difference of their means. A pair whose interval holds 0 is a tie: its order is not told by the figures, so
it can neither agree nor disagree. Two sets order the settings alike when no pair is ordered one way by one set and
the other way by the other, and every pair one set tells apart the other tells apart too (the ``agrees`` verdict);
``consistent`` allows the second set to tie where the first tells apart, ``opposite`` is a pair ordered both ways.

Usage::

    pairs = pair_orders({"keyword": [1.0, 0.5, ...], "dense": [...], "hybrid": [...]})
    pairs["hybrid>keyword"]          # {"difference": 0.031, "low": 0.012, "high": 0.05, "order": "hybrid"}
    compare(generated_pairs, public_pairs)   # {"verdict": "agrees" | "consistent" | "opposite", "pairs": {...}}
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
TIE = "tie"


def pair_orders(scores: dict[str, list[float]], resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """For each pair ``a>b`` of the settings (in the order given): the difference of their mean scores, its paired
    bootstrap interval and which setting is ahead (``tie`` when the interval holds 0)."""
    names = list(scores)
    if len({len(v) for v in scores.values()}) != 1 or not scores[names[0]]:
        raise ValueError("every setting needs the same, non-empty list of per-question scores")
    table = np.array([scores[n] for n in names], dtype=float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, table.shape[1], size=(resamples, table.shape[1]))
    means = table[:, draws].mean(axis=2)  # settings x resamples
    tail = (1 - LEVEL) / 2 * 100
    out: dict[str, Any] = {}
    for (i, a), (j, b) in itertools.combinations(enumerate(names), 2):
        spread = means[i] - means[j]
        low, high = (float(x) for x in np.percentile(spread, [tail, 100 - tail]))
        order = a if low > 0 else b if high < 0 else TIE
        out[f"{a}>{b}"] = {"difference": round(float(table[i].mean() - table[j].mean()), 4),
                           "low": round(low, 4), "high": round(high, 4), "order": order}
    return out


def compare(candidate: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """Whether ``candidate``'s pair orders (``pair_orders``) agree with ``reference``'s, pair by pair:
    ``same`` (both the same setting ahead, or both tied), ``reference tie`` (only the candidate tells them apart),
    ``candidate tie`` (only the reference does), ``opposite``."""
    pairs = {}
    for pair, ref in reference.items():
        mine = candidate[pair]["order"]
        if mine == ref["order"]:
            pairs[pair] = "same"
        elif ref["order"] == TIE:
            pairs[pair] = "reference tie"
        elif mine == TIE:
            pairs[pair] = "candidate tie"
        else:
            pairs[pair] = "opposite"
    verdicts = set(pairs.values())
    verdict = ("opposite" if "opposite" in verdicts else "consistent" if "candidate tie" in verdicts else "agrees")
    return {"verdict": verdict, "pairs": pairs}
