"""An IMAP mailbox: each message of the chosen folders a document, read as an uploaded ``.eml`` is (its
attachments documents of their own, held to the same limits of count and depth).

A message is known by its folder, the folder's UIDVALIDITY and its UID (RFC 3501: a UID names one message for as
long as the UIDVALIDITY stays), so a message is never read twice: the folder's state (UIDVALIDITY, UIDNEXT, how many
messages) is asked for first, and a folder whose state is the last run's is not listed again. Otherwise its UIDs are
listed (``UID SEARCH ALL``), and only the new ones read, their size asked first (``RFC822.SIZE``: one past
``max_item_bytes`` is a failed item, never fetched), their bytes with ``BODY.PEEK[]`` (no message marked read). A
message expunged or moved away is not listed: its document is removed; a new UIDVALIDITY reads the folder again.
A folder's messages take the document groups of the longest mapped folder holding it (``groups``) and, with
``acl``, of the readers its access control list names (``imap_acl``: ``GETACL``, asked every run, so that a changed
ACL reaches every message without reading it again), through the mapping the SaaS kinds use (``access``): a folder
whose readers no mapping names, or whose ACL cannot be read, is not indexed, with the reason in the run.
The server is reached only after the egress guard passed its host; every answer is held to the size and time limits
(``imap_client``). A login refused, or a folder that cannot be opened, fails the run with the server's words.

Usage::

    Mail().items(MailConfig(host="imap.example.org", username="ana", password="...", folders=["INBOX"]), ctx)
"""

from __future__ import annotations

import base64
import imaplib
import re
from collections.abc import Iterator
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from pydantic import Field, SecretStr

from agentsearch.pipeline.platform.egress import EgressGuard, EgressRefused
from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig
from agentsearch.pipeline.sources.kinds.imap_acl import acl_offered, folder_access
from agentsearch.pipeline.sources.kinds.imap_client import TooLarge, connect, said
from agentsearch.pipeline.sources.kinds.permissions import GroupMapping, GroupsField, RequiredField, Unmapped

_SIZE = re.compile(rb"UID (\d+) RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+) UID (\d+)")
SIZES_AT_ONCE = 500


class MailConfig(SourceConfig):
    host: str = Field(min_length=1, max_length=255, description="The IMAP server.")
    port: int = Field(993, ge=1, le=65535)
    username: str = Field(min_length=1, max_length=200)
    password: SecretStr = Field(description="The mailbox's password (write-only).")
    folders: list[str] = Field(["INBOX"], min_length=1, max_length=100,
                               description="The folders read (their subfolders are not, unless named).")
    tls: Literal["ssl", "starttls", "none"] = Field("ssl", description="ssl (port 993), starttls, or none (only "
                                                                       "where the network is trusted).")
    ca_cert: str | None = Field(None, max_length=20_000, description="A private authority's certificate (PEM) the "
                                "server's is verified against, instead of the system's authorities.")
    max_messages: int = Field(1000, ge=1, le=100_000, description="New messages read at most per run (the rest "
                                                                  "the next runs).")
    groups: GroupsField = Field(default_factory=dict)
    groups_required: RequiredField = False
    acl: bool = Field(False, description="Read each folder's access control list (RFC 4314): its readers (user:NAME, "
                                         "group:NAME for $NAME) restrict its messages to the groups mapped to them; "
                                         "a folder whose readers no mapping names is not indexed.")


