"""Word, PowerPoint, Excel and CSV files are read into parts with their places (a heading path, a slide, a sheet's
row), through the parsing child process (``agentsearch.pipeline.parsing.read_file``) as the worker reads them, and
refused by reason when they are bombs (ZIP or XML), damaged, or past the limits on rows and text. The files are built
here with the libraries that write them (python-docx, python-pptx, openpyxl, the csv module) or, for what no library
writes, with zipfile."""

from __future__ import annotations

import csv
import datetime
import io
import zipfile
from pathlib import Path

import docx
import openpyxl
import pytest
from docx.oxml import parse_xml
from msoffcrypto.format.ooxml import OOXMLFile
from pptx import Presentation
from pptx.util import Inches

from agentsearch.pipeline.parsing import ParseLimits, ParseRefused, read_file, sniff

LAUGHS = ('<!DOCTYPE lolz [<!ENTITY lol0 "lol">'
          + "".join(f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)) + "]>")
XLSX_SHEET = "xl/worksheets/sheet1.xml"
MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
SHEET_START = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet xmlns="{MAIN}"><sheetData>'
SHEET_END = "</sheetData></worksheet>"


def read(path: Path, file_format: str, **limits) -> tuple:
    """The parsed file and the progress it reported."""
    progress: list[tuple[int, int]] = []
    parsed = read_file(path, file_format, ParseLimits(**limits), on_progress=lambda *p: progress.append(p))
    return parsed, progress


def places(parsed) -> list[tuple[dict, str]]:
    return [(part.location, part.text) for part in parsed.parts]


def replace_member(path: Path, name: str, data: bytes) -> None:
    """The Office file at ``path`` with its part ``name`` replaced by ``data``."""
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members[name] = data
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)


def workbook_with_sheet(path: Path, write_rows, shared_strings: str = "") -> Path:
    """A workbook of one sheet ("Data") whose XML is written by hand: ``write_rows(file)`` writes its rows; with
    the ``<si>`` items of a table of shared strings, as Excel writes its strings."""
    book = openpyxl.Workbook()
    book.active.title = "Data"
    book.save(path)
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist() if info.filename != XLSX_SHEET}
    if shared_strings:
        members["xl/sharedStrings.xml"] = f'<sst xmlns="{MAIN}">{shared_strings}</sst>'.encode()
        members["[Content_Types].xml"] = members["[Content_Types].xml"].replace(b"</Types>", (
            b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.'
            b'spreadsheetml.sharedStrings+xml"/></Types>'))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
        with archive.open(XLSX_SHEET, "w") as sheet:
            sheet.write(SHEET_START.encode())
            write_rows(sheet)
            sheet.write(SHEET_END.encode())
    return path


def text_row(number: int, *cells: str) -> str:
    return f'<row r="{number}">' + "".join(
        f'<c r="{"ABCDEFGH"[i]}{number}" t="inlineStr"><is><t>{cell}</t></is></c>' for i, cell in enumerate(cells)
    ) + "</row>"


# --- Word ---------------------------------------------------------------------------------------------------------

