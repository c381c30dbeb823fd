"""The iterative loop driven by a scripted OpenAI-compatible server: evaluation, refinement and grading replies."""

from __future__ import annotations

import json
import re

import pytest

from agentsearch.pipeline.agentic.config import IterativeConfig, Thresholds
from agentsearch.pipeline.agentic.loop import LoopState, LoopTools, next_action, run_iteration, run_loop
from agentsearch.pipeline.agentic.refine import LLMRefiner
from agentsearch.pipeline.agentic.scoring import CRITERIA, LLMScorer
from agentsearch.pipeline.agentic.sufficiency import LLMGrader, OfflineGrader
from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM
from tests.support.toy_search import ToySearch

QUERY = "offshore wind turbine maintenance"
CORPUS = [
    Document(id="gearbox", title="Gearbox inspection intervals",
             text="Offshore wind turbine gearboxes are inspected every 6 months by Vestas crews since 2021."),
    Document(id="blades", title="Blade erosion repair",
             text="Wind turbine blades erode at the leading edge; repair costs reach 30,000 euros per blade."),
    Document(id="budget", title="Turbine maintenance budget",
             text="Maintenance of offshore wind turbines costs 45 euros per kW each year, Orsted reported in 2024."),
    Document(id="noise", title="Onshore turbine noise",
             text="Wind turbine noise limits near homes are 40 dB at night in Denmark."),
    Document(id="oil", title="Turbine lubrication",
             text="Wind turbine gearbox oil is changed every 2 years; offshore crews sample it each quarter."),
    Document(id="cables", title="Subsea cable faults",
             text="Offshore wind farms lose most output to export cable faults, a 2023 study of 40 farms found."),
]


fake, llm = llm_fixtures.fake, llm_fixtures.llm


def by_position(*scores: tuple[float, float, float, float]):
    """An evaluation reply giving the n-th listed document the n-th scores (the last ones repeat)."""

    def reply(body: dict) -> str:
        listed = re.findall(r"^\[(\d+)\] (.+)$", body["messages"][-1]["content"], re.MULTILINE)
        return json.dumps([
            {"id": int(n), **dict(zip(CRITERIA, scores[min(i, len(scores) - 1)])), "reasoning": f"judged {title}"}
            for i, (n, title) in enumerate(listed)
        ])

    return reply


def listed_titles(body: dict) -> set[str]:
    return set(re.findall(r"^\[\d+\] (.+)$", body["messages"][-1]["content"], re.MULTILINE))


def tools_for(llm, search, grader=None) -> LoopTools:
    return LoopTools(search=search, scorer=LLMScorer(llm, timeout_s=5), refiner=LLMRefiner(llm, timeout_s=5),
                     grader=grader)


GOOD, BAD = (5, 5, 4, 4), (2, 2, 2, 2)


def test_loop_stops_at_the_target_after_refining_from_what_was_discarded(fake, llm):
    search = ToySearch(CORPUS)
    refined = "offshore wind turbine gearbox maintenance intervals"
    fake.script(by_position(GOOD, BAD), refined, by_position((4, 4, 4, 4), BAD))
    config = IterativeConfig(target=2, per_iteration=2, max_iterations=3, sufficiency=False)
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, search))

    assert state.stop_reason == "target_reached" and state.iteration == 2
    assert len(state.kept) == 2 and len(state.discarded) == 2
    # Evaluate, refine, evaluate: no refinement is asked for once the target is met.
    assert len(fake.requests) == 3 and fake.pending == 0
    refine_prompt = fake.requests[1]["messages"][-1]["content"]
    discarded_first = state.history[0]
    assert discarded_first.discarded == 1
    bad_title = next(j.document.title for j in state.discarded if j.iteration == 1)
    assert f"{bad_title} (Score: 2.0) - judged {bad_title}" in refine_prompt
    assert state.history[1].queries == [refined] and search.calls[1][0] == refined
    # The seen-memo: nothing evaluated in the first iteration is evaluated again.
    assert not listed_titles(fake.requests[0]) & listed_titles(fake.requests[2])
    assert state.history[1].skipped_memo >= 1


def test_loop_stops_at_the_budget_short_of_the_target(fake, llm):
    fake.script(by_position(BAD), "offshore turbine servicing", by_position(BAD))
    config = IterativeConfig(target=3, per_iteration=2, max_iterations=2, sufficiency=False)
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS)))
    assert state.stop_reason == "budget_exhausted" and state.iteration == 2
    assert state.kept == [] and len(state.discarded) == 4
    assert len(fake.requests) == 3 and fake.pending == 0
    assert next_action(state).action == "stop"


