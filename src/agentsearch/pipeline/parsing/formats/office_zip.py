"""What the readers of Word, PowerPoint and Excel files share: the guard of their ZIP container (``check``), run
before any library opens the file, and the pieces every reader builds its parts with (``TextBudget``, ``row_line``,
``table_lines``, ``core_title``).

An Office file is a ZIP archive of XML parts, and both layers can be bombs. ``check`` reads the ZIP's end record
first and refuses a directory larger than Office writes before ``zipfile`` reads it
(``agentsearch.pipeline.parsing.zip_end``: a million tiny entries would cost seconds and hundreds of MB). Then it reads
the directory and refuses a file whose parts unpack to more than ``limits.max_unpacked_mb`` in all, one part that
unpacks to more than 200 times its packed size (past 10 MB: 300 MB of zeros packs into 300 KB), or more than 10,000
parts. The sizes it reads are the ones ``zipfile`` holds every part to as it unpacks it, for the libraries too: a part
that inflates past its stated size is cut there and fails its checksum. Then it reads the start of every XML part up to
its first element and refuses one that declares a document type, the place where entities are defined: no Office
application writes one, and "a billion laughs" (ten entities, each ten of the one before) needs one. The libraries are
safe from entities on their own as well (measured with lxml 6.1 / libxml2 2.14 and defusedxml 0.7): python-docx and
python-pptx parse with lxml's ``resolve_entities=False`` and libxml2 stops the expansion ("Maximum entity
amplification factor exceeded"), openpyxl parses sheets with defusedxml (``EntitiesForbidden``) and its other parts
with lxml's ``resolve_entities=False``; the check turns their errors into a reason a sender can act on.

Checking costs little, each part being inflated only up to its first element: 22 ms of CPU for a deck of 839
parts (200 slides), under 2 ms for a Word file or a workbook.

Usage::

    check(path, limits)            # ParseRefused("the file unpacks to more than 256 MB ...") or None
    budget = TextBudget(limits)
    budget.take("Revenue rose 12%.")                  # ParseRefused past limits.max_chars
    row_line(["North", "412"], ["Region", "Revenue"])  # "Region: North; Revenue: 412"
    table_lines([["Region", "Revenue"], ["North", "412"]])  # ["Region: North; Revenue: 412"]
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any
from xml.parsers import expat

from agentsearch.pipeline.parsing.parsed import ParseLimits, ParseRefused
from agentsearch.pipeline.parsing.zip_end import MAX_PARTS, check_directory, end_record

# A part that unpacks to more than this many times its packed size, past RATIO_FROM bytes, is a bomb: real parts pack
# 5 to 20 times (a sheet of a million empty rows: 7 times).
MAX_RATIO = 200
RATIO_FROM = 10 * 2**20
_READ = 16 * 1024
# Joins the parts of a document (agentsearch.pipeline.ingestion.files.PART_SEPARATOR): counted in the text's length.
_SEPARATOR = 2
_CORE_PROPERTIES = "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"


def check(path: Path, limits: ParseLimits) -> None:
    """Refuse the Office file at ``path`` if unpacking it or parsing its XML could take more than ``limits`` allow."""
    with path.open("rb") as file:
        check_directory(end_record(file))
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_PARTS:
                raise ParseRefused(f"the file holds more than {MAX_PARTS:,} parts, more than any Office application "
                                   "writes; save it again from its application")
            if sum(m.file_size for m in members) > limits.max_unpacked_mb * 2**20:
                raise ParseRefused(f"the file unpacks to more than {limits.max_unpacked_mb} MB (Office files are ZIP "
                                   "archives); make it smaller, for instance by compressing its pictures, or split it")
            for member in members:
                if member.file_size > RATIO_FROM and member.file_size > MAX_RATIO * max(member.compress_size, 1):
                    raise ParseRefused(f"a part of the file unpacks to more than {MAX_RATIO} times its packed size, "
                                       "the shape of a ZIP bomb; save it again from its application")
                if member.flag_bits & 0x1:
                    raise ParseRefused("the parts of the file are encrypted; remove the password and upload it again")
            for member in members:
                with archive.open(member) as part:
                    if _declares_doctype(part):
                        raise ParseRefused("the file holds XML with a document type declaration, which Office never "
                                           "writes (it is how XML entity bombs are built); save it again from its "
                                           "application")
    except zipfile.BadZipFile:
        raise ParseRefused("a damaged ZIP file (Office files are ZIP files): it cannot be opened; save it again and "
                           "upload it whole") from None
    except (NotImplementedError, EOFError) as exc:
        raise ParseRefused(f"a damaged ZIP file (Office files are ZIP files): {exc}") from None


class _FirstElement(Exception):
    pass


class _Doctype(Exception):
    pass


def _declares_doctype(part: IO[bytes]) -> bool:
    """Whether the XML in ``part`` declares a document type before its first element (False for a part that is no
    XML: a picture, a font). Only the part's start is inflated; a prolog long enough to hide a declaration far down
    is read to its end."""
    head = part.read(_READ)
    if not head.lstrip(b"\xef\xbb\xbf\xff\xfe\x00 \t\r\n").startswith(b"<"):  # UTF-8, UTF-16 with or without BOM
        return False
    parser = expat.ParserCreate()

    def first_element(*_: Any) -> None:
        raise _FirstElement

    def doctype(*_: Any) -> None:
        raise _Doctype

    parser.StartElementHandler = first_element
    parser.StartDoctypeDeclHandler = doctype
    seen = head
    try:
        chunk = head
        while chunk:
            parser.Parse(chunk, False)
            chunk = part.read(_READ)
            seen = seen[-16:] + chunk
        parser.Parse(b"", True)
    except _FirstElement:
        return False
    except _Doctype:
        return True
    except expat.ExpatError:
        # XML expat cannot read (an encoding it lacks) is left to the library's parser, which refuses entities too;
        # a declaration in sight is refused here.
        return b"<!DOCTYPE" in seen or "<!DOCTYPE".encode("utf-16-le") in seen
    return False


class TextBudget:
    """The characters a document's text may hold (``limits.max_chars``), counted as parts are taken."""

    def __init__(self, limits: ParseLimits) -> None:
        self.limit = limits.max_chars
        self.used = 0

    def take(self, text: str) -> str:
        self.used += len(text) + _SEPARATOR
        if self.used > self.limit + _SEPARATOR:
            raise ParseRefused(f"the text read is longer than {self.limit:,} characters; split the file")
        return text