def test_a_word_file_is_read_by_heading_path_with_its_tables_as_rows(tmp_path):
    document = docx.Document()
    document.core_properties.title = "Annual report 2025"
    document.sections[0].header.paragraphs[0].text = "CONFIDENTIAL header"
    document.sections[0].footer.paragraphs[0].text = "Page footer"
    document.add_heading("Annual report", level=0)
    document.add_paragraph("Prepared by the finance team.")
    document.add_heading("Results", level=1)
    document.add_paragraph("The year closed above plan.")
    document.add_heading("Revenue", level=2)
    document.add_paragraph("Revenue rose 12% to 412 million.")
    table = document.add_table(rows=3, cols=3)
    rows = [("Region", "Revenue", "Quarter"), ("North", "412", "Q4"), ("South", "", "Q3")]
    for row, cells in zip(table.rows, rows, strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.add_paragraph("Costs were flat.")
    document.add_heading("Outlook", level=1)
    loose = document.add_table(rows=2, cols=2)
    loose.cell(0, 0).text, loose.cell(1, 0).text, loose.cell(1, 1).text = "Wind", "Solar", "Storage"
    path = tmp_path / "report.docx"
    document.save(path)

    parsed, _ = read(path, "docx")
    assert parsed.title == "Annual report 2025" and parsed.pages is None
    assert places(parsed) == [
        ({"section": "Annual report"}, "Annual report\n\nPrepared by the finance team."),
        ({"section": "Results"}, "Results\n\nThe year closed above plan."),
        ({"section": "Results > Revenue"}, ("Revenue\n\nRevenue rose 12% to 412 million.\n\n"
                                            "Region: North; Revenue: 412; Quarter: Q4\n\n"
                                            "Region: South; Quarter: Q3\n\nCosts were flat.")),
        ({"section": "Outlook"}, "Outlook\n\nWind\n\nSolar | Storage"),
    ]
    assert "CONFIDENTIAL" not in parsed.text and "footer" not in parsed.text


def test_text_before_any_heading_has_no_section_and_a_file_without_core_title_has_none(tmp_path):
    document = docx.Document()
    document.add_paragraph("A memo without headings.")
    document.add_heading("Decision", level=2)
    document.add_paragraph("Approved.")
    path = tmp_path / "memo.docx"
    document.save(path)
    replace_member(path, "docProps/core.xml", b'<?xml version="1.0"?><cp:coreProperties xmlns:cp="http://schemas.'
                   b'openxmlformats.org/package/2006/metadata/core-properties"/>')

    parsed, _ = read(path, "docx")
    assert parsed.title is None
    assert places(parsed) == [({}, "A memo without headings."), ({"section": "Decision"}, "Decision\n\nApproved.")]

    # Without a title in its properties, a paragraph styled Title names the document.
    document.paragraphs[0].insert_paragraph_before("Board memo", style="Title")
    document.save(path)
    replace_member(path, "docProps/core.xml", b'<?xml version="1.0"?><cp:coreProperties xmlns:cp="http://schemas.'
                   b'openxmlformats.org/package/2006/metadata/core-properties"/>')
    assert read(path, "docx")[0].title == "Board memo"


def test_tracked_insertions_fields_and_content_controls_are_read_and_deletions_left_out(tmp_path):
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    paragraph = document.add_paragraph("Revenue rose ")
    for xml in (f'<w:del {w} w:id="1" w:author="A"><w:r><w:delText>9%</w:delText></w:r></w:del>',
                f'<w:ins {w} w:id="2" w:author="A"><w:r><w:t>12%</w:t></w:r></w:ins>',
                f'<w:fldSimple {w} w:instr="PAGE"><w:r><w:t xml:space="preserve"> on page 4</w:t></w:r></w:fldSimple>'):
        paragraph._p.append(parse_xml(xml))
    document.element.body.insert(1, parse_xml(f'<w:sdt {w}><w:sdtContent><w:p><w:r><w:t>Approved by the board.'
                                              '</w:t></w:r></w:p></w:sdtContent></w:sdt>'))
    path = tmp_path / "tracked.docx"
    document.save(path)
    assert places(read(path, "docx")[0]) == [({}, "Revenue rose 12% on page 4\n\nApproved by the board.")]


def test_a_word_text_longer_than_the_limit_is_refused(tmp_path):
    document = docx.Document()
    for number in range(20):
        document.add_paragraph(f"Paragraph {number} of a long memo about the budget.")
    path = tmp_path / "long.docx"
    document.save(path)
    with pytest.raises(ParseRefused, match=r"^the text read is longer than 500 characters; split the file$"):
        read(path, "docx", max_chars=500)


# --- PowerPoint ---------------------------------------------------------------------------------------------------

def test_a_deck_is_read_one_part_per_slide_with_its_notes_and_tables(tmp_path):
    deck = Presentation()
    deck.core_properties.title = "Q4 review"
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Q4 results"
    body = first.placeholders[1].text_frame
    body.text = "Revenue rose 12%"
    body.add_paragraph().text = "Wind output doubled"
    first.notes_slide.notes_text_frame.text = "Mention the new wind farm."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "By region"
    table = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, cells in enumerate([("Region", "Revenue"), ("North", "412"), ("South", "380")]):
        for c, text in enumerate(cells):
            table.cell(r, c).text = text
    group = second.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(5), Inches(3), Inches(1)).text_frame.text = "Source: finance"
    deck.slides.add_slide(deck.slide_layouts[6])  # blank: no part
    path = tmp_path / "deck.pptx"
    deck.save(path)

    parsed, progress = read(path, "pptx")
    assert parsed.title == "Q4 review" and parsed.pages == 3 and progress == [(1, 3), (2, 3), (3, 3)]
    assert places(parsed) == [
        ({"slide": 1}, "Q4 results\n\nRevenue rose 12%\n\nWind output doubled\n\nNotes:\nMention the new wind farm."),
        ({"slide": 2}, "By region\n\nRegion: North; Revenue: 412\n\nRegion: South; Revenue: 380\n\nSource: finance"),
    ]
    window = read_file(path, "pptx", ParseLimits(), pages=range(1, 2))
    assert [p.location for p in window.parts] == [{"slide": 2}] and window.pages == 3


