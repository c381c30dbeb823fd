"""What hangs off a Confluence page or blog post besides its body: its comments, folded into its document, and its
attachments, documents of their own read through the parsers.

The content listing expands both with their versions (``children.comment.version``,
``children.attachment.version``), so a run learns of a comment added, edited or deleted, and of an attachment
changed, without a request per page: a page's version is its own number and, when it has comments, their IDs and
versions (``"3+c1a2b..."``), and a page is read again when either moves. When the expansion is cut (more than the
server's expansion limit, a ``next`` link), they are listed from the page's own ``child/comment`` or
``child/attachment`` instead: one request a run for such a page.

Usage::

    version = page_version(page, comments_of(client, config.url, page))   # "3", or "3+c<hash>" with comments
    html = comments_html(client, config.url, "101")                # "<h2>Comments</h2>..." ("" with none)
    for attachment in attachments(client, config.url, page): ...   # each with its version and download link
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Iterator
from typing import Any

PAGE = 50
LISTED_CHILDREN = "children.comment.version,children.attachment.version"


def comments_of(client: Any, base: str, page: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's comments with their versions: the listing's expansion, else (cut, or not given) its own
    ``child/comment``."""
    listed = _expanded(page, "comment")
    if listed is not None:
        return listed
    return list(_children(client, base, str(page["id"]), "comment", "version"))


def page_version(page: dict[str, Any], comments: list[dict[str, Any]]) -> str:
    """The page's version as a run compares it: its number, and its comments' IDs and versions when it has any."""
    number = str(page.get("version", {}).get("number", ""))
    if not comments:
        return number
    seen = sorted(f"{c.get('id')}:{c.get('version', {}).get('number', '')}" for c in comments)
    return f"{number}+c{hashlib.sha256(','.join(seen).encode()).hexdigest()[:16]}"


def comments_html(client: Any, base: str, content_id: str) -> str:
    """The content's comments (replies too, ``depth=all``) in order, each with its author and date."""
    parts = []
    for comment in _children(client, base, content_id, "comment", "body.storage,version"):
        by = comment.get("version", {}).get("by", {})
        who = by.get("displayName") or by.get("publicName") or by.get("username") or "someone"
        when = str(comment.get("version", {}).get("when", ""))[:10]
        body = comment.get("body", {}).get("storage", {}).get("value", "")
        parts.append(f'<div class="comment"><p><b>{html.escape(who)}</b> ({html.escape(when)}):</p>{body}</div>')
    return f"<h2>Comments</h2>{''.join(parts)}" if parts else ""


def attachments(client: Any, base: str, page: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's attachments as listed (each with ``version``, ``extensions.fileSize``, ``_links.download``)."""
    listed = _expanded(page, "attachment")
    if listed is not None:
        return listed
    return list(_children(client, base, str(page["id"]), "attachment", "version"))


def _expanded(page: dict[str, Any], kind: str) -> list[dict[str, Any]] | None:
    """The children of ``kind`` the listing's expansion holds; None when it holds none, or not all."""
    array = page.get("children", {}).get(kind)
    if not isinstance(array, dict) or not isinstance(array.get("results"), list):
        return None
    if array.get("_links", {}).get("next"):
        return None
    return list(array["results"])


def _children(client: Any, base: str, content_id: str, kind: str, expand: str) -> Iterator[dict[str, Any]]:
    params: dict[str, Any] = {"expand": expand, "limit": PAGE}
    if kind == "comment":
        params["depth"] = "all"
    answer = client.get(f"rest/api/content/{content_id}/child/{kind}", params=params)
    while isinstance(answer, dict):
        yield from answer.get("results", [])
        links = answer.get("_links", {})
        if not links.get("next"):
            return
        answer = client.get(f"{links.get('base') or base}{links['next']}", absolute=True)
