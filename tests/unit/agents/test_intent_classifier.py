"""The intent classifier on real text: by embeddings (the real MiniLM model of the folder's ``embedder`` fixture)
and by an LLM over HTTP (a local OpenAI-compatible server, ``tests.support.fake_llm``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped
from agentsearch.pipeline.agents.builtin.intent_classifier import IntentClassifier
from agentsearch.pipeline.platform.llm import LLMClient
from tests.support.fake_llm import FakeLLM
from tests.unit.agents.pre_search_fakes import CORPUS, FakeTools, ctx_with, inp


@pytest.fixture(scope="module")
def embedding_tools(embedder) -> FakeTools:
    """One toolbox for the read-only embedding tests, so the example centroids are computed once for them."""
    return FakeTools(CORPUS, embedder)


INTENTS = {
    "finance": [
        "What was revenue in the third quarter?",
        "How high was the EBITDA margin?",
        "What is the full-year revenue guidance?",
        "How much net debt does the company have?",
    ],
    "hr": [
        "How many days of annual leave do employees get?",
        "What is the parental leave policy?",
        "Can I work from home?",
        "Who do I contact about my employment contract?",
    ],
}


@pytest.mark.parametrize(
    ("query", "intent"),
    [
        ("Did Northwind raise its 2025 sales forecast?", "finance"),
        ("What dividend per share did the board propose?", "finance"),
        ("How many weeks of paid leave do new parents get?", "hr"),
        ("Are staff allowed to work remotely on Fridays?", "hr"),
    ],
)
def test_intent_classifier_tags_finance_and_hr_questions(embedding_tools, query, intent):
    out = IntentClassifier({"intents": INTENTS, "mode": "embedding"}).run(inp(query), ctx_with(embedding_tools))
    assert out.metadata["intent"] == intent
    scores = out.metadata["intent_scores"]
    assert out.metadata["intent_confidence"] == scores[intent] == max(scores.values()) >= 0.3
    assert out.query == query


def test_intent_classifier_falls_back_below_min_confidence(embedding_tools):
    agent = IntentClassifier({"intents": INTENTS, "fallback_intent": "other", "mode": "embedding"})
    out = agent.run(inp("Floating wind foundations in deep water"), ctx_with(embedding_tools))
    assert out.metadata["intent"] == "other"
    assert out.metadata["intent_confidence"] < 0.3


def test_intent_classifier_embeds_the_examples_once_per_instance(embedder):
    tools = FakeTools(CORPUS, embedder)
    agent = IntentClassifier({"intents": INTENTS, "mode": "embedding"})
    agent.run(inp("EBITDA margin in 2025"), ctx_with(tools))
    agent.run(inp("parental leave"), ctx_with(tools))
    assert [c for c in tools.calls if c[0] == "embed"] == [("embed", 8), ("embed", 1), ("embed", 1)]


def test_intent_classifier_llm_variant_picks_the_label(embedder, fake_llm):
    fake_llm.script('{"intent": "hr", "confidence": 0.92}', '{"intent": "legal", "confidence": 0.99}')
    tools = FakeTools(CORPUS, embedder, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    agent = IntentClassifier({"intents": INTENTS})  # mode "auto": the LLM when one is configured
    out = agent.run(inp("Can I take unpaid leave?"), ctx_with(tools))
    assert out.metadata == {"intent": "hr", "intent_confidence": 0.92, "intent_method": "llm"}
    system, user = fake_llm.requests[0]["messages"]
    assert user["content"] == "Can I take unpaid leave?"
    assert "What is the parental leave policy?" in system["content"] and "finance" in system["content"]
    # A label the config does not know is not passed on.
    assert agent.run(inp("Is the NDA binding?"), ctx_with(tools)).metadata["intent"] == "general"
    assert not [c for c in tools.calls if c[0] == "embed"]


def test_intent_classifier_auto_falls_back_to_embeddings_when_the_llm_fails(embedder, fake_llm):
    fake_llm.script(FakeLLM.error(400, "model not found"))
    tools = FakeTools(CORPUS, embedder, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = IntentClassifier({"intents": INTENTS}).run(inp("How high was EBITDA in Q3?"), ctx_with(tools))
    assert out.metadata["intent"] == "finance" and out.metadata["intent_method"] == "embedding"
    assert "model not found" in out.metadata["intent_warning"]
    with pytest.raises(AgentSkipped, match="no LLM"):
        IntentClassifier({"intents": INTENTS, "mode": "llm"}).run(inp("EBITDA"), ctx_with(FakeTools(CORPUS, embedder)))


@pytest.mark.parametrize(
    "intents", [{}, {"finance": []}, {"finance": ["  "]}, {"": ["What was revenue?"]}, {"finance": "revenue"}]
)
def test_intent_classifier_refuses_intents_without_examples(intents):
    with pytest.raises(ValidationError):
        IntentClassifier({"intents": intents})