# --- Excel and CSV ------------------------------------------------------------------------------------------------

def test_a_workbook_is_read_one_part_per_row_with_its_header_on_every_sheet(tmp_path):
    book = openpyxl.Workbook()
    book.properties.title = "Sales 2025"
    sales = book.active
    sales.title = "Q4"
    sales.append(["Region", "Revenue", "Quarter", "Closed"])
    sales.append(["North", 412, "Q4", datetime.date(2025, 12, 31)])
    sales.append([])  # an empty row: no part, the next keeps its number
    sales.append(["South", 380.5, None, datetime.datetime(2025, 11, 3, 14, 30)])
    staff = book.create_sheet("Staff")
    staff.append(["Name", "Role"])
    staff.append(["Ada", "Engineer"])
    path = tmp_path / "sales.xlsx"
    book.save(path)

    parsed, progress = read(path, "xlsx")
    assert parsed.title == "Sales 2025" and parsed.pages == 2 and progress == [(1, 2), (2, 2)]
    assert places(parsed) == [
        ({"sheet": "Q4", "row": 2}, "Region: North; Revenue: 412; Quarter: Q4; Closed: 2025-12-31"),
        ({"sheet": "Q4", "row": 4}, "Region: South; Revenue: 380.5; Closed: 2025-11-03T14:30:00"),
        ({"sheet": "Staff", "row": 2}, "Name: Ada; Role: Engineer"),
    ]


def test_a_formula_cell_gives_its_stored_value(tmp_path):
    def rows(sheet):
        sheet.write(text_row(1, "Units", "Price", "Total").encode())
        sheet.write(b'<row r="2"><c r="A2"><v>3</v></c><c r="B2"><v>4</v></c><c r="C2"><f>A2*B2</f><v>12</v></c>'
                    b'<c r="D2" t="b"><f>C2&gt;10</f><v>1</v></c></row>')

    parsed, _ = read(workbook_with_sheet(tmp_path / "totals.xlsx", rows), "xlsx")
    assert places(parsed) == [({"sheet": "Data", "row": 2}, "Units: 3; Price: 4; Total: 12; TRUE")]


def test_shared_strings_are_read_as_their_runs_without_phonetic_guides_or_escapes(tmp_path):
    strings = ("<si><t>City</t></si><si><t>Note</t></si>"
               "<si><r><t>Tok</t></r><r><rPr><b/></rPr><t>yo</t></r><rPh sb='0' eb='1'><t>トウキョウ</t></rPh></si>"
               "<si><t>first line_x000D_\nsecond_x005F_x000D_</t></si>")

    def rows(sheet):
        sheet.write(b'<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>'
                    b'<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2" t="s"><v>3</v></c></row>')

    parsed, _ = read(workbook_with_sheet(tmp_path / "strings.xlsx", rows, strings), "xlsx")
    assert places(parsed) == [({"sheet": "Data", "row": 2}, "City: Tokyo; Note: first line second_x000D_")]


