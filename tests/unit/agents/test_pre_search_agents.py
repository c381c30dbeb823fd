"""The pre-search agents of the catalogue on real text: spell_checker, acronym_resolver (mined definitions),
intent_classifier, query_expander, translator, and the detector -> translator -> expander chain.

Agents get a small in-memory toolbox (``FakeTools``) with the same methods as ``pipeline.agents.toolbox.AgentTools``:
BM25 keyword search over the sample corpus plus two documents of its own, the collection vocabulary, acronyms mined with
the project's miner, embeddings from the real MiniLM model (loaded once for the module), and an optional LLM. The
LLM variants talk HTTP to a local OpenAI-compatible server (``tests.support.fake_llm``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.agents.base import AgentContext, AgentSkipped, Document, PreSearchInput, Stage
from pipeline.agents.builtin.acronym_resolver import AcronymResolver
from pipeline.agents.builtin.intent_classifier import IntentClassifier
from pipeline.agents.builtin.query_expander import QueryExpander
from pipeline.agents.builtin.spell_checker import SpellChecker
from pipeline.agents.builtin.translator import Translator
from pipeline.agents.records import AgentSpec
from pipeline.agents.registry import AgentRegistry
from pipeline.agents.runner import AgentRunner
from pipeline.job.stages import pre_search_step
from pipeline.job.state import JobState
from pipeline.platform.llm import LLMClient, LLMReply, reply_json
from pipeline.platform.settings import Settings
from pipeline.retrieval.analyzer import KeywordAnalyzer
from pipeline.text import words
from pipeline.text.acronyms import mine_acronyms
from tests.support.fake_llm import FakeLLM

REPO = Path(__file__).resolve().parents[3]
SAMPLE = [json.loads(line) for line in (REPO / "examples" / "sample_corpus.jsonl").read_text().splitlines() if line]
HYDROGEN = {
    "id": "nw-hydrogen-pilot",
    "title": "Northwind Hydrogen Pilot at Harrow Ridge",
    "text": (
        "Northwind Energy will install a 20 MW electrolyser next to the Harrow Ridge solar farm. The electrolyser "
        "splits water into hydrogen with surplus midday solar power that would otherwise be curtailed. Construction "
        "starts in the fourth quarter (Q4) of 2025, and the first hydrogen is expected in the second half of 2026. "
        "The hydrogen will be sold to a fertiliser plant 12 kilometres away under a ten-year offtake contract."
    ),
}
CORPUS = [*SAMPLE, HYDROGEN]
COLLECTION = "3f1c1f8e-4a53-4c4b-9a57-2d1b3a5c0e01"
ANALYZER = KeywordAnalyzer("english")


class FakeTools:
    """``AgentTools`` over an in-memory list of documents; records what the agents asked for."""

    def __init__(self, documents: list[dict], embedder=None, llm=None) -> None:
        self.documents = documents
        self.texts = [f"{d['title']}. {d['text']}" for d in documents]
        self._terms = [ANALYZER.terms(t) for t in self.texts]
        self._df = Counter(t for terms in self._terms for t in set(terms))
        self._avg_len = sum(map(len, self._terms)) / len(self._terms)
        self.embedder = embedder
        self.llm = llm
        self.calls: list[tuple] = []

    def for_user(self, user_id: str | None) -> FakeTools:
        # The runner binds the toolbox to the job's user; these documents are everyone's.
        return self

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        self.calls.append(("search", collection_id, query, top_k, strategy))
        n, found = len(self.documents), []
        for doc, terms in zip(self.documents, self._terms):
            tf, score = Counter(terms), 0.0
            for term in ANALYZER.terms(query):
                if tf[term]:
                    idf = math.log(1 + (n - self._df[term] + 0.5) / (self._df[term] + 0.5))
                    score += idf * tf[term] * 2.2 / (tf[term] + 1.2 * (0.25 + 0.75 * len(terms) / self._avg_len))
            if score > 0:
                found.append(Document(id=doc["id"], title=doc["title"], text=doc["text"], score=score))
        return sorted(found, key=lambda d: d.score, reverse=True)[:top_k]

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(("embed", len(texts)))
        return self.embedder.embed(texts)

    def vocabulary(self, collection_id: str) -> dict[str, int]:
        self.calls.append(("vocabulary", collection_id))
        return dict(Counter(w for t in self.texts for w in words(t)))

    def acronyms(self, collection_id: str) -> dict[str, str]:
        self.calls.append(("acronyms", collection_id))
        return mine_acronyms(self.texts)


class StubLLM:
    """The smallest LLM client: ``reply`` / ``complete`` / ``complete_json`` give scripted replies and keep the
    messages they got (a context of unknown size: prompts are budgeted by estimate)."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.messages: list[list[dict]] = []

    def reply(self, messages, timeout_s=20.0, **kwargs) -> LLMReply:
        self.messages.append(messages)
        return LLMReply(self.replies.pop(0), "stop")

    def complete(self, messages, timeout_s=20.0, **kwargs) -> str:
        return self.reply(messages, timeout_s).text

    def complete_json(self, messages, timeout_s=20.0, **kwargs):
        return reply_json(self.reply(messages, timeout_s))


