"""The PDF report and the email draft mark the answer's sentences their sources do not support; each artifact is
read back with an independent reader (poppler's pdftotext, the standard library's HTML parser)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pipeline.agents.base import AgentContext, Document, ResponseAgentInput, Source, Stage
from pipeline.agents.citation_marks import marked_pieces, summary
from pipeline.agents.email_draft import EmailDraft
from pipeline.agents.pdf_report import PdfReport
from pipeline.job.answer.citations import verify_citations
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