def test_a_sheet_of_a_million_empty_rows_is_read_for_its_real_rows(tmp_path):
    def rows(sheet):
        sheet.write(text_row(1, "Name", "Score").encode() + text_row(2, "Ada", "3").encode())
        for start in range(3, 1_000_003, 10_000):
            sheet.write("".join(f'<row r="{n}"/>' for n in range(start, start + 10_000)).encode())
        sheet.write(text_row(1_000_003, "Bo", "5").encode())

    path = workbook_with_sheet(tmp_path / "sparse.xlsx", rows)
    parsed, _ = read(path, "xlsx", time_s=10, memory_mb=512)
    assert places(parsed) == [({"sheet": "Data", "row": 2}, "Name: Ada; Score: 3"),
                              ({"sheet": "Data", "row": 1_000_003}, "Name: Bo; Score: 5")]


def test_rows_past_the_limit_are_refused_across_sheets(tmp_path):
    book = openpyxl.Workbook()
    for name in ("One", "Two"):
        sheet = book.create_sheet(name)
        for number in range(4):
            sheet.append([f"{name} {number}", number])
    path = tmp_path / "rows.xlsx"
    book.save(path)
    assert len(read(path, "xlsx", max_rows=8)[0].parts) == 6  # two headers and six rows
    with pytest.raises(ParseRefused, match=r"^the file has more than 7 rows that hold a value; split it$"):
        read(path, "xlsx", max_rows=7)


def test_a_csv_file_with_semicolons_in_windows_1252_is_read_with_its_accents(tmp_path):
    path = tmp_path / "villes.csv"
    rows = [["Région", "Montant", "Ville"], ["Nord", "1,5", "Zürich"], ["", "", ""], ["Sud", "2", "Besançon"]]
    with path.open("w", encoding="cp1252", newline="") as file:
        csv.writer(file, delimiter=";").writerows(rows)
    assert sniff(path.read_bytes(), path.name) == "csv"

    parsed, progress = read(path, "csv")
    assert parsed.pages is None and progress == [(1, 1)]
    assert places(parsed) == [({"sheet": "villes", "row": 2}, "Région: Nord; Montant: 1,5; Ville: Zürich"),
                              ({"sheet": "villes", "row": 4}, "Région: Sud; Montant: 2; Ville: Besançon")]


def test_a_latin_1_csv_with_commas_and_a_quoted_field_over_two_lines(tmp_path):
    path = tmp_path / "people.csv"
    path.write_bytes('Name,City,Note\r\nJürgen,München,"Straße 5,\r\nHinterhaus"\r\nRenée,Genève,\r\n'
                     .encode("latin-1"))
    parsed, _ = read(path, "csv")
    assert places(parsed) == [
        ({"sheet": "people", "row": 2}, "Name: Jürgen; City: München; Note: Straße 5, Hinterhaus"),
        ({"sheet": "people", "row": 3}, "Name: Renée; City: Genève"),
    ]


# --- Refusals -----------------------------------------------------------------------------------------------------