def ctx_with(tools) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id=COLLECTION, tools=tools)


def inp(query: str, **metadata) -> PreSearchInput:
    return PreSearchInput(query=query, collection_id=COLLECTION, metadata=metadata)


PLAIN = AgentContext(pipeline_stage=Stage.PRE_SEARCH)


@pytest.fixture(scope="module")
def embedder():
    from pipeline.retrieval.embedder import Embedder

    return Embedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def embedding_tools(embedder) -> FakeTools:
    """One toolbox for the read-only embedding tests, so the example centroids are computed once for them."""
    return FakeTools(CORPUS, embedder)


@pytest.fixture
def tools() -> FakeTools:
    return FakeTools(CORPUS)


@pytest.fixture
def fake_llm():
    with FakeLLM(model="fake") as server:
        yield server


def test_the_four_new_agents_are_registered_with_their_stage():
    registry = AgentRegistry.discover()
    for agent_id in ("translator", "query_expander", "intent_classifier", "spell_checker"):
        cls = registry.get(agent_id)
        assert cls.stage == Stage.PRE_SEARCH and cls.__module__ == f"pipeline.agents.builtin.{agent_id}"
        assert isinstance(registry.build(agent_id).config, cls.Config)  # each works with its default config


# --- spell_checker --------------------------------------------------------------------------------------------


def test_spell_checker_corrects_misspelt_words():
    out = SpellChecker().run(inp("reveune projecions"), PLAIN)
    assert out.query == "revenue projections"
    assert out.metadata["corrections"] == {"reveune": "revenue", "projecions": "projections"}


def test_spell_checker_keeps_domain_terms_found_only_in_the_collection(tools):
    query = "Northwind electrolyser reveune projecions"
    out = SpellChecker().run(inp(query), ctx_with(tools))
    assert out.query == "Northwind electrolyser revenue projections"
    assert set(out.metadata["corrections"]) == {"reveune", "projecions"}
    # Without the collection's vocabulary the same words would be "corrected" to English ones.
    blind = SpellChecker({"use_collection_vocabulary": False}).run(inp(query), ctx_with(tools))
    assert {"Northwind", "electrolyser"} <= set(blind.metadata["corrections"])
    assert "Northwind" not in blind.query and "electrolyser" not in blind.query


def test_spell_checker_corrects_towards_the_collections_spelling(tools):
    out = SpellChecker().run(inp("Nortwind hydrogen electrolyzer output"), ctx_with(tools))
    assert out.query == "Northwind hydrogen electrolyser output"
    assert out.metadata["corrections"] == {"Nortwind": "Northwind", "electrolyzer": "electrolyser"}


def test_spell_checker_builds_the_collections_dictionary_only_for_a_word_to_correct(tools, monkeypatch):
    from pipeline.agents.builtin import spell_checker

    built, real = [], spell_checker.domain_dictionary

    def counting(key, vocabulary):
        built.append(key)
        return real(key, vocabulary)

    monkeypatch.setattr(spell_checker, "domain_dictionary", counting)
    out = SpellChecker().run(inp("Northwind electrolyser revenue"), ctx_with(tools))  # every word known
    assert out.metadata["corrections"] == {} and built == []
    out = SpellChecker().run(inp("Nortwind electrolyser revenue"), ctx_with(tools))
    assert out.metadata["corrections"] == {"Nortwind": "Northwind"} and len(built) == 1


