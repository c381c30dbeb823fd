"""The PDF report and the email draft mark the answer's sentences their sources do not support, and say how an LLM's
answer was made; each artifact is read back with an independent reader (poppler's pdftotext, the standard library's
HTML parser)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from agentsearch.pipeline.agents.base import AgentContext, Document, ResponseAgentInput, Source, Stage
from agentsearch.pipeline.agents.builtin.citation_marks import marked_pieces, model_note, shown, summary
from agentsearch.pipeline.agents.builtin.email_draft import EmailDraft
from agentsearch.pipeline.agents.builtin.pdf_report import PdfReport
from agentsearch.pipeline.documents import Citation
from agentsearch.pipeline.job.answer.citations import verify_citations
from agentsearch.pipeline.job.answer.grounding import PARTIAL_MARK
from tests.support.readers import HtmlReader

DOCS = [
    Document(id="sb50", title="Super Bowl 50", score=0.9,
             text="The Denver Broncos defeated the Carolina Panthers 24–10 to earn their third Super Bowl title. "
                  "The game was played at Levi's Stadium in Santa Clara, California."),
    Document(id="sb49", title="Super Bowl XLIX", score=0.8,
             text="The New England Patriots won Super Bowl XLIX. The game was played in Glendale, Arizona."),
]
SUPPORTED = "The Denver Broncos defeated the Carolina Panthers 24–10 [1]."
CONTRADICTED = "The Patriots won Super Bowl XLIX in Houston, Texas in 2017 [1]."
PARTIAL = "The New England Patriots won Super Bowl XLIX after a snowstorm delayed the kickoff [2]."
ANSWER = f"{SUPPORTED} {CONTRADICTED}\n\n{PARTIAL}"
CTX = AgentContext(pipeline_stage=Stage.RESPONSE, query="Who won?")


def make_input(answer: str = ANSWER) -> ResponseAgentInput:
    return ResponseAgentInput(answer=answer, query="Who won the Super Bowls?", documents=DOCS,
                              sources=[Source(document_id=d.id, title=d.title, score=d.score) for d in DOCS],
                              citations=verify_citations(answer, DOCS).citations)


def test_the_verdicts_behind_the_marks():
    inp = make_input()
    assert [c.status for c in inp.citations] == ["supported", "unsupported", "partial"]
    pieces = marked_pieces(inp.answer, inp.citations)
    assert "".join(p for p, _ in pieces) == inp.answer
    marked = [(p, m.status, m.sources) for p, m in pieces if m is not None]
    assert marked == [(CONTRADICTED, "unsupported", (1,)), (PARTIAL, "partial", (2,))]
    assert summary(inp.citations) == ("Citation check: 1 of 3 cited sentences supported by their sources; 1 only "
                                      "partly supported, 1 not supported (marked).")


def test_the_email_marks_unsupported_and_partial_sentences():
    html = EmailDraft().run(make_input(), CTX).data.decode()
    marks: list[tuple[dict, str]] = []

    class Marks(HtmlReader):
        inside: dict | None = None

        def handle_starttag(self, tag, attrs):
            super().handle_starttag(tag, attrs)
            if tag == "mark":
                self.inside = dict(attrs)
                marks.append((self.inside, ""))

        def handle_endtag(self, tag):
            if tag == "mark":
                self.inside = None

        def handle_data(self, data):
            super().handle_data(data)
            if self.inside is not None:
                marks[-1] = (marks[-1][0], marks[-1][1] + data)

    reader = Marks()
    reader.feed(html)
    assert [(a["class"], text) for a, text in marks] == [("citation-unsupported", CONTRADICTED),
                                                          ("citation-partial", PARTIAL)]
    text = "".join(reader.text)
    assert f"{CONTRADICTED} [not supported by source 1]" in text
    assert f"{PARTIAL} [only partly supported by source 2]" in text
    assert f"{SUPPORTED} {CONTRADICTED}" in text  # the supported sentence is not marked
    assert "1 not supported (marked)" in text


def test_an_answer_its_sources_support_is_not_marked():
    html = EmailDraft().run(make_input(SUPPORTED), CTX).data.decode()
    reader = HtmlReader()
    reader.feed(html)
    assert "mark" not in reader.tags and "not supported" not in "".join(reader.text)
    assert "Citation check: 1 of 1 cited sentences supported by their sources." in "".join(reader.text)


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils missing (make services)")
def test_the_pdf_report_marks_unsupported_and_partial_sentences(tmp_path):
    artifact = PdfReport().run(make_input(), CTX)
    path = tmp_path / "report.pdf"
    path.write_bytes(artifact.data)
    text = " ".join(subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                                   check=True).stdout.split())
    assert f"{CONTRADICTED} [not supported by source 1]" in text
    assert f"{PARTIAL} [only partly supported by source 2]" in text
    assert f"{SUPPORTED} {CONTRADICTED}" in text
    assert "Citation check: 1 of 3 cited sentences supported by their sources" in text


# An answer an LLM wrote, as the answer step delivers it (agentsearch.pipeline.job.answer.grounding): one supported
# sentence, one partly supported (carrying the text mark), one left out, then a quote of the offline answer.
LLM_SUPPORTED = "The Denver Broncos defeated the Carolina Panthers 24–10 [1]."
LLM_PARTIAL = f"The New England Patriots won Super Bowl XLIX after a snowstorm delayed the kickoff [2] {PARTIAL_MARK}."
LLM_QUOTE = "The game was played at Levi's Stadium in Santa Clara, California [1]."
LLM_ANSWER = f"{LLM_SUPPORTED} {LLM_PARTIAL} {LLM_QUOTE}"
LLM_METADATA = {"answer": {
    "method": "llm", "fallback_reason": None, "draft": {"model": "smollm2-135m-instruct", "format": "json"},
    "sentences": [
        {"text": "The Denver Broncos defeated the Carolina Panthers 24–10.", "status": "supported", "cited": [1],
         "sources": [1], "reason": None, "delivered": True},
        {"text": "The New England Patriots won Super Bowl XLIX after a snowstorm delayed the kickoff.",
         "status": "partial", "cited": [2], "sources": [2], "reason": "the source does not say: snowstorm, kickoff",
         "delivered": True},
        {"text": "The Broncos scored 369 points in 318 minutes.", "status": "unsupported", "cited": [1], "sources": [],
         "reason": "no source holds 318, 369", "delivered": False},
    ],
    "llm_sentences": {"supported": 1, "partial": 1, "unsupported": 1}, "rule": "llm sentences supported + extractive "
    "quotes", "quotes_added": 1}}
LLM_NOTE = ("Written by the model (smollm2-135m-instruct): 1 of 3 sentences supported by the sources, 1 only partly; "
            "1 left out; 1 quote from the sources added.")
FALLBACK_METADATA = {"answer": {
    "method": "extractive", "llm_sentences": {"supported": 0, "partial": 0, "unsupported": 2},
    "fallback_reason": "no sentence of the LLM's answer is supported by the sources (2 unsupported, 0 partly "
                       "supported)",
    "sentences": [{"text": "Northwind made 900 turbines.", "status": "unsupported", "cited": [1], "sources": [],
                   "reason": "no source holds 900", "delivered": False}] * 2}}
FALLBACK_NOTE = ("The model's answer was not used: no sentence of the LLM's answer is supported by the sources "
                 "(2 unsupported, 0 partly supported).")


def llm_input(answer: str = LLM_ANSWER, metadata: dict = LLM_METADATA) -> ResponseAgentInput:
    def checked(sentence: str, source: int, status: str, reason: str | None = None) -> Citation:
        return Citation(sentence=sentence, source=source, document_id=DOCS[source - 1].id, status=status,
                        score={"supported": 0.9, "partial": 0.5}.get(status, 0.0), reason=reason,
                        span=None if status == "unsupported" else (0, 10))

    citations = [checked(LLM_SUPPORTED, 1, "supported"),
                 checked(LLM_PARTIAL, 2, "partial", "the source does not say: snowstorm, kickoff"),
                 checked(LLM_QUOTE, 1, "supported")]
    return make_input(answer).model_copy(update={"citations": citations, "metadata": metadata})


def test_the_note_on_how_the_model_answered():
    assert model_note(LLM_METADATA["answer"]) == LLM_NOTE
    assert model_note(FALLBACK_METADATA["answer"]) == FALLBACK_NOTE
    every = {**LLM_METADATA["answer"], "model": "m", "quotes_added": 0,
             "sentences": [{**s, "status": "supported", "delivered": True}
                           for s in LLM_METADATA["answer"]["sentences"]]}
    assert model_note(every) == "Written by the model (m): 3 of 3 sentences supported by the sources."
    failed = {"method": "extractive", "fallback_reason": "LLMError: the endpoint answered 503.", "degraded": True}
    assert model_note(failed) == "The model's answer was not used: LLMError: the endpoint answered 503."
    # No model asked: nothing to say (the offline default, an answer without documents, a job before this record).
    assert model_note({"method": "extractive", "fallback_reason": None}) is None
    assert model_note({"method": "extractive", "fallback_reason": "no documents to answer from"}) is None
    assert model_note({"method": "llm", "fallback_reason": None}) is None
    assert model_note(None) is None and model_note({}) is None


def test_a_partly_supported_sentence_is_said_so_once_beside_its_mark():
    inp = llm_input()
    pieces = marked_pieces(inp.answer, inp.citations)
    assert "".join(p for p, _ in pieces) == inp.answer
    [(piece, mark)] = [(p, m) for p, m in pieces if m is not None]
    assert piece == LLM_PARTIAL and mark.label == "only partly supported by source 2"
    assert shown(piece, mark) == LLM_PARTIAL.replace(f" {PARTIAL_MARK}", "")
    assert shown(piece, None) == piece  # an unmarked piece is printed as the answer has it


def test_the_email_says_how_the_model_answered_and_marks_a_partial_sentence_once():
    reader = HtmlReader()
    reader.feed(EmailDraft().run(llm_input(), CTX).data.decode())
    text = "".join(reader.text)
    partial = LLM_PARTIAL.replace(f" {PARTIAL_MARK}", "")
    assert f"{partial} [only partly supported by source 2]" in text
    answer = text.split("Citation check")[0]
    assert PARTIAL_MARK not in answer and answer.count("partly supported") == 1  # said once, by the mark
    assert f"{LLM_SUPPORTED} {partial}" in text and LLM_QUOTE in text
    assert ("Citation check: 2 of 3 cited sentences supported by their sources; 1 only partly supported "
            "(marked).") in text
    assert LLM_NOTE in text
    reader = HtmlReader()
    reader.feed(EmailDraft().run(make_input(SUPPORTED).model_copy(update={"metadata": FALLBACK_METADATA}),
                                 CTX).data.decode())
    assert FALLBACK_NOTE in "".join(reader.text)


def test_the_email_of_an_answer_no_model_wrote_has_no_note():
    reader = HtmlReader()
    reader.feed(EmailDraft().run(make_input(SUPPORTED).model_copy(
        update={"metadata": {"answer": {"method": "extractive", "fallback_reason": None}}}), CTX).data.decode())
    text = "".join(reader.text)
    assert "model" not in text and "Citation check: 1 of 1" in text


def test_a_note_holding_markup_is_text_in_the_email():
    answer = {**FALLBACK_METADATA["answer"], "fallback_reason": "LLMError: <script>alert(1)</script> & more"}
    html = EmailDraft().run(make_input(SUPPORTED).model_copy(update={"metadata": {"answer": answer}}),
                            CTX).data.decode()
    reader = HtmlReader()
    reader.feed(html)
    assert "script" not in reader.tags
    assert "The model's answer was not used: LLMError: <script>alert(1)</script> & more." in "".join(reader.text)


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils missing (make services)")
def test_the_pdf_report_says_how_the_model_answered_and_marks_a_partial_sentence_once(tmp_path):
    def read(inp: ResponseAgentInput) -> str:
        path = tmp_path / "report.pdf"
        path.write_bytes(PdfReport().run(inp, CTX).data)
        return " ".join(subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                                       check=True).stdout.split())

    text = read(llm_input())
    partial = LLM_PARTIAL.replace(f" {PARTIAL_MARK}", "")
    assert f"{partial} [only partly supported by source 2]" in text
    answer = text.split("Citation check")[0]
    assert PARTIAL_MARK not in answer and answer.count("partly supported") == 1  # said once, by the mark
    assert LLM_NOTE in text
    assert FALLBACK_NOTE in read(make_input(SUPPORTED).model_copy(update={"metadata": FALLBACK_METADATA}))
    assert "model" not in read(make_input(SUPPORTED))
