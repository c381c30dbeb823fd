"""What the LLM agents and the iterative loop's LLM parts do with the replies a small model gives: prose or the
prompt handed back, the question repeated, an answer instead of a query, a reply cut at its token limit, and
prompts longer than the model's context. Each bad reply takes the offline or no-op path with the reason recorded."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agentic.compress import Compressor
from agentsearch.pipeline.agentic.refine import LLMRefiner
from agentsearch.pipeline.agentic.scoring import Evaluation, LLMScorer
from agentsearch.pipeline.agentic.sufficiency import LLMGrader, OfflineGrader
from agentsearch.pipeline.agents.base import AgentContext, Document, PostSearchInput, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.intent_classifier import IntentClassifier
from agentsearch.pipeline.agents.builtin.llm_prompt import LlmPrompt
from agentsearch.pipeline.agents.builtin.query_contextualizer import QueryContextualizer
from agentsearch.pipeline.agents.builtin.query_expander import QueryExpander
from agentsearch.pipeline.agents.builtin.reranker import Reranker
from agentsearch.pipeline.agents.builtin.translator import Translator
from agentsearch.pipeline.platform.llm import LLMClient, LLMError, LLMReply, estimate_tokens, reply_json
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from tests.support import llm_fixtures

fake = llm_fixtures.fake
SPANISH = "¿Cuáles fueron los ingresos de Northwind Energy en el cuarto trimestre de 2025?"
ENGLISH = "What was Northwind Energy's revenue in the fourth quarter of 2025?"
REVENUE = [{"role": "user", "content": "What was Northwind's Q4 2025 revenue?"},
           {"role": "assistant", "content": "Q4 2025 revenue reached $412 million [1]."}]
PARAGRAPH = ("Northwind Energy reported fourth-quarter revenue of $412 million, up 18 percent from a year earlier, "
             "as new wind and solar capacity came online across its three regions. ")


class Scripted:
    """An LLM client giving scripted replies (text, or ``(text, finish_reason)``) in a context of ``context``
    tokens, counted by estimate; it keeps what it was asked."""

    default_context_tokens = 4096

    def __init__(self, *replies, context: int | None = None) -> None:
        self.replies = list(replies)
        self.context = context
        self.asked: list[dict] = []

    def context_tokens(self) -> int | None:
        return self.context

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def reply(self, messages, timeout_s=20.0, temperature=0.0, max_tokens=None, json_schema=None) -> LLMReply:
        self.asked.append({"messages": messages, "max_tokens": max_tokens, "json_schema": json_schema})
        text, finish = (self.replies.pop(0), "stop") if isinstance(self.replies[0], str) else self.replies.pop(0)
        return LLMReply(text, finish)

    def complete(self, messages, timeout_s=20.0, **kwargs) -> str:
        return self.reply(messages, timeout_s, **kwargs).text

    def complete_json(self, messages, timeout_s=20.0, **kwargs):
        return reply_json(self.reply(messages, timeout_s, **kwargs))

    def prompt_tokens(self, n: int = -1) -> int:
        return sum(estimate_tokens(m["content"]) for m in self.asked[n]["messages"])


def pre(llm, history=None, documents=None) -> AgentContext:
    tools = SimpleNamespace(llm=llm, search=lambda *a, **k: [], vocabulary=lambda c: {})
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id="c1", tools=tools,
                        conversation_history=history, retrieved_documents=documents)


def translation(text: str, source: str = "es") -> str:
    return json.dumps({"source_language": source, "translation": text})


# --- translator ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "reason"), [
    (translation("2025-01-01"), "characters"),                                  # a date for a question
    (translation("en"), "characters"),                                          # the language code, no translation
    (translation("los ingresos de Northwind Energy en el cuarto trimestre 2025"), "copies words of the query"),
    (translation("What was Northwind Energy's revenue in the fourth quarter?"), "lost the query's numbers"),
    (translation(SPANISH, source="en"), "repeats the query"),                  # echoed, claimed to be English
    (translation(SPANISH, source="es"), "repeats the query"),                  # echoed, the detector said Spanish
    (translation("Quels étaient les revenus de Northwind Energy au quatrième trimestre 2025?"), "not 'en'"),
    (('{"source_language": "es", "translation": "What was', "length"), "cut at max_tokens"),
])
def test_a_bad_translation_is_an_error_saying_why_and_the_query_stays(reply, reason):
    llm = Scripted(reply)
    with pytest.raises(LLMError, match=reason):
        Translator({"target_language": "en"}).run(PreSearchInput(query=SPANISH, metadata={"language": "es"}),
                                                  pre(llm))
    asked = llm.asked[0]
    assert asked["json_schema"]["required"] == ["source_language", "translation"] and asked["max_tokens"] > 40


def test_without_a_detector_a_query_handed_back_is_already_in_the_target_unless_it_plainly_is_not():
    same = Translator({"target_language": "en"}).run(PreSearchInput(query="Super Bowl 50 MVP"),
                                                     pre(Scripted(translation("Super Bowl 50 MVP", source="en"))))
    assert same.query == "Super Bowl 50 MVP" and same.metadata["translated_from"] is None
    with pytest.raises(LLMError, match="repeats the query, which is in 'es'"):
        Translator({"target_language": "en"}).run(PreSearchInput(query=SPANISH), pre(Scripted(translation(SPANISH))))


def test_the_detector_outweighs_the_models_claim_that_the_query_is_already_english():
    llm = Scripted(translation(ENGLISH, source="en"))
    out = Translator({"target_language": "en"}).run(PreSearchInput(query=SPANISH, metadata={"language": "es"}),
                                                    pre(llm))
    assert out.query == ENGLISH and out.metadata["translated_from"] == "es"


def test_one_failed_target_among_several_is_named_and_the_others_used():
    llm = Scripted(translation("Wie hoch war der Umsatz von Northwind Energy im vierten Quartal 2025?"),
                   translation("2025"))
    tools = SimpleNamespace(llm=llm, collection_languages=lambda cid: {"de": 50, "en": 40})
    out = Translator().run(PreSearchInput(query=SPANISH, metadata={"language": "es"}),
                           AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id="c1", tools=tools))
    assert out.metadata["translated_to"] == "de" and "characters" in out.metadata["translation_errors"]["en"]


# --- query expander, contextualizer, intent --------------------------------------------------------------------------


def test_an_expansion_of_the_querys_own_words_falls_back_to_the_offline_path():
    llm = Scripted('{"terms": ["offshore wind turbine maintenance", "wind turbine", "Maintenance"]}')
    out = QueryExpander({"synonyms": {"offshore": ["marine"]}}).run(
        PreSearchInput(query="offshore wind turbine maintenance"), pre(llm))
    assert out.metadata["expansion_terms"] == ["marine"] and "no new term" in out.metadata["expansion_warning"]
    schema = llm.asked[0]["json_schema"]["properties"]["terms"]
    assert schema["type"] == "array" and schema["maxItems"] == 10


def test_sentences_are_not_search_terms():
    llm = Scripted('{"terms": ["This query is about the upkeep of turbines at sea", "upkeep"]}')
    out = QueryExpander({"mode": "llm"}).run(PreSearchInput(query="offshore wind turbine maintenance"), pre(llm))
    assert out.metadata["expansion_terms"] == ["upkeep"] and out.metadata["expansion_method"] == "llm"


@pytest.mark.parametrize(("reply", "reason"), [
    ('{"query": "Q4 2025 revenue reached $412 million [1]."}', "reads like an earlier answer"),
    ('{"query": "and in 2024?"}', "repeats a question that refers back"),
    (('{"query": "Northwind Q4 20', "length"), "cut at max_tokens"),
])
def test_a_rewrite_that_is_no_standalone_question_falls_back_to_the_rules(reply, reason):
    out = QueryContextualizer({"mode": "auto"}).run(PreSearchInput(query="and in 2024?"), pre(Scripted(reply), REVENUE))
    assert out.query == "Northwind Q4 2024 revenue" and out.metadata["contextualization_method"] == "rules"
    assert reason in out.metadata["contextualization_warning"]


def test_the_oldest_turns_give_way_to_the_context():
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + PARAGRAPH * 3}
               for i in range(8)] + REVENUE
    llm = Scripted('{"query": "Northwind Q4 2024 revenue"}', context=700)
    out = QueryContextualizer({"mode": "llm", "max_turns": 10, "max_answer_chars": 8000}).run(
        PreSearchInput(query="and in 2024?"), pre(llm, history))
    assert out.query == "Northwind Q4 2024 revenue"
    prompt = llm.asked[0]["messages"][1]["content"]
    assert "Q4 2025 revenue reached $412 million" in prompt and "turn 2:" not in prompt  # newest kept, oldest out
    assert llm.prompt_tokens() + llm.asked[0]["max_tokens"] <= 700


def test_the_intent_prompt_shows_fewer_examples_in_a_small_context_and_the_schema_lists_the_labels():
    intents = {f"label{i}": [f"an example question number {j} for label {i}" for j in range(8)] for i in range(6)}
    llm = Scripted('{"intent": "label2", "confidence": 0.8}', context=400)
    out = IntentClassifier({"intents": intents, "mode": "llm"}).run(PreSearchInput(query="q"), pre(llm))
    assert out.metadata["intent"] == "label2"
    system = llm.asked[0]["messages"][0]["content"]
    assert "number 0 for label 5" in system and "number 7 for label 5" not in system
    assert llm.asked[0]["json_schema"]["properties"]["intent"]["enum"] == [*intents, "general"]
    assert llm.prompt_tokens() + llm.asked[0]["max_tokens"] <= 400


# --- llm_prompt ----------------------------------------------------------------------------------------------------


def test_a_cut_reply_never_becomes_the_query_and_is_marked_in_metadata():
    agent = LlmPrompt({"template": "Rewrite: {query}", "output": "both", "max_tokens": 8})
    with pytest.raises(LLMError, match="cut at max_tokens"):
        agent.run(PreSearchInput(query="q"), pre(Scripted(("solar output in", "length"))))
    out = LlmPrompt({"template": "Summarise: {query}", "max_tokens": 8}).run(
        PreSearchInput(query="q"), pre(Scripted(("A long summary that", "length"))))
    assert out.metadata == {"llm_prompt": "A long summary that", "llm_prompt_truncated": True}


def test_a_json_schema_is_sent_with_parse_json_and_must_describe_an_object(fake):
    schema = {"type": "object", "properties": {"department": {"type": "string"}}, "required": ["department"]}
    fake.script('{"department": "hr"}')
    out = LlmPrompt({"template": "{query}", "parse_json": True, "json_schema": schema, "metadata_key": "d"}).run(
        PreSearchInput(query="leave"), pre(LLMClient(fake.base_url, "fake-model")))
    assert out.metadata == {"d": {"department": "hr"}}
    assert fake.requests[0]["response_format"]["json_schema"]["schema"] == schema
    assert fake.requests[0]["max_tokens"] == 512  # the default bound of a reply
    with pytest.raises(ValidationError, match="object"):
        LlmPrompt({"template": "{query}", "parse_json": True, "json_schema": {"type": "array"}})
    with pytest.raises(ValidationError, match="needs parse_json"):
        LlmPrompt({"template": "{query}", "json_schema": schema})


def test_documents_give_way_to_the_context_and_a_template_that_cannot_fit_is_not_sent():
    documents = [Document(id=f"d{i}", title=f"Doc {i}", text=PARAGRAPH * 6) for i in range(5)]
    llm = Scripted("energy results", context=600)
    out = LlmPrompt({"template": "Sources:\n{documents}\nTopic?", "max_tokens": 32}).run(
        PreSearchInput(query="q"), pre(llm, documents=documents))
    assert out.metadata["llm_prompt"] == "energy results"
    prompt = llm.asked[0]["messages"][0]["content"]
    assert prompt.startswith("Sources:\n[1] Doc 0") and prompt.endswith("Topic?")
    assert llm.prompt_tokens() + 32 <= 600
    with pytest.raises(LLMError, match="prompt not sent"):
        LlmPrompt({"template": PARAGRAPH * 20 + "{query}", "max_tokens": 32}).run(
            PreSearchInput(query="q"), pre(Scripted(context=600)))


# --- post-search and the iterative loop ---------------------------------------------------------------------------

DOCS = [Document(id=f"d{i}", title=f"Report {i}", text=PARAGRAPH * 4, score=1 - i / 10) for i in range(6)]


def test_the_reranker_shows_the_passages_that_fit_and_ranks_the_rest_after_them():
    llm = Scripted('{"ranking": [2, 1]}', context=500)
    out = Reranker({"mode": "llm", "dense_weight": 0, "llm_passage_chars": 4000}).run(
        PostSearchInput(documents=DOCS, query="Northwind revenue"),
        AgentContext(pipeline_stage=Stage.POST_SEARCH, tools=SimpleNamespace(llm=llm)))
    summary = out.metadata["rerank"]
    assert summary["method"] == "llm" and "left out to fit a 500-token context" in summary["llm_budget"]
    shown = summary["llm_ranked"]
    assert 2 <= shown < len(DOCS) and llm.asked[0]["json_schema"]["properties"]["ranking"]["maxItems"] == shown
    assert llm.prompt_tokens() + llm.asked[0]["max_tokens"] <= 500


def test_a_grade_drops_follow_ups_that_repeat_the_query_and_the_prompts_placeholders():
    query = "Northwind revenue 2025 and 2024"
    llm = Scripted(json.dumps({"sufficient": False, "missing": ["what is still missing", "2024 figures"],
                               "follow_up_queries": [query, " ", "Northwind revenue 2024"]}))
    grade = LLMGrader(llm, OfflineGrader(KeywordAnalyzer())).grade(query, DOCS[:2])
    assert grade.method == "llm" and grade.missing == ["2024 figures"]
    assert grade.follow_up_queries == ["Northwind revenue 2024"] and grade.budget is None


def test_a_grade_cut_short_or_without_room_is_the_offline_one_with_the_reason():
    cut = LLMGrader(Scripted(('{"sufficient": true, "missing": ["', "length")), OfflineGrader(KeywordAnalyzer()))
    grade = cut.grade("Northwind revenue", DOCS[:2])
    assert grade.method == "offline" and "cut at max_tokens" in grade.error
    tiny = LLMGrader(Scripted(context=300), OfflineGrader(KeywordAnalyzer())).grade("Northwind revenue", DOCS[:2])
    assert tiny.method == "offline" and "do not fit the model's 300-token context" in tiny.error


@pytest.mark.parametrize(("reply", "reason"), [
    ("RULES:\n1. Remove terms that led to poor results\n2. Add specific terms", "prompt's instructions"),
    ("Northwind Revenue", "repeats the query"),
    (("Northwind revenue quarterly results for the regions with", "length"), "cut at max_tokens"),
    ("", "unusable"),
])
def test_a_refinement_that_is_no_new_query_keeps_the_original(reply, reason):
    discarded = [(d, Evaluation(document_id=d.id, overall=1.0, reasoning="off topic")) for d in DOCS[2:]]
    refinement = LLMRefiner(Scripted(reply)).refine("northwind revenue", "Northwind revenue", DOCS[:1], discarded)
    assert refinement.method == "unchanged" and refinement.query == "northwind revenue" and reason in refinement.error


def test_the_refinement_prompt_keeps_the_newest_discarded_results_that_fit():
    discarded = [(d.model_copy(update={"title": f"Discarded {i}"}),
                  Evaluation(document_id=d.id, overall=1.0, reasoning="off topic " + PARAGRAPH))
                 for i, d in enumerate(DOCS * 3)]
    llm = Scripted("Northwind quarterly revenue by region", context=600)
    refinement = LLMRefiner(llm).refine("Northwind revenue", "Northwind revenue", DOCS[:2], discarded)
    assert refinement.method == "llm"
    prompt = llm.asked[0]["messages"][0]["content"]
    assert "Discarded 17" in prompt and "Discarded 3 " not in prompt and "- Report 0" in prompt
    assert llm.prompt_tokens() + llm.asked[0]["max_tokens"] <= 600


def test_scoring_keeps_what_the_context_could_not_show_and_a_cut_reply_keeps_all():
    evaluation = {"id": 1, "relevance": 5, "actionability": 4, "source_quality": 4, "recency_impact": 4,
                  "reasoning": "on topic"}
    llm = Scripted(json.dumps({"evaluations": [evaluation]}), context=1200)
    scoring = LLMScorer(llm).score("Northwind revenue", DOCS[:4])
    assert scoring.method == "llm" and scoring.evaluations[0].overall == 4.25
    assert "texts cut to fit a 1200-token context" in scoring.error
    assert "3 of 4 results had no usable evaluation and were kept" in scoring.error
    assert llm.asked[0]["json_schema"]["properties"]["evaluations"]["maxItems"] == 4
    assert llm.prompt_tokens() + llm.asked[0]["max_tokens"] <= 1200
    cut = LLMScorer(Scripted(('{"evaluations": [{"id": 1, "relev', "length"))).score("q", DOCS[:2])
    assert cut.method == "keep_all" and "cut at max_tokens" in cut.error


def test_a_cut_compression_is_replaced_by_the_extractive_one():
    llm = Scripted(("- Northwind revenue: $412 million\n- Growth", "length"))
    _compressed, record = Compressor(KeywordAnalyzer(), max_chars=300, min_chars=500, llm=llm).compress(
        "Northwind revenue", DOCS[0])
    assert record.method == "extractive" and "cut at max_tokens (150)" in record.error
    assert llm.asked[0]["max_tokens"] == 150


@pytest.mark.parametrize(("question", "reply"), [
    ("and in 2024?", "What was Northwind's Q4 2025 revenue?"),       # the earlier question handed back
    ("and its profit?", "Northwind Q4 2025 revenue"),                  # the follow-up's own subject lost
])
def test_a_rewrite_that_drops_the_follow_ups_own_words_falls_back_to_the_rules(question, reply):
    out = QueryContextualizer({"mode": "auto"}).run(PreSearchInput(query=question),
                                                   pre(Scripted(json.dumps({"query": reply})), REVENUE))
    assert out.metadata["contextualization_method"] == "rules"
    assert "drops the question's own words" in out.metadata["contextualization_warning"]


def test_a_rewrite_may_spell_the_quarter_out():
    out = QueryContextualizer({"mode": "llm"}).run(
        PreSearchInput(query="what about the third quarter?"),
        pre(Scripted('{"query": "Northwind revenue in the third quarter of 2025"}'), REVENUE))
    assert out.query == "Northwind revenue in the third quarter of 2025"


def test_placeholders_figures_and_the_prompts_own_words_are_no_expansion_terms():
    llm = Scripted('{"terms": ["term", "employee_name", "2023", "JSON", "staff count", "headcount"]}')
    out = QueryExpander({"mode": "llm", "max_terms": 5}).run(PreSearchInput(query="How many employees?"), pre(llm))
    assert out.metadata["expansion_terms"] == ["staff count", "headcount"]