def row_line(cells: Sequence[str], header: Sequence[str] | None) -> str:
    """A row of cells as one line that says what it holds: ``"Region: North; Revenue: 412"`` under a header,
    ``"North | 412"`` without one. Empty cells are left out; a cell under an empty header cell stands alone."""
    if header is None:
        return " | ".join(cell for cell in cells if cell)
    return "; ".join(f"{header[i]}: {cell}" if i < len(header) and header[i] else cell
                     for i, cell in enumerate(cells) if cell)


def table_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """A table's rows as lines (``row_line``). Its first row is its header when the table has more rows and every
    cell of the first row holds text (at least two)."""
    rows = [row for row in rows if any(row)]
    if len(rows) >= 2 and len(rows[0]) >= 2 and all(rows[0]):
        return [row_line(row, rows[0]) for row in rows[1:]]
    return [row_line(row, None) for row in rows]


def core_title(package: Any) -> str | None:
    """The title in the core properties of a python-docx or python-pptx package; None when unset or when the file has
    no core properties (the libraries would make up "Word Document" or "PowerPoint Presentation")."""
    try:
        part = package.part_related_by(_CORE_PROPERTIES)
    except KeyError:
        return None
    properties = getattr(part, "core_properties", part)  # python-docx wraps them, python-pptx's part is them
    return " ".join((properties.title or "").split()) or None