def test_spell_checker_leaves_numbers_acronyms_and_words_with_digits_alone(tools):
    out = SpellChecker().run(inp("EBITDA TWh Q4 2025 H2O 3.5GW reveune"), ctx_with(tools))
    assert out.query == "EBITDA TWh Q4 2025 H2O 3.5GW revenue"
    assert out.metadata["corrections"] == {"reveune": "revenue"}


def test_spell_checker_keeps_case_punctuation_and_configured_words():
    out = SpellChecker({"keep": ["projecions"]}).run(inp("Reveune, projecions?"), PLAIN)
    assert out.query == "Revenue, projecions?"
    assert out.metadata["corrections"] == {"Reveune": "Revenue"}


def test_spell_checker_skips_queries_in_a_language_it_has_no_dictionary_for():
    with pytest.raises(AgentSkipped, match="'es'"):
        SpellChecker().run(inp("ingresos del cuarto trimestre", language="es"), PLAIN)
    # After a translation into English the checker runs again.
    out = SpellChecker().run(inp("fourth quarter reveune", language="es", translated_to="en"), PLAIN)
    assert out.query == "fourth quarter revenue"


def test_spell_checker_loads_the_english_dictionary_once_per_process():
    SpellChecker().warm_up()
    assert SpellChecker().english.get() is SpellChecker({"max_edit_distance": 1}).english.get()
    assert SpellChecker.english.get().words["revenue"] > 1_000_000


@pytest.mark.parametrize("config",
                         [{"max_edit_distance": 3}, {"min_word_length": 1}, {"languages": []}, {"lang": "en"}])
def test_spell_checker_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        SpellChecker(config)


# --- acronym_resolver with mined definitions ------------------------------------------------------------------


def test_acronym_resolver_expands_q4_with_the_definition_mined_from_the_corpus(tools):
    out = AcronymResolver().run(inp("Electrolyser construction start in Q4"), ctx_with(tools))
    assert out.query == "Electrolyser construction start in Q4 (fourth quarter)"
    assert out.metadata["acronyms_resolved"] == {"Q4": "fourth quarter"}
    assert out.metadata["acronym_sources"] == {"Q4": "mined"}
    assert ("acronyms", COLLECTION) in tools.calls


def test_acronym_resolver_uses_definitions_of_the_sample_corpus(tools):
    out = AcronymResolver().run(inp("typical LCOE of a PPA"), ctx_with(tools))
    assert out.query == "typical LCOE (levelized cost of energy) of a PPA (power purchase agreement)"


def test_acronym_resolver_config_wins_over_mined_definitions(tools):
    agent = AcronymResolver({"acronyms": {"Q4": "October to December"}})
    out = agent.run(inp("PPA signed in Q4"), ctx_with(tools))
    assert out.query == "PPA (power purchase agreement) signed in Q4 (October to December)"
    assert out.metadata["acronym_sources"] == {"PPA": "mined", "Q4": "config"}


def test_acronym_resolver_does_not_repeat_an_expansion_the_query_spells_out(tools):
    out = AcronymResolver().run(inp("power purchase agreement (PPA) terms in Q4"), ctx_with(tools))
    assert out.query == "power purchase agreement (PPA) terms in Q4 (fourth quarter)"


def test_acronym_resolver_skips_only_when_both_sources_are_empty(tools):
    with pytest.raises(AgentSkipped, match="no acronyms configured or mined"):
        AcronymResolver({"use_mined": False}).run(inp("Q4 revenue"), ctx_with(tools))
    with pytest.raises(AgentSkipped):
        tools = FakeTools([{"id": "x", "title": "t", "text": "No definitions."}])
        AcronymResolver().run(inp("Q4 revenue"), ctx_with(tools))


def test_acronym_resolver_keeps_working_when_mining_fails():
    class Broken(FakeTools):
        def acronyms(self, collection_id):
            raise ConnectionError("database unavailable")

    out = AcronymResolver({"acronyms": {"Q4": "fourth quarter"}}).run(inp("Q4 results"), ctx_with(Broken(CORPUS)))
    assert out.query == "Q4 (fourth quarter) results"
    assert "database unavailable" in out.metadata["acronym_mining_error"]


