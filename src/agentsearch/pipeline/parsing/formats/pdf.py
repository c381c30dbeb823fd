"""PDF pages as parts (``{"page": k}``): the text layer where a page has one, tables as rows of cells, running
headers and footers left out, and pages without text (scans) read by OCR.

Text: pypdfium2 (PDFium, the engine of Chromium's PDF viewer), not pypdf. On 100 reportlab pages of 50 lines it read
727 pages/s of CPU against pypdf's 169 (this reader, with all it does per page: 456); a content stream of 1.8 M
operators shared by three pages costs it 0.13 s where pypdf took over ten; a table's row comes out as one line
("North 12 14 15") where pypdf gives one line per cell; and the two columns of a reportlab page come out one after
the other from both. Both follow the order a page draws its text in: a page that draws two columns line by line
across reads across from both (and from pdfplumber). PDFium ends a line broken after a hyphen with U+0002 and joins
the two lines; the word is joined here.

Tables: pdfplumber (``find_tables``) finds a table by its ruling lines and gives its cells, but costs about 100 ms
on a page of text (PDFium: 1.4 ms), so only a page that draws at least four thin straight lines is given to it. A
page with a table is read from pdfplumber's words, top to bottom: the lines outside the tables, and each table at
its place as lines of ``cell | cell | cell``.

Running headers and footers: a line among the first or last three of a page (no more than a quarter of its lines),
digits counted alike ("Page 3 of 9" is "Page 4 of 9"), that is there on at least 60% of the pages with text, and on
three at least, is left out of every page that has other text. The pages compared are the window read and four
pages either side of it (their text layer only, no OCR): each window decides for itself, for the cost of the text
of eight pages more.

Characters without a meaning: a font with no map to Unicode gives codes PDFium cannot name (control characters,
U+FFFD; pdfplumber's ``(cid:N)``), and a map may send a glyph to U+0000 (PDFium drops those, and they are counted
from its list of characters). They are left out, and a note says how many per page; private-use characters
(symbol fonts' bullets and icons) are left out without a note. A page most of whose characters are either is read
by OCR instead.

OCR (``agentsearch.pipeline.parsing.ocr``): a page with no text but something drawn on it, or an image and less than a
line of text, is rendered at ``limits.ocr_dpi`` (less where the page would have more than ``limits.max_pixels``) and
read; a note names the pages read so.

Refused: more pages than ``limits.max_pages`` (before a page is read), a user password, a damaged file, more text
than ``limits.max_chars`` in the pages read. A PDF encrypted with an empty user password (an owner password only)
opens as any other.

Usage (in the parsing child)::

    parsed = parse(Path("report.pdf"), ParseLimits(), progress, pages=range(0, 20))
    parsed.pages, parsed.notes        # 212, ["pages 3-4 were read by OCR"]
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsearch.pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused, Part

# Pages either side of a window whose text helps tell running headers and footers.
RUNNING_MARGIN_PAGES = 4
RUNNING_LINES = 3                 # lines from the top and from the bottom of a page that may be running
RUNNING_SHARE = 0.6
RUNNING_MIN_PAGES = 3
RULING_LINES = 4                  # thin straight lines that make a page worth looking for tables on
MAX_PATHS_FOR_TABLES = 5000       # more paths than this is a drawing, not a table
MIN_TEXT_CHARS = 16               # fewer characters of text on a page with an image: the page is a scan

# C0 and C1 control characters (tab and line ends aside), U+FFFD, pdfplumber's name for a code it cannot map.
_UNREADABLE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]|\(cid:\d+\)")
_PRIVATE_USE = re.compile(r"[\ue000-\uf8ff]")
# Titles programs write on their own: reportlab's defaults, "Microsoft Word - report.docx".
_PLACEHOLDER_TITLES = {"", "untitled", "(anonymous)", "anonymous", "untitled document", "title"}
_PLACEHOLDER_PREFIX = re.compile(r"^Microsoft (Word|PowerPoint|Excel) - ")
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    import pypdfium2 as pdfium

    document = _open(pdfium, path)
    total = len(document)
    if total > limits.max_pages:
        raise ParseRefused(f"the PDF has more than {limits.max_pages} pages")
    window = range(total) if pages is None else range(max(0, pages.start), min(total, pages.stop))
    reader = _Reader(document, path, limits)
    running = reader.running_lines(range(max(0, window.start - RUNNING_MARGIN_PAGES),
                                         min(total, window.stop + RUNNING_MARGIN_PAGES)))
    parts: list[Part] = []
    chars = 0
    began, read_until = time.monotonic(), None
    for number in window:
        if limits.window_s and number > window.start and time.monotonic() - began > limits.window_s:
            read_until = number
            break
        text = _without(reader.page_text(number), running)
        if text:
            chars += len(text)
            if chars > limits.max_chars:
                raise ParseRefused(f"the PDF has more than {limits.max_chars} characters of text; split it into "
                                   "smaller files")
            parts.append(Part(text, {"page": number + 1}))
        progress(number + 1, total)
    reader.close()
    return ParsedFile(title=_title(document), parts=parts, pages=total, notes=reader.notes(), read_until=read_until)


def _open(pdfium, path: Path):
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code == pdfium.raw.FPDF_ERR_PASSWORD:
            raise ParseRefused("the PDF is protected by a password; remove the password and upload it again") from None
        if code == pdfium.raw.FPDF_ERR_SECURITY:
            raise ParseRefused("the PDF is protected by a security handler that cannot be read; remove the "
                               "protection and upload it again") from None
        raise ParseRefused("the PDF is damaged and cannot be opened; save or export it again and upload the new "
                           "file") from None


def _title(document) -> str | None:
    """The metadata's title, but for the placeholders programs write when the author gave none."""
    title = (document.get_metadata_dict().get("Title") or "").strip()
    title = _PLACEHOLDER_PREFIX.sub("", title).strip()
    return None if title.casefold() in _PLACEHOLDER_TITLES else title


