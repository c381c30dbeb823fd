"""Grounded answers: each sentence an LLM wrote judged against the sources, and the rule that picks the delivered
answer (src/agentsearch/pipeline/job/answer/grounding.py)."""

from __future__ import annotations

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.answer import PARTIAL_MARK, extractive_answer
from agentsearch.pipeline.job.answer.delivery import deliver
from agentsearch.pipeline.job.answer.grounding import LLMSentence, judge_sentences, lower_by_judge, names_in, unstated

DOCS = [
    Document(id="q4", title="Northwind Q4 2025", score=0.9,
             text="Northwind Energy reported results on January 20. Q4 2025 revenue reached $412 million, up 18% "
                  "from $349 million a year earlier. The wind division grew fastest."),
    Document(id="hires", title="Northwind hiring", score=0.7,
             text="Northwind Energy hired 120 engineers in 2025. Most of them joined the wind division in Aarhus."),
]
QUESTION = "What was Northwind Energy's revenue in Q4 2025?"


def judge(*sentences: LLMSentence):
    verdicts, _ = judge_sentences(list(sentences), DOCS)
    return verdicts


def test_an_invented_figure_is_unsupported_and_the_offline_answer_is_delivered():
    invented = LLMSentence("Northwind Energy's revenue in Q4 2025 was $369 million, up 16% from $318 million.", [1])
    [verdict] = judge(invented)
    assert verdict.status == "unsupported" and verdict.sources == []
    assert "369" in verdict.reason and "318" in verdict.reason
    offline = extractive_answer(QUESTION, DOCS)
    answer = deliver([verdict], offline, DOCS)
    assert answer.method == "extractive" and answer.text == offline.text
    assert "no sentence of the LLM's answer is supported" in answer.fallback_reason
    assert "$412 million" in answer.text and "369" not in answer.text
    assert answer.info["sentences"] == [verdict.as_dict(delivered=False)]


def test_a_name_no_source_holds_makes_a_sentence_unsupported():
    [verdict] = judge(LLMSentence("The revenue of Contoso Energy reached $412 million in Q4 2025.", [1]))
    assert verdict.status == "unsupported" and "Contoso" in verdict.reason
    assert names_in("Revenue at Northwind rose in Q4 and COVID-19 ended.") == ["Northwind", "Q4", "COVID"]
    assert unstated("Northwind hired 120 engineers in Aarhus.", DOCS) == []
    assert unstated("Northwind hired 130 engineers in Oslo.", DOCS) == ["130", "Oslo"]
    assert unstated("The engineers joined Northwind's wind division in Aarhus.", DOCS) == []  # "Northwind" is held


def test_an_uncited_or_wrongly_cited_sentence_is_cited_where_it_is_said():
    uncited, wrong = judge(LLMSentence("Northwind Energy hired 120 engineers in 2025.", []),
                           LLMSentence("Q4 2025 revenue reached $412 million.", [2]))
    assert uncited.status == "supported" and uncited.sources == [2]
    assert "the model gave no source" in uncited.reason
    assert wrong.status == "supported" and wrong.sources == [1]
    assert wrong.reason == "cited [2], said by [1]"
    span = wrong.citations[0].span
    assert "$412 million" in DOCS[0].text[span[0]:span[1]]


def test_the_models_answer_is_kept_and_a_quote_it_says_in_its_own_words_is_not_added():
    verdicts = judge(LLMSentence("Northwind's Q4 2025 revenue was $412 million.", [1]),
                     LLMSentence("Northwind made 900 turbines.", [1]))
    assert [v.status for v in verdicts] == ["supported", "unsupported"]
    offline = extractive_answer(QUESTION, DOCS)
    assert "Q4 2025 revenue reached $412 million" in offline.text
    answer = deliver(verdicts, offline, DOCS, query=QUESTION)
    assert answer.method == "llm" and answer.fallback_reason is None
    assert answer.text.startswith("Northwind's Q4 2025 revenue was $412 million [1].")
    assert "900" not in answer.text
    # The offline quote of the sentence the model restated is covered: the revenue is said once.
    assert answer.text.count("412") == 1 and "reached $412 million" not in answer.text
    assert answer.info["quotes_covered"] >= 1
    assert [s["delivered"] for s in answer.info["sentences"]] == [True, False]
    statuses = {c.sentence: c.status for c in answer.citations}
    assert statuses["Northwind's Q4 2025 revenue was $412 million [1]."] == "supported"
    assert all(s == "supported" for s in statuses.values())


