"""A PDF is read within limits on pages, CPU time and memory (``agentsearch.pipeline.parsing.read_file``, the real child
process), and refused by name past them.

The slow file is the shape that costs PDFium most for its size: form XObjects nested four deep, each drawing the next
ten times, the last one 3,000 empty save/restore pairs, so one page of 3 KB runs 30 M operators (about 3 CPU s). The
tests set their limits low and assert what is refused and what is read, never how long it took.
"""

from __future__ import annotations

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from agentsearch.pipeline.parsing import ParseLimits, ParseRefused, read_file
from agentsearch.pipeline.platform.settings import Settings
from tests.support.pdfs import page_text, pdf_file


def nested_forms_pdf(path, depth: int = 4, fan: int = 10, leaf_operators: int = 3000):
    """One page of a line of text and forms nested ``depth`` deep, each drawing the next ``fan`` times."""
    c = canvas.Canvas(str(path), pageCompression=1)
    c.beginForm("F0")
    for _ in range(leaf_operators):
        c.saveState()
        c.restoreState()
    c.endForm()
    for level in range(1, depth):
        c.beginForm(f"F{level}")
        for _ in range(fan):
            c.doForm(f"F{level - 1}")
        c.endForm()
    c.drawString(72, 720, "A page of little text.")
    for _ in range(fan):
        c.doForm(f"F{depth - 1}")
    c.showPage()
    c.save()
    return path


def test_a_pdf_slower_to_read_than_the_limit_is_refused(tmp_path):
    slow = nested_forms_pdf(tmp_path / "slow.pdf")
    assert slow.stat().st_size < 8 * 1024

    with pytest.raises(ParseRefused) as refused:
        read_file(slow, "pdf", ParseLimits(time_s=1))
    assert str(refused.value) == "reading the file took longer than 1 s"


def test_a_pdf_with_more_pages_than_the_limit_is_refused_and_one_at_the_limit_is_read(tmp_path):
    long = tmp_path / "long.pdf"
    long.write_bytes(pdf_file([page_text(f"Page {n} of four.") for n in range(1, 5)]))
    with pytest.raises(ParseRefused) as refused:
        read_file(long, "pdf", ParseLimits(max_pages=3))
    assert str(refused.value) == "the PDF has more than 3 pages"

    short = tmp_path / "short.pdf"
    short.write_bytes(pdf_file([page_text(f"Page {n} of three.") for n in range(1, 4)]))
    parsed = read_file(short, "pdf", ParseLimits(max_pages=3))
    # A page whose only line looks like a running footer keeps it: it is that page's text.
    assert parsed.text == "Page 1 of three.\n\nPage 2 of three.\n\nPage 3 of three."
    assert [p.location for p in parsed.parts] == [{"page": 1}, {"page": 2}, {"page": 3}]
    assert parsed.pages == 3 and parsed.title is None and parsed.notes == []


def test_a_pdf_needing_more_memory_than_the_limit_is_refused(tmp_path):
    # One page whose stream inflates from about 70 KB to 70 MB: reading it takes some 200 MB of address space, and
    # a page of the same text without the padding reads within the same limit.
    big = tmp_path / "big.pdf"
    big.write_bytes(pdf_file([page_text("A page of little text.") + b" " * 70_000_000]))
    small = tmp_path / "small.pdf"
    small.write_bytes(pdf_file([page_text("A page of little text.")]))
    limits = ParseLimits(memory_mb=128)

    assert read_file(small, "pdf", limits).text == "A page of little text."
    with pytest.raises(ParseRefused) as refused:
        read_file(big, "pdf", limits)
    # PDFium aborts the process when an allocation fails (SIGABRT) rather than raising MemoryError: said the same.
    assert str(refused.value) == "reading the file needed more than 128 MB"


def test_a_pdf_within_the_limits_is_read_with_its_title_and_a_broken_one_is_refused(tmp_path):
    report = tmp_path / "report.pdf"
    c = canvas.Canvas(str(report), pagesize=A4)
    c.setTitle("Quarterly report")
    c.drawString(72, 750, "Q4 2025 revenue reached 412 million dollars.")
    c.showPage()
    c.drawString(72, 750, "Wind output rose in the second half.")
    c.save()
    parsed = read_file(report, "pdf", ParseLimits(max_pages=2, time_s=30, memory_mb=512))
    assert parsed.title == "Quarterly report" and parsed.pages == 2
    assert [(p.location, p.text) for p in parsed.parts] == [
        ({"page": 1}, "Q4 2025 revenue reached 412 million dollars."),
        ({"page": 2}, "Wind output rose in the second half.")]

    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(ParseRefused) as refused:
        read_file(broken, "pdf", ParseLimits())
    assert str(refused.value) == ("the PDF is damaged and cannot be opened; save or export it again and upload the "
                                  "new file")


def test_the_limits_are_settings_with_their_defaults():
    settings = Settings()
    limits = ParseLimits.from_settings(settings)
    assert limits == ParseLimits(max_pages=2000, time_s=30, memory_mb=1024, ocr_languages=settings.ocr_languages)
    for name in ("pdf_max_pages", "pdf_read_time_s", "pdf_read_memory_mb", "ocr_languages"):
        assert Settings.model_fields[name].description
