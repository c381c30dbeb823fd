"""The loop offline: step function, serialisable state, stop rules, memo, and profiles merged by category."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agentic.config import IterativeConfig, Thresholds
from agentsearch.pipeline.agentic.loop import (
    IterationRecord,
    JudgedDocument,
    LoopState,
    LoopTools,
    final_documents,
    next_action,
    run_iteration,
    run_loop,
)
from agentsearch.pipeline.agentic.profiles import Profile, ProfileSet, merge_by_category
from agentsearch.pipeline.agentic.refine import OfflineRefiner
from agentsearch.pipeline.agentic.scoring import Evaluation, OfflineScorer
from agentsearch.pipeline.agentic.sufficiency import OfflineGrader
from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from tests.support.toy_search import ToySearch

ANALYZER = KeywordAnalyzer()
QUERY = "offshore wind turbine gearbox failures"
CORPUS = [
    Document(id=f"g{i}", title=f"Gearbox report {i}",
             text=f"Offshore wind turbine gearbox failures rose in {2015 + i}; bearings caused {20 + i}% of them.")
    for i in range(4)
] + [
    Document(id=f"b{i}", title=f"Blade note {i}", text=f"Wind turbine blade erosion note number {i}, about coatings.")
    for i in range(6)
]


def offline_tools(search, grader=True) -> LoopTools:
    return LoopTools(search=search, scorer=OfflineScorer(ANALYZER), refiner=OfflineRefiner(ANALYZER),
                     grader=OfflineGrader(ANALYZER) if grader else None)


def test_the_state_survives_json_and_a_reloaded_state_continues_the_same_way():
    config = IterativeConfig(target=6, per_iteration=3, max_iterations=3, sufficiency=False)
    first = run_iteration(LoopState.start(QUERY, config), offline_tools(ToySearch(CORPUS)))
    wire = json.loads(json.dumps(first.dump()))  # what a Celery message carries
    reloaded = LoopState.load(wire)
    assert reloaded == first
    in_memory = run_iteration(first, offline_tools(ToySearch(CORPUS)))
    from_wire = run_iteration(reloaded, offline_tools(ToySearch(CORPUS)))
    assert [j.document.id for j in in_memory.kept] == [j.document.id for j in from_wire.kept]
    assert in_memory.queries == from_wire.queries


def test_offline_loop_keeps_the_matching_results_and_never_evaluates_one_twice():
    search = ToySearch(CORPUS)
    config = IterativeConfig(target=4, per_iteration=3, max_iterations=3, sufficiency=False)
    state = run_loop(LoopState.start(QUERY, config), offline_tools(search))
    evaluated = [j.document.id for j in state.kept + state.discarded]
    assert len(evaluated) == len(set(evaluated))
    assert {j.document.id for j in state.kept} == {"g0", "g1", "g2", "g3"}
    assert state.stop_reason == "target_reached"
    # Each later search asks for more results, so that skipping the memo'd ones still leaves new ones.
    assert search.calls[1][1] > search.calls[0][1]
    assert [d.document.id for d in final_documents(state)] == [j.document.id for j in sorted(
        state.kept, key=lambda j: (-j.evaluation.overall, -j.document.score))]


def test_refinement_learns_from_kept_results_and_avoids_the_discarded_ones_terms():
    config = IterativeConfig(target=10, per_iteration=5, max_iterations=2, sufficiency=False)
    state = run_iteration(LoopState.start(QUERY, config), offline_tools(ToySearch(CORPUS)))
    refinement = state.history[0].refinement
    assert refinement.method == "offline" and "bearings" in refinement.added_terms
    assert not {"blade", "erosion", "coatings"} & set(refinement.added_terms)
    assert state.queries[0] == refinement.query


def test_the_loop_stops_when_nothing_new_is_found():
    config = IterativeConfig(target=10, per_iteration=5, max_iterations=5, sufficiency=False)
    state = run_loop(LoopState.start("gearbox", config), offline_tools(ToySearch(CORPUS)))
    assert state.stop_reason == "no_new_results"
    assert state.history[-1].evaluated == 0 and len(state.kept) + len(state.discarded) == 4


def test_the_offline_grader_can_end_the_loop_before_the_target():
    config = IterativeConfig(target=5, per_iteration=1, max_iterations=3, sufficiency=True)
    state = run_loop(LoopState.start(QUERY, config), offline_tools(ToySearch(CORPUS)))
    assert state.stop_reason == "sufficient" and state.iteration == 1 and state.history[0].grade.sufficient


def test_budget_is_chosen_by_complexity_unless_set():
    assert LoopState.start("notice period", IterativeConfig()).budget == 1
    assert LoopState.start("notice period", IterativeConfig(max_iterations=4)).budget == 4
    long = "Compare wind, solar and storage costs, their subsidies, grid fees and 2030 targets"
    assert LoopState.start(long, IterativeConfig()).budget == 3


def test_next_action_reads_only_the_state():
    config = IterativeConfig(target=2, max_iterations=3)
    state = LoopState.start(QUERY, config)
    assert next_action(state).reason == "start"
    record = IterationRecord(iteration=1, queries=[QUERY], threshold=4.0, base_threshold=4.0, method="offline",
                             evaluated=5, skipped_memo=0, kept=1, discarded=4, kept_total=1)
    kept = JudgedDocument(document=CORPUS[0], evaluation=Evaluation(document_id="g0", overall=4.5), iteration=1,
                          query=QUERY)
    running = state.model_copy(update={"iteration": 1, "history": [record], "kept": [kept]})
    assert next_action(running).action == "continue"
    assert next_action(running.model_copy(update={"kept": [kept, kept]})).reason == "target_reached"
    assert next_action(running.model_copy(update={"iteration": 3})).reason == "budget_exhausted"
    empty = record.model_copy(update={"evaluated": 0})
    assert next_action(running.model_copy(update={"history": [empty]})).reason == "no_new_results"


def test_results_seen_by_earlier_runs_are_skipped_and_recorded():
    def skip(documents):
        fresh = [d for d in documents if d.id != "g0"]
        return fresh, [{"document_id": "g0", "reason": "id"}] if len(fresh) < len(documents) else []

    tools = offline_tools(ToySearch(CORPUS))
    tools.skip_seen = skip
    config = IterativeConfig(target=3, per_iteration=3, max_iterations=1, sufficiency=False)
    state = run_iteration(LoopState.start(QUERY, config), tools)
    assert "g0" not in {j.document.id for j in state.kept + state.discarded}
    assert state.history[0].skipped_earlier == [{"document_id": "g0", "reason": "id"}]
    assert state.history[0].evaluated == 3 and "id:toy/g0" in state.seen


# --- profiles -----------------------------------------------------------------------------------------------------

def test_profiles_are_validated_when_built():
    with pytest.raises(ValidationError, match="key of the merged result"):
        Profile(name="total")
    with pytest.raises(ValidationError, match="may only use"):
        Profile(name="x", query_template="{query} {other}")
    with pytest.raises(ValidationError, match="unique"):
        ProfileSet(profiles=[Profile(name="a"), Profile(name="a")])
    with pytest.raises(ValidationError):
        Profile(name="Has Spaces")
    with pytest.raises(ValidationError, match="invalid search overrides"):
        Profile(name="x", search={"strategy": "fuzzy"})


def test_a_profile_renders_its_query_and_overrides_the_jobs_settings():
    profile = Profile(name="research", query_template="{query} study results", target=2, max_iterations=1,
                      thresholds=Thresholds(first=4.5, later=4.0), search={"strategy": "keyword"})
    assert profile.render("gearbox  failures") == "gearbox failures study results"
    assert Profile(name="fixed", query_template="AI model launches").render("ignored") == "AI model launches"
    config = profile.iterative_config(IterativeConfig(target=5, per_iteration=4, search={"min_score": 0.1}))
    assert (config.target, config.max_iterations, config.per_iteration) == (2, 1, 4)
    assert config.thresholds.first == 4.5 and config.search == {"min_score": 0.1, "strategy": "keyword"}


def judged(doc_id: str, overall: float, url: str | None = None) -> JudgedDocument:
    return JudgedDocument(document=Document(id=doc_id, text="t", metadata={"url": url} if url else {}),
                          evaluation=Evaluation(document_id=doc_id, overall=overall), iteration=1, query="q")


def test_merge_by_category_lists_categories_with_counts_and_a_shared_result_once():
    merged = merge_by_category({
        "research": [judged("p1", 4.6), judged("shared", 4.0, url="https://x.example/a")],
        "industry": [judged("n1", 4.1), judged("shared-copy", 4.4, url="https://x.example/a"), judged("n2", 3.9)],
        "empty": [],
    })
    assert set(merged) == {"research", "industry", "empty", "total", "by_category_count"}
    assert [i["document_id"] for i in merged["research"]] == ["p1"]
    assert [i["document_id"] for i in merged["industry"]] == ["n1", "shared-copy", "n2"]
    assert merged["by_category_count"] == {"research": 1, "industry": 3, "empty": 0}
    assert merged["total"] == 4
