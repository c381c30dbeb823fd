"""The layer probe (``agentsearch.bench.sentence_layers``) on one abstract-like document: every variant measured, and
the last layer, the one the model pools, agreeing most with the sentence embedded alone."""

from __future__ import annotations

from agentsearch.bench import sentence_layers

# Written for the test: the evaluation data is not part of a checkout.
ABSTRACT = {"id": "a1", "title": "Vitamin D and bone density in older adults",
            "text": "Low vitamin D levels are common among adults over sixty-five. In a cohort of 1,200 patients, "
                    "supplementation for two years raised hip bone density by 2.1 percent. Fracture rates did not "
                    "differ between the groups. Higher doses gave no further benefit."}


def test_the_last_layer_agrees_most_with_the_sentence_alone():
    cosines = sentence_layers.measure(documents=[ABSTRACT])
    assert set(cosines) == {f"layer {n}" for n in range(7)} | {f"mix {n} {w}" for n, w in sentence_layers.MIXES}
    assert all(-1.0 <= c <= 1.0 for c in cosines.values())
    # Late chunking (the last layer) is what an earlier layer would have to beat; on this model none does.
    assert cosines["layer 6"] == max(cosines.values())
    assert cosines["layer 0"] < cosines["layer 6"] - 0.3
