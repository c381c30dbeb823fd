"""Settings' order told by a paired bootstrap: a difference within the noise is a tie, which neither agrees nor
disagrees; opposite orders and a tie where the reference tells the settings apart are each named."""

from __future__ import annotations

import pytest

from agentsearch.bench.setting_order import compare, pair_orders


def test_a_clear_difference_has_an_order_and_a_small_one_is_a_tie() -> None:
    base = [float(i % 2) for i in range(300)]
    # The same questions, one setting finding 60 more of them (clear), another differing on one question (noise).
    better = [1.0 if i < 120 else s for i, s in enumerate(base)]
    almost = [1.0 - base[0], *base[1:]]
    pairs = pair_orders({"hybrid": better, "keyword": base, "dense": almost})
    assert pairs["hybrid>keyword"]["order"] == "hybrid"
    assert pairs["hybrid>keyword"]["low"] > 0 and pairs["hybrid>keyword"]["difference"] > 0.05
    assert pairs["keyword>dense"]["order"] == "tie"
    assert pairs["keyword>dense"]["low"] <= 0 <= pairs["keyword>dense"]["high"]
    assert pair_orders({"a": base, "b": almost}) == pair_orders({"a": base, "b": almost})  # seeded


def test_compare_names_opposite_orders_and_ties() -> None:
    ref = {"h>k": {"order": "h"}, "h>d": {"order": "h"}, "k>d": {"order": "tie"}}
    assert compare({"h>k": {"order": "h"}, "h>d": {"order": "h"}, "k>d": {"order": "k"}}, ref) == {
        "verdict": "agrees", "pairs": {"h>k": "same", "h>d": "same", "k>d": "reference tie"}}
    tied = compare({"h>k": {"order": "tie"}, "h>d": {"order": "h"}, "k>d": {"order": "tie"}}, ref)
    assert tied["verdict"] == "consistent" and tied["pairs"]["h>k"] == "candidate tie"
    flipped = compare({"h>k": {"order": "k"}, "h>d": {"order": "h"}, "k>d": {"order": "tie"}}, ref)
    assert flipped["verdict"] == "opposite" and flipped["pairs"]["h>k"] == "opposite"


def test_settings_need_the_same_questions() -> None:
    with pytest.raises(ValueError, match="per-question scores"):
        pair_orders({"a": [1.0, 0.0], "b": [1.0]})
