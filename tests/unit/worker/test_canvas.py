"""build_job_canvas: the job graph as data (inspected, never sent to a broker)."""

from __future__ import annotations

import copy

import pytest
from celery.canvas import Signature, _chain, _chord
from kombu.utils.json import dumps, loads

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.worker.job_tasks import (
    ANSWER_SPARE_S,
    HARD_LIMIT_MARGIN_S,
    SOFT_LIMIT_MARGIN_S,
    STEP_LIMIT_S,
    build_agentic_tail,
    build_job_canvas,
)

JOB = "6f1c2a8e-3d4b-4c1e-9a7f-2b8d5e0c9a11"

SPECS = [
    # Deliberately out of order, with a priority tie (broken by agent id) and a negative priority.
    AgentSpec(agent_id="query_translator", stage=Stage.PRE_SEARCH, priority=20, timeout_s=12),
    AgentSpec(agent_id="acronym_resolver", stage=Stage.PRE_SEARCH, priority=10,
              config={"acronyms": {"PPA": "power purchase agreement"}}),
    AgentSpec(agent_id="language_detector", stage=Stage.PRE_SEARCH, priority=-5),
    AgentSpec(agent_id="abbreviation_fixer", stage=Stage.PRE_SEARCH, priority=10),
    AgentSpec(agent_id="reranker", stage=Stage.POST_SEARCH, priority=50),
    AgentSpec(agent_id="deduplicator", stage=Stage.POST_SEARCH, priority=0, config={"threshold": 0.7}),
    AgentSpec(agent_id="email_draft", stage=Stage.RESPONSE, priority=5, config_id="cfg-email"),
    AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE, priority=1, timeout_s=4),
]


def names(canvas) -> list[str]:
    return [t.task for t in canvas.tasks]


def agent_ids(sigs) -> list[str]:
    return [s.kwargs["spec"]["agent_id"] for s in sigs]


@pytest.fixture
def canvas():
    return build_job_canvas(JOB, SPECS, default_timeout_s=30.0)


def test_the_job_is_a_chain_whose_steps_run_in_pipeline_order(canvas):
    assert isinstance(canvas, _chain)
    assert names(canvas) == [
        "agentsearch.pre_search_agent",
        "agentsearch.pre_search_agent",
        "agentsearch.pre_search_agent",
        "agentsearch.pre_search_agent",
        "agentsearch.core_search",
        "agentsearch.post_search_agent",
        "agentsearch.post_search_agent",
        "agentsearch.generate_answer",
        "celery.chord",
    ]


def test_pre_and_post_agents_run_by_priority_lower_first_ties_by_agent_id(canvas):
    pre = [t for t in canvas.tasks if t.task == "agentsearch.pre_search_agent"]
    post = [t for t in canvas.tasks if t.task == "agentsearch.post_search_agent"]
    assert agent_ids(pre) == ["language_detector", "abbreviation_fixer", "acronym_resolver", "query_translator"]
    assert agent_ids(post) == ["deduplicator", "reranker"]


def test_each_agent_step_carries_its_whole_spec_as_json(canvas):
    by_id = {s.agent_id: s for s in SPECS}
    for sig in canvas.tasks[:-1]:
        if "spec" in sig.kwargs:
            spec = sig.kwargs["spec"]
            assert spec == by_id[spec["agent_id"]].model_dump(mode="json")
            assert AgentSpec.model_validate(spec) == by_id[spec["agent_id"]]
    acronyms = next(t for t in canvas.tasks if t.kwargs.get("spec", {}).get("agent_id") == "acronym_resolver")
    assert acronyms.kwargs["spec"]["config"] == {"acronyms": {"PPA": "power purchase agreement"}}


def test_agent_steps_receive_the_state_from_the_previous_step(canvas):
    # Mutable signatures with no args of their own: the chain passes the previous result as the first argument.
    for sig in canvas.tasks[:-1]:
        assert sig.args == ()
        assert not sig.immutable


