"""AgentRegistry: entry-point discovery, extra modules, lookups, config validation at build time, id clashes, and the
built-in agents each registered under its stage."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import (
    Agent,
    AgentConfig,
    AgentContext,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    Stage,
)
from agentsearch.pipeline.agents.builtin.audio_summary import AudioSummary
from agentsearch.pipeline.agents.builtin.chart_generator import ChartGenerator
from agentsearch.pipeline.agents.builtin.pdf_report import PdfReport
from agentsearch.pipeline.agents.builtin.pptx_generator import PptxGenerator
from agentsearch.pipeline.agents.registry import AgentRegistry, UnknownAgent

SAMPLE = "agentsearch_test_agents"
CLASH = "agentsearch_test_agents_clash"

BUILT_INS = {
    "language_detector": Stage.PRE_SEARCH,
    "acronym_resolver": Stage.PRE_SEARCH,
    "deduplicator": Stage.POST_SEARCH,
    "executive_summary": Stage.RESPONSE,
    "email_draft": Stage.RESPONSE,
}


@pytest.fixture(scope="module")
def registry() -> AgentRegistry:
    return AgentRegistry.discover()


def test_entry_points_find_the_five_built_in_agents_with_their_stages(registry):
    # Other built-ins may be added over time; these five must be there, each at its own stage.
    found = {cls.agent_id: cls.stage for cls in registry}
    assert {agent_id: found.get(agent_id) for agent_id in BUILT_INS} == BUILT_INS
    assert len(registry) == len(found) >= 5


@pytest.mark.parametrize("agent_id", sorted(BUILT_INS))
def test_built_in_agents_resolve_to_their_own_module_and_class(registry, agent_id):
    cls = registry.get(agent_id)
    assert issubclass(cls, Agent)
    assert cls.agent_id == agent_id
    assert cls.__module__ == f"agentsearch.pipeline.agents.builtin.{agent_id}"
    assert agent_id in registry
    # Every built-in works with its default config.
    assert isinstance(registry.build(agent_id).config, cls.Config)


def test_response_agents_are_not_cached_but_the_built_in_search_agents_are(registry):
    # Artifacts are stored by reference; caching their bytes would defeat that.
    assert all(not c.cacheable for c in registry if c.stage == Stage.RESPONSE)
    assert all(registry.get(a).cacheable for a, stage in BUILT_INS.items() if stage != Stage.RESPONSE)


def test_extra_module_registers_its_agent_classes_besides_the_built_ins(registry):
    extended = AgentRegistry.discover(extra_modules=[SAMPLE])
    found = {cls.agent_id: cls.stage for cls in extended}
    assert found == {
        **{cls.agent_id: cls.stage for cls in registry},
        "year_scoper": Stage.PRE_SEARCH,
        "top_trimmer": Stage.POST_SEARCH,
        "plain_text_answer": Stage.RESPONSE,
    }
    assert extended.get("year_scoper").__module__ == SAMPLE
    # The imported built-in is still the entry-point class, and bases / helpers were not registered.
    assert extended.get("language_detector").__module__ == "agentsearch.pipeline.agents.builtin.language_detector"
    assert "CitationFormatter" not in {cls.__name__ for cls in extended}


def test_agent_from_an_extra_module_is_built_with_its_validated_config():
    registry = AgentRegistry.discover(extra_modules=[SAMPLE])
    agent = registry.build("year_scoper", {"year": 2024})
    assert agent.config.year == 2024
    out = agent.run(PreSearchInput(query="solar revenue"), AgentContext(pipeline_stage=Stage.PRE_SEARCH))
    assert out.query == "solar revenue 2024"


def test_extra_module_that_does_not_exist_raises_import_error():
    with pytest.raises(ModuleNotFoundError):
        AgentRegistry.discover(extra_modules=["agentsearch_no_such_module_here"])


def test_unknown_agent_id_raises_unknown_agent(registry):
    with pytest.raises(UnknownAgent) as info:
        registry.get("sentiment_analyzer")
    assert info.value.agent_id == "sentiment_analyzer"
    assert "sentiment_analyzer" in str(info.value)
    with pytest.raises(UnknownAgent):
        registry.build("sentiment_analyzer", {})
    assert "sentiment_analyzer" not in registry


def test_unknown_agent_is_a_key_error_for_callers_that_treat_it_as_a_missing_key(registry):
    with pytest.raises(KeyError):
        registry.get("sentiment_analyzer")


@pytest.mark.parametrize(
    ("agent_id", "config", "field"),
    [
        ("deduplicator", {"threshold": 5}, "threshold"),
        ("deduplicator", {"threshold": 0}, "threshold"),
        ("language_detector", {"min_confidence": -0.1}, "min_confidence"),
        ("executive_summary", {"max_words": 5}, "max_words"),
        ("email_draft", {"filename": "../../etc/passwd"}, "filename"),
        ("acronym_resolver", {"acronyms": {"PPA": "   "}}, "acronyms"),
        # A typo in a key is refused rather than ignored.
        ("deduplicator", {"treshold": 0.7}, "treshold"),
    ],
)
def test_bad_config_raises_validation_error_at_build_time(registry, agent_id, config, field):
    with pytest.raises(ValidationError) as info:
        registry.build(agent_id, config)
    assert field in {str(part) for err in info.value.errors() for part in err["loc"]}


def test_good_config_is_applied_at_build_time(registry):
    agent = registry.build("deduplicator", {"threshold": 0.8, "shingle_size": 2})
    assert (agent.config.threshold, agent.config.shingle_size) == (0.8, 2)
    # Unspecified keys take the defaults of the Config model.
    assert registry.build("deduplicator", {"threshold": 0.8}).config.shingle_size == 3


def test_two_classes_claiming_one_id_raise():
    class SpanishOnly(PreSearchAgent):
        agent_id = "language_detector"

        def run(self, inp, ctx):
            return PreSearchOutput(query=inp.query, metadata={"language": "es"})

    registry = AgentRegistry.discover()
    with pytest.raises(ValueError, match="language_detector"):
        registry.register(SpanishOnly)
    # The original stays registered.
    assert registry.get("language_detector").__name__ == "LanguageDetector"


def test_a_module_claiming_a_built_in_id_makes_discovery_fail():
    with pytest.raises(ValueError, match="language_detector"):
        AgentRegistry.discover(extra_modules=[CLASH])


def test_registering_the_same_class_twice_is_harmless():
    class Shouter(PreSearchAgent):
        agent_id = "shouter"

        class Config(AgentConfig):
            exclaim: bool = False

    registry = AgentRegistry([Shouter])
    registry.register(Shouter)
    assert len(registry) == 1
    assert registry.get("shouter") is Shouter


@pytest.mark.parametrize("not_an_agent", [dict, PreSearchAgent, "language_detector"])
def test_register_refuses_what_is_not_an_agent_class_with_an_id(not_an_agent):
    # PreSearchAgent is an Agent subclass but has no agent_id.
    with pytest.raises(TypeError):
        AgentRegistry().register(not_an_agent)


# The four pre-search agents that came after the first five: translator, query_expander, intent_classifier and
# spell_checker.
def test_the_four_new_agents_are_registered_with_their_stage():
    registry = AgentRegistry.discover()
    for agent_id in ("translator", "query_expander", "intent_classifier", "spell_checker"):
        cls = registry.get(agent_id)
        assert cls.stage == Stage.PRE_SEARCH and cls.__module__ == f"agentsearch.pipeline.agents.builtin.{agent_id}"
        assert isinstance(registry.build(agent_id).config, cls.Config)  # each works with its default config


# The four rendering response agents, none of them cached: their artifacts are stored once by reference.
def test_the_four_agents_are_registered_by_entry_point():
    registry = AgentRegistry.discover()
    for cls in (PptxGenerator, PdfReport, ChartGenerator, AudioSummary):
        assert registry.get(cls.agent_id) is cls
        assert cls.stage == Stage.RESPONSE and not cls.cacheable