class Mail:
    name: ClassVar[str] = "mail"
    config_model: ClassVar[type[SourceConfig]] = MailConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: MailConfig, ctx: Context) -> Iterator[Item]:
        try:
            EgressGuard(ctx.fetcher.policy).addresses(config.host, config.port)
        except (EgressRefused, OSError) as exc:
            raise ListingFailed(str(exc)) from exc
        try:
            imap = connect(config.host, config.port, config.tls, ctx.max_item_bytes, ctx.timeout_s, config.ca_cert)
        except (OSError, imaplib.IMAP4.error, ValueError) as exc:  # ValueError: a ca_cert that is no certificate
            raise ListingFailed(f"imap {config.host}:{config.port}: {type(exc).__name__}: {exc}") from exc
        try:
            try:
                imap.login(config.username, config.password.get_secret_value())
            except imaplib.IMAP4.error as exc:
                raise ListingFailed(f"imap login refused: {said(exc)}") from exc
            budget = [config.max_messages]
            imap.deadline_in(ctx.timeout_s)
            offered = config.acl and acl_offered(imap)
            for folder in dict.fromkeys(config.folders):
                yield from self._folder(imap, folder, config, offered, ctx, budget)
        except (OSError, imaplib.IMAP4.abort) as exc:  # the connection lost mid-way: what was read stays
            raise ListingFailed(f"imap {config.host}: the connection was lost: {exc}") from exc
        finally:
            try:
                imap.logout()
            except (OSError, imaplib.IMAP4.error):
                pass

    def _folder(self, imap: Any, folder: str, config: MailConfig, offered: bool, ctx: Context,
                budget: list[int]) -> Iterator[Item]:
        imap.deadline_in(ctx.timeout_s)
        typ, answer = imap.select(_quoted(folder), readonly=True)
        if typ != "OK":
            raise ListingFailed(f"imap folder {folder!r}: {said(answer)}")
        state = {"uidvalidity": _number(imap, "UIDVALIDITY"), "uidnext": _number(imap, "UIDNEXT"),
                 "exists": _number(imap, "EXISTS")}
        groups, refused = _groups(imap, folder, config, offered)
        prefix = f"{folder}/{state['uidvalidity']}/"
        known = {key: entry for key, entry in ctx.previous.items() if key.startswith(prefix)}
        folders = ctx.cursor.setdefault("folders", {})
        if folders.get(folder) == state and refused is None and len(known) >= state["exists"]:
            # Nothing arrived (UIDNEXT), left (EXISTS) or was renumbered (UIDVALIDITY): nothing to list.
            for key, entry in known.items():
                yield Item(key, entry["version"], url=entry.get("url", ""), groups=groups)
            return
        imap.deadline_in(ctx.timeout_s * 3)
        typ, answer = imap.uid("SEARCH", "ALL")
        if typ != "OK":
            raise ListingFailed(f"imap folder {folder!r}: UID SEARCH: {said(answer)}")
        uids = [int(u) for u in (answer[0] or b"").split()]
        new = [uid for uid in uids if f"{prefix}{uid}" not in known]
        # A folder not to be indexed: its messages are listed (counted failed, their documents removed), never read.
        sizes = self._sizes(imap, new[:budget[0]], ctx) if refused is None else {}
        for uid in uids:
            key = f"{prefix}{uid}"
            url = (f"imap://{quote(config.username, safe='')}@{config.host}:{config.port}/{quote(folder)};"
                   f"UIDVALIDITY={state['uidvalidity']}/;UID={uid}")
            if refused is not None:
                yield Item(key, str(uid), url=url, error=refused, withhold=True)
            elif key in known:
                yield Item(key, known[key]["version"], url=url, groups=groups)
            elif uid in sizes:
                budget[0] -= 1
                yield self._message(imap, key, uid, sizes[uid], url, groups, ctx)
        # The folder is recorded as listed only when every new message was read (none left for a later run).
        complete = all(f"{prefix}{uid}" in known or uid in sizes for uid in uids)
        folders[folder] = state if complete else None

    def _sizes(self, imap: Any, uids: list[int], ctx: Context) -> dict[int, int]:
        sizes: dict[int, int] = {}
        for first in range(0, len(uids), SIZES_AT_ONCE):
            imap.deadline_in(ctx.timeout_s)
            wanted = ",".join(str(u) for u in uids[first:first + SIZES_AT_ONCE])
            typ, answer = imap.uid("FETCH", wanted, "(RFC822.SIZE)")
            if typ != "OK":
                raise ListingFailed(f"imap UID FETCH RFC822.SIZE: {said(answer)}")
            for line in answer:
                found = _SIZE.search(line if isinstance(line, bytes) else b"")
                if found:
                    uid, size = (found[1], found[2]) if found[1] else (found[4], found[3])
                    sizes[int(uid)] = int(size)
        return sizes

    def _message(self, imap: Any, key: str, uid: int, size: int, url: str, groups: list[str] | None,
                 ctx: Context) -> Item:
        version = str(uid)  # a UID names one message's bytes for as long as the UIDVALIDITY stays
        if size > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{url}: {size} bytes, over the limit of {ctx.max_item_bytes}")
        imap.deadline_in(ctx.timeout_s)
        try:
            typ, answer = imap.uid("FETCH", str(uid), "(BODY.PEEK[])")
        except TooLarge as exc:
            raise ListingFailed(f"{url}: {exc}") from exc
        data = next((part[1] for part in answer if isinstance(part, tuple)), None) if typ == "OK" else None
        if data is None:  # expunged between the listing and now: gone, as the next run will see
            return Item(key, version, url=url, error=f"{url}: not fetched: {said(answer)}")
        return Item(key, version, Content(f"message-{uid}.eml", data), url=url, groups=groups)


def _groups(imap: Any, folder: str, config: MailConfig, offered: bool) -> tuple[list[str] | None, str | None]:
    """The folder's groups: those of the longest mapped folder holding it, met with those its ACL's readers are
    mapped to (``acl``); or why its messages may not be indexed (every one then listed failed, none indexed). Read
    every run, so that a changed ACL or mapping reaches every message without reading it again."""
    place = GroupMapping(config.groups).place_of(folder)
    access = folder_access(imap, _quoted(folder), config.username, offered) if config.acl else Access()
    access.place = set() if place is None else {place}
    try:
        return PrincipalMapping(config.groups, config.groups_required).groups_of(access, folder), None
    except Unmapped as exc:
        return None, str(exc)


def _number(imap: Any, name: str) -> int:
    values = imap.untagged_responses.get(name) or [b"0"]
    return int(values[-1])


def _quoted(folder: str) -> str:
    """The folder's name as IMAP spells it: modified UTF-7 (RFC 3501 5.1.3, ``Entwürfe`` is ``Entw&APw-rfe``),
    quoted."""
    encoded, pending = [], ""
    for char in folder + "\0":
        if char != "\0" and not 0x20 <= ord(char) <= 0x7E:
            pending += char
            continue
        if pending:
            wide = base64.b64encode(pending.encode("utf-16-be")).decode().rstrip("=").replace("/", ",")
            encoded.append(f"&{wide}-")
            pending = ""
        if char != "\0":
            encoded.append("&-" if char == "&" else char)
    name = "".join(encoded)
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'

