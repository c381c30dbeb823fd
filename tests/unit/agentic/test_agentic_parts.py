"""The offline parts of the agentic modes: scoring, thresholds, refinement, sufficiency, budget, compression."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agentic.compress import Compressor, compress_documents, extractive_compress
from agentsearch.pipeline.agentic.config import IterativeConfig, Thresholds, reduced_for_test_mode
from agentsearch.pipeline.agentic.refine import OfflineRefiner, clean_query_reply
from agentsearch.pipeline.agentic.scoring import (
    Evaluation,
    OfflineScorer,
    Scoring,
    adaptive_threshold,
    judge,
    parse_evaluations,
)
from agentsearch.pipeline.agentic.sufficiency import OfflineGrader, choose_budget, query_aspects
from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from tests.support.fake_llm import FakeLLM

ANALYZER = KeywordAnalyzer()


def doc(id_: str, text: str, title: str = "", score: float = 0.5, **metadata) -> Document:
    return Document(id=id_, title=title or id_, text=text, score=score, metadata=metadata)


# --- config -------------------------------------------------------------------------------------------------------

def test_config_refuses_impossible_settings_when_built():
    with pytest.raises(ValidationError, match="top_k is set by the loop"):
        IterativeConfig(search={"top_k": 3})
    with pytest.raises(ValidationError, match="invalid search overrides"):
        IterativeConfig(search={"strategy": "fuzzy"})
    with pytest.raises(ValidationError, match="compress_max_chars must be below"):
        IterativeConfig(compress_min_chars=500, compress_max_chars=800)
    with pytest.raises(ValidationError):
        Thresholds(first=5.5)
    assert Thresholds().base(1) == 4.0 and Thresholds().base(2) == Thresholds().base(7) == 3.8


def test_test_mode_reduces_the_limits_to_one_iteration_one_result_two_per_search():
    reduced = reduced_for_test_mode(IterativeConfig(target=5, max_iterations=3, per_iteration=5))
    assert (reduced.target, reduced.max_iterations, reduced.per_iteration) == (1, 1, 2)
    unset = reduced_for_test_mode(IterativeConfig())
    assert unset.max_iterations == 1


# --- evaluation ---------------------------------------------------------------------------------------------------

DOCS = [doc("a", "Alpha text."), doc("b", "Beta text."), doc("c", "Gamma text.")]


def test_llm_scores_are_averaged_here_not_taken_from_the_reply():
    reply = ('Here you go:\n[{"id": 1, "relevance": 5, "actionability": 4, "source_quality": 4, "recency_impact": 3, '
             '"overall_score": 1.0, "decision": "discard"}, {"id": "c", "relevance": "2", "actionability": 2, '
             '"source_quality": 2, "recency_impact": 2}, {"id": 2, "relevance": 4, "actionability": 4, '
             '"source_quality": 4, "recency_impact": 4}]')
    scoring = parse_evaluations(reply, DOCS)
    assert scoring.method == "llm" and scoring.error is None
    assert [e.overall for e in scoring.evaluations] == [4.0, 4.0, 2.0]
    judged = judge(scoring, 4.0, Thresholds())
    assert judged.kept_ids() == ["a", "b"]


def test_odd_entries_are_skipped_without_raising():
    reply = ('[{"id": 1e999, "relevance": 5, "actionability": 5, "source_quality": 5, "recency_impact": 5}, '
             '"just a string", {"id": true, "relevance": 5}, {"id": "[2]", "relevance": 5, "actionability": 5, '
             '"source_quality": 5, "recency_impact": "NaN"}, {"id": "[3]", "relevance": 1, "actionability": 1, '
             '"source_quality": 1, "recency_impact": 1}]')
    scoring = parse_evaluations(reply, DOCS)
    assert [e.overall for e in scoring.evaluations] == [None, None, 1.0]
    assert scoring.error == "2 of 3 results had no usable evaluation and were kept; 4 entries unusable"


def test_an_object_holding_the_list_is_accepted_and_unknown_ids_are_not_matched():
    scoring = parse_evaluations('{"evaluations": [{"id": 7, "relevance": 5, "actionability": 5, '
                                '"source_quality": 5, "recency_impact": 5}]}', DOCS)
    assert scoring.method == "keep_all" and "no usable evaluation" in scoring.error


def test_adaptive_threshold_follows_the_batch_within_its_bounds():
    assert adaptive_threshold([4.0, 4.0], 4.0, 0.5) == 4.0
    assert adaptive_threshold([5.0, 5.0, 4.9], 4.0, 0.5) == 4.5  # a strong batch raises the bar, capped
    assert adaptive_threshold([2.0, 2.5, 3.0], 4.0, 0.5) == 3.5  # a weak one lowers it, floored
    scoring = Scoring(method="offline", evaluations=[
        Evaluation(document_id="x", overall=3.7), Evaluation(document_id="y", overall=3.0)])
    assert judge(scoring, 4.0, Thresholds()).kept_ids() == []
    adaptive = judge(scoring, 4.0, Thresholds(adaptive=True, max_shift=0.5))
    assert adaptive.threshold == 3.525 and adaptive.kept_ids() == ["x"]  # mean 3.35 + half the sd 0.35


def test_offline_scores_rank_the_matching_document_first_and_impute_what_has_no_evidence():
    query = "offshore wind turbine gearbox inspection"
    match = doc("m", "Offshore wind turbine gearboxes need inspection every 6 months, Vestas said in 2021. "
                     "Crews check oil and bearings, and replace worn seals before the winter storms arrive.",
                score=0.9)
    other = doc("o", "Solar panels on rooftops are cleaned twice a year to keep their output high, "
                     "installers say; dust lowers yield.", score=0.3)
    scoring = OfflineScorer(ANALYZER).score(query, [match, other])
    first, second = scoring.evaluations
    assert scoring.method == "offline"
    assert first.relevance > second.relevance and first.overall > second.overall
    assert first.imputed == ["actionability", "source_quality", "recency_impact"]
    assert first.overall == first.relevance == first.source_quality
    judged = judge(scoring, 4.0, Thresholds())
    assert judged.kept_ids() == ["m"]


def test_offline_source_quality_and_recency_come_from_metadata():
    today = datetime(2026, 1, 1, tzinfo=UTC)
    undated_scorer = OfflineScorer(ANALYZER, today=today)
    scorer = OfflineScorer(ANALYZER, authority={"reuters": 1.0}, today=today, half_life_days=365)
    long_text = "Wind turbine output figures for 2025. " * 8
    blocked = doc("b", long_text, url="https://medium.com/@x/wind", published="2026-01-01")
    trusted = doc("t", long_text, source="reuters", published="2025-01-01")
    ev_blocked, ev_trusted = scorer.score("wind turbine output", [blocked, trusted]).evaluations
    assert ev_blocked.source_quality == 1.0 and ev_blocked.recency_impact == 5.0
    assert ev_trusted.source_quality == 5.0 and ev_trusted.recency_impact == pytest.approx(3.0, abs=0.02)
    assert ev_blocked.imputed == ev_trusted.imputed == ["actionability"]
    # Without a recency weight in the search, a date is no evidence of quality.
    assert undated_scorer.score("wind turbine output", [trusted]).evaluations[0].imputed == [
        "actionability", "source_quality", "recency_impact"]


def test_offline_scoring_uses_embeddings_when_given_and_survives_their_failure():
    query = "wind"
    near, far = doc("n", "Wind power.", score=0.5), doc("f", "Wind power.", score=0.5)
    vectors = {"wind": [1.0, 0.0], "n. Wind power.": [1.0, 0.0], "f. Wind power.": [0.0, 1.0]}
    scorer = OfflineScorer(ANALYZER, embed=lambda texts: [vectors[t] for t in texts])
    ev_near, ev_far = scorer.score(query, [near, far]).evaluations
    assert ev_near.relevance > ev_far.relevance and "embedding" in ev_near.reasoning

    def broken(texts):
        raise RuntimeError("model unavailable")

    ev = OfflineScorer(ANALYZER, embed=broken).score(query, [near]).evaluations[0]
    assert "embedding" not in ev.reasoning and ev.overall is not None


# --- refinement ---------------------------------------------------------------------------------------------------

def test_offline_refinement_adds_terms_of_kept_results_that_discarded_ones_lack():
    kept = [doc("k1", "Gearbox bearings fail first; gearbox bearings wear in salt air."),
            doc("k2", "Replacing gearbox bearings offshore needs a jack-up vessel.")]
    discarded = [(doc("d1", "Blade erosion and blade coatings in salt air."), Evaluation(document_id="d1")),
                 (doc("d2", "Blade coatings against rain erosion."), Evaluation(document_id="d2"))]
    refinement = OfflineRefiner(ANALYZER, max_terms=2).refine("turbine failures", "turbine failures", kept, discarded)
    assert refinement.method == "offline"
    assert refinement.added_terms == ["bearings", "gearbox"]
    assert refinement.query == "turbine failures bearings gearbox"
    assert not {"blade", "salt", "air", "coatings"} & set(refinement.added_terms)


def test_offline_refinement_drops_query_terms_that_only_led_to_discarded_results():
    kept = [doc("k", "Gearbox bearings wear offshore.")]
    discarded = [(doc(f"d{i}", "Blade erosion on turbines."), Evaluation(document_id=f"d{i}")) for i in range(3)]
    refinement = OfflineRefiner(ANALYZER).refine("turbine blade gearbox wear", "turbine blade gearbox wear", kept,
                                                 discarded)
    assert "blade" in refinement.removed_terms and "blade" not in refinement.query.split()


def test_without_anything_kept_the_query_stays_for_its_next_results():
    refinement = OfflineRefiner(ANALYZER).refine("q", "current q", [], [(DOCS[0], Evaluation(document_id="a"))])
    assert refinement.method == "unchanged" and refinement.query == "current q"


def test_a_refined_query_is_cleaned_from_chatty_replies():
    assert clean_query_reply('```\nRefined query: "offshore gearbox bearing failures"\n```') == \
        "offshore gearbox bearing failures"
    assert clean_query_reply("gearbox failures\n\nI removed the word blade.") == "gearbox failures"


# --- sufficiency and budget ---------------------------------------------------------------------------------------

def test_aspects_and_budget_follow_the_querys_complexity():
    assert query_aspects("What is the notice period?") == ["What is the notice period?"]
    # "how it" carries no content term, so it is no aspect of its own.
    assert query_aspects("Q4 2025 revenue and how it compared with 2024") == ["Q4 2025 revenue", "2024"]
    assert choose_budget("What is the notice period?") == 1
    assert choose_budget("Q4 2025 revenue of Northwind Energy and its solar output") == 2
    assert choose_budget("Compare wind, solar and storage costs, their subsidies, grid fees and 2030 targets") == 3


def test_offline_grade_covers_each_aspect_and_follows_up_on_the_missing_one():
    grader = OfflineGrader(ANALYZER)
    query = "wind turbine gearbox failures and subsea cable faults"
    kept = [doc("g", "Wind turbine gearbox failures are the costliest repairs.")]
    grade = grader.grade(query, kept)
    assert not grade.sufficient and grade.missing == ["subsea cable faults"]
    assert grade.follow_up_queries == ["subsea cable faults"]
    grade = grader.grade(query, [*kept, doc("c", "Subsea cable faults cut output.")])
    assert grade.sufficient and grade.coverage == 1.0 and grade.follow_up_queries == []
    assert not grader.grade(query, []).sufficient
    # A part too short to search alone gets the lead aspect's words.
    grade = grader.grade("Northwind Energy revenue in Q4 2025, and 2024", kept)
    assert grade.follow_up_queries[-1] == "Northwind Energy revenue in Q4 2025 2024"


# --- compression --------------------------------------------------------------------------------------------------

LONG = (
    "Welcome to our website, please accept the cookies. "
    "Northwind Energy reported revenue of $412 million in Q4 2025. "
    "Our newsletter is sent every week to subscribers. "
    "The revenue growth came from offshore wind farms commissioned on March 3. "
    "Follow us on social media for more updates. "
) * 6


def test_extractive_compression_keeps_query_sentences_with_their_figures_and_dates():
    text = extractive_compress(ANALYZER, "Northwind revenue growth", LONG, max_chars=200)
    assert "$412 million in Q4 2025" in text and "March 3" in text
    assert "cookies" not in text and "newsletter" not in text
    assert len(text) <= 200 or text.count(".") == 1


def test_short_documents_stay_whole_and_long_ones_record_their_compression():
    compressor = Compressor(ANALYZER, max_chars=200, min_chars=1000)
    short = doc("s", "Short text about revenue.")
    same, record = compressor.compress("revenue", short)
    assert same is short and record.method == "unchanged"
    compressed, record = compressor.compress("Northwind revenue", doc("l", LONG))
    assert record.method == "extractive" and record.to_chars < record.from_chars
    assert compressed.metadata["compressed"]["from_chars"] == len(LONG)


def test_an_llm_compression_with_an_invented_figure_is_replaced_by_the_extractive_one():
    with FakeLLM() as fake:
        llm = LLMClient(fake.base_url, model="fake-model", backoff_s=0.01)
        fake.script("- Northwind revenue: $415 million in Q4 2025", "- Northwind revenue: $412 million in Q4 2025")
        compressor = Compressor(ANALYZER, max_chars=200, min_chars=1000, llm=llm, timeout_s=5)
        first, record = compressor.compress("Northwind revenue", doc("l", LONG))
        assert record.method == "extractive" and "415" in record.error and "$412 million" in first.text
        second, record = compressor.compress("Northwind revenue", doc("l", LONG))
        assert record.method == "llm" and second.text == "- Northwind revenue: $412 million in Q4 2025"
        assert "proper nouns, dates" in fake.requests[0]["messages"][0]["content"]


def test_compression_runs_with_bounded_concurrency_and_keeps_order():
    active, peak, lock = [0], [0], threading.Lock()
    pair = threading.Barrier(2, timeout=10)

    class Slow(Compressor):
        def compress(self, query, document):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            pair.wait()  # two compressions meet here, however the threads are scheduled; one alone times out
            with lock:
                active[0] -= 1
            return super().compress(query, document)

    docs = [doc(str(i), LONG) for i in range(6)]
    out, records = compress_documents("Northwind revenue", docs, Slow(ANALYZER, 200, 1000), concurrency=2)
    assert peak[0] == 2 and [d.id for d in out] == [str(i) for i in range(6)]
    assert all(r.method == "extractive" for r in records)


def test_offline_refinement_leaves_out_words_common_to_the_unevaluated_results():
    kept = [doc("k1", "The company services gearbox bearings at its energy sites."),
            doc("k2", "The company replaces gearbox bearings; energy output recovers.")]
    background = [doc(f"n{i}", f"The company reports energy output for site {i}.") for i in range(4)]
    refinement = OfflineRefiner(ANALYZER).refine("turbine repairs", "turbine repairs", kept, [], background)
    assert {"bearings", "gearbox"} <= set(refinement.added_terms)
    assert not {"company", "energy", "output"} & set(refinement.added_terms)
    without = OfflineRefiner(ANALYZER).refine("turbine repairs", "turbine repairs", kept, [])
    assert {"company", "energy"} <= set(without.added_terms)
