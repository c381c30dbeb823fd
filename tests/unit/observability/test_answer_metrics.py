"""The answers' quality per collection, counted from the records real answer steps write: who wrote the delivered
text, the LLM's sentences by verdict, and why an LLM answer fell back to the offline one."""

from __future__ import annotations

import fakeredis

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.answer import generate_answer
from agentsearch.pipeline.observability.metrics import AnswerOutcome, MetricsRecorder
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM
from tests.support.metric_samples import exposed, scrape, value

fake, llm = llm_fixtures.fake, llm_fixtures.llm
QUESTION = "How much did revenue grow in the third quarter?"
DOCUMENTS = [
    Document(id="report", title="Q3 report", score=0.9,
             text="Revenue grew 12 percent to 4.2 million euros in the third quarter. Costs stayed flat."),
    Document(id="plan", title="Q4 plan", score=0.5,
             text="The team plans to hire three engineers in the fourth quarter."),
]


def test_an_llm_answer_counts_its_sentences_by_verdict(fake, llm):
    fake.script("Revenue grew 12 percent to 4.2 million euros in the third quarter [1]. "
                "Revenue tripled because of a merger [1].")
    answer = generate_answer(QUESTION, DOCUMENTS, llm=llm, timeout_s=10, judge_timeout_s=5)
    outcome = AnswerOutcome.of(answer.metadata())
    assert outcome.method == "llm" and outcome.fallback is None
    assert outcome.verdicts["supported"] >= 1 and outcome.verdicts["unsupported"] >= 1
    assert sum(outcome.verdicts.values()) == 2


def test_each_fallback_has_its_reason(fake, llm):
    offline = AnswerOutcome.of(generate_answer(QUESTION, DOCUMENTS).metadata())
    assert (offline.method, offline.verdicts, offline.fallback) == ("offline", {}, None)  # no LLM was asked

    fake.script(FakeLLM.error(401, "invalid key"))
    failed = AnswerOutcome.of(generate_answer(QUESTION, DOCUMENTS, llm=llm, timeout_s=10).metadata())
    assert (failed.method, failed.fallback) == ("offline", "llm_error")

    fake.script(FakeLLM.delay(3, "Revenue grew [1]."))
    cut = AnswerOutcome.of(generate_answer(QUESTION, DOCUMENTS, llm=llm, timeout_s=0.5).metadata())
    assert (cut.method, cut.fallback) == ("offline", "budget")

    fake.script("The moon is made of cheese [2].")
    unsupported = AnswerOutcome.of(generate_answer(QUESTION, DOCUMENTS, llm=llm, timeout_s=10,
                                                   judge_timeout_s=5).metadata())
    assert (unsupported.method, unsupported.fallback) == ("offline", "unsupported")
    assert unsupported.verdicts["unsupported"] == 1

    nothing = AnswerOutcome.of(generate_answer(QUESTION, [], llm=llm, timeout_s=10).metadata())
    assert (nothing.method, nothing.fallback) == ("offline", "no_documents")


def test_the_counts_are_exposed_per_collection():
    store = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    recorder = MetricsRecorder(store)
    llm_answer = {"method": "llm", "llm_sentences": {"supported": 2, "partial": 1, "unsupported": 1}}
    cut = {"method": "extractive", "fallback_reason": "the LLM's reply was cut", "degraded": True,
           "llm_cut": {"setting": "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S", "budget_s": 60}}
    recorder.record_answer("c1", llm_answer)
    recorder.record_answer("c1", llm_answer)
    recorder.record_answer("c2", cut)
    samples = scrape(store)
    assert value(samples, "agentsearch_answers_total", collection="c1", method="llm") == 2
    assert value(samples, "agentsearch_answers_total", collection="c2", method="offline") == 1
    assert value(samples, "agentsearch_answer_sentences_total", collection="c1", verdict="supported") == 4
    assert value(samples, "agentsearch_answer_sentences_total", collection="c1", verdict="unsupported") == 2
    assert not exposed(samples, "agentsearch_answer_sentences_total", collection="c2", verdict="supported")
    assert value(samples, "agentsearch_answer_fallbacks_total", collection="c2", reason="budget") == 1
    assert not exposed(samples, "agentsearch_answer_fallbacks_total", collection="c1", reason="budget")
