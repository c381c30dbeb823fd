"""The guard on the LLM's evaluation: it fires when the model's scores disagree with the retrieval, not when they
agree, and a loop it fires in goes on offline and says so."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.guard import DISAGREES, check_agreement, kendall_tau_b
from agentsearch.pipeline.agentic.loop import LoopState, LoopTools, run_iteration, run_loop
from agentsearch.pipeline.agentic.refine import Refinement
from agentsearch.pipeline.agentic.scoring import Evaluation, Scoring, judge
from agentsearch.pipeline.agents.base import Document

RETRIEVAL = [0.9, 0.8, 0.7, 0.6, 0.5]
THRESHOLDS = IterativeConfig().thresholds


def judged(overalls: list[float | None], method: str = "llm"):
    scoring = Scoring(method=method, evaluations=[
        Evaluation(document_id=f"d{i}", overall=o, relevance=o, actionability=o, source_quality=o, recency_impact=o)
        for i, o in enumerate(overalls)])
    return judge(scoring, 4.0, THRESHOLDS)


def test_kendall_tau_b():
    assert kendall_tau_b([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau_b([3, 2, 1], [10, 20, 30]) == -1.0
    assert kendall_tau_b([2, 2, 2], [10, 20, 30]) is None  # all ties: no order to compare
    assert kendall_tau_b([1], [1]) is None
    assert 0 < kendall_tau_b([5, 5, 4, 2], [0.9, 0.8, 0.7, 0.6]) < 1


def test_scores_that_follow_the_retrieval_pass():
    check = check_agreement(judged([5, 4.5, 4, 3, 2]), judged([4.5, 4.2, 3.5, 3, 2], "offline"), RETRIEVAL)
    assert not check.disagrees and check.rule is None and check.rank_correlation == 1.0
    assert (check.llm_kept, check.offline_kept, check.both_kept) == (3, 2, 2)


def test_a_good_model_may_reorder_some_results_and_still_pass():
    # It prefers the third result to the second and drops the first's runner-up: tau still positive.
    check = check_agreement(judged([5, 3, 4.5, 2, 2.5]), judged([4.5, 4.2, 3.5, 3, 2], "offline"), RETRIEVAL)
    assert check.rank_correlation > 0 and not check.disagrees


def test_scores_against_the_retrieval_fire_the_rank_rule():
    check = check_agreement(judged([2, 2.5, 3, 4.5, 5]), judged([4.5, 4.2, 3.5, 3, 2], "offline"), RETRIEVAL)
    assert check.disagrees and check.rule == "rank" and check.rank_correlation == -1.0
    assert "against the retrieval" in check.detail


def test_the_rank_threshold_is_configurable():
    llm = judged([4, 5, 3, 4.5, 2])  # tau +0.4
    offline = judged([4.5, 4.2, 3.5, 3, 2], "offline")
    assert not check_agreement(llm, offline, RETRIEVAL).disagrees
    assert check_agreement(llm, offline, RETRIEVAL, min_rank_correlation=0.5).rule == "rank"


def test_keeping_none_of_what_the_retrieval_keeps_fires_the_keep_rule():
    # Every score tied (no order, so no rank verdict), all below the threshold: the offline scorer's two are lost.
    check = check_agreement(judged([2, 2, 2, 2, 2]), judged([4.5, 4.2, 3.5, 3, 2], "offline"), RETRIEVAL)
    assert check.disagrees and check.rule == "keep" and check.rank_correlation is None
    assert check.offline_kept == 2 and check.both_kept == 0


def test_keeping_nothing_when_the_retrieval_keeps_nothing_either_passes():
    check = check_agreement(judged([2, 2, 2, 2, 2]), judged([3, 3, 3, 2, 2], "offline"), RETRIEVAL)
    assert not check.disagrees


def test_too_few_scored_results_give_no_rank_verdict():
    check = check_agreement(judged([2, 5, None, None, None]), judged([4.5, 4.2, 3, 3, 2], "offline"), RETRIEVAL)
    assert check.rank_correlation is None and not check.disagrees  # both kept d1 (unscored ones are kept)


# --- in the loop ------------------------------------------------------------------------------------------------

CORPUS = [Document(id=f"doc{i}", title=f"Wind turbine report {i}", text="wind turbine " + "maintenance " * (9 - i))
          for i in range(9)]


class FixedScorer:
    """Scores the n-th document of every batch with the n-th overall, by one method; counts its calls."""

    def __init__(self, method: str, overalls: list[float]) -> None:
        self.method, self.overalls, self.calls = method, overalls, 0

    def score(self, query: str, documents: list[Document], threshold: float = 4.0) -> Scoring:
        self.calls += 1
        return Scoring(method=self.method, evaluations=[
            Evaluation(document_id=d.id, relevance=o, actionability=o, source_quality=o, recency_impact=o, overall=o)
            for d, o in zip(documents, self.overalls)])


class NamedRefiner:
    def __init__(self, name: str) -> None:
        self.name, self.calls = name, 0

    def refine(self, original, current, kept, discarded, background=None) -> Refinement:
        self.calls += 1
        return Refinement(query=f"{original} {self.name}", method="offline")


def ranked_search():
    """Documents best first with strictly falling retrieval scores."""
    def search(query: str, top_k: int) -> list[Document]:
        return [d.model_copy(update={"score": 1.0 - i / 10}) for i, d in enumerate(CORPUS)][:top_k]
    return search


def tools(llm_overalls: list[float]) -> tuple[LoopTools, FixedScorer, FixedScorer, NamedRefiner, NamedRefiner]:
    llm, offline = FixedScorer("llm", llm_overalls), FixedScorer("offline", [4.5, 4.2, 3.5, 3.0])
    llm_refiner, offline_refiner = NamedRefiner("llm"), NamedRefiner("offline")
    return (LoopTools(search=ranked_search(), scorer=llm, refiner=llm_refiner, fallback_scorer=offline,
                      fallback_refiner=offline_refiner), llm, offline, llm_refiner, offline_refiner)


CONFIG = IterativeConfig(target=10, per_iteration=4, max_iterations=2, sufficiency=False)


def test_a_disagreeing_model_is_set_aside_for_the_rest_of_the_run():
    loop_tools, llm, offline, llm_refiner, offline_refiner = tools([2.0, 2.0, 4.5, 5.0])
    state = run_loop(LoopState.start("wind turbine maintenance", CONFIG), loop_tools)

    first, second = state.history
    assert first.guard is not None and first.guard.disagrees and first.guard.rule == "rank"
    assert state.llm_off == DISAGREES and state.llm_off_iteration == 1
    # The batch is judged by the retrieval's signals: the retrieval's first two kept, not the model's picks.
    assert first.method == "offline" and "LLM scores not used" in first.evaluation_error
    assert [j.document.id for j in state.kept if j.iteration == 1] == ["doc0", "doc1"]
    # Offline from then on: no second LLM evaluation, the offline refiner, no second check.
    assert llm.calls == 1 and offline.calls == 2
    assert (llm_refiner.calls, offline_refiner.calls) == (0, 1)
    assert second.method == "offline" and second.guard is None
    assert LoopState.load(state.dump()).llm_off == DISAGREES


def test_an_agreeing_model_keeps_the_loop():
    loop_tools, llm, offline, llm_refiner, offline_refiner = tools([5.0, 4.5, 4.0, 2.0])
    state = run_loop(LoopState.start("wind turbine maintenance", CONFIG), loop_tools)

    assert state.llm_off is None and [r.method for r in state.history] == ["llm", "llm"]
    assert all(r.guard is not None and not r.guard.disagrees for r in state.history)
    assert llm.calls == 2 and offline.calls == 2  # the offline scorer checks each batch, decides none
    assert (llm_refiner.calls, offline_refiner.calls) == (1, 0)


@pytest.mark.parametrize("setting", [{"llm_guard": False}, None])
def test_no_guard_without_it_configured_or_without_an_offline_scorer(setting):
    loop_tools, _llm, offline, _, _ = tools([2.0, 2.0, 4.5, 5.0])
    config = CONFIG.model_copy(update=setting) if setting else CONFIG
    if setting is None:
        loop_tools.fallback_scorer = None
    state = run_iteration(LoopState.start("wind turbine maintenance", config), loop_tools)
    assert state.llm_off is None and state.history[0].guard is None and state.history[0].method == "llm"
    assert offline.calls == 0


def test_a_failed_llm_evaluation_is_not_checked():
    loop_tools, _, offline, _, _ = tools([])
    loop_tools.scorer = FixedScorer("keep_all", [])
    state = run_iteration(LoopState.start("wind turbine maintenance", CONFIG), loop_tools)
    assert state.history[0].guard is None and state.llm_off is None and offline.calls == 0

