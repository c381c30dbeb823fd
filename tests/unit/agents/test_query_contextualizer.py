"""The ``query_contextualizer`` agent: its offline rules (a new year, a pronoun, a missing entity, a standalone
question left alone, no history) and its LLM path against a local OpenAI-compatible server."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.query_contextualizer import (
    QueryContextualizer,
    contextualize,
    is_standalone,
    parse,
)
from agentsearch.pipeline.platform.llm import LLMClient, LLMError
from tests.support.fake_llm import FakeLLM

REVENUE = [
    {"role": "user", "content": "What was Northwind's Q4 2025 revenue?"},
    {"role": "assistant", "content": "Q4 2025 revenue reached $412 million [1]."},
]


class Tools:
    def __init__(self, llm=None) -> None:
        self.llm = llm


def ctx(history, llm=None) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, conversation_history=history, tools=Tools(llm))


def run(query: str, history, config=None, llm=None):
    return QueryContextualizer(config or {"mode": "offline"}).run(PreSearchInput(query=query), ctx(history, llm))


def test_a_new_year_replaces_the_earlier_one_and_the_rest_is_carried():
    out = run("and in 2024?", REVENUE)
    assert out.query == "Northwind Q4 2024 revenue"
    assert out.metadata["carried"] == {"names": ["Northwind"], "quarter": "Q4", "terms": ["revenue"]}
    assert out.metadata["contextualized"] and out.metadata["original_query"] == "and in 2024?"
    assert out.metadata["standalone_query"] == out.query and out.metadata["contextualization_method"] == "rules"


def test_a_new_quarter_or_name_replaces_the_one_of_its_kind():
    assert run("and Q3?", REVENUE).query == "Northwind Q3 2025 revenue"
    assert run("What about Contoso?", REVENUE).query == "Contoso Q4 2025 revenue"


def test_a_pronoun_stands_for_the_last_name_and_a_new_topic_keeps_its_own_terms():
    out = run("Who is its CEO?", REVENUE)
    assert out.query == "Northwind CEO" and out.metadata["carried"] == {"names": ["Northwind"]}
    history = [{"role": "user", "content": "How large is the Kestrel Point battery?"}]
    assert run("How long can it discharge at full power?", history).query == "Kestrel Point discharge full power"


def test_a_question_missing_its_subject_gets_the_earlier_one_and_that_quarter_carries_the_time():
    assert run("What was the TRIR in 2024?", REVENUE).query == "Northwind 2024 TRIR"
    assert run("And in that quarter, what was the EBITDA margin?", REVENUE).query == "Northwind Q4 2025 EBITDA margin"


def test_a_standalone_question_is_left_exactly_as_asked():
    out = run("What was Contoso's revenue in 2024?", REVENUE)
    assert out.query == "What was Contoso's revenue in 2024?"
    assert out.metadata["contextualized"] is False and out.metadata["contextualization_method"] == "unchanged"
    assert is_standalone(parse("Kestrel Point battery storage capacity"), 3)
    assert not is_standalone(parse("Kestrel Point?"), 3)  # a name, but too little to search by itself


def test_follow_ups_build_on_each_other_through_the_history():
    history = [{"role": "user", "content": "What was Northwind's Q4 2025 revenue?"},
               {"role": "user", "content": "and in 2024?"}]
    assert contextualize("and Q3?", history)[0] == "Northwind Q3 2024 revenue"


@pytest.mark.parametrize("history", [None, [], [{"role": "assistant", "content": "Hello."}]])
def test_without_earlier_questions_the_agent_is_skipped(history):
    with pytest.raises(AgentSkipped, match="no conversation history"):
        run("and in 2024?", history)


def test_the_config_is_checked_when_built():
    with pytest.raises(ValidationError):
        QueryContextualizer({"mode": "psychic"})
    with pytest.raises(ValidationError):
        QueryContextualizer({"max_turns": 0})
    with pytest.raises(ValidationError):
        QueryContextualizer({"min_content_words": 3, "typo": True})


@pytest.fixture
def fake_llm():
    with FakeLLM(model="fake") as server:
        yield server


def test_the_llm_writes_the_standalone_query_from_the_conversation(fake_llm):
    fake_llm.script('{"query": "Northwind Q4 2024 revenue"}')
    llm = LLMClient(base_url=fake_llm.base_url, model="fake")
    out = run("and in 2024?", REVENUE, config={"mode": "auto"}, llm=llm)
    assert out.query == "Northwind Q4 2024 revenue" and out.metadata["contextualization_method"] == "llm"
    prompt = fake_llm.requests[0]["messages"][1]["content"]
    assert "User: What was Northwind's Q4 2025 revenue?" in prompt and "Assistant: Q4 2025 revenue" in prompt
    assert prompt.endswith("Last question: and in 2024?")


def test_a_failing_llm_falls_back_to_the_rules_in_auto_and_fails_in_llm_mode(fake_llm):
    fake_llm.script("no json here", "still none")
    llm = LLMClient(base_url=fake_llm.base_url, model="fake", max_retries=0)
    out = run("and in 2024?", REVENUE, config={"mode": "auto"}, llm=llm)
    assert out.query == "Northwind Q4 2024 revenue" and "contextualization_warning" in out.metadata
    with pytest.raises(LLMError):
        run("and in 2024?", REVENUE, config={"mode": "llm"}, llm=llm)


def test_llm_mode_without_an_llm_is_skipped():
    with pytest.raises(AgentSkipped, match="no LLM"):
        run("and in 2024?", REVENUE, config={"mode": "llm"})
