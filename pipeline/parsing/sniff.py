"""A file's format, told from its bytes: the name's extension only settles what the bytes leave open (Markdown or
plain text, CSV or plain text), so a Word file called ``report.pdf`` is read as the Word file it is.

Usage::

    sniff(Path("upload.bin").read_bytes(), "report.pdf")   # "docx"
    sniff(b"", "empty.txt")                                 # ParseRefused("the file is empty")
"""

from __future__ import annotations

import io
import re
import zipfile

from pipeline.parsing.parsed import ParseRefused
from pipeline.parsing.text_encoding import decode_text

FORMATS = ("pdf", "image", "docx", "pptx", "xlsx", "csv", "html", "markdown", "text", "eml", "jsonl")
# What a name's extension says, where the bytes alone cannot tell text formats apart.
TEXT_EXTENSIONS = {".md": "markdown", ".markdown": "markdown", ".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl",
                   ".ndjson": "jsonl", ".eml": "eml", ".html": "html", ".htm": "html", ".txt": "text"}
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# An encrypted Word, Excel or PowerPoint file is an OLE container holding this stream (its name in UTF-16).
_ENCRYPTION_INFO = "EncryptionInfo".encode("utf-16-le")
_OFFICE_MAIN_PARTS = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}
# Header names as long as Exchange writes them (X-MS-Exchange-CrossTenant-OriginalArrivalTime); a value may be empty.
_HEADER_LINE = re.compile(rb"^[A-Za-z][A-Za-z0-9-]{1,76}:(?:[ \t]|$)", re.MULTILINE)
_MAIL_HEADERS = (b"from:", b"subject:", b"date:", b"message-id:", b"mime-version:", b"received:", b"to:")
# A byte-order mark, an XHTML declaration and comments may come first; a page may start at any tag of its head.
_HTML_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*"
                         rb"<(?:!doctype\s+html|html|head|body|meta|title|link|base|style)\b",
                         re.IGNORECASE | re.DOTALL)
_ATX_HEADING = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)


def sniff(data: bytes, name: str) -> str:
    """One of ``FORMATS`` for a file's bytes (all of them: a ZIP is told by its directory, at its end)."""
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
    try:
        names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    except zipfile.BadZipFile:
        raise ParseRefused("a damaged ZIP file (Office files are ZIP files): it cannot be opened") from None
    for part, found in _OFFICE_MAIN_PARTS.items():
        if part in names:
            return found
    if "xl/workbook.bin" in names:
        raise ParseRefused("an Excel binary workbook (.xlsb); save it as .xlsx")
    if "mimetype" in names or "content.xml" in names:
        raise ParseRefused("an OpenDocument file (.odt, .ods, .odp); save it as .docx, .xlsx or .pptx")
    raise ParseRefused("a ZIP archive that is no Word, PowerPoint or Excel file; upload the files inside it")


def _looks_like_mail(head: bytes) -> bool:
    """Headers first (``Name: value`` lines up to a blank line), among them at least two a mail always has."""
    block = head.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    lines = [line for line in block.splitlines() if line and not line[:1].isspace()]
    if lines and lines[0].startswith(b"From "):  # the separator line of a message saved from an mbox
        lines = lines[1:]
    if len(lines) < 2 or not all(_HEADER_LINE.match(line) for line in lines):
        return False
    return sum(line.lower().startswith(_MAIL_HEADERS) for line in lines) >= 2
