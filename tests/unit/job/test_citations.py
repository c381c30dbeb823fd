"""Verified citations: answer sentences checked against the sources they cite, offline and through an LLM.

The offline cases are hand-made sentences over real-looking passages: supported (verbatim and restated), partly
supported, contradicted by a number, and about something else. Spans are read back from the source's own text.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.job.answer.citations import cited_sentences, fully_supported, numbers_in, verify_citations
from agentsearch.pipeline.job.assembly import assemble_response
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from agentsearch.pipeline.text import whole_sentences
from agentsearch.pipeline.text.spans import find_loose, sentence_spans
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM

SB50 = ("Super Bowl 50 was an American football game to determine the champion of the National Football League "
        "for the 2015 season.  The American Football Conference champion Denver Broncos defeated the National "
        "Football Conference champion Carolina Panthers 24–10 to earn their third Super Bowl title.\nThe game "
        "was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at Santa Clara, "
        "California.")
NW = ("Northwind Energy reported Q4 2025 revenue of $412 million, up 18% from Q4 2024. The company did not "
      "expand its offshore wind fleet in 2025. Maintenance costs fell by 7% after the new turbine contracts.")
DOCS = [Document(id="sb50", title="Super Bowl 50", text=SB50, score=0.9),
        Document(id="nw-q4", title="Northwind Q4", text=NW, score=0.8)]


def check(sentence: str, n: int = 1, **kwargs) -> Citation:
    citations = verify_citations(sentence, DOCS, **kwargs).citations
    assert len(citations) == 1, citations
    return citations[0]


def spanned(c: Citation) -> str:
    assert c.span is not None
    return DOCS[c.source - 1].text[c.span[0]:c.span[1]]


# --- sentences and spans -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [SB50, NW, "  John C. Messenger wrote it.\n\n It sold. Dr. Who came!  Yes? ok",
                                  "No end mark at all", ""])
def test_sentence_spans_are_whole_sentences_with_offsets_into_the_text(text):
    spans = sentence_spans(text)
    assert [s.text for s in spans] == whole_sentences(text)
    for s in spans:
        assert " ".join(text[s.start:s.end].split()) == " ".join(s.text.split())


def test_find_loose_ignores_case_and_spacing_and_maps_back():
    start, end = find_loose(SB50, "denver broncos DEFEATED the national football\nconference")
    assert SB50[start:end] == "Denver Broncos defeated the National Football Conference"
    assert find_loose(SB50, "Denver Broncos lost") is None
    assert find_loose(SB50, "   ") is None


def test_cited_sentences_take_markers_after_the_full_stop_ranges_and_drop_unknown_sources():
    answer = "The Broncos won 24–10 [1]. It was in Santa Clara. [1][2] Revenue rose [1-2]. Nothing [7]. Plain."
    claims = cited_sentences(answer, 2)
    assert [(c.text, c.sources) for c in claims] == [
        ("The Broncos won 24–10.", [1]), ("It was in Santa Clara.", [1, 2]), ("Revenue rose.", [1, 2])]
    assert claims[1].sentence == "It was in Santa Clara. [1][2]"


def test_quoted_sentences_of_scripts_without_capitals_are_claims_of_their_own_and_supported():
    # After "।" or a Thai sentence no capital letter follows: the citation and its full stop end the sentence.
    hindi = [Document(id="a", title="a", text="किले का पुनर्निर्माण 1964 में किया गया था। यह नदी पर है।", score=1.0),
             Document(id="b", title="b", text="पैंथर्स ने 308 अंक दिए।", score=0.9)]
    answer = "किले का पुनर्निर्माण 1964 में किया गया था। [1]. पैंथर्स ने 308 अंक दिए। [2]."
    claims = cited_sentences(answer, 2)
    assert [c.sources for c in claims] == [[1], [2]]
    check = verify_citations(answer, hindi)
    assert [(c.source, c.status) for c in check.citations] == [(1, "supported"), (2, "supported")]
    start, end = check.citations[0].span
    assert hindi[0].text[start:end] == "किले का पुनर्निर्माण 1964 में किया गया था।"


def test_numbers_are_normalised():
    assert numbers_in("$1,000 and 3.5% in 2016, four times, 24–10") == {"1000", "3.5", "2016", "4", "24", "10"}
    assert numbers_in("Q4 revenue") == set()


# --- offline verdicts ----------------------------------------------------------------------------------------------

def test_a_quoted_sentence_is_supported_with_its_exact_span():
    c = check("The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at "
              "Santa Clara, California [1].")
    assert c.status == "supported" and c.score == 1.0 and c.document_id == "sb50"
    assert spanned(c).startswith("The game was played on February 7, 2016") and spanned(c).endswith("California.")


def test_a_restated_sentence_is_supported_by_the_sentence_that_says_it():
    c = check("The Denver Broncos earned their third Super Bowl title, defeating the Carolina Panthers 24–10 [1].")
    assert c.status == "supported", c
    assert "Denver Broncos defeated" in spanned(c) and "Levi's" not in spanned(c)
    assert c.score >= 0.8


def test_a_sentence_joining_two_source_sentences_gets_a_span_over_both():
    c = check("The Broncos defeated the Panthers 24–10 in the game played at Levi's Stadium in Santa Clara [1].")
    assert c.status == "supported", c
    assert spanned(c).startswith("The American Football Conference") and spanned(c).endswith("California.")


def test_a_sentence_that_adds_claims_the_source_lacks_is_partly_supported():
    c = check("The Denver Broncos defeated the Carolina Panthers after a snowstorm delayed the kickoff [1].")
    assert c.status == "partial", c
    assert "Denver Broncos" in spanned(c) and c.reason


def test_a_number_the_source_lacks_makes_a_sentence_partial():
    c = check("Maintenance costs fell by 7% after the 12 new turbine contracts [2].")
    assert c.source == 2 and c.status == "partial", c
    assert "12" in c.reason and spanned(c).startswith("Maintenance costs fell")


def test_a_contradicted_number_is_unsupported_and_says_what_the_source_states():
    c = check("The Denver Broncos defeated the Carolina Panthers 31–10 to earn their third Super Bowl title [1].")
    assert c.status == "unsupported" and c.span is None and c.score == 0.0
    assert "24" in c.reason and "31" in c.reason
    c = check("Northwind Energy reported Q4 2025 revenue of $512 million [2].")
    assert c.status == "unsupported" and "412" in c.reason


def test_a_negation_the_other_way_round_is_at_most_partial():
    c = check("The company expanded its offshore wind fleet in 2025 [2].")
    assert c.status == "partial" and "negation" in c.reason
    assert spanned(c) == "The company did not expand its offshore wind fleet in 2025."


def test_a_sentence_about_something_else_is_unsupported_without_a_span():
    c = check("Cheese fondue is a Swiss dish of melted cheese served in a communal pot [1].")
    assert c.status == "unsupported" and c.span is None and c.reason == "no span of the source says it"


def test_the_wrong_source_is_unsupported_while_the_right_one_supports():
    citations = verify_citations("The Denver Broncos defeated the Carolina Panthers 24–10 [1][2].", DOCS).citations
    assert [(c.source, c.status) for c in citations] == [(1, "supported"), (2, "unsupported")]
    assert fully_supported(citations)  # one of its sources supports the sentence


def test_embedding_cosine_decides_a_restatement_between_partial_and_supported():
    sentence = "The Denver Broncos beat Carolina 24–10 for a third championship [1]."

    def embed_with(cosine: float):
        def embed(texts):
            # The claim and the Broncos sentence at the given cosine; every other text orthogonal to both.
            out = []
            for t in texts:
                if t.startswith("The Denver Broncos beat"):
                    out.append([1.0, 0.0, 0.0])
                elif "Denver Broncos defeated" in t:
                    out.append([cosine, (1 - cosine ** 2) ** 0.5, 0.0])
                else:
                    out.append([0.0, 0.0, 1.0])
            return out
        return embed

    lexical = check(sentence)
    close = check(sentence, embed=embed_with(0.92))
    far = check(sentence, embed=embed_with(0.1))
    assert close.status == "supported" and "Denver Broncos defeated" in spanned(close)
    assert far.status != "supported"
    assert close.score > far.score
    # Without vectors, the restatement is anchored by its number and names, which the span states in place.
    assert lexical.status == "supported"
    assert check("The Denver Broncos beat Carolina 24–17 for a third championship [1].").status == "unsupported"


def test_the_check_reports_counts_and_is_cheap():
    answer = ("The Denver Broncos defeated the Carolina Panthers 24–10 [1]. Revenue was $512 million in Q4 2025 "
              "[2]. Maintenance costs fell after new turbine contracts and a record storm [2].")
    verify_citations(answer, DOCS)  # the analyzer loaded once
    # The check's own CPU time: what a busy machine adds while the thread waits for a core is not its cost.
    started = time.thread_time()
    result = verify_citations(answer, DOCS)
    elapsed_ms = (time.thread_time() - started) * 1000
    assert result.info["method"] == "offline" and result.info["sentences"] == 3
    assert (result.info["supported"], result.info["partial"], result.info["unsupported"]) == (1, 1, 1)
    assert result.info["all_supported"] is False
    assert elapsed_ms < 50, elapsed_ms


def test_an_answer_without_citations_has_none_to_check():
    result = verify_citations("The sources do not say.", DOCS)
    assert result.citations == [] and result.info["all_supported"] is False


# --- the LLM route -------------------------------------------------------------------------------------------------

fake, llm = llm_fixtures.fake, llm_fixtures.llm


ANSWER = ("The Broncos beat the Panthers to win their third title [1]. The game was in Santa Clara [1]. "
          "Revenue was $512 million [2].")


def test_one_entailment_call_judges_every_pair_and_its_quotes_become_spans(fake, llm):
    def judge(claim, source_text):
        if claim.startswith("The Broncos"):
            return "supported", "Denver Broncos defeated the National Football Conference champion Carolina Panthers"
        if "Santa Clara" in claim:
            return "partial", "at Santa Clara, California"
        return "supported", "Northwind Energy reported Q4 2025 revenue"

    fake.script(FakeLLM.entailment(judge))
    result = verify_citations(ANSWER, DOCS, llm=llm)
    assert len(fake.requests) == 1
    system, user = fake.requests[0]["messages"]
    assert '"verdicts"' in system["content"] and "1. (cites [1]) The Broncos beat the Panthers" in user["content"]
    assert result.info["method"] == "llm" and result.info["llm_verdicts"] == 3
    first, second, third = result.citations
    assert first.status == "supported" and spanned(first).startswith("Denver Broncos defeated")
    assert second.status == "partial" and spanned(second) == "at Santa Clara, California"
    # The model called the wrong number supported: a contradicted number stays unsupported.
    assert third.status == "unsupported" and "412" in third.reason
    assert result.info["contradicted_kept"] == 1


def test_a_quote_not_in_the_source_keeps_the_offline_span(fake, llm):
    fake.script(FakeLLM.entailment(lambda claim, text: ("supported", "words the source never wrote")))
    c = verify_citations("The Denver Broncos defeated the Carolina Panthers 24–10 [1].", DOCS, llm=llm).citations[0]
    assert c.status == "supported" and "Denver Broncos defeated" in spanned(c)
    assert "quote is not in the source" in c.reason


def test_pairs_the_reply_leaves_out_keep_their_offline_verdict(fake, llm):
    fake.script(json.dumps({"verdicts": [{"claim": 1, "source": 1, "status": "unsupported", "quote": ""},
                                         {"claim": 9, "source": 1, "status": "supported", "quote": "x"},
                                         {"claim": 2, "source": 2, "status": "supported", "quote": "x"}]}))
    result = verify_citations(ANSWER, DOCS, llm=llm)
    assert [c.status for c in result.citations] == ["unsupported", "supported", "unsupported"]
    assert result.citations[0].reason.startswith("entailment")
    assert result.info["llm_verdicts"] == 1 and result.info["llm_missing"] == 2


@pytest.mark.parametrize("reply", ["not json at all", json.dumps({"verdicts": []}), json.dumps({"claims": 1}),
                                   json.dumps({"verdicts": [{"claim": 1, "source": 1, "status": "maybe"}]}),
                                   FakeLLM.error(400, "bad request")])
def test_an_unusable_reply_falls_back_to_the_offline_check(fake, llm, reply):
    fake.script(reply)
    result = verify_citations(ANSWER, DOCS, llm=llm)
    assert result.info["method"] == "offline" and "LLMError" in result.info["fallback_reason"]
    assert result.citations == verify_citations(ANSWER, DOCS).citations


# --- in the job ----------------------------------------------------------------------------------------------------

def job_state(**kwargs) -> JobState:
    return JobState(job_id=str(uuid.uuid4()), collection_id="c1", query="Who won Super Bowl 50?", documents=DOCS,
                    **kwargs)


def test_the_answer_step_checks_the_extractive_answer_without_the_llm(fake, llm):
    fake.script(FakeLLM.error(400, "no model"))  # the answer's LLM call fails; the check never asks it
    out = answer_step(job_state(), llm=llm)
    assert out.metadata["answer"]["method"] == "extractive" and len(fake.requests) == 1
    assert out.citations and all(c.status == "supported" and c.score == 1.0 for c in out.citations)
    assert out.metadata["citations"]["all_supported"] is True
    for c in out.citations:  # each span is the quoted sentence in its source
        text = c.sentence.replace(f" [{c.source}]", "")
        assert " ".join(DOCS[c.source - 1].text[c.span[0]:c.span[1]].split()) == text
    response = assemble_response(out, [])
    assert response["citations"] == [c.model_dump(mode="json") for c in out.citations]
    assert isinstance(response["citations"][0]["span"], list)


def test_the_answer_step_judges_an_llm_answer_before_delivering_it(fake, llm):
    fake.script(json.dumps({"answer": "The Broncos defeated the Panthers 31–10 [1]. The game was in Santa Clara [1]."}),
                FakeLLM.entailment(lambda claim, text: ("supported", "Santa Clara, California")))
    out = answer_step(job_state(), llm=llm)
    assert out.metadata["answer"]["method"] == "llm" and len(fake.requests) == 2
    sentences = out.metadata["answer"]["sentences"]
    assert [(s["status"], s["delivered"]) for s in sentences] == [("unsupported", False), ("supported", True)]
    assert "31" in sentences[0]["reason"]
    assert out.answer.startswith("The game was in Santa Clara [1].") and "31–10" not in out.answer
    assert all(c.status == "supported" for c in out.citations)
    assert out.metadata["citations"]["method"] == "llm"
    assert out.metadata["citations"]["all_supported"] is True


# --- the evaluation's citation figures -----------------------------------------------------------------------------

def test_the_tally_counts_supported_answers_gold_spans_and_caught_probes():
    from agentsearch.pipeline.eval.citation_scores import CitationTally, probe_texts

    out = answer_step(job_state())
    probes = probe_texts(out.answer, DOCS)
    # Each sentence of source 1 cited to source 2 instead, and its first number changed.
    cited_to_1 = out.answer.count("[1]")
    assert cited_to_1 >= 2 and probes["recited"].count("[2]") == cited_to_1 and "[1]" not in probes["recited"]
    assert "Super Bowl 51" in probes["number"] and "25–10" in probes["number"]
    tally = CitationTally()
    record = tally.add(out, ["Denver Broncos"], hit="Denver Broncos" in out.answer)
    tally.add(out, ["a span nobody wrote"], hit=False, probe=False)
    report = tally.report()
    assert record["all_supported"] is True and record["gold_in_verified_span"] is True
    assert report["fully_supported_rate"] == 1.0 and report["answers"] == 2
    assert report["gold_in_verified_span_rate"] == 0.5 and report["gold_in_verified_span_of_hits"] == 1.0
    # Every altered citation is caught: cited to a source that does not say it, or with a changed number.
    assert report["probes"]["recited"]["caught_rate"] == 1.0 and report["probes"]["number"]["caught_rate"] == 1.0


def test_a_number_is_matched_in_its_place_not_anywhere_in_the_span():
    source = Document(id="td", title="", score=1.0, text=(
        "He is the oldest quarterback to play in a Super Bowl at age 39. The past record was held by John Elway, "
        "who won Super Bowl XXXIII at age 38. Then Anderson scored on a 2-yard touchdown run with 3:08 left."))
    # The same "3" stands elsewhere (3:08), and "39" in the sentence before: both are other places.
    for claim, says in [("Then Anderson scored on a 3-yard touchdown run with 3:08 left [1].", "2"),
                        ("The past record was held by John Elway, who won Super Bowl XXXIII at age 39 [1].", "38")]:
        c = verify_citations(claim, [source]).citations[0]
        assert c.status == "unsupported" and c.reason.startswith(f"the source states {says} where"), (claim, c)


def test_the_answer_and_its_check_together_stay_below_the_answer_steps_celery_limit():
    from agentsearch.pipeline.job.answer import ANSWER_LLM_TIMEOUT_S
    from agentsearch.pipeline.job.answer.citations import CITATION_LLM_TIMEOUT_S
    from agentsearch.worker.job_tasks import STEP_LIMIT_S

    assert ANSWER_LLM_TIMEOUT_S + CITATION_LLM_TIMEOUT_S < STEP_LIMIT_S
