"""A file's name as its sender gave it, made one the service can keep and write: ``upload_name`` is the name an
upload is stored under (its folders dropped; refused when it names no file), ``bare_name`` a name safe to join to a
folder, whatever it was given (a worker's parsing folder, an e-mail's attachments).

A name is never trusted as a path: ``..`` joined to a folder is the folder's parent, and a name with a NUL cannot be
written at all.

Usage::

    upload_name("../../etc/passwd.txt")      # "passwd.txt"
    upload_name("a/..")                      # ParseRefused("the file name '..' names no file; rename the file")
    bare_name("..", "file")                  # "file"
    bare_name("C:\\\\Users\\\\me\\\\.report.pdf", "file")   # "report.pdf"
"""

from __future__ import annotations

import re

from agentsearch.pipeline.parsing.parsed import ParseRefused

MAX_NAME_BYTES = 200
# Control characters, C1 included: no file name needs one, and a terminal or a log line would act on them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# An extension kept when a long name is cut.
_MAX_EXTENSION_BYTES = 16


def upload_name(sent: str) -> str:
    """The name an uploaded file is stored and shown under: the last segment of ``sent`` (a browser or a client may
    send folders, with ``/`` or ``\\``). ``ParseRefused`` naming the problem when that is empty, ``.`` or ``..``,
    holds a NUL, or is longer than ``MAX_NAME_BYTES`` in UTF-8."""
    name = _last_segment(sent)
    if "\x00" in name:
        raise ParseRefused("the file name holds a NUL character; rename the file")
    if name in ("", ".", ".."):
        raise ParseRefused(f"the file name {name!r} names no file; rename the file" if name else
                           "the file has no name; give it one")
    if len(name.encode("utf-8", "replace")) > MAX_NAME_BYTES:
        raise ParseRefused(f"the file name is longer than {MAX_NAME_BYTES} bytes; rename the file")
    return name


def bare_name(name: str, fallback: str) -> str:
    """``name`` as a file name safe to join to a folder: its last segment, without control characters or leading
    dots (so never ``.`` or ``..``, nor hidden), at most ``MAX_NAME_BYTES`` in UTF-8 with its extension kept;
    ``fallback`` when nothing is left."""
    name = _last_segment(_CONTROL.sub("", name)).strip().lstrip(".")
    if not name:
        return fallback
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        stem, dot, suffix = name.rpartition(".")
        suffix = f".{suffix}" if dot and len(suffix.encode("utf-8")) <= _MAX_EXTENSION_BYTES else ""
        stem = stem if suffix else name
        budget = MAX_NAME_BYTES - len(suffix.encode("utf-8"))
        name = stem.encode("utf-8")[:budget].decode("utf-8", "ignore") + suffix
    return name


def _last_segment(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1]
