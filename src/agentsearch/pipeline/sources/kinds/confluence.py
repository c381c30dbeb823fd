"""Confluence (Cloud or Data Center) spaces' pages and blog posts, with their comments and attachments, read with
``atlassian-python-api`` over REST API v1.

Each run lists every current page and blog post of the configured spaces (``GET /rest/api/content`` with ``type``
each of ``types``, ``PAGE`` a page, following ``_links.next``) with its version, its ancestors, its read
restrictions and the versions of its comments and attachments (``kinds.confluence_parts``), but not its body: a page
whose version number and comments are the last run's is not read; a new or changed one is read (``GET
/rest/api/content/{id}`` with ``body.storage``, and its comments from ``child/comment`` when it has any) and handed
to the parsers as HTML, its comments after its body, each with its author and date. Each attachment of a format
the parsers read is a document of its own (``{page}/{attachment}``), with its page's permissions and its own
version; one over ``max_item_bytes`` (its listed ``fileSize``) is a failed item, never downloaded. A page no longer
listed (trashed, deleted, moved out of the spaces, or no longer visible to the account) is gone, with its
attachments; so is an attachment deleted. The whole listing is asked for each run rather than a search by
``lastmodified``: a restriction changed, a comment added or a page trashed does not change a page's date, and each
must reach the index.

Permissions (``kinds.access``): a page's place is ``space:KEY``; each read restriction on it or on a page above it
(Confluence's view restrictions are inherited) is a set of ``group:NAME`` and ``user:ACCOUNT_ID`` (``user:USERNAME``
on Data Center) that must be met. A page whose restrictions are not in the listing is asked for them
(``/restriction/byOperation/read``); a refusal there, or an ancestor not listed, leaves it not indexed. A 429 is
retried once after its ``Retry-After`` (the library's ``retry_with_header``), at most ``MAX_RETRY_AFTER_S``.

Usage::

    Confluence().items(ConfluenceConfig(url="https://example.atlassian.net/wiki", username="me@example.org",
                                        token="...", spaces=["HR"], groups={"space:HR": "hr"}), ctx)
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping, SaasConfig, guard_host, unread
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, http_url
from agentsearch.pipeline.sources.kinds.confluence_parts import (
    LISTED_CHILDREN,
    attachments,
    comments_html,
    comments_of,
    page_version,
)
from agentsearch.pipeline.sources.kinds.files import file_content, readable

PAGE = 50
MAX_RETRY_AFTER_S = 60
RESTRICTIONS = "restrictions.read.restrictions.user,restrictions.read.restrictions.group"
LISTED = f"version,ancestors,{RESTRICTIONS},{LISTED_CHILDREN}"


class ConfluenceConfig(SaasConfig):
    url: str = Field(max_length=2000, description="The site's base URL (https://example.atlassian.net/wiki).")
    username: str | None = Field(None, max_length=200, description="The account (an e-mail on Cloud); none: "
                                                                   "the token is a personal access token.")
    token: SecretStr = Field(description="The API token, or a Data Center personal access token (write-only).")
    spaces: list[str] = Field(min_length=1, max_length=100, description="The keys of the spaces read.")
    max_items: int = Field(10_000, ge=1, le=1_000_000, description="Pages listed at most per run.")
    types: list[Literal["page", "blogpost"]] = Field(["page", "blogpost"], min_length=1,
                                                     description="The kinds of content read: pages, blog posts.")
    attachments: bool = Field(True, description="Read the pages' attachments (through the parsers, size-limited).")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return http_url(value).rstrip("/")


class Confluence:
    name: ClassVar[str] = "confluence"
    config_model: ClassVar[type[SourceConfig]] = ConfluenceConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: ConfluenceConfig, ctx: Context) -> Iterator[Item]:
        from requests import RequestException

        guard_host(config.url, ctx)
        client = _client(config, ctx)
        mapping = PrincipalMapping.of(config)
        listed = 0
        for space in config.spaces:
            try:
                pages = [page for kind in config.types for page in self._pages(client, config, space, kind)]
            except RequestException as exc:
                raise ListingFailed(f"confluence space {space}: {_said(exc)}") from exc
            restricted: dict[str, list[set[str]] | str | None] = {
                str(page["id"]): _restrictions(page) for page in pages}
            for page in pages:
                if listed >= config.max_items:
                    ctx.partial = (f"{config.url}: more than {config.max_items} pages (max_items): the rest not "
                                   "listed, nothing removed")
                    return
                listed += 1
                yield from self._page(client, config, space, page, restricted, mapping, ctx)

    def _pages(self, client: Any, config: ConfluenceConfig, space: str, kind: str) -> Iterator[dict[str, Any]]:
        answer = client.get("rest/api/content", params={"spaceKey": space, "type": kind, "status": "current",
                                                        "expand": LISTED, "limit": PAGE})
        while True:
            if not isinstance(answer, dict) or "results" not in answer:
                raise ListingFailed(f"confluence space {space}: the answer is no content listing")
            yield from answer["results"]
            links = answer.get("_links", {})
            if not links.get("next"):
                return
            # The next page's link is relative to the site's base (its context path, /wiki on Cloud, included).
            answer = client.get(f"{links.get('base') or config.url}{links['next']}", absolute=True)

    def _page(self, client: Any, config: ConfluenceConfig, space: str, page: dict[str, Any],
              restricted: dict[str, list[set[str]] | str | None], mapping: PrincipalMapping, ctx: Context
              ) -> Iterator[Item]:
        from requests import RequestException

        key = str(page["id"])
        label = f"confluence {page.get('type', 'page')} {key} ({page.get('title', '')})"
        url = f"{config.url}{page.get('_links', {}).get('webui', f'/pages/viewpage.action?pageId={key}')}"
        try:
            version = page_version(page, comments_of(client, config.url, page))
        except RequestException as exc:  # its comments' versions unknown: kept as it was, its attachments too
            yield Item(key, "", url=url, error=f"{label}: its comments: {_said(exc)}")
            yield from _kept(f"{key}/", ctx, None)
            return
        access = Access(place={f"space:{space}"})
        for level in [*[str(a["id"]) for a in page.get("ancestors", [])], key]:
            if level not in restricted:
                access.unreadable = f"the page above it, {level}, is not listed: its restrictions are unknown"
                break
            found = restricted[level]
            if found is None:  # not in the listing's answer: asked for, once a run
                found = restricted[level] = _asked(client, level)
            if isinstance(found, str):
                access.unreadable = found
                break
            access.restrictions.extend(found)
        known, groups = unread(mapping, access, label, key, version, url, ctx)
        if known is None:
            try:
                full = client.get(f"rest/api/content/{key}", params={"expand": "body.storage,version"})
                comments = comments_html(client, config.url, key) if "+c" in version else ""
            except RequestException as exc:
                known = Item(key, version, url=url, error=f"{label}: {_said(exc)}")
            else:
                title = str(full.get("title") or page.get("title") or key)
                body = full.get("body", {}).get("storage", {}).get("value", "")
                data = (f"<html><head><title>{html.escape(title)}</title></head><body>{body}{comments}"
                        "</body></html>").encode()
                known = Item(key, version, Content(f"{key}.html", data, title), url=url, groups=groups)
        yield known
        if config.attachments and not known.withhold:
            try:
                listed = attachments(client, config.url, page)
            except RequestException as exc:
                # Its attachments kept as they were: a listing that failed removes nothing.
                yield Item(f"{key}/attachments", "", error=f"{label}: its attachments: {_said(exc)}")
                yield from _kept(f"{key}/", ctx, groups)
                return
            for attachment in listed:
                item = self._attachment(client, config, key, attachment, access, mapping, label, ctx)
                if item is not None:
                    yield item

    def _attachment(self, client: Any, config: ConfluenceConfig, page_key: str, attachment: dict[str, Any],
                    access: Access, mapping: PrincipalMapping, label: str, ctx: Context) -> Item | None:
        """An attachment: the page's permissions, its own version; its bytes read only when that moved."""
        from requests import RequestException

        name = str(attachment.get("title") or attachment.get("id"))
        key, version = f"{page_key}/{attachment.get('id')}", str(attachment.get("version", {}).get("number", ""))
        download = str(attachment.get("_links", {}).get("download", ""))
        url = f"{config.url}{download.split('?', 1)[0]}"
        label = f"{label}, attachment {name}"
        if not readable(name) or not download:
            return None  # a format no parser reads: not an item
        known, groups = unread(mapping, access, label, key, version, url, ctx)
        if known is not None:
            return known
        size = int(attachment.get("extensions", {}).get("fileSize") or 0)
        if size > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{label}: {size} bytes, over the limit of {ctx.max_item_bytes}")
        try:
            data = client.get(f"{config.url}{download}", absolute=True, not_json_response=True)
        except RequestException as exc:
            return Item(key, version, url=url, error=f"{label}: {_said(exc)}")
        if not isinstance(data, bytes) or len(data) > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{label}: over the limit of {ctx.max_item_bytes} bytes")
        return Item(key, version, file_content(name, data), url=url, groups=groups)


