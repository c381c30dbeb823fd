"""The translator with a scripted LLM and over HTTP, and the chain it stands in through the runner: language
detector -> translator -> query expander."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped, Stage
from agentsearch.pipeline.agents.builtin.translator import Translator
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.job.agent_call import pre_search_step
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.records.agent_runs import AgentSpec
from tests.unit.agents.pre_search_fakes import COLLECTION, CORPUS, PLAIN, FakeTools, StubLLM, ctx_with, inp

# --- translator -----------------------------------------------------------------------------------------------

SPANISH = "¿Cuáles fueron los ingresos de Northwind Energy en el cuarto trimestre de 2025?"
ENGLISH = "What was Northwind Energy's revenue in the fourth quarter of 2025?"


def test_translator_skips_without_an_llm(keyword_tools):
    with pytest.raises(AgentSkipped, match="no LLM endpoint configured"):
        Translator().run(inp(SPANISH, language="es"), ctx_with(keyword_tools))
    with pytest.raises(AgentSkipped, match="no LLM endpoint configured"):
        Translator().run(inp(SPANISH), PLAIN)


def test_translator_skips_a_query_already_in_the_target_language():
    llm = StubLLM()
    with pytest.raises(AgentSkipped, match="already in the target language 'en'"):
        Translator().run(inp(ENGLISH, language="en", language_confidence=0.99), ctx_with(FakeTools(CORPUS, llm=llm)))
    assert llm.messages == []


def test_translator_translates_with_an_llm_and_keeps_the_original():
    llm = StubLLM(json.dumps({"source_language": "es", "translation": ENGLISH}))
    out = Translator().run(inp(SPANISH, language="es"), ctx_with(FakeTools(CORPUS, llm=llm)))
    assert out.query == ENGLISH
    assert out.metadata == {
        "original_query": SPANISH, "translated_from": "es", "translated_to": "en", "translation_method": "llm",
    }
    assert llm.messages[0][-1] == {"role": "user", "content": SPANISH}


def test_translator_over_http_sends_the_query_and_the_target_language(fake_llm):
    fake_llm.script(json.dumps({"source_language": "en", "translation": "Wie hoch war der Umsatz im vierten Quartal?"}))
    tools = FakeTools(CORPUS, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = Translator({"target_language": "de"}).run(
        inp("What was the revenue in the fourth quarter?", language="en"), ctx_with(tools)
    )
    assert out.query == "Wie hoch war der Umsatz im vierten Quartal?"
    assert out.metadata["original_query"] == "What was the revenue in the fourth quarter?"
    assert out.metadata["translated_from"] == "en" and out.metadata["translated_to"] == "de"
    (request,) = fake_llm.requests
    assert fake_llm.paths == ["/v1/chat/completions"] and request["model"] == "fake"
    system, user = request["messages"]
    assert user == {"role": "user", "content": "What was the revenue in the fourth quarter?"}
    assert "German (de)" in system["content"] and "English (en)" in system["content"]


def test_translator_without_a_detector_lets_the_llm_name_the_language(fake_llm):
    fake_llm.script(json.dumps({"source_language": "es", "translation": ENGLISH}),
                    json.dumps({"source_language": "en", "translation": ENGLISH}),
                    f'"{ENGLISH}"')
    tools = FakeTools(CORPUS, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = Translator().run(inp(SPANISH), ctx_with(tools))
    assert out.query == ENGLISH and out.metadata["translated_from"] == "es"
    # The LLM found the query already in English: nothing changes.
    same = Translator().run(inp(ENGLISH), ctx_with(tools))
    assert same.query == ENGLISH and "original_query" not in same.metadata
    # A model that ignores the JSON format but answers with the translation alone still works.
    plain = Translator().run(inp(SPANISH, language="es"), ctx_with(tools))
    assert plain.query == ENGLISH and plain.metadata["translated_from"] == "es"


@pytest.mark.parametrize("config", [{"target_language": "english"}, {"target_language": ""}, {"source": "es"}])
def test_translator_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        Translator(config)


# --- the chain through the runner: detector (0) -> translator (10) -> expander (20) -----------------------------


def run_chain(tools, redis_client, tmp_path, query: str) -> JobState:
    registry = AgentRegistry.discover()
    runner = AgentRunner(registry, redis_client, Settings(data_dir=tmp_path), tools=tools)
    state = JobState(job_id="j1", collection_id=COLLECTION, query=query, original_query=query)
    for agent_id, priority in (("language_detector", 0), ("translator", 10), ("query_expander", 20)):
        spec = AgentSpec(agent_id=agent_id, stage=Stage.PRE_SEARCH, priority=priority,
                         config={"max_terms": 3} if agent_id == "query_expander" else {})
        state = pre_search_step(state, spec, runner)
    return state


def test_chain_without_an_llm_skips_the_translator_and_still_expands(keyword_tools, redis_client, tmp_path):
    state = run_chain(keyword_tools, redis_client, tmp_path, SPANISH)
    assert [(r.agent_id, r.status) for r in state.agent_runs] == [
        ("language_detector", "ok"), ("translator", "skipped"), ("query_expander", "ok"),
    ]
    assert "no LLM endpoint configured" in state.agent_runs[1].errors[0]
    assert state.metadata["language"] == "es"
    assert len(state.metadata["expansion_terms"]) == 3
    assert state.query == f"{SPANISH} {' '.join(state.metadata['expansion_terms'])}"


def test_chain_with_an_llm_expands_the_translated_query(keyword_tools, redis_client, tmp_path):
    keyword_tools.llm = StubLLM(json.dumps({"source_language": "es", "translation": ENGLISH}),
                                '{"terms": ["sales", "income"]}')
    state = run_chain(keyword_tools, redis_client, tmp_path, SPANISH)
    assert [(r.agent_id, r.status) for r in state.agent_runs] == [
        ("language_detector", "ok"), ("translator", "ok"), ("query_expander", "ok"),
    ]
    assert state.metadata["original_query"] == SPANISH and state.metadata["translated_from"] == "es"
    assert state.metadata["language"] == "es"  # what the user wrote in stays known to later agents
    # The translator told the LLM what the detector found; the expander worked on the translation.
    assert "Spanish (es)" in keyword_tools.llm.messages[0][0]["content"]
    assert keyword_tools.llm.messages[1][-1]["content"] == ENGLISH
    assert state.query == f"{ENGLISH} sales income"
    assert state.metadata["expansion_method"] == "llm"
