"""Who may read an IMAP folder, from its access control list (RFC 4314, the ACL extension; Dovecot's ``imap_acl``
plugin, Cyrus, ...), as principals the admin's mapping names (``kinds.access.PrincipalMapping``).

``GETACL`` answers each identifier with its rights (``* ACL HR ana lrwstipekxacd $hr lrs anyone l``); an
identifier holding ``r`` (read: SELECT, FETCH, SEARCH) may read the folder's messages. They become one restriction,
any of whose principals may read:

- a user ``ana`` is ``user:ana``; ``owner`` (the folder's owner, as some servers name it) is the account the source
  logs in as, since the folders a source reads are named as that account sees them;
- a group, ``$hr`` (Dovecot's and Cyrus's spelling; ``!$hr``, a group overriding its members' rights, likewise), is
  ``group:hr``;
- ``anyone`` or ``authenticated`` holding ``r``: every account of the server may read it, so the ACL restricts
  nothing (the folder's place in the admin's mapping still may).

Fail closed: a negative right (``-carol r``: every reader but carol) cannot be carried over to document groups,
so the folder is not indexed; neither is one whose ACL the server does not offer (no ``ACL`` capability) or refuses
to show (``GETACL`` needs the administer right, ``a``), nor one whose answer is not understood.

Usage::

    folder_access(imap, '"HR"', "ana", acl_offered(imap))   # Access(restrictions=[{"user:ana", "group:hr"}])
    parse_acl(b'HR ana lrs "ann smith" lr')  # ("HR", [("ana", "lrs"), ("ann smith", "lr")])
"""

from __future__ import annotations

import imaplib
import re
from typing import Any

from agentsearch.pipeline.sources.kinds.access import Access
from agentsearch.pipeline.sources.kinds.imap_client import said

READ = "r"
EVERYONE = frozenset({"anyone", "authenticated"})
_TOKEN = re.compile(rb'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"(){}]+))')


class AclUnreadable(ValueError):
    """The answer is not an ACL this reader understands."""


def parse_acl(line: bytes) -> tuple[str, list[tuple[str, str]]]:
    """One ``ACL`` untagged answer (without ``* ACL``): the folder's name and each identifier with its rights."""
    tokens: list[str] = []
    at = 0
    while at < len(line.rstrip()):
        found = _TOKEN.match(line, at)
        if found is None:
            raise AclUnreadable(f"not an ACL answer at {line[at:at + 40]!r}")
        raw = found[2] if found[1] is None else re.sub(rb"\\(.)", rb"\1", found[1])
        tokens.append(raw.decode("utf-8", "replace"))
        at = found.end()
    if len(tokens) % 2 != 1:
        raise AclUnreadable(f"an identifier without its rights in {line[:200]!r}")
    return tokens[0], [(tokens[i], tokens[i + 1]) for i in range(1, len(tokens), 2)]


def principal(identifier: str, login: str) -> str:
    """The principal the admin's mapping names for an ACL identifier (without its ``-``)."""
    if identifier == "owner":
        return f"user:{login}"
    group = identifier.removeprefix("!")
    if group.startswith("$"):
        return f"group:{group[1:]}"
    return f"user:{identifier}"


def access_of(entries: list[tuple[str, str]], login: str) -> Access:
    """The folder's readers as an ``Access`` (its place left to the caller)."""
    denied = [name[1:] for name, rights in entries if name.startswith("-") and READ in rights]
    if denied:
        return Access(unreadable=f"a negative read right for {', '.join(sorted(denied)[:5])} (RFC 4314 '-'), "
                                 "which document groups cannot express")
    readers = {name for name, rights in entries if not name.startswith("-") and READ in rights}
    if readers & EVERYONE:
        return Access()
    return Access(restrictions=[{principal(name, login) for name in readers}])


def folder_access(imap: Any, quoted: str, login: str, offered: bool) -> Access:
    """The folder's readers as its server's ACL says (``quoted``: its name as sent; ``offered``: the server named
    ``ACL`` among its capabilities after login), or why they cannot be known."""
    if not offered:
        return Access(unreadable="the server offers no ACL extension (RFC 4314)")
    try:
        typ, answer = imap.getacl(quoted)
    except imaplib.IMAP4.error as exc:  # BAD: the command not understood
        return Access(unreadable=f"GETACL refused: {said(exc)}")
    if typ != "OK":  # NO: no administer right on the folder
        return Access(unreadable=f"GETACL refused: {said(answer)}")
    lines = [line for line in answer if line]
    if len(lines) != 1 or not isinstance(lines[0], bytes):
        return Access(unreadable=f"GETACL answered {len(lines)} ACLs or a literal for one folder")
    try:
        _name, entries = parse_acl(lines[0])
    except AclUnreadable as exc:
        return Access(unreadable=str(exc))
    return access_of(entries, login)


def acl_offered(imap: Any) -> bool:
    """Whether the server offers the ACL extension, asked after login (a server may name it only then)."""
    typ, answer = imap.capability()
    return typ == "OK" and bool(answer) and "ACL" in answer[-1].decode("ascii", "replace").upper().split()