# --- intent_classifier ----------------------------------------------------------------------------------------

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


# --- query_expander -------------------------------------------------------------------------------------------


def test_query_expander_adds_terms_from_the_top_documents_of_a_keyword_pass(tools):
    query = "offshore foundations"
    out = QueryExpander({"mode": "offline", "max_terms": 4, "feedback_docs": 3}).run(inp(query), ctx_with(tools))
    terms = out.metadata["expansion_terms"]
    assert len(terms) == 4 and {"monopiles", "floating"} & set(terms)
    assert out.query == f"{query} {' '.join(terms)}"
    assert ("search", COLLECTION, query, 3, "keyword") in tools.calls
    feedback = [d for d in CORPUS if d["id"] in out.metadata["feedback_documents"]]
    assert feedback and feedback[0]["id"] == "offshore-wind-foundations"
    for term in terms:  # every term comes from the feedback documents, none is a query word
        assert any(term in words(f"{d['title']} {d['text']}") for d in feedback)
        assert term not in words(query)
    assert set(out.metadata["expansion_sources"].values()) == {"feedback"}


def test_query_expander_does_not_add_the_query_terms_again_in_another_form(tools):
    out = QueryExpander({"mode": "offline", "max_terms": 10}).run(inp("turbine maintenance"), ctx_with(tools))
    terms = out.metadata["expansion_terms"]
    assert terms
    assert not {"turbine", "turbines", "maintenance", "maintain"} & set(terms)
    assert len({ANALYZER.terms(t)[0] for t in terms}) == len(terms)  # one form per stem


def test_query_expander_prefers_terms_rare_in_the_collection(tools):
    out = QueryExpander({"mode": "offline", "max_terms": 5}).run(inp("safety injuries"), ctx_with(tools))
    terms = out.metadata["expansion_terms"]
    assert terms[0] == "recordable"  # "total recordable injury rate": rare in the collection, in every feedback doc
    # "northwind" and "energy" are in every feedback document too, but everywhere else as well.
    feedback = [d for d in CORPUS if d["id"] in out.metadata["feedback_documents"]]
    assert all({"northwind", "energy"} <= set(words(f"{d['title']} {d['text']}")) for d in feedback)
    assert not {"northwind", "energy"} & set(terms)
    # A stricter lift keeps only the terms that stand out most.
    strict = QueryExpander({"mode": "offline", "max_terms": 5, "min_lift": 5}).run(inp("safety injuries"),
                                                                                 ctx_with(tools))
    assert "recordable" in strict.metadata["expansion_terms"] and "company" not in strict.metadata["expansion_terms"]
    assert "company" in terms


def test_query_expander_adds_configured_synonyms():
    agent = QueryExpander({"synonyms": {"revenue": ["sales", "turnover"], "parental leave": ["maternity leave"],
                                        "EBITDA": ["operating profit"]}})
    out = agent.run(inp("Revenue and parental leave at Northwind"), PLAIN)
    assert out.query == "Revenue and parental leave at Northwind sales turnover maternity leave"
    assert out.metadata["expansion_terms"] == ["sales", "turnover", "maternity leave"]
    assert out.metadata["expansion_sources"] == {"sales": "synonym", "turnover": "synonym",
                                                 "maternity leave": "synonym"}
    # Whole words only: "leave" alone does not trigger "parental leave", "revenues" does not trigger "revenue".
    assert agent.run(inp("annual leave and revenues"), PLAIN).metadata["expansion_terms"] == []


def test_query_expander_synonyms_come_on_top_of_feedback_terms(tools):
    agent = QueryExpander({"mode": "offline", "max_terms": 2, "synonyms": {"battery": ["energy storage system"]}})
    out = agent.run(inp("Kestrel Point battery"), ctx_with(tools))
    sources = out.metadata["expansion_sources"]
    assert next(iter(sources.items())) == ("energy storage system", "synonym")
    assert list(sources.values()).count("feedback") == 2


