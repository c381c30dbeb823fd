"""What the file-holding kinds (a WebDAV drive, an object store) read of a file: which names are read at all, and
how its bytes are handed on (text and code as text, the rest through the parsers, as the Git kind does).

Usage::

    if readable("reports/q1.pdf"):
        content = file_content("reports/q1.pdf", data)     # Content("q1.pdf", data), parsed by the parsing queue
"""

from __future__ import annotations

from pathlib import PurePosixPath

from agentsearch.pipeline.sources.kinds.base import Content
from agentsearch.pipeline.sources.kinds.git import FILE_SUFFIXES, TEXT_SUFFIXES

# Besides the Git kind's: e-mails (their attachments documents too), images (read by OCR), tables as text.
OTHER_SUFFIXES = frozenset({".eml", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".tsv"})
READ_SUFFIXES = TEXT_SUFFIXES | FILE_SUFFIXES | OTHER_SUFFIXES


def readable(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in READ_SUFFIXES


def file_content(path: str, data: bytes) -> Content:
    name = PurePosixPath(path).name
    return Content(name, data, name, as_text=PurePosixPath(path).suffix.lower() in TEXT_SUFFIXES)
