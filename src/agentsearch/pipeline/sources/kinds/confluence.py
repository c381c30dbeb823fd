"""Confluence (Cloud or Data Center) spaces' pages, read with ``atlassian-python-api`` over REST API v1.

Each run lists every current page of the configured spaces (``GET /rest/api/content``, ``PAGE`` a page, following
``_links.next``) with its version, its ancestors and its read restrictions, but not its body: a page whose version
number is the last run's is not read; a new or changed one is read (``GET /rest/api/content/{id}`` with
``body.storage``) and handed to the parsers as HTML. A page no longer listed (trashed, deleted, moved out of the
spaces, or no longer visible to the account) is gone. The whole listing is asked for each run rather than a search
by ``lastmodified``: a restriction changed or a page trashed does not change a page's date, and both must reach
the index.

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
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping, SaasConfig, guard_host, unread
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, http_url

PAGE = 50
MAX_RETRY_AFTER_S = 60
RESTRICTIONS = "restrictions.read.restrictions.user,restrictions.read.restrictions.group"
LISTED = f"version,ancestors,{RESTRICTIONS}"


class ConfluenceConfig(SaasConfig):
    url: str = Field(max_length=2000, description="The site's base URL (https://example.atlassian.net/wiki).")
    username: str | None = Field(None, max_length=200, description="The account (an e-mail on Cloud); none: "
                                                                   "the token is a personal access token.")
    token: SecretStr = Field(description="The API token, or a Data Center personal access token (write-only).")
    spaces: list[str] = Field(min_length=1, max_length=100, description="The keys of the spaces read.")
    max_items: int = Field(10_000, ge=1, le=1_000_000, description="Pages listed at most per run.")

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
                pages = list(self._pages(client, config, space))
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
                yield self._page(client, config, space, page, restricted, mapping, ctx)

    def _pages(self, client: Any, config: ConfluenceConfig, space: str) -> Iterator[dict[str, Any]]:
        answer = client.get("rest/api/content", params={"spaceKey": space, "type": "page", "status": "current",
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
              restricted: dict[str, list[set[str]] | str | None], mapping: PrincipalMapping, ctx: Context) -> Item:
        from requests import RequestException

        key, version = str(page["id"]), str(page.get("version", {}).get("number", ""))
        url = f"{config.url}{page.get('_links', {}).get('webui', f'/pages/viewpage.action?pageId={key}')}"
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
        known, groups = unread(mapping, access, f"confluence page {key} ({page.get('title', '')})", key, version, url,
                               ctx)
        if known is not None:
            return known
        try:
            full = client.get(f"rest/api/content/{key}", params={"expand": "body.storage,version"})
        except RequestException as exc:
            return Item(key, version, url=url, error=f"confluence page {key}: {_said(exc)}")
        title = str(full.get("title") or page.get("title") or key)
        body = full.get("body", {}).get("storage", {}).get("value", "")
        data = f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>".encode()
        return Item(key, version, Content(f"{key}.html", data, title), url=url, groups=groups)


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