class _Reader:
    """One document's pages: their text (PDFium's, pdfplumber's where a page has tables, the OCR engine's where it
    has none) and what the notes say about them."""

    def __init__(self, document, path: Path, limits: ParseLimits) -> None:
        self.document, self.path, self.limits = document, path, limits
        self.layer: dict[int, tuple[str, int, int]] = {}   # page -> (text, unreadable, private use) of PDFium
        self.ocr_pages: list[int] = []
        self.unreadable: dict[int, int] = {}
        self._plumber: Any = None  # a pdfplumber.PDF, opened on the first page that has tables

    def close(self) -> None:
        if self._plumber is not None:
            self._plumber.close()

    def text_layer(self, number: int) -> tuple[str, int, int]:
        if number not in self.layer:
            page = self.document[number]
            textpage = page.get_textpage()
            raw_text = textpage.get_text_bounded()
            text, unreadable, private = _clean(raw_text)
            self.layer[number] = (text, unreadable + _mapped_to_nothing(textpage, len(raw_text)), private)
            textpage.close()
            page.close()
        return self.layer[number]

    def running_lines(self, sample: range) -> set[str]:
        """The lines (normalised) that run along the top or bottom of most pages of ``sample``."""
        seen: Counter[str] = Counter()
        pages_with_text = 0
        for number in sample:
            lines = self.text_layer(number)[0].split("\n")
            edges = _edges(lines)
            if edges:
                pages_with_text += 1
                seen.update({_normal(lines[i]) for i in edges})
        needed = max(RUNNING_MIN_PAGES, math.ceil(RUNNING_SHARE * pages_with_text))
        return {line for line, count in seen.items() if count >= needed and line}

    def page_text(self, number: int) -> str:
        text, unreadable, private = self.text_layer(number)
        page = self.document[number]
        try:
            meaningful = len(text) - text.count(" ") - text.count("\n")
            if unreadable + private > meaningful or (meaningful < MIN_TEXT_CHARS and
                                                     _draws_something(page, meaningful)):
                read = self._ocr(page)
                if len(read) >= len(text):
                    self.ocr_pages.append(number)
                    return read
            if _has_ruling_lines(page):
                text, unreadable = self._tables(number, text, unreadable)
            if unreadable:
                self.unreadable[number] = unreadable
            return text
        finally:
            page.close()

    def _ocr(self, page) -> str:
        from agentsearch.pipeline.parsing.ocr import read_image

        width, height = page.get_size()
        scale = self.limits.ocr_dpi / 72
        if width * height * scale * scale > self.limits.max_pixels:
            scale = math.sqrt(self.limits.max_pixels / (width * height))
        image = page.render(scale=scale, grayscale=True).to_pil()
        return read_image(image, self.limits, dpi=round(scale * 72)).text

    def _tables(self, number: int, text: str, unreadable: int) -> tuple[str, int]:
        """The page's text from pdfplumber with its tables as rows of cells; PDFium's text where it finds none, or
        where pdfplumber fails on what PDFium read."""
        try:
            if self._plumber is None:
                import pdfplumber

                self._plumber = pdfplumber.open(self.path)
            page = self._plumber.pages[number]
            tables = page.find_tables()
        except (MemoryError, RecursionError):
            raise
        except Exception:  # noqa: BLE001 - pdfminer's many errors on a file PDFium reads: the tables are lost
            return text, unreadable
        if not tables:
            return text, unreadable
        boxes = [table.bbox for table in tables]
        outside = page.filter(lambda obj: obj.get("object_type") != "char" or not any(
            box[0] <= obj["x0"] and obj["x1"] <= box[2] and box[1] <= obj["top"] and obj["bottom"] <= box[3]
            for box in boxes))
        blocks = [(line["top"], line["text"]) for line in outside.extract_text_lines()]
        blocks += [(table.bbox[1], _table_lines(table.extract())) for table in tables]
        cleaned, unreadable, _ = _clean("\n".join(block for _, block in sorted(blocks, key=lambda b: b[0])))
        return cleaned, unreadable

    def notes(self) -> list[str]:
        notes = [f"page {number + 1}: {count} character{'s' if count > 1 else ''} could not be read and "
                 f"{'were' if count > 1 else 'was'} left out" for number, count in sorted(self.unreadable.items())]
        if self.ocr_pages:
            from agentsearch.pipeline.parsing.ocr import ocr_note

            notes.append(ocr_note([number + 1 for number in self.ocr_pages]))
        return notes


