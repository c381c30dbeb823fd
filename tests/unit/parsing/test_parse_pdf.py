"""PDFs read through the real parsing child (``agentsearch.pipeline.parsing.read_file``): reading order, tables as rows
of cells, running headers and footers left out, characters without a meaning left out with a note, scanned pages read
by OCR, passwords, windows of a long file.

The files are made here with reportlab (text, columns, tables), Pillow (scanned pages, ``tests.support.scans``) and
pypdf (encryption, a font with no map to Unicode).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, FloatObject, NameObject, NumberObject
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas
from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph, SimpleDocTemplate, Table, TableStyle

from agentsearch.pipeline.parsing import ParseLimits, ParseRefused, read_file
from tests.support.pdfs import page_text, pdf_file
from tests.support.scans import save_scanned_pdf, scan_page, words_found

LIMITS = ParseLimits(time_s=30)
SCAN_LINES = ["Quarterly report of the northern wind farms", "Revenue rose by twelve percent in the fourth quarter,",
              "while the output of the solar parks fell behind", "as prices dropped during the long winter months."]


def test_a_two_column_page_reads_one_column_after_the_other(tmp_path):
    path = tmp_path / "columns.pdf"
    doc = BaseDocTemplate(str(path), pagesize=A4)
    width, height = A4
    column = (width - 120) / 2
    doc.addPageTemplates([PageTemplate(frames=[Frame(50, 50, column, height - 100, id="left"),
                                               Frame(70 + column, 50, column, height - 100, id="right")])])
    normal = getSampleStyleSheet()["Normal"]
    left = "Leftstart " + "the wind farms of the north delivered more power than planned " * 12 + "leftend."
    right = "Rightstart " + "solar output fell behind as prices dropped " * 8 + "rightend."
    doc.build([Paragraph(left, normal), Paragraph(right, normal)])

    (part,) = read_file(path, "pdf", LIMITS).parts
    text = " ".join(part.text.split())
    assert text.index("Leftstart") < text.index("leftend.") < text.index("Rightstart") < text.index("rightend.")
    assert part.location == {"page": 1}


def test_a_table_with_ruling_lines_reads_as_rows_of_cells_in_its_place(tmp_path):
    path = tmp_path / "table.pdf"
    normal = getSampleStyleSheet()["Normal"]
    table = Table([["Region", "Q1", "Q2", "Q3"], ["North", "12", "14", "15"], ["South", "9", "11", "8"],
                   ["East wind farm", "3", "4", "5"]])
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
    SimpleDocTemplate(str(path), pagesize=A4).build(
        [Paragraph("Output by region, in megawatt hours.", normal), table, Paragraph("Figures are unaudited.", normal)])

    (part,) = read_file(path, "pdf", LIMITS).parts
    assert part.text.splitlines() == ["Output by region, in megawatt hours.", "Region | Q1 | Q2 | Q3",
                                      "North | 12 | 14 | 15", "South | 9 | 11 | 8", "East wind farm | 3 | 4 | 5",
                                      "Figures are unaudited."]


def test_running_headers_and_footers_are_left_out_of_every_page(tmp_path):
    path = tmp_path / "report.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    for number in range(1, 6):
        c.drawString(72, 800, "ACME Corp — Confidential")
        c.drawString(72, 700, f"Chapter {number} tells of the wind farm number {number * 7}.")
        c.drawString(72, 680, "Its turbines ran all year.")
        c.drawString(280, 40, f"Page {number} of 5")
        c.showPage()
    c.save()

    parsed = read_file(path, "pdf", LIMITS)
    assert [p.text for p in parsed.parts] == [
        f"Chapter {n} tells of the wind farm number {n * 7}.\nIts turbines ran all year." for n in range(1, 6)]
    # A window of two pages looks at the pages around it too.
    window = read_file(path, "pdf", LIMITS, pages=range(1, 3))
    assert [p.text for p in window.parts] == [p.text for p in parsed.parts[1:3]]


def test_characters_a_font_cannot_name_are_left_out_with_a_note(tmp_path):
    path = tmp_path / "glyphs.pdf"
    # Codes 1, 3 and 4 have no glyph name in Helvetica's encoding (the text layer holds the control characters);
    # code 0 is a character PDFium maps to U+0000 and leaves out of its text.
    path.write_bytes(pdf_file([page_text("A page that reads well."),
                               b"BT /F1 12 Tf 72 720 Td (Revenue rose \x01\x03\x04sharply.) Tj ET\n",
                               b"BT /F1 12 Tf 72 720 Td (Output\x00 fell\x00.) Tj ET\n"]))

    parsed = read_file(path, "pdf", LIMITS)
    assert [(p.location, p.text) for p in parsed.parts] == [({"page": 1}, "A page that reads well."),
                                                            ({"page": 2}, "Revenue rose sharply."),
                                                            ({"page": 3}, "Output fell.")]
    assert parsed.notes == ["page 2: 3 characters could not be read and were left out",
                            "page 3: 2 characters could not be read and were left out"]


def test_a_page_whose_text_layer_cannot_be_read_is_read_by_ocr(tmp_path):
    path = unmapped_font_pdf(tmp_path / "unmapped.pdf", ["REVENUE ROSE IN THE NORTH", "OUTPUT FELL IN THE SOUTH"])

    parsed = read_file(path, "pdf", LIMITS)
    (part,) = parsed.parts
    assert words_found("revenue rose in the north output fell in the south", part.text) >= 0.9
    assert parsed.notes == ["page 1 was read by OCR"]


def test_scanned_pages_are_read_by_ocr_beside_pages_with_text(tmp_path):
    path = tmp_path / "mixed.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setTitle("Wind report")
    c.drawString(72, 750, "The typed cover page of the wind report.")
    for seed, lines in ((1, SCAN_LINES[:2]), (2, SCAN_LINES[2:])):
        c.showPage()
        scan = scan_page(lines, seed=seed)
        c.drawImage(ImageReader(scan), 40, 600, width=scan.width * 72 / 150, height=scan.height * 72 / 150)
    c.save()

    parsed = read_file(path, "pdf", LIMITS)
    assert parsed.title == "Wind report" and parsed.pages == 3
    assert [p.location for p in parsed.parts] == [{"page": 1}, {"page": 2}, {"page": 3}]
    assert parsed.parts[0].text == "The typed cover page of the wind report."
    assert words_found(" ".join(SCAN_LINES[:2]), parsed.parts[1].text) >= 0.9
    assert words_found(" ".join(SCAN_LINES[2:]), parsed.parts[2].text) >= 0.9
    assert parsed.notes == ["pages 2-3 were read by OCR"]


def test_a_window_of_a_scanned_pdf_is_read_by_ocr(tmp_path):
    path = save_scanned_pdf([scan_page(SCAN_LINES[:2], seed=3), scan_page(SCAN_LINES[2:], seed=4)],
                            tmp_path / "scan.pdf")

    parsed = read_file(path, "pdf", LIMITS, pages=range(1, 2))
    (part,) = parsed.parts
    assert part.location == {"page": 2} and words_found(" ".join(SCAN_LINES[2:]), part.text) >= 0.9
    assert parsed.pages == 2 and parsed.notes == ["page 2 was read by OCR"]


def test_a_window_reads_only_its_pages_and_tells_the_whole_count(tmp_path):
    path = tmp_path / "long.pdf"
    path.write_bytes(pdf_file([page_text(f"Turbine {n} ran for {n * 100} hours.") for n in range(1, 6)]))
    progress: list[tuple[int, int]] = []

    parsed = read_file(path, "pdf", LIMITS, on_progress=lambda done, total: progress.append((done, total)),
                       pages=range(2, 4))
    assert [(p.location, p.text) for p in parsed.parts] == [({"page": 3}, "Turbine 3 ran for 300 hours."),
                                                            ({"page": 4}, "Turbine 4 ran for 400 hours.")]
    assert parsed.pages == 5 and progress == [(3, 5), (4, 5)] and parsed.read_until is None


def test_a_window_past_its_time_budget_stops_after_the_page_that_passed_it_and_says_where(tmp_path):
    path = tmp_path / "long.pdf"
    path.write_bytes(pdf_file([page_text(f"Turbine {n} ran for {n * 100} hours.") for n in range(1, 6)]))
    parsed = read_file(path, "pdf", replace(LIMITS, window_s=1e-6), pages=range(1, 5))
    assert [p.location for p in parsed.parts] == [{"page": 2}] and parsed.read_until == 2 and parsed.pages == 5


def test_a_password_protected_pdf_is_refused_and_one_with_only_an_owner_password_is_read(tmp_path):
    plain = tmp_path / "plain.pdf"
    plain.write_bytes(pdf_file([page_text("The board met in March.")]))
    locked, owner_only = tmp_path / "locked.pdf", tmp_path / "owner-only.pdf"
    for path, user_password in ((locked, "secret"), (owner_only, "")):
        writer = PdfWriter(clone_from=plain)
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-256")
        writer.write(path)

    with pytest.raises(ParseRefused) as refused:
        read_file(locked, "pdf", LIMITS)
    assert str(refused.value) == "the PDF is protected by a password; remove the password and upload it again"
    assert read_file(owner_only, "pdf", LIMITS).text == "The board met in March."


def test_a_word_broken_over_two_lines_is_joined(tmp_path):
    path = tmp_path / "hyphen.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    c.drawString(72, 720, "the infor-")
    c.drawString(72, 706, "mation age")
    c.save()
    assert read_file(path, "pdf", LIMITS).text == "the information age"


def unmapped_font_pdf(path, lines: list[str]):
    """One page of ``lines`` (capitals and spaces) in a Type 3 font whose glyph names mean nothing (g1, g2, ...) and
    which has no map to Unicode: each glyph draws its letter in Helvetica, so the page shows the text while its text
    layer is control characters."""
    letters = sorted(set("".join(lines)))
    codes = dict(zip(letters, [c for c in range(1, 32) if c not in (2, 9, 10, 11, 12, 13)], strict=False))
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)

    def name(value: str) -> NameObject:
        return NameObject(f"/{value}")

    def stream(data: str):
        obj = DecodedStreamObject()
        obj.set_data(data.encode("latin-1"))
        return writer._add_object(obj)

    helvetica = DictionaryObject({name("Type"): name("Font"), name("Subtype"): name("Type1"),
                                  name("BaseFont"): name("Helvetica")})
    widths = {letter: round(stringWidth(letter, "Helvetica", 1000)) for letter in letters}
    procs = DictionaryObject({name(f"g{codes[c]}"): stream(f"{widths[c]} 0 d0 BT /H 1000 Tf 0 0 Td ({c}) Tj ET")
                              for c in letters})
    differences = ArrayObject()
    for letter in letters:
        differences += [NumberObject(codes[letter]), name(f"g{codes[letter]}")]
    by_code = {code: widths[letter] for letter, code in codes.items()}
    font = DictionaryObject({
        name("Type"): name("Font"), name("Subtype"): name("Type3"), name("CharProcs"): procs,
        name("FontBBox"): ArrayObject([NumberObject(v) for v in (0, -200, 1000, 900)]),
        name("FontMatrix"): ArrayObject([FloatObject(v) for v in (0.001, 0, 0, 0.001, 0, 0)]),
        name("Encoding"): DictionaryObject({name("Type"): name("Encoding"), name("Differences"): differences}),
        name("FirstChar"): NumberObject(1), name("LastChar"): NumberObject(31),
        name("Widths"): ArrayObject([NumberObject(by_code.get(code, 0)) for code in range(1, 32)]),
        name("Resources"): DictionaryObject({name("Font"): DictionaryObject({name("H"): helvetica})}),
    })
    page[name("Resources")] = DictionaryObject({name("Font"): DictionaryObject({name("T3"): writer._add_object(font)})})
    shown = [f"BT /T3 16 Tf 72 {720 - 24 * i} Td <{''.join(f'{codes[c]:02x}' for c in line)}> Tj ET"
             for i, line in enumerate(lines)]
    page[name("Contents")] = stream("\n".join(shown))
    writer.write(path)
    return path
