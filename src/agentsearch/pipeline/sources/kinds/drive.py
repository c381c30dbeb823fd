"""A WebDAV drive (Nextcloud, ownCloud, SharePoint, any RFC 4918 server): the files under a folder, by ETag.

The folder is listed with ``PROPFIND`` (``Depth: 1``, never ``infinity``, which many servers refuse and which would
answer a whole tree at once), asking each entry's ``getetag``, ``getlastmodified``, ``getcontentlength`` and
``resourcetype``; each subfolder is listed the same way, breadth first, to ``max_depth`` folders down and at most
``max_items`` files. A file is versioned by its ETag (else its date and size): a file whose version is the last
run's is not read; a new or changed one is read with a ``GET``. A file no longer listed is gone. Every request goes
through the egress guard with the source's limits (``Fetcher``); an answer that is no multistatus XML, or a folder
that cannot be listed, fails the run: nothing is removed on a listing not read whole. The XML is read with
``defusedxml`` (no entities, no external references).

Usage::

    Drive().items(DriveConfig(url="https://cloud.example.org/remote.php/dav/files/ana/Handbook/",
                              username="ana", password="..."), ctx)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import ClassVar
from urllib.parse import unquote, urljoin, urlsplit
from xml.etree.ElementTree import Element, ParseError

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException
from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.sources.fetch import FetchFailed
from agentsearch.pipeline.sources.kinds.base import Context, Item, ListingFailed, SourceConfig, folder_url
from agentsearch.pipeline.sources.kinds.files import file_content, readable, unread
from agentsearch.pipeline.sources.kinds.permissions import GroupMapping, GroupsField, RequiredField

DAV = "{DAV:}"
PROPFIND = (b'<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:getetag/>'
            b"<d:getlastmodified/><d:getcontentlength/><d:resourcetype/></d:prop></d:propfind>")


class DriveConfig(SourceConfig):
    url: str = Field(description="The WebDAV folder read (its files and subfolders).", max_length=2000)
    username: str | None = Field(None, max_length=200)
    password: SecretStr | None = Field(None, description="The password or app password (write-only).")
    max_items: int = Field(1000, ge=1, le=100_000, description="Files listed at most per run.")
    max_depth: int = Field(10, ge=0, le=50, description="Subfolders followed down, at most.")
    groups: GroupsField = Field(default_factory=dict)
    groups_required: RequiredField = False

    _folder = field_validator("url")(folder_url)


class Drive:
    name: ClassVar[str] = "drive"
    config_model: ClassVar[type[SourceConfig]] = DriveConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: DriveConfig, ctx: Context) -> Iterator[Item]:
        mapping = GroupMapping(config.groups, config.groups_required)
        root = urlsplit(config.url).path
        folders: deque[tuple[str, int]] = deque([(config.url, 0)])
        listed = 0
        while folders:
            folder, depth = folders.popleft()
            for href, etag, is_folder in self._list(folder, ctx):
                url = urljoin(folder, href)
                path = unquote(urlsplit(url).path)
                # The folder itself, or an answer naming a place outside the source (another host, another folder,
                # ".." segments): never read.
                if (_origin(url) != _origin(config.url) or not path.startswith(root) or "/../" in f"{path}/"
                        or path.rstrip("/") == urlsplit(folder).path.rstrip("/")):
                    continue
                place = path[len(root):]
                if is_folder:
                    if depth < config.max_depth:
                        folders.append((url, depth + 1))
                    continue
                if not readable(place):
                    continue
                if listed >= config.max_items:
                    # Past the limit the listing is not whole: an unlisted file must not be taken for gone.
                    ctx.partial = (f"{config.url}: more than {config.max_items} files (max_items): the rest not "
                                   "listed, nothing removed")
                    return
                listed += 1
                yield self._file(url, place, etag, mapping, ctx)

    def _list(self, folder: str, ctx: Context) -> list[tuple[str, str, bool]]:
        """Each entry of the folder: its href, its version, whether it is a folder."""
        try:
            answer = ctx.fetcher.send("PROPFIND", folder, {"Depth": "1", "Content-Type": "application/xml"},
                                      PROPFIND)
        except FetchFailed as exc:
            raise ListingFailed(f"PROPFIND {exc}") from exc
        if answer.status != 207:
            raise ListingFailed(f"PROPFIND {folder}: HTTP {answer.status}, not a WebDAV multistatus answer")
        try:
            tree = ElementTree.fromstring(answer.data)
        except (ParseError, DefusedXmlException) as exc:
            raise ListingFailed(f"PROPFIND {folder}: the answer is no XML a WebDAV server sends: {exc}") from exc
        if tree.tag != f"{DAV}multistatus":
            raise ListingFailed(f"PROPFIND {folder}: the answer is no multistatus ({tree.tag[:100]})")
        return [_entry(folder, response) for response in tree.findall(f"{DAV}response")]

    def _file(self, url: str, place: str, version: str, mapping: GroupMapping, ctx: Context) -> Item:
        known, groups = unread(place, version, url, mapping, ctx)
        if known is not None:
            return known
        try:
            data = ctx.fetcher.get(url).data
        except FetchFailed as exc:
            return Item(place, version, url=url, error=str(exc))
        return Item(place, version, file_content(place, data), url=url, groups=groups)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _entry(folder: str, response: Element) -> tuple[str, str, bool]:
    href = (response.findtext(f"{DAV}href") or "").strip()
    if not href:
        raise ListingFailed(f"PROPFIND {folder}: a response without its href")
    props: dict[str, str] = {}
    is_folder = False
    for propstat in response.findall(f"{DAV}propstat"):
        if "200" not in (propstat.findtext(f"{DAV}status") or ""):
            continue
        for prop in propstat.findall(f"{DAV}prop"):
            for child in prop:
                props[child.tag] = (child.text or "").strip()
                if child.tag == f"{DAV}resourcetype" and child.find(f"{DAV}collection") is not None:
                    is_folder = True
    version = props.get(f"{DAV}getetag") or (
        f"{props.get(f'{DAV}getlastmodified', '')}|{props.get(f'{DAV}getcontentlength', '')}")
    return href, version, is_folder
