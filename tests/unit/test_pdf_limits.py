"""A PDF is read within limits on pages, CPU time and memory (``pipeline.parsing``), and refused by name past them.

The slow file is the shape that costs most for its size: three pages sharing one content stream of 1.8 M operators,
about 4 KB, which pypdf parses again for every page (over ten CPU seconds read in process). The tests set their
limits low and assert what is refused and what is read, never how long it took.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from pipeline.ingest import IngestError, read_documents
from pipeline.parsing import PdfLimits, PdfRefused, read_pdf
from pipeline.platform.settings import Settings, get_settings
from tests.support.pdfs import page_text, pdf_file, shared_stream


@pytest.fixture
def pdf_settings(monkeypatch):
    """Sets ``AGENTSEARCH_*`` variables for the settings ``read_documents`` reads by default (as ``agentsearch ingest``
    does), and forgets them after the test."""

    def use(**variables: str) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(f"AGENTSEARCH_{name.upper()}", value)
        get_settings.cache_clear()

    yield use
    get_settings.cache_clear()


def test_a_pdf_slower_to_read_than_the_limit_is_refused_naming_the_file(tmp_path, pdf_settings):
    pdf_settings(pdf_read_time_s="1")
    slow = tmp_path / "slow.pdf"
    slow.write_bytes(pdf_file([shared_stream(1_800_000)] * 3))
    assert slow.stat().st_size < 8 * 1024

    with pytest.raises(IngestError) as refused:
        read_documents(slow)
    assert str(refused.value) == "slow.pdf: the PDF took longer than 1 s to read"


def test_a_pdf_with_more_pages_than_the_limit_is_refused_and_one_at_the_limit_is_read(tmp_path, pdf_settings):
    pdf_settings(pdf_max_pages="3")
    long = tmp_path / "long.pdf"
    long.write_bytes(pdf_file([page_text(f"Page {n} of four.") for n in range(1, 5)]))
    with pytest.raises(IngestError) as refused:
        read_documents(long)
    assert str(refused.value) == "long.pdf: the PDF has more than 3 pages"

    short = tmp_path / "short.pdf"
    short.write_bytes(pdf_file([page_text(f"Page {n} of three.") for n in range(1, 4)]))
    (doc,) = read_documents(short)
    assert doc.text == "Page 1 of three.\n\nPage 2 of three.\n\nPage 3 of three."
    assert doc.metadata == {"source": "short.pdf", "pages": 3} and doc.title == "short"


def test_a_pdf_needing_more_memory_than_the_limit_is_refused(tmp_path):
    # One page whose stream inflates from about 70 KB to 70 MB: reading it takes some 200 MB of address space.
    big = tmp_path / "big.pdf"
    big.write_bytes(pdf_file([page_text("A page of little text.") + b" " * 70_000_000]))
    with pytest.raises(PdfRefused, match=r"^the PDF needed more than 128 MB to read$"):
        read_pdf(big, PdfLimits(memory_mb=128))
    with pytest.raises(IngestError, match=r"^big\.pdf: the PDF needed more than 128 MB to read$"):
        read_documents(big, PdfLimits(memory_mb=128))


def test_a_pdf_within_the_limits_is_read_with_its_title_and_a_broken_one_is_named(tmp_path):
    report = tmp_path / "report.pdf"
    c = canvas.Canvas(str(report), pagesize=A4)
    c.setTitle("Quarterly report")
    c.drawString(72, 750, "Q4 2025 revenue reached 412 million dollars.")
    c.showPage()
    c.drawString(72, 750, "Wind output rose in the second half.")
    c.save()
    pdf = read_pdf(report, PdfLimits(max_pages=2, time_s=30, memory_mb=512))
    assert pdf.title == "Quarterly report" and len(pdf.pages) == 2 and "412 million" in pdf.pages[0]

    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(IngestError, match=r"^broken\.pdf: not a readable PDF \("):
        read_documents(broken)


def test_the_limits_are_settings_with_their_defaults():
    limits = PdfLimits.from_settings(Settings())
    assert limits == PdfLimits(max_pages=2000, time_s=30, memory_mb=1024)
    for name in ("pdf_max_pages", "pdf_read_time_s", "pdf_read_memory_mb"):
        assert Settings.model_fields[name].description


def test_the_pdfs_of_one_upload_share_the_time_limit(client, monkeypatch):
    """Twenty PDFs of just under the limit each would hold one request twenty times as long: the route gives each
    PDF what is left of the request's time, and refuses the first one none is left for (the reader and the clock
    are stand-ins: what is under test is the route's sharing, not the reading)."""
    from pipeline.ingest import DocumentIn

    clock = [1000.0]
    given: list[tuple[str, int]] = []

    def read_taking_fifteen_seconds(path, limits):
        given.append((path.name, limits.time_s))
        clock[0] += 15.0
        return [DocumentIn(id=path.stem, title=path.stem, text="Read.")]

    monkeypatch.setattr("pipeline.ingest.read_documents", read_taking_fifteen_seconds)
    monkeypatch.setattr("api.routes.documents.time", SimpleNamespace(monotonic=lambda: clock[0]))
    collection_id = client.post("/v1/collections", json={"name": "shared budget"}).json()["id"]
    files = [("files", (f"part-{i}.pdf", b"%PDF-1.4 stand-in")) for i in range(3)]
    refused = client.post(f"/v1/collections/{collection_id}/files", files=files)
    assert refused.status_code == 422, refused.text
    (error,) = refused.json()["detail"]
    assert error["loc"] == ["body", "files", 2]
    assert error["msg"] == "part-2.pdf: the request's PDFs took longer than 30 s to read; send fewer at once"
    assert given == [("part-0.pdf", 30), ("part-1.pdf", 15)]
    assert client.get(f"/v1/collections/{collection_id}/documents").json()["total"] == 0