def test_a_zip_bomb_named_as_a_word_file_is_refused_before_it_is_unpacked(tmp_path):
    path = tmp_path / "bomb.docx"
    zeros = bytes(2**20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as member:
            for _ in range(300):
                member.write(zeros)
    assert path.stat().st_size < 2 * 2**20
    assert sniff(path.read_bytes(), "bomb.docx") == "office"
    with pytest.raises(ParseRefused, match=r"^the file unpacks to more than 256 MB \(Office files are ZIP archives\)"):
        read(path, "office")


def test_a_part_that_unpacks_to_hundreds_of_times_its_size_is_refused_in_a_workbook(tmp_path):
    path = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
        with archive.open(XLSX_SHEET, "w") as member:
            for _ in range(40):
                member.write(bytes(2**20))
    assert sniff(path.read_bytes(), "bomb.xlsx") == "office"
    with pytest.raises(ParseRefused, match=r"^a part of the file unpacks to more than 200 times its packed size"):
        read(path, "office")


XML_BOMB = r"^the file holds XML with a document type declaration, which Office never writes"


def test_an_xml_entity_bomb_in_a_word_file_is_refused(tmp_path):
    document = docx.Document()
    document.add_paragraph("PLACEHOLDER")
    path = tmp_path / "laughs.docx"
    document.save(path)
    with zipfile.ZipFile(path) as archive:
        xml = archive.read("word/document.xml").decode()
    head, root = xml.split("\n", 1)
    replace_member(path, "word/document.xml", f"{head}\n{LAUGHS}{root.replace('PLACEHOLDER', '&lol9;')}".encode())
    with pytest.raises(ParseRefused, match=XML_BOMB):
        read(path, "docx")


def test_an_xml_entity_bomb_in_a_sheet_is_refused(tmp_path):
    path = workbook_with_sheet(tmp_path / "laughs.xlsx", lambda sheet: sheet.write(text_row(1, "&lol9;").encode()))
    with zipfile.ZipFile(path) as archive:
        xml = archive.read(XLSX_SHEET).decode()
    head, root = xml.split("\n", 1)
    replace_member(path, XLSX_SHEET, f"{head}\n{LAUGHS}{root}".encode())
    with pytest.raises(ParseRefused, match=XML_BOMB):
        read(path, "xlsx")


def test_a_damaged_word_file_is_refused(tmp_path):
    document = docx.Document()
    document.add_paragraph("A file cut short in the upload.")
    buffer = io.BytesIO()
    document.save(buffer)
    path = tmp_path / "cut.docx"
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    damaged = r"^a damaged ZIP file \(Office files are ZIP files\): it cannot be opened"
    with pytest.raises(ParseRefused, match=damaged):
        sniff(path.read_bytes(), path.name)
    with pytest.raises(ParseRefused, match=damaged):
        read(path, "docx")


# --- Telling the formats apart ------------------------------------------------------------------------------------

def test_office_files_and_csv_are_told_apart_by_their_bytes_and_an_encrypted_one_is_refused(tmp_path):
    document, deck, book = docx.Document(), Presentation(), openpyxl.Workbook()
    document.add_paragraph("Minutes.")
    deck.slides.add_slide(deck.slide_layouts[0]).shapes.title.text = "Agenda"
    book.active.append(["Region", "Revenue"])
    book.active.append(["North", 412])
    saved = {}
    for name, office_file in (("a.docx", document), ("a.pptx", deck), ("a.xlsx", book)):
        buffer = io.BytesIO()
        office_file.save(buffer)
        saved[name] = buffer.getvalue()
    # The bytes decide, whatever the name says: an Office file is "office" to sniffing, and the parsing child tells
    # which one from its directory.
    assert [sniff(saved[name], "upload.csv") for name in saved] == ["office"] * 3
    for name, data in saved.items():
        (tmp_path / name).write_bytes(data)
    assert [read(tmp_path / name, "office")[0].format for name in saved] == ["docx", "pptx", "xlsx"]
    assert sniff(b"Region;Revenue\nNorth;412\n", "sales.csv") == "csv"
    assert sniff(b"Region\tRevenue\nNorth\t412\n", "sales.tsv") == "csv"

    encrypted = io.BytesIO()
    OOXMLFile(io.BytesIO(saved["a.docx"])).encrypt("secret", encrypted)
    with pytest.raises(ParseRefused, match=r"^the Office file is protected by a password"):
        sniff(encrypted.getvalue(), "a.docx")


def test_a_workbook_named_as_csv_is_read_as_the_workbook_it_is(tmp_path):
    book = openpyxl.Workbook()
    book.active.append(["Region", "Revenue"])
    book.active.append(["North", 412])
    path = tmp_path / "export.csv"
    book.save(path)
    assert sniff(path.read_bytes(), path.name) == "office"
    parsed, _ = read(path, "office")
    assert parsed.format == "xlsx"
    assert places(parsed) == [({"sheet": "Sheet", "row": 2}, "Region: North; Revenue: 412")]
