"""The answer evaluation's figures of the rule that keeps a model's answer (src/agentsearch/pipeline/eval/grounding.py):
the model's gold-holding sentences delivered, the delivered length against the draft beside the rule before (the
offline quotes always appended) on the same verdicts, and the first words after the search."""

from __future__ import annotations

from agentsearch.pipeline.eval.grounding import FirstDelta, GroundingTally, appended
from agentsearch.pipeline.job.job_state import JobState

OFFLINE = ("The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading the NFL in "
           "interceptions with 24 and boasting four Pro Bowl selections [1]. Kawann Short led the team in sacks [1].")
MODEL = "The Panthers defense gave up just 308 points."


def sentence(text: str, status: str, delivered: bool) -> dict:
    return {"text": text, "status": status, "delivered": delivered, "cited": [1], "sources": [1], "reason": None}


def state(answer: str, sentences: list[dict], method: str = "llm") -> JobState:
    job = JobState(job_id="j", collection_id="c", query="q", original_query="q", answer=answer)
    job.metadata["answer"] = {"method": method, "sentences": sentences}
    return job


def test_the_rule_before_appended_every_quote_the_model_did_not_hold_word_for_word():
    kept = [sentence(MODEL, "supported", True), sentence("Invented 900 turbines.", "unsupported", False)]
    before = appended(kept, OFFLINE)
    assert before.startswith(MODEL) and "boasting four Pro Bowl selections" in before and "900" not in before
    assert "[1]" not in before
    # No supported sentence: the offline answer alone, by both rules.
    assert appended([sentence(MODEL, "partial", False)], OFFLINE).startswith("The Panthers defense gave up just 308")


def test_the_tally_reports_gold_sentences_delivered_lengths_and_first_words():
    tally = GroundingTally()
    sentences = [sentence(MODEL, "supported", True), sentence("It allowed 308 points in 2015 alone.", "unsupported",
                                                              False)]
    first = FirstDelta()
    first.quick("Quick [1].")
    first.write(MODEL)
    first.finish(MODEL, "llm")
    offline = FirstDelta()
    offline.write(OFFLINE)
    offline.finish(OFFLINE, "extractive")
    record = tally.add(state(MODEL + " [1].", sentences), state(OFFLINE, [], "extractive"), ["308 points"], True,
                       first, offline)
    assert record["gold_sentences"] == 2 and record["gold_sentences_delivered"] == 1
    report = tally.report(1)
    assert report["model_gold_sentences_delivered_rate"] == 0.5
    lengths = report["length_chars"]
    draft = len(" ".join(s["text"] for s in sentences))
    assert lengths["answers"] == 1 and lengths["draft_p50"] == draft
    assert lengths["delivered_p50"] == len(MODEL + ".")
    assert lengths["before_rule_ratio_p50"] > lengths["ratio_p50"]
    assert report["first_words_ms"]["p50"] == round(first.quick_ms, 1)
    assert report["before_rule_gold_span_rate"] == 1.0