def test_a_quote_the_model_repeats_word_for_word_is_not_given_twice():
    offline = extractive_answer(QUESTION, DOCS, max_sentences=1)
    [quote] = offline.text.split(" [")[:1]
    verdicts = judge(LLMSentence(quote + ".", [1]))
    answer = deliver(verdicts, offline, DOCS)
    assert answer.text.count(quote) == 1 and answer.info["quotes_added"] == 0


def test_a_partly_supported_sentence_is_delivered_with_its_mark():
    verdicts = judge(LLMSentence("Northwind Energy hired 120 engineers in 2025.", [2]),
                     LLMSentence("The wind division grew fastest because of offshore demand.", [1]))
    assert [v.status for v in verdicts] == ["supported", "partial"]
    answer = deliver(verdicts, extractive_answer(QUESTION, DOCS), DOCS)
    assert f"because of offshore demand [1] {PARTIAL_MARK}." in answer.text
    assert any(c.status == "partial" and PARTIAL_MARK in c.sentence for c in answer.citations)


def test_only_partly_supported_sentences_are_not_enough_to_replace_the_offline_answer():
    verdicts = judge(LLMSentence("The wind division grew fastest because of offshore demand.", [1]))
    offline = extractive_answer(QUESTION, DOCS)
    answer = deliver(verdicts, offline, DOCS)
    assert answer.method == "extractive" and "1 partly supported" in answer.fallback_reason


def test_the_llm_judge_can_lower_a_verdict_but_never_raise_one():
    supported, unsupported = judge(LLMSentence("Northwind Energy hired 120 engineers in 2025.", [2]),
                                   LLMSentence("Northwind made 900 turbines.", [1]))
    lowered = lower_by_judge([supported, unsupported], {0: ("partial", None), 1: ("supported", None)})
    assert lowered == 1
    assert supported.status == "partial" and supported.citations[0].status == "partial"
    assert unsupported.status == "unsupported"


def test_a_fragment_is_not_supported_by_a_source_that_holds_its_words():
    number, name, sentence = judge(LLMSentence("120.", [2]), LLMSentence("Northwind Energy.", [1]),
                                   LLMSentence("Northwind Energy hired 120 engineers.", [2]))
    assert number.status == name.status == "unsupported" and "fragment" in number.reason
    assert sentence.status == "supported"
    [chinese] = judge(LLMSentence("诺斯温德能源公司在2025年雇用了工程师。", []))
    assert "fragment" not in (chinese.reason or "")


def test_a_title_the_model_copies_from_a_source_is_no_sentence_in_any_script():
    from agentsearch.pipeline.ingestion.chunking import chunk_text

    cases = [("الموافقات على تقارير النفقات", "تحتاج تقارير النفقات التي تزيد على ألفي يورو إلى توقيع المدير المالي."),
             ("ผลประกอบการไตรมาส 3", "บริษัทจะจ้างวิศวกร 40 คนสำหรับทีมกังหันในไตรมาสที่สี่"),
             ("3. Approvals for travel claims", "Expense reports above 2,000 euros need the director's signature.")]
    for heading, body in cases:
        docs = [Document(id="policy", title="Policy", score=0.9, text="\n\n".join(chunk_text(f"{heading}\n\n{body}")))]
        title, sentence = judge_sentences([LLMSentence(heading, [1]), LLMSentence(body, [1])], docs)[0]
        assert title.status == "unsupported" and title.reason.startswith("a title of the source"), heading
        assert sentence.status == "supported", body
