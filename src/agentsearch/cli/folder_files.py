"""The files of a folder as ``agentsearch sync`` takes them: which are documents, which are left out and why, and
their bytes, each read once.

A document is a regular file under the folder whose path has no hidden part. Left out, named with the reason and
never opened: a link whose target is outside the folder, hidden, missing or a folder (links to folders are not
followed); a FIFO, socket or device (opening a FIFO would wait for a writer). A link to a visible regular file
inside the folder is followed: it is a document of its own, named by the link's path. A name that is not UTF-8
(Linux allows any bytes) is sent with each byte that is not UTF-8 as U+FFFD, and that is said.

A file is opened without following a link (``O_NOFOLLOW``: a file swapped for a link after the walk is refused)
and without waiting (``O_NONBLOCK``), and must still be a regular file once open.

Usage::

    listing = folder_listing(Path("~/handbook").expanduser())
    listing.files["hr/leave"].source, listing.skipped, listing.renamed
    data = read_file(listing.files["hr/leave"].source, limit=64 * 1024 * 1024)   # UnreadableFile past it
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import click

_READ_BYTES = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class UnreadableFile(OSError):
    """A file of the folder that could not be read as a document; the message says why."""


@dataclass(frozen=True)
class FolderFile:
    path: Path     # where it is in the folder (a link: the link)
    source: Path   # what is read: the file itself, or a link's target
    name: str      # the file name sent, UTF-8


@dataclass
class FolderListing:
    files: dict[str, FolderFile] = field(default_factory=dict)       # by document id
    skipped: list[tuple[Path, str]] = field(default_factory=list)    # (path, why), never opened
    renamed: list[tuple[Path, str]] = field(default_factory=list)    # (path, document id) of names not UTF-8


def shown(path: os.PathLike | str) -> str:
    """A path as it can be printed: bytes of a name that are not UTF-8 as ``\\xe9``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def folder_listing(folder: Path) -> FolderListing:
    """Every document file under ``folder`` by its id, and what was left out; two files that would share an id
    (``a.pdf`` and ``a.docx``) are refused by name."""
    listing = FolderListing()
    root = Path(os.path.realpath(folder))
    for path in _visible_entries(folder):
        relative = path.relative_to(folder)
        taken = _source(path, root)
        if isinstance(taken, str):
            listing.skipped.append((path, taken))
            continue
        # Undecodable bytes of a name come from os.walk as lone surrogates, which no request can carry.
        sent = os.fsencode(relative.as_posix()).decode("utf-8", "replace")
        document_id = PurePosixPath(sent).with_suffix("").as_posix()
        if sent != relative.as_posix():
            listing.renamed.append((path, document_id))
        if document_id in listing.files:
            raise click.ClickException(f"{shown(listing.files[document_id].path)} and {shown(path)} would both be "
                                       f"document {document_id!r}; rename one of them")
        listing.files[document_id] = FolderFile(path, taken, PurePosixPath(sent).name)
    return listing


def _visible_entries(folder: Path) -> Iterator[Path]:
    """Every entry under ``folder`` that is not a folder walked into, in name order, hidden ones (a part starting
    with ``.``) left out; links to folders are entries, not walked into."""
    for directory, folders, names in os.walk(folder, followlinks=False):
        here = Path(directory)
        walked = sorted(f for f in folders if not f.startswith(".") and not (here / f).is_symlink())
        linked = [f for f in folders if not f.startswith(".") and (here / f).is_symlink()]
        folders[:] = walked
        for name in sorted([*linked, *(n for n in names if not n.startswith("."))]):
            yield here / name


def _source(path: Path, root: Path) -> Path | str:
    """The file to read for ``path`` (itself, or a link's target inside ``root``), or why it is left out."""
    try:
        target = path
        if path.is_symlink():
            target = Path(os.path.realpath(path, strict=True))
            if not target.is_relative_to(root):
                return f"a link to {shown(target)}, outside the folder"
            if any(part.startswith(".") for part in target.relative_to(root).parts):
                return f"a link to a hidden file ({shown(target.relative_to(root))})"
        mode = target.stat().st_mode
    except OSError as exc:
        return f"a link that leads nowhere ({exc.strerror})" if path.is_symlink() else f"cannot be read: {exc}"
    if stat.S_ISREG(mode):
        return target
    if stat.S_ISDIR(mode):
        return "a link to a folder; links to folders are not followed"
    return f"not a regular file but {_kind(mode)}"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "of an unknown kind"


@contextmanager
def _opened(source: Path) -> Iterator[BinaryIO]:
    """``source`` open for reading if it is still a regular file, not a link; ``UnreadableFile`` otherwise."""
    try:
        descriptor = os.open(source, _OPEN_FLAGS)
    except OSError as exc:
        raise UnreadableFile(f"cannot be opened: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise UnreadableFile("no longer a regular file")
        yield stream


def file_digest(source: Path) -> str:
    """The SHA-256 of the file's bytes, as the service keeps it per document (``content_hash``)."""
    digest = hashlib.sha256()
    with _opened(source) as stream:
        for block in iter(lambda: stream.read(_READ_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def read_file(source: Path, limit: int) -> bytes:
    """The file's bytes, read once: what is sent is what was read, so a file that changes meanwhile is sent as one
    whole version and its request's length is its own. ``UnreadableFile`` past ``limit`` bytes."""
    with _opened(source) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise UnreadableFile(f"larger than an upload may be ({limit:,} bytes, AGENTSEARCH_MAX_UPLOAD_BYTES)")
    return data