def test_query_expander_skips_without_synonyms_or_a_collection():
    with pytest.raises(AgentSkipped, match="no synonyms"):
        QueryExpander().run(PreSearchInput(query="solar output"), PLAIN)


def test_query_expander_llm_variant(fake_llm, tools):
    fake_llm.script('```json\n{"terms": ["sales", "Revenue", "turnover", "Income Statement"]}\n```')
    tools.llm = LLMClient(base_url=fake_llm.base_url, model="fake")
    out = QueryExpander({"mode": "llm", "max_terms": 3}).run(inp("revenue 2025"), ctx_with(tools))
    assert out.query == "revenue 2025 sales turnover Income Statement"  # "Revenue" is the query's own word
    assert out.metadata["expansion_method"] == "llm"
    request = fake_llm.requests[0]
    assert request["model"] == "fake" and request["messages"][-1]["content"] == "revenue 2025"
    assert "up to 3" in request["messages"][0]["content"]
    assert not [c for c in tools.calls if c[0] == "search"]  # no feedback pass when the LLM answered


def test_query_expander_auto_falls_back_to_feedback_when_the_llm_fails(fake_llm, tools):
    fake_llm.script("I cannot help with that.")
    tools.llm = LLMClient(base_url=fake_llm.base_url, model="fake")
    out = QueryExpander({"max_terms": 3}).run(inp("offshore foundations"), ctx_with(tools))
    assert out.metadata["expansion_method"] == "pseudo_relevance" and len(out.metadata["expansion_terms"]) == 3
    assert "not JSON" in out.metadata["expansion_warning"]
    with pytest.raises(AgentSkipped, match="no LLM"):
        QueryExpander({"mode": "llm"}).run(inp("offshore foundations"), ctx_with(FakeTools(CORPUS)))


@pytest.mark.parametrize(
    "config", [{"max_terms": 0}, {"feedback_docs": 0}, {"mode": "magic"}, {"synonyms": {"revenue": []}},
               {"synonyms": {" ": ["sales"]}}, {"terms": 3}]
)
def test_query_expander_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        QueryExpander(config)


# --- translator -----------------------------------------------------------------------------------------------

SPANISH = "¿Cuáles fueron los ingresos de Northwind Energy en el cuarto trimestre de 2025?"
ENGLISH = "What was Northwind Energy's revenue in the fourth quarter of 2025?"


def test_translator_skips_without_an_llm(tools):
    with pytest.raises(AgentSkipped, match="no LLM endpoint configured"):
        Translator().run(inp(SPANISH, language="es"), ctx_with(tools))
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


def test_chain_without_an_llm_skips_the_translator_and_still_expands(tools, redis_client, tmp_path):
    state = run_chain(tools, redis_client, tmp_path, SPANISH)
    assert [(r.agent_id, r.status) for r in state.agent_runs] == [
        ("language_detector", "ok"), ("translator", "skipped"), ("query_expander", "ok"),
    ]
    assert "no LLM endpoint configured" in state.agent_runs[1].errors[0]
    assert state.metadata["language"] == "es"
    assert len(state.metadata["expansion_terms"]) == 3
    assert state.query == f"{SPANISH} {' '.join(state.metadata['expansion_terms'])}"


def test_chain_with_an_llm_expands_the_translated_query(tools, redis_client, tmp_path):
    tools.llm = StubLLM(json.dumps({"source_language": "es", "translation": ENGLISH}), '{"terms": ["sales", "income"]}')
    state = run_chain(tools, redis_client, tmp_path, SPANISH)
    assert [(r.agent_id, r.status) for r in state.agent_runs] == [
        ("language_detector", "ok"), ("translator", "ok"), ("query_expander", "ok"),
    ]
    assert state.metadata["original_query"] == SPANISH and state.metadata["translated_from"] == "es"
    assert state.metadata["language"] == "es"  # what the user wrote in stays known to later agents
    # The translator told the LLM what the detector found; the expander worked on the translation.
    assert "Spanish (es)" in tools.llm.messages[0][0]["content"]
    assert tools.llm.messages[1][-1]["content"] == ENGLISH
    assert state.query == f"{ENGLISH} sales income"
    assert state.metadata["expansion_method"] == "llm"