def test_response_agents_run_in_a_chord_whose_body_assembles_the_job(canvas):
    last = canvas.tasks[-1]
    assert isinstance(last, _chord)
    header = list(last.tasks)
    assert [s.task for s in header] == ["agentsearch.response_agent"] * 2
    assert agent_ids(header) == ["executive_summary", "email_draft"]
    assert header[1].kwargs["spec"]["config_id"] == "cfg-email"
    body = last.body
    assert body.task == "agentsearch.assemble"
    assert body.kwargs == {"job_id": JOB}
    # The body must receive the header's results (the response agents' records).
    assert not body.immutable
    assert body.args == ()


def test_without_response_agents_there_is_no_chord_and_assemble_gets_an_empty_list():
    specs = [s for s in SPECS if s.stage != Stage.RESPONSE]
    canvas = build_job_canvas(JOB, specs)
    assert "celery.chord" not in names(canvas)
    last = canvas.tasks[-1]
    assert last.task == "agentsearch.assemble"
    assert last.args == ([],)
    assert last.kwargs == {"job_id": JOB}
    # Immutable: the state from generate_answer must not be passed in as the response records.
    assert last.immutable
    assert names(canvas)[-2] == "agentsearch.generate_answer"


def test_no_agents_at_all_is_search_answer_assemble():
    canvas = build_job_canvas(JOB, [])
    assert names(canvas) == ["agentsearch.core_search", "agentsearch.generate_answer", "agentsearch.assemble"]
    assert canvas.tasks[0].args == () and not canvas.tasks[0].immutable


def test_only_response_agents_is_fine():
    canvas = build_job_canvas(JOB, [s for s in SPECS if s.stage == Stage.RESPONSE])
    assert names(canvas) == ["agentsearch.core_search", "agentsearch.generate_answer", "celery.chord"]


def test_time_limits_follow_the_spec_timeout_with_soft_before_hard(canvas):
    sigs = {s.kwargs["spec"]["agent_id"]: s for s in canvas.tasks if "spec" in s.kwargs}
    sigs.update({s.kwargs["spec"]["agent_id"]: s for s in canvas.tasks[-1].tasks})
    for agent_id, timeout in [("query_translator", 12), ("executive_summary", 4)]:
        opts = sigs[agent_id].options
        assert opts["soft_time_limit"] == timeout + SOFT_LIMIT_MARGIN_S
        assert opts["time_limit"] == timeout + HARD_LIMIT_MARGIN_S
    for sig in sigs.values():
        # The runner's own deadline comes first, Celery's soft limit next, the hard kill last.
        timeout = sig.kwargs["spec"]["timeout_s"] or 30.0
        assert timeout < sig.options["soft_time_limit"] < sig.options["time_limit"]


def test_specs_without_a_timeout_use_the_default_timeout():
    spec = AgentSpec(agent_id="deduplicator", stage=Stage.POST_SEARCH)
    short = build_job_canvas(JOB, [spec], default_timeout_s=7.0)
    long = build_job_canvas(JOB, [spec], default_timeout_s=90.0)
    step = lambda c: next(t for t in c.tasks if t.task == "agentsearch.post_search_agent")  # noqa: E731
    assert step(short).options["soft_time_limit"] == 7.0 + SOFT_LIMIT_MARGIN_S
    assert step(long).options["time_limit"] == 90.0 + HARD_LIMIT_MARGIN_S


def test_fixed_steps_use_the_step_limit(canvas):
    for sig in [*canvas.tasks[:-1], canvas.tasks[-1].body]:
        if "spec" not in sig.kwargs:
            assert sig.options["soft_time_limit"] == STEP_LIMIT_S + SOFT_LIMIT_MARGIN_S
            assert sig.options["time_limit"] == STEP_LIMIT_S + HARD_LIMIT_MARGIN_S


