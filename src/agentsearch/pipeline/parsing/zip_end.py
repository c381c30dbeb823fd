"""A ZIP archive's end record: how many entries its directory lists and how many bytes that directory takes, read
from the last bytes of the file without reading the directory itself (``end_record``), and the limits an Office
file's directory is held to before anything reads it (``check_directory``).

Opening a ZIP with ``zipfile`` reads its whole central directory into objects: a 47 MB file listing a million tiny
entries costs about 10 s of CPU and 400 MB. The end record (22 bytes at the end, 76 more for ZIP64) says how big
that directory is, so a process that must stay responsive (the API, a worker pool process) checks the record only,
and every real reading of the archive happens in the parsing child (``agentsearch.pipeline.parsing.sandbox``).

Usage::

    end = end_record(io.BytesIO(data))       # EndRecord(entries=14, directory_bytes=1180, directory_offset=..., ...)
    check_directory(end)                      # ParseRefused("the file lists more than 10,000 parts ...") or None
    end_record(io.BytesIO(b"PK\\x03\\x04..."))  # ParseRefused("a damaged ZIP file ...: it cannot be opened ...")
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

from agentsearch.pipeline.parsing.parsed import ParseRefused

# No Office application writes more parts; a deck of 200 slides has 839.
MAX_PARTS = 10_000
# A directory entry is 46 bytes and a name (Office names are short): 1 KiB a part leaves room for long names and
# extra fields. ``zipfile`` reads the directory by its size, whatever count the record states.
MAX_DIRECTORY_BYTES = MAX_PARTS * 1024

_END = struct.Struct("<4sHHHHIIH")           # signature, disk, directory's disk, entries here, entries, size, offset,
_END_SIGNATURE = b"PK\x05\x06"               # comment length
_LOCATOR = struct.Struct("<4sIQI")           # ZIP64 locator: signature, disk, offset of the ZIP64 record, disks
_LOCATOR_SIGNATURE = b"PK\x06\x07"
_END64 = struct.Struct("<4sQHHIIQQQQ")       # ZIP64 record: signature, size, versions, disks, entries here,
_END64_SIGNATURE = b"PK\x06\x06"             # entries, directory size, directory offset
# The record sits in the last 22 bytes, or before a comment of at most 65,535.
_TAIL = _END.size + 0xFFFF
_CANNOT_OPEN = ("a damaged ZIP file (Office files are ZIP files): it cannot be opened; save it again and upload it "
                "whole")


@dataclass(frozen=True)
class EndRecord:
    """What a ZIP's end record states: ``entries`` in its central directory, the directory's size
    (``directory_bytes``) and where it starts (``directory_offset``), and whether the ZIP64 record said so."""

    entries: int
    directory_bytes: int
    directory_offset: int
    zip64: bool


def end_record(file: IO[bytes]) -> EndRecord:
    """The end record of the ZIP archive in ``file`` (a seekable binary file), read from its last 64 KiB at most;
    ``ParseRefused`` when there is none (no ZIP, or one cut short) or it contradicts itself."""
    size = file.seek(0, 2)
    tail_start = max(0, size - _TAIL)
    file.seek(tail_start)
    tail = file.read()
    at = tail.rfind(_END_SIGNATURE, 0, max(0, len(tail) - _END.size + len(_END_SIGNATURE)))
    if at < 0:
        raise ParseRefused(_CANNOT_OPEN)
    _, disk, directory_disk, here, entries, directory_bytes, offset, _comment = _END.unpack_from(tail, at)
    position = tail_start + at  # where the directory must end
    zip64 = False
    if at >= _LOCATOR.size and tail[at - _LOCATOR.size:at - _LOCATOR.size + 4] == _LOCATOR_SIGNATURE:
        zip64, position = True, position - _LOCATOR.size - _END64.size
        if position < 0:
            raise ParseRefused(f"{_CANNOT_OPEN} (its ZIP64 record is missing)")
        file.seek(position)
        record = file.read(_END64.size)
        if len(record) < _END64.size or record[:4] != _END64_SIGNATURE:
            raise ParseRefused(f"{_CANNOT_OPEN} (its ZIP64 record is damaged)")
        _, _, _, _, disk, directory_disk, here, entries, directory_bytes, offset = _END64.unpack(record)
    if disk != 0 or directory_disk != 0 or here != entries:
        raise ParseRefused("a ZIP file split across several files (Office files are ZIP files); upload it as one file")
    if offset + directory_bytes > position:
        raise ParseRefused(f"{_CANNOT_OPEN} (its directory lies past its end)")
    return EndRecord(entries=entries, directory_bytes=directory_bytes, directory_offset=offset, zip64=zip64)


def check_directory(end: EndRecord) -> None:
    """Refuse an Office file whose directory is larger than any Office application writes: reading it would cost
    the reader seconds and hundreds of MB before a single part is looked at."""
    if end.entries > MAX_PARTS:
        raise ParseRefused(f"the file lists {end.entries:,} parts, more than the {MAX_PARTS:,} any Office application "
                           "writes; save it again from its application")
    if end.directory_bytes > MAX_DIRECTORY_BYTES:
        raise ParseRefused(f"the file's directory of parts takes {end.directory_bytes:,} bytes, more than the "
                           f"{MAX_DIRECTORY_BYTES:,} of any Office file; save it again from its application")
