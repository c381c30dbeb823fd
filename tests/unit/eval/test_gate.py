"""The gate's rules: which fall of which figure refuses a change, what search settings a collection may hold, how a
run reads them, and a collection's settings under a request's own."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.eval import gate as gate_module
from agentsearch.pipeline.eval.gate import checked_search_settings, falls, gate, run_settings
from agentsearch.pipeline.eval.quality_runs import Asked, RunSettings, score_question
from agentsearch.pipeline.job.request import SearchRequest
from agentsearch.pipeline.job.submit import _with_collection_search
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.refusal import Refusal

NOW = {"hit@5": 0.9, "ndcg@10": 0.8, "gold_span_rate": 0.5, "supported_rate": 1.0, "fallback_rate": 0.1,
       "latency_p50_ms": 100.0}


def test_a_fall_past_the_tolerance_is_named_and_a_smaller_one_is_not() -> None:
    assert falls(NOW, {**NOW, "hit@5": 0.89, "latency_p50_ms": 900.0}, 0.02) == []  # latency is never gated
    fell = falls(NOW, {**NOW, "ndcg@10": 0.7, "fallback_rate": 0.2}, 0.02)
    assert [(f["figure"], f["fall"]) for f in fell] == [("ndcg@10", 0.1), ("fallback_rate", 0.1)]
    assert falls(NOW, {**NOW, "gold_span_rate": 0.9}, 0.0) == []  # better is no fall
    assert falls(NOW, {**NOW, "fallback_rate": None}, 0.0) == []  # a figure one side lacks is not compared


def test_score_question_is_hit_at_5_and_ndcg_at_10_with_one_relevant_document() -> None:
    assert score_question(["a", "b"], "a") == (True, 1.0)
    hit, gain = score_question(["x", "y", "z", "w", "v", "a"], "a")
    assert not hit and 0 < gain < 0.5
    assert score_question(["x"], "a") == (False, 0.0)


def test_search_settings_are_checked_as_a_requests_and_a_filter_is_refused() -> None:
    settings = Settings()
    assert checked_search_settings({"strategy": "keyword", "top_k": 3}, settings) == {"strategy": "keyword",
                                                                                      "top_k": 3}
    for bad, loc in (({"strategy": "telepathy"}, ("body", "search", "strategy")),
                     ({"filter": {"eq": {"key": "a", "value": 1}}}, ("body", "search", "filter")),
                     ({"top_k": settings.max_top_k + 1}, ("body", "search", "top_k")),
                     ({"no_such_field": 1}, ("body", "search", "no_such_field"))):
        with pytest.raises(Refusal) as refused:
            checked_search_settings(bad, settings)
        assert refused.value.status == 422 and tuple(refused.value.errors[0]["loc"]) == loc


def test_a_run_reads_the_collections_settings_with_the_services_top_k_by_default() -> None:
    settings = Settings()
    assert run_settings(None, settings) == RunSettings({}, settings.default_top_k)
    assert run_settings({"strategy": "semantic", "top_k": 1}, settings) == RunSettings({"strategy": "semantic"}, 1)


def test_a_requests_own_values_win_over_the_collections() -> None:
    request = SearchRequest(collection_id="00000000-0000-0000-0000-000000000001", query="q")
    saved = {"strategy": "keyword", "top_k": 2}
    assert _with_collection_search(saved, request, 5, {}) == (2, {"strategy": "keyword"})
    assert _with_collection_search(saved, request, 5, {"strategy": "hybrid"}) == (2, {"strategy": "hybrid"})
    asked = request.model_copy(update={"top_k": 7})
    assert _with_collection_search(saved, asked, 7, {}) == (7, {"strategy": "keyword"})
    assert _with_collection_search(None, request, 5, {"x": 1}) == (5, {"x": 1})


def test_the_verdicts(monkeypatch) -> None:
    """The runs' figures decide: a fall refuses, none applies, a run past the deadline is not applied."""
    figures = {"current": NOW, "staged": {**NOW, "hit@5": 0.5}}
    statuses = {"current": "done", "staged": "done"}

    def fake_measure(services, collection_id, questions, run, llm=None, deadline=None):
        side = "staged" if run.top_k == 1 else "current"
        return figures[side], statuses[side]

    monkeypatch.setattr(gate_module, "measure", fake_measure)
    asked = [Asked("q", "a", "d")]
    refused = gate(None, "c", asked, RunSettings({}, 5), RunSettings({}, 1), 0.02, 60)
    assert refused.verdict == "refused" and "hit@5 0.9 -> 0.5" in refused.reason
    assert refused.as_json()["figures"] == {"current": NOW, "staged": figures["staged"]}
    figures["staged"] = NOW
    assert gate(None, "c", asked, RunSettings({}, 5), RunSettings({}, 1), 0.02, 60).verdict == "applied"
    statuses["staged"] = "timed_out"
    late = gate(None, "c", asked, RunSettings({}, 5), RunSettings({}, 1), 0.02, 60)
    assert late.verdict == "not_applied" and "quality_gate_timeout_s" in late.reason
    assert gate(None, "c", [], RunSettings(), RunSettings(), 0.02, 60).verdict == "not_applied"