@pytest.mark.parametrize("answer_s, judge_s, limit_s", [
    ("60", "20", STEP_LIMIT_S),                     # the defaults fit the step limit as they always did
    ("5", "1", STEP_LIMIT_S),                       # shorter budgets never shorten it
    ("300", "120", 300 + 120 + ANSWER_SPARE_S),     # a model on CPU cores: the step waits for its budgets
])
def test_the_answer_steps_limit_follows_the_llm_budgets(monkeypatch, answer_s, judge_s, limit_s):
    monkeypatch.setenv("AGENTSEARCH_ANSWER_LLM_TIMEOUT_S", answer_s)
    monkeypatch.setenv("AGENTSEARCH_JUDGE_LLM_TIMEOUT_S", judge_s)
    get_settings.cache_clear()
    try:
        job, tail = build_job_canvas(JOB, SPECS), build_agentic_tail(JOB, SPECS)
    finally:
        get_settings.cache_clear()
    for canvas_ in (job, tail):
        (answer,) = [t for t in canvas_.tasks if t.task == "agentsearch.generate_answer"]
        assert answer.options["soft_time_limit"] == limit_s + SOFT_LIMIT_MARGIN_S
        assert answer.options["time_limit"] == limit_s + HARD_LIMIT_MARGIN_S
        assert answer.options["ignore_result"]
        search = next(t for t in canvas_.tasks if t.task in ("agentsearch.core_search", "agentsearch.agentic_compress"))
        assert search.options["soft_time_limit"] == STEP_LIMIT_S + SOFT_LIMIT_MARGIN_S  # the other steps keep theirs


def test_a_failing_step_marks_the_job_failed(canvas):
    errbacks = canvas.options["link_error"]
    assert [(e.task, e.kwargs) for e in errbacks] == [("agentsearch.job_failed", {"job_id": JOB})]


def test_the_function_is_pure():
    before = copy.deepcopy(SPECS)
    first = build_job_canvas(JOB, SPECS)
    second = build_job_canvas(JOB, list(reversed(SPECS)))
    assert SPECS == before  # inputs untouched
    assert first == second  # same input (in any order) -> equal structure
    assert dumps(first) == dumps(second)
    assert first.tasks[0] is not second.tasks[0]  # no shared, mutable signatures between calls
    # ... and the structure really depends on the input.
    assert build_job_canvas("another-job", SPECS) != first
    assert build_job_canvas(JOB, SPECS[:-1]) != first


def test_the_canvas_survives_the_json_serialiser_the_broker_uses(canvas):
    restored = Signature.from_dict(loads(dumps(canvas)))
    assert names(restored) == names(canvas)
    chord_ = restored.tasks[-1]
    assert agent_ids(chord_.tasks) == ["executive_summary", "email_draft"]
    assert chord_.body["kwargs"] == {"job_id": JOB}
    assert restored.options["link_error"][0]["task"] == "agentsearch.job_failed"


def test_a_step_hands_its_output_on_and_only_a_chords_header_stores_it(canvas):
    # The chain carries each output in the next message; a chord gathers its header's from the result backend.
    chord_ = canvas.tasks[-1]
    assert all(sig.options["ignore_result"] for sig in [*canvas.tasks[:-1], chord_.body])
    assert not any(sig.options.get("ignore_result") for sig in chord_.tasks)
    searches = build_job_canvas(JOB, [], collection_ids=["c1", "c2"]).tasks[0]
    # Celery folds the steps after a chord into its body: merge_search and the rest of the job.
    assert isinstance(searches, _chord) and isinstance(searches.body, _chain)
    assert [(sig.task, sig.options["ignore_result"]) for sig in searches.body.tasks] == [
        ("agentsearch.merge_search", True), ("agentsearch.generate_answer", True), ("agentsearch.assemble", True)]
    assert [sig.options["ignore_result"] for sig in searches.tasks] == [False, False]