def _clean(raw: str) -> tuple[str, int, int]:
    """Text with PDFium's line ends and hyphens made plain and characters without a meaning left out; how many of
    those there were (unreadable, private use)."""
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x02", "").replace("\x0b", "\n").replace("\x0c", "\n")
    text, unreadable = _UNREADABLE.subn("", text)
    text, private = _PRIVATE_USE.subn("", text)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(), unreadable, private


def _mapped_to_nothing(textpage, text_length: int) -> int:
    """Characters whose font maps them to U+0000: PDFium's text leaves them out without a trace, so its count of
    characters is longer than the text; only then are they counted, one by one (2 ms a page of 3,500)."""
    import pypdfium2.raw as raw

    count = textpage.count_chars()
    if count <= text_length:
        return 0
    return sum(1 for index in range(count) if raw.FPDFText_GetUnicode(textpage.raw, index) == 0)


def _normal(line: str) -> str:
    return _DIGITS.sub("#", _SPACES.sub(" ", line).strip().casefold())


def _without(text: str, running: set[str]) -> str:
    """``text`` less its first and last lines that are running headers or footers."""
    if not running:
        return text
    lines = text.split("\n")
    edges = _edges(lines)
    kept = [line for i, line in enumerate(lines) if i not in edges or _normal(line) not in running]
    # A page of nothing but such lines keeps them: "Page 2 of 3." alone is that page's text.
    return "\n".join(kept).strip() or text


def _edges(lines: list[str]) -> set[int]:
    """The indices of the lines at the top and bottom of a page that may be running: up to ``RUNNING_LINES`` from
    each end, and no more than a quarter of the page's lines (one of a page of four)."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    count = max(1, min(RUNNING_LINES, len(filled) // 4))
    return set(filled[:count] + filled[-count:])


def _table_lines(rows: list[list[str | None]]) -> str:
    lines = []
    for row in rows:
        cells = [_SPACES.sub(" ", cell or "").strip() for cell in row]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _draws_something(page, text_chars: int) -> bool:
    """Whether a page of little or no text draws an image, or draws anything at all when it has no text."""
    import pypdfium2.raw as raw

    kinds = {obj.type for obj in page.get_objects(max_depth=2)}
    return raw.FPDF_PAGEOBJ_IMAGE in kinds or (text_chars == 0 and bool(kinds))


def _has_ruling_lines(page) -> bool:
    import pypdfium2.raw as raw

    rules = 0
    for count, obj in enumerate(page.get_objects(filter=(raw.FPDF_PAGEOBJ_PATH,), max_depth=2)):
        if count > MAX_PATHS_FOR_TABLES:
            return False
        left, bottom, right, top = obj.get_bounds()
        if min(right - left, top - bottom) <= 3 and max(right - left, top - bottom) >= 10:
            rules += 1
    return rules >= RULING_LINES
