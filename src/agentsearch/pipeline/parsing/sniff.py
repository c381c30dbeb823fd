"""A file's format, told from its bytes: the name's extension only settles what the bytes leave open (Markdown or
plain text, CSV or plain text), so a Word file called ``report.pdf`` is read as the Word file it is.

An Office file (a ZIP) is ``"office"`` here: which of Word, PowerPoint or Excel it is stands in its central
directory, and that directory is read only by the parsing child (``agentsearch.pipeline.parsing.formats.office``), which
holds the reading to its limits. What sniffing reads of a ZIP is its end record and its first entry's name, a few bytes
whatever the directory's size (``agentsearch.pipeline.parsing.zip_end``): the API and the workers call this for every
file.

Usage::

    sniff(Path("upload.bin").read_bytes(), "report.pdf")   # "office" (a Word file, read as one)
    sniff(b"", "empty.txt")                                 # ParseRefused("the file is empty")
"""

from __future__ import annotations

import io
import re
import struct

from agentsearch.pipeline.parsing.parsed import ParseRefused
from agentsearch.pipeline.parsing.text_encoding import decode_text
from agentsearch.pipeline.parsing.zip_end import check_directory, end_record

# "office" is told apart into "docx", "pptx" and "xlsx" as the parsing child reads it.
FORMATS = ("pdf", "image", "office", "docx", "pptx", "xlsx", "csv", "html", "markdown", "text", "eml", "jsonl")
# What a name's extension says, where the bytes alone cannot tell text formats apart.
TEXT_EXTENSIONS = {".md": "markdown", ".markdown": "markdown", ".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl",
                   ".ndjson": "jsonl", ".eml": "eml", ".html": "html", ".htm": "html", ".txt": "text"}
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# An encrypted Word, Excel or PowerPoint file is an OLE container holding this stream (its name in UTF-16).
_ENCRYPTION_INFO = "EncryptionInfo".encode("utf-16-le")
# A ZIP entry's local header: signature, versions, flags, method, time, date, CRC, sizes, name and extra lengths.
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
# Header names as long as Exchange writes them (X-MS-Exchange-CrossTenant-OriginalArrivalTime); a value may be empty.
_HEADER_LINE = re.compile(rb"^[A-Za-z][A-Za-z0-9-]{1,76}:(?:[ \t]|$)", re.MULTILINE)
_MAIL_HEADERS = (b"from:", b"subject:", b"date:", b"message-id:", b"mime-version:", b"received:", b"to:")
# A byte-order mark, an XHTML declaration and comments may come first; a page may start at any tag of its head.
_HTML_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*"
                         rb"<(?:!doctype\s+html|html|head|body|meta|title|link|base|style)\b",
                         re.IGNORECASE | re.DOTALL)
_ATX_HEADING = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)


def sniff(data: bytes, name: str) -> str:
    """One of ``FORMATS`` for a file's bytes (never "docx", "pptx" or "xlsx": an Office file is "office")."""
    if not data:
        raise ParseRefused("the file is empty")
    extension = _extension(name)
    if data.startswith(_OLE_MAGIC):
        if _ENCRYPTION_INFO in data:
            raise ParseRefused("the Office file is protected by a password; remove the password and upload it again")
        raise ParseRefused("an old binary Office file (.doc, .xls or .ppt); save it as .docx, .xlsx or .pptx")
    if data.startswith(b"PK\x03\x04"):
        return _office_format(data)
    # Readers accept a PDF header anywhere in the first kilobyte (after a mail gateway's banner, say); a text file
    # that merely mentions one stays text.
    if data.startswith(b"%PDF-") or (b"%PDF-" in data[:1024] and extension not in TEXT_EXTENSIONS):
        return "pdf"
    if data.startswith(_IMAGE_MAGIC):
        return "image"
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseRefused("not a format agentsearch reads: binary content that is no PDF, image or Office file")
    head = data[:8192]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16: the checks below read the text as UTF-8
        head = decode_text(head).encode("utf-8")
    if _HTML_START.match(head) or (extension == ".html" and b"<" in head):
        return "html"
    if extension == ".eml" or _looks_like_mail(head):
        return "eml"
    by_name = TEXT_EXTENSIONS.get(extension)
    if by_name in ("markdown", "csv", "jsonl", "text"):
        return by_name
    return "markdown" if _ATX_HEADING.search(head.decode("utf-8", "replace")) else "text"


def _extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _office_format(data: bytes) -> str:
    """``"office"`` for a ZIP whose end record is whole and whose directory is of a size Office writes. OpenDocument
    and EPUB store an uncompressed ``mimetype`` entry first (their specifications say so): refused from its name."""
    check_directory(end_record(io.BytesIO(data)))
    if len(data) >= _LOCAL_HEADER.size:
        *_, name_length, extra_length = _LOCAL_HEADER.unpack_from(data)
        start = _LOCAL_HEADER.size + name_length + extra_length
        if data[_LOCAL_HEADER.size:_LOCAL_HEADER.size + name_length] == b"mimetype":
            if data[start:start + 64].startswith(b"application/vnd.oasis.opendocument"):
                raise ParseRefused("an OpenDocument file (.odt, .ods, .odp); save it as .docx, .xlsx or .pptx")
            raise ParseRefused("a ZIP archive that is no Word, PowerPoint or Excel file; upload the files inside it")
    return "office"


def _looks_like_mail(head: bytes) -> bool:
    """Headers first (``Name: value`` lines up to a blank line), among them at least two a mail always has."""
    block = head.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    lines = [line for line in block.splitlines() if line and not line[:1].isspace()]
    if lines and lines[0].startswith(b"From "):  # the separator line of a message saved from an mbox
        lines = lines[1:]
    if len(lines) < 2 or not all(_HEADER_LINE.match(line) for line in lines):
        return False
    return sum(line.lower().startswith(_MAIL_HEADERS) for line in lines) >= 2
