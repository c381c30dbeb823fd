"""The pdf report, each file read back with poppler's pdftotext and pdfinfo."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agentsearch.pipeline.agents.builtin.pdf_report import PdfReport
from tests.unit.agents.response_fakes import ANSWER, CTX, QUERY, flat, make_input

needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils missing (make services)")


def pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout


def pdf_pages(path: Path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M)[1])


@needs_poppler
def test_pdf_holds_answer_reasoning_sources_and_page_numbers(tmp_path):
    inp = make_input()
    artifact = PdfReport().run(inp, CTX)
    assert artifact.content_type == "application/pdf" and artifact.data.startswith(b"%PDF-")
    path = tmp_path / artifact.filename
    path.write_bytes(artifact.data)
    raw = pdf_text(path)
    text = flat(raw)
    assert text.startswith(QUERY)
    assert flat(ANSWER) in text  # with its [n] markers
    assert "Reasoning" in text and flat(inp.cot_steps[1].thought) in text
    for n, source in enumerate(inp.sources, start=1):
        assert re.search(rf"\[{n}\]\s+{re.escape(source.title)}\s+{source.document_id}\s+{source.score:.3f}", text)
    assert pdf_pages(path) == artifact.metadata["pages"] == 1
    assert "Page 1 of 1" in raw


@needs_poppler
def test_pdf_counts_its_pages_truthfully_on_a_long_answer(tmp_path):
    long_answer = " ".join(
        f"Paragraph sentence {i}: Northwind Energy reported revenue figures for its wind, solar and storage "
        f"business lines that analysts compared across quarters [{i % 3 + 1}]." for i in range(150)
    )
    artifact = PdfReport({"page_size": "letter"}).run(make_input(long_answer), CTX)
    path = tmp_path / "long.pdf"
    path.write_bytes(artifact.data)
    pages = pdf_pages(path)
    assert pages >= 2
    assert artifact.metadata["pages"] == pages
    text = pdf_text(path)
    assert f"Page {pages} of {pages}" in text and f"Page 1 of {pages}" in text
    assert "Paragraph sentence 149:" in text  # the answer's end made it onto the last pages
    assert "letter" in subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True).stdout


@needs_poppler
def test_pdf_escapes_markup_in_title_and_sources(tmp_path):
    inp = make_input(cot_steps=None)
    inp.sources[1].title = "Results <b>bold</b> & <script>x</script>"
    artifact = PdfReport({"title": "Revenue <Q4> & outlook", "include_cot": False}).run(inp, CTX)
    path = tmp_path / "r.pdf"
    path.write_bytes(artifact.data)
    text = flat(pdf_text(path))
    assert text.startswith("Revenue <Q4> & outlook")
    assert f"Question: {QUERY}" in text
    assert "Results <b>bold</b> & <script>x</script>" in text
    assert "Reasoning" not in text and artifact.metadata["cot_steps"] == 0


@needs_poppler
def test_pdf_sources_say_where_in_their_file_each_passage_stands(tmp_path):
    inp = make_input()
    inp.sources[0].title, inp.sources[1].title = "Q4 report", "Q4 figures"  # short: one line of a table cell each
    # From the source the answer step made; from the retrieved chunk's metadata; none for a document sent as text.
    inp.sources[0].location = {"page": 3}
    inp.documents[1].metadata = {**inp.documents[1].metadata, "location": {"sheet": "Q4", "rows": [7, 12]}}
    artifact = PdfReport().run(inp, CTX)
    path = tmp_path / "located.pdf"
    path.write_bytes(artifact.data)
    text = flat(pdf_text(path))
    first, second, third = inp.sources
    assert re.search(rf"\[1\]\s+{re.escape(first.title)}, p\. 3\s+{first.document_id}", text)
    assert re.search(rf"\[2\]\s+{re.escape(second.title)}, Q4, rows 7–12\s+{second.document_id}", text)
    assert re.search(rf"\[3\]\s+{re.escape(third.title)}\s+{third.document_id}", text)  # nothing added
