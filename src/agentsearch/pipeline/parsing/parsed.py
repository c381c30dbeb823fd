"""What parsing a file gives (``ParsedFile``: its parts, each with its location), the limits it is held to
(``ParseLimits``) and the refusal of a file (``ParseRefused``).

A part is the smallest piece of a file that has a place of its own: a page of a PDF or a scan, a slide, a row of a
sheet, the text under one heading of a Word file, a web page or a Markdown file. Chunks never run across two parts
of different places (``agentsearch.pipeline.ingestion.chunking.chunk_parts``), and every chunk, source and citation
carries its part's ``location``:

- ``{"page": 3}``: a page of a PDF, a scanned page or an image (1-based);
- ``{"slide": 2}``: a slide of a deck, its notes included;
- ``{"sheet": "Q4", "row": 7}``: a row of a spreadsheet or CSV file (1-based, as the spreadsheet numbers it; the
  header row gives the row's field names); chunks of several rows say ``"rows": [first, last]``;
- ``{"section": "Results > Revenue"}``: the heading path of a Word, HTML, Markdown or e-mail part; ``{}`` when the
  file has no structure (plain text).

Everything here crosses the boundary of the parsing child process as JSON (``to_json`` / ``from_json``).

Usage::

    parsed = ParsedFile(title="Q4 report", parts=[Part("Revenue rose 12%.", {"page": 1})], pages=1)
    ParsedFile.from_json(parsed.to_json()) == parsed
    ParseLimits(max_pages=2000, time_s=30, memory_mb=1024)
    raise ParseRefused("the PDF is encrypted; remove its password and upload it again")
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field
from typing import Any

Location = dict[str, Any]


@dataclass(frozen=True)
class Part:
    text: str
    location: Location = field(default_factory=dict)


@dataclass(frozen=True)
class Attachment:
    """A file inside a file (an e-mail's attachments): parsed as a document of its own."""

    name: str
    data: bytes

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "data": base64.b64encode(self.data).decode("ascii")}

    @classmethod
    def from_json(cls, value: dict[str, str]) -> Attachment:
        return cls(name=value["name"], data=base64.b64decode(value["data"]))


@dataclass
class ParsedFile:
    """A file's text as parts. ``pages`` is the number of pages the whole file has (pages, slides or sheets; None
    where the format has none), ``notes`` what a user should know about the reading (pages read by OCR, characters
    that could not be read and were left out), ``attachments`` the files it carries."""

    title: str | None
    parts: list[Part]
    pages: int | None = None
    notes: list[str] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    # A window of pages cut short by ``ParseLimits.window_s``: the page (0-based) the next window starts at.
    read_until: int | None = None
    # The format the reader found the file to be, where it was sent as a kind of container ("office": "docx").
    format: str | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.parts)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "parts": [asdict(p) for p in self.parts], "pages": self.pages,
                "notes": list(self.notes), "attachments": [a.to_json() for a in self.attachments],
                "read_until": self.read_until, "format": self.format}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ParsedFile:
        return cls(title=value.get("title"), parts=[Part(p["text"], p.get("location") or {}) for p in value["parts"]],
                   pages=value.get("pages"), notes=list(value.get("notes") or []),
                   attachments=[Attachment.from_json(a) for a in value.get("attachments") or []],
                   read_until=value.get("read_until"), format=value.get("format"))


@dataclass(frozen=True)
class ParseLimits:
    """What reading one untrusted file may take. ``time_s`` and ``memory_mb`` hold the child process that reads it
    (CPU seconds, address space); the others are checked by the readers as they go, so a file past one is refused by
    name rather than read into memory first."""

    max_pages: int = 2000
    time_s: int = 30
    memory_mb: int = 1024
    # the text of one document (agentsearch.pipeline.ingestion.documents_in.MAX_DOCUMENT_CHARS)
    max_chars: int = 1_000_000
    max_rows: int = 100_000              # rows of all sheets of a spreadsheet or CSV file that hold a value
    max_unpacked_mb: int = 256           # the inflated size of an Office file's parts (a zip bomb stops here)
    max_pixels: int = 60_000_000         # one image or rendered page (an image bomb stops here)
    max_depth: int = 64                  # nesting of HTML elements, e-mail parts
    max_attachments: int = 20
    ocr_languages: str = "eng"           # tesseract's +-joined language codes
    ocr_dpi: int = 200
    # A paged reader stops a window after the page that passes this many seconds (0: never), and says where
    # (``ParsedFile.read_until``): a file whose later pages are scans after quick text pages stays within its limits.
    window_s: float = 0

    @classmethod
    def from_settings(cls, settings: Any) -> ParseLimits:
        """The limits of ``agentsearch.pipeline.platform.settings.Settings``."""
        return cls(max_pages=settings.pdf_max_pages, time_s=settings.pdf_read_time_s,
                   memory_mb=settings.pdf_read_memory_mb, ocr_languages=settings.ocr_languages)


class ParseRefused(ValueError):
    """The file is not read: the message says why in words its sender can act on, without the file's name (the
    caller knows what it calls it)."""