def _kept(prefix: str, ctx: Context, groups: list[str] | None) -> Iterator[Item]:
    """The last run's items under ``prefix`` (a page's attachments), unchanged: a listing that failed removes
    nothing. ``groups`` None: the groups they had."""
    for key, state in ctx.previous.items():
        if key.startswith(prefix):
            yield Item(key, state.get("version", ""), url=state.get("url", ""), memo=state.get("memo", {}),
                       groups=state.get("groups") if groups is None else groups)


def _client(config: ConfluenceConfig, ctx: Context) -> Any:
    from atlassian import Confluence as Client

    secret = config.token.get_secret_value()
    # cloud=False: the REST API v1 paths under the site's base URL, which Cloud and Data Center both serve.
    auth = {"username": config.username, "password": secret} if config.username else {"token": secret}
    return Client(url=config.url, cloud=False, timeout=int(ctx.timeout_s) or 1, retry_with_header=True,
                  max_backoff_seconds=MAX_RETRY_AFTER_S, **auth)


def _restrictions(page: dict[str, Any]) -> list[set[str]] | None:
    """The page's own read restriction (an empty list: none), or None when the listing did not say."""
    read = page.get("restrictions", {}).get("read", {}).get("restrictions")
    if not isinstance(read, dict) or "user" not in read or "group" not in read:
        return None
    return _principals(read)


def _principals(read: dict[str, Any]) -> list[set[str]]:
    principals = {f"group:{g['name']}" for g in read.get("group", {}).get("results", []) if g.get("name")}
    principals |= {f"user:{u.get('accountId') or u.get('username') or u.get('userKey')}"
                   for u in read.get("user", {}).get("results", [])}
    return [principals] if principals else []


def _asked(client: Any, page_id: str) -> list[set[str]] | str:
    """The page's read restriction asked for itself, or why it could not be read."""
    from requests import RequestException

    try:
        answer = client.get(f"rest/api/content/{page_id}/restriction/byOperation/read",
                            params={"expand": "restrictions.user,restrictions.group"})
    except RequestException as exc:
        return f"its read restrictions: {_said(exc)}"
    if not isinstance(answer, dict) or not isinstance(answer.get("restrictions"), dict):
        return "its read restrictions: the answer holds none"
    return _principals(answer["restrictions"])


def _said(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if response is None:
        return f"{type(exc).__name__}: {exc}"
    try:
        message = response.json().get("message", "")
    except ValueError:
        message = response.text[:200]
    return f"HTTP {response.status_code} {message}".strip()
