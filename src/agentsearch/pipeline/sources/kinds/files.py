"""What the file-holding kinds (a WebDAV drive, an object store) read of a file: which names are read at all, and
how its bytes are handed on (text and code as text, the rest through the parsers, as the Git kind does).

Usage::

    if readable("reports/q1.pdf"):
        known, groups = unread("reports/q1.pdf", etag, url, mapping, ctx)   # an Item: nothing to read
        content = file_content("reports/q1.pdf", data)     # Content("q1.pdf", data), parsed by the parsing queue
"""

from __future__ import annotations

from pathlib import PurePosixPath

from agentsearch.pipeline.sources.kinds.base import Content, Context, Item
from agentsearch.pipeline.sources.kinds.git import FILE_SUFFIXES, TEXT_SUFFIXES
from agentsearch.pipeline.sources.kinds.permissions import GroupMapping, Unmapped

# Besides the Git kind's: e-mails (their attachments documents too), images (read by OCR), tables as text.
OTHER_SUFFIXES = frozenset({".eml", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".tsv"})
READ_SUFFIXES = TEXT_SUFFIXES | FILE_SUFFIXES | OTHER_SUFFIXES


def readable(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in READ_SUFFIXES


def file_content(path: str, data: bytes) -> Content:
    name = PurePosixPath(path).name
    return Content(name, data, name, as_text=PurePosixPath(path).suffix.lower() in TEXT_SUFFIXES)


def unread(place: str, version: str, url: str, mapping: GroupMapping, ctx: Context
           ) -> tuple[Item | None, list[str] | None]:
    """The file's item when it is not to be read (its permissions unknown under a required mapping: withheld; its
    version the last run's: unchanged), else None; and its groups."""
    try:
        groups = mapping.groups_of(place)
    except Unmapped as exc:
        return Item(place, version, url=url, error=str(exc), withhold=True), None
    previous = ctx.previous.get(place)
    if previous is not None and previous.get("version") == version:
        return Item(place, version, url=url, groups=groups, memo=previous.get("memo", {})), groups
    return None, groups