def test_the_threshold_is_lower_after_the_first_iteration(fake, llm):
    borderline = (4, 4, 4, 3.6)  # overall 3.9: below 4.0, above 3.8
    fake.script(by_position(borderline), QUERY + " costs", by_position(borderline))
    config = IterativeConfig(target=1, per_iteration=1, max_iterations=2, sufficiency=False)
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS)))

    assert [r.threshold for r in state.history] == [4.0, 3.8]
    assert [(r.kept, r.discarded) for r in state.history] == [(0, 1), (1, 0)]
    assert state.kept[0].evaluation.overall == pytest.approx(3.9)
    assert "Threshold: 4\n" in fake.requests[0]["messages"][-1]["content"]
    assert "Threshold: 3.8\n" in fake.requests[2]["messages"][-1]["content"]


def test_thresholds_are_configurable(fake, llm):
    fake.script(by_position((4, 4, 4, 4)), QUERY + " costs", by_position((4, 4, 4, 4)))
    config = IterativeConfig(target=1, per_iteration=1, max_iterations=2, sufficiency=False,
                             thresholds=Thresholds(first=4.5, later=4.2))
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS)))
    assert [r.threshold for r in state.history] == [4.5, 4.2]
    assert state.kept == [] and state.stop_reason == "budget_exhausted"


@pytest.mark.parametrize("reply", [
    "These all look like excellent articles to me!",
    '[{"id": 1, "relevance": 9, "actionability": 4, "source_quality": 4, "recency_impact": 4}]',
    '{"verdict": "fine"}',
])
def test_a_malformed_evaluation_keeps_every_result_and_is_recorded(fake, llm, reply):
    fake.script(reply)
    config = IterativeConfig(target=2, per_iteration=2, max_iterations=3, sufficiency=False)
    state = run_iteration(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS)))
    record = state.history[0]
    assert record.method == "keep_all" and record.kept == 2 and record.discarded == 0
    assert record.evaluation_error and "every result kept" in record.evaluation_error
    assert all(j.evaluation.overall is None and j.evaluation.decision == "keep" for j in state.kept)
    assert state.stop_reason == "target_reached" and len(fake.requests) == 1


def test_a_reply_that_scores_only_some_results_keeps_the_rest_and_says_so(fake, llm):
    fake.script('```json\n[{"id": 2, "relevance": 1, "actionability": 1, "source_quality": 2, '
                '"recency_impact": 2, "reasoning": "off topic"}]\n```')
    config = IterativeConfig(target=5, per_iteration=2, max_iterations=1, sufficiency=False)
    state = run_iteration(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS)))
    record = state.history[0]
    assert record.method == "llm" and (record.kept, record.discarded) == (1, 1)
    assert "1 of 2 results had no usable evaluation" in record.evaluation_error
    assert state.discarded[0].evaluation.overall == 1.5


def test_a_failed_refinement_reuses_the_original_query(fake, llm):
    fake.script(by_position(BAD), FakeLLM.error(400, "bad request"), by_position(GOOD))
    config = IterativeConfig(target=1, per_iteration=1, max_iterations=2, sufficiency=False)
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS)))
    refinement = state.history[0].refinement
    assert refinement.method == "unchanged" and refinement.query == QUERY and "failed" in refinement.error
    assert state.history[1].queries == [QUERY] and state.stop_reason == "target_reached"


def test_the_grader_stops_a_sufficient_run_and_sends_follow_ups_when_not(fake, llm):
    analyzer = KeywordAnalyzer()
    grader = LLMGrader(llm, OfflineGrader(analyzer), timeout_s=5)
    config = IterativeConfig(target=3, per_iteration=1, max_iterations=3)

    fake.script(by_position(GOOD), '{"sufficient": true, "missing": []}')
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, ToySearch(CORPUS), grader))
    assert state.stop_reason == "sufficient" and state.iteration == 1 and len(fake.requests) == 2

    search = ToySearch(CORPUS)
    fake.script(by_position(GOOD),
                '{"sufficient": false, "missing": ["cable faults"], "follow_up_queries": ["offshore cable faults"]}',
                QUERY + " schedule", by_position(GOOD), '{"sufficient": true}')
    state = run_loop(LoopState.start(QUERY, config), tools_for(llm, search, grader))
    assert state.history[0].grade.follow_up_queries == ["offshore cable faults"]
    assert state.history[1].queries == [QUERY + " schedule", "offshore cable faults"]
    assert {q for q, _ in search.calls[1:]} == {QUERY + " schedule", "offshore cable faults"}
    assert state.stop_reason == "sufficient"


def test_an_unusable_grade_falls_back_to_offline_coverage(fake, llm):
    grader = LLMGrader(llm, OfflineGrader(KeywordAnalyzer()), timeout_s=5)
    fake.script("not json at all")
    grade = grader.grade(QUERY, [CORPUS[0]])
    assert grade.method == "offline" and grade.error.startswith("malformed grading reply, offline grade used")
    # Three of the four query terms ("maintenance" is missing) reach the 0.6 coverage an aspect needs.
    assert grade.coverage == 0.75 and grade.sufficient
