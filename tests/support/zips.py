"""ZIP files written byte by byte for the tests of reading them: an archive whose central directory lists as many
entries as a test wants (each a copy of one tiny entry: a million cost 47 MB and no time to build), and one whose end
record says what a test wants.

Usage::

    docx_bytes = word_file("Travel budget by team")  # a Word file of one paragraph, by python-docx
    big = huge_directory(docx_bytes, 1_000_000)      # the Word file, its directory grown by a million entries "x"
    lying = with_end(docx_bytes, entries=5_000_000)  # the Word file, its end record claiming five million
    few = huge_directory(docx_bytes, 300_000, stated=12)  # 14 MB of directory, its end record claiming 12 entries
"""

from __future__ import annotations

import io
import struct

_END = struct.Struct("<4sHHHHIIH")
_LOCATOR = struct.Struct("<4sIQI")
_END64 = struct.Struct("<4sQHHIIQQQQ")
# A directory entry of a stored, empty file named "x" whose local header is the archive's first.
_ENTRY = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0) + b"x"


def word_file(*paragraphs: str) -> bytes:
    """A Word file of ``paragraphs``, as python-docx saves it."""
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _parts(archive: bytes) -> tuple[bytes, bytes, int]:
    """The archive's entries, its central directory and its count of entries (a ZIP without ZIP64 or a comment)."""
    at = archive.rindex(b"PK\x05\x06")
    _, _, _, _, entries, size, offset, _ = _END.unpack_from(archive, at)
    return archive[:offset], archive[offset:offset + size], entries


def end_records(entries: int, size: int, offset: int, *, zip64: bool | None = None) -> bytes:
    """The end of an archive whose directory of ``entries`` takes ``size`` bytes from ``offset``: its ZIP64 record
    and locator too when a count or an offset needs them (or ``zip64`` says so)."""
    if zip64 is None:
        zip64 = entries > 0xFFFF or size > 0xFFFFFFFF or offset > 0xFFFFFFFF
    if not zip64:
        return _END.pack(b"PK\x05\x06", 0, 0, entries, entries, size, offset, 0)
    record_at = offset + size
    return (_END64.pack(b"PK\x06\x06", _END64.size - 12, 45, 45, 0, 0, entries, entries, size, offset)
            + _LOCATOR.pack(b"PK\x06\x07", 0, record_at, 1)
            + _END.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))


def huge_directory(archive: bytes, extra_entries: int, stated: int | None = None) -> bytes:
    """``archive`` (no ZIP64, no comment) with ``extra_entries`` more directory entries, each naming an empty file
    "x" (47 bytes apiece); its end record states ``stated`` entries when given, else the truth."""
    entries, directory, count = _parts(archive)
    directory += _ENTRY * extra_entries
    return entries + directory + end_records(count + extra_entries if stated is None else stated, len(directory),
                                             len(entries))


def with_end(archive: bytes, *, entries: int | None = None, offset: int | None = None, zip64: bool = False) -> bytes:
    """``archive`` (no ZIP64, no comment) with its end record stating ``entries`` and ``offset`` (the directory's)
    instead of the truth."""
    before, directory, count = _parts(archive)
    return before + directory + end_records(count if entries is None else entries, len(directory),
                                            len(before) if offset is None else offset, zip64=zip64)
