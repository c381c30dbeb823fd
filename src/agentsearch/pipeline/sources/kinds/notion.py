"""The Notion pages shared with an integration, read with ``notion-client``.

Each run lists the pages (``POST /v1/search`` filtered to pages, newest edit first, following ``next_cursor``) with
their ``last_edited_time`` and parent, not their content: a page whose edit time is the last run's is not read; a
new or edited one has its blocks read (``GET /v1/blocks/{id}/children``, paginated, nested blocks to ``MAX_DEPTH``)
and stored as text, its properties (a database row's columns: ``kinds.notion_properties``) under its title and in
its document's metadata. The rows of each database named in ``databases`` are also listed from the database itself
(``GET /v1/databases/{id}`` for its data sources, then ``POST /v1/data_sources/{id}/query``, paginated): Notion's
search is eventually consistent and may not yet hold a row just added or edited, the query does. A property edited
moves the row's ``last_edited_time``, so it is read again like any edit. A page in the trash, archived, or no longer
shared with the integration is gone. Notion's search is the change feed the public API offers; it names no deleted
page, so the listing is read whole each run.

Permissions (``kinds.access``): Notion's public API does not say with whom a page is shared. A page's place is
where it sits: the nearest of itself and the pages and databases above it that the mapping names (``page:ID``,
``database:ID``; ``workspace`` for a top-level page) gives its groups, so moving a page under another changes its
groups at the next run. When the mapping names any place and a page's chain of parents cannot be followed (a page
above it not shared with the integration, ``object_not_found``), its place is unknown and it is not indexed. A 429
is retried after its ``Retry-After`` (the client's own retries, at most ``MAX_RETRY_AFTER_S``).

Usage::

    Notion().items(NotionConfig(token="ntn_...", databases=["00000009-2cf9-4fdf-8782-e53db20768a5"],
                                groups={"page:59833787-2cf9-4fdf-8782-e53db20768a5": "hr"}), ctx)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Annotated, Any, ClassVar

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.security.transports import guarded_client
from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping, SaasConfig, unread
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, http_url
from agentsearch.pipeline.sources.kinds.notion_properties import properties

log = logging.getLogger(__name__)
PAGE = 100
MAX_DEPTH = 3
MAX_RETRY_AFTER_S = 60
TEXT_BLOCKS = ("paragraph", "heading_1", "heading_2", "heading_3", "bulleted_list_item", "numbered_list_item",
               "to_do", "toggle", "quote", "callout", "code")
PREFIX = {"heading_1": "# ", "heading_2": "## ", "heading_3": "### ", "bulleted_list_item": "- ",
          "numbered_list_item": "1. ", "to_do": "- [ ] ", "quote": "> "}


class NotionConfig(SaasConfig):
    token: SecretStr = Field(description="The integration's secret (write-only).")
    url: str = Field("https://api.notion.com", max_length=2000, description="The API's base URL.")
    max_items: int = Field(10_000, ge=1, le=1_000_000, description="Pages listed at most per run.")
    databases: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=100,
        description="Databases (by ID) whose rows are listed from the databases themselves, not only the search.")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return http_url(value).rstrip("/")


class Notion:
    name: ClassVar[str] = "notion"
    config_model: ClassVar[type[SourceConfig]] = NotionConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: NotionConfig, ctx: Context) -> Iterator[Item]:
        from notion_client import Client
        from notion_client.client import RetryOptions
        from notion_client.errors import APIResponseError, HTTPResponseError, RequestTimeoutError

        # The client's connections go through the egress guard: it is handed a guarded httpx client.
        with guarded_client(ctx.fetcher.policy, follow_redirects=False) as http:
            client = Client(client=http, auth=config.token.get_secret_value(), base_url=config.url,
                            timeout_ms=int(ctx.timeout_s * 1000), logger=log,
                            retry=RetryOptions(max_retries=2, max_retry_delay_ms=MAX_RETRY_AFTER_S * 1000))
            mapping = PrincipalMapping.of(config)
            try:
                pages = self._pages(client)
            except (APIResponseError, HTTPResponseError, RequestTimeoutError) as exc:
                raise ListingFailed(f"notion search: {_said(exc)}") from exc
            for database in config.databases:
                try:
                    pages.extend(self._rows(client, database))
                except (APIResponseError, HTTPResponseError, RequestTimeoutError) as exc:
                    raise ListingFailed(f"notion database {database}: {_said(exc)}") from exc
            listed = {page["id"]: page for page in pages}
            parents: dict[str, dict[str, Any] | str] = {}
            for count, page in enumerate(listed.values()):
                if count >= config.max_items:
                    ctx.partial = (f"notion: more than {config.max_items} pages (max_items): the rest not listed, "
                                   "nothing removed")
                    return
                yield self._page(client, page, listed, parents, mapping, ctx)

    def _pages(self, client: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            answer = client.search(filter={"property": "object", "value": "page"}, page_size=PAGE,
                                   sort={"direction": "descending", "timestamp": "last_edited_time"},
                                   **({"start_cursor": cursor} if cursor else {}))
            found.extend(p for p in answer.get("results", [])
                         if p.get("object") == "page" and not p.get("in_trash") and not p.get("archived"))
            cursor = answer.get("next_cursor") if answer.get("has_more") else None
            if not cursor:
                return found

    def _rows(self, client: Any, database_id: str) -> list[dict[str, Any]]:
        """A database's rows, from each of its data sources (``POST /v1/data_sources/{id}/query``): what the
        database holds now, where the search may lag behind an edit."""
        database = client.databases.retrieve(database_id=database_id)
        found: list[dict[str, Any]] = []
        for source in database.get("data_sources") or []:
            cursor = None
            while True:
                answer = client.data_sources.query(data_source_id=source["id"], page_size=PAGE,
                                                   **({"start_cursor": cursor} if cursor else {}))
                found.extend(p for p in answer.get("results", [])
                             if p.get("object") == "page" and not p.get("in_trash") and not p.get("archived"))
                cursor = answer.get("next_cursor") if answer.get("has_more") else None
                if not cursor:
                    break
        return found

    def _page(self, client: Any, page: dict[str, Any], listed: dict[str, dict[str, Any]],
              parents: dict[str, dict[str, Any] | str], mapping: PrincipalMapping, ctx: Context) -> Item:
        from notion_client.errors import APIResponseError, HTTPResponseError, RequestTimeoutError

        key, version, url = page["id"], str(page.get("last_edited_time", "")), str(page.get("url") or page["id"])
        title = _title(page) or key
        known, groups = unread(mapping, self._access(client, page, listed, parents, mapping),
                               f"notion page {key} ({title})", key, version, url, ctx)
        if known is not None:
            return known
        shown, metadata = properties(page.get("properties", {}))
        try:
            lines = [f"# {title}", "", *([*shown, ""] if shown else []), *self._blocks(client, key, 0)]
        except (APIResponseError, HTTPResponseError, RequestTimeoutError) as exc:
            return Item(key, version, url=url, error=f"notion page {key}: {_said(exc)}")
        text = "\n".join(lines)
        return Item(key, version, Content(f"{key}.md", text.encode(), title, as_text=True, metadata=metadata),
                    url=url, groups=groups)

    def _access(self, client: Any, page: dict[str, Any], listed: dict[str, dict[str, Any]],
                parents: dict[str, dict[str, Any] | str], mapping: PrincipalMapping) -> Access:
        """The nearest mapped place holding the page; every place of its chain when none is mapped."""
        chain: list[str] = []
        node: dict[str, Any] | str = page
        principal: str | None = f"page:{page['id']}"
        for _ in range(50):
            if principal is not None:
                chain.append(principal)
                if principal in mapping.groups:
                    return Access(place={principal})
            assert isinstance(node, dict)
            parent = node.get("parent", {})
            kind = parent.get("type")
            if kind == "workspace":
                principal = "workspace"
                chain.append(principal)
                return Access(place={principal} if principal in mapping.groups else set(chain))
            if kind in ("database_id", "data_source_id"):
                # A database's row; on newer API versions its parent names the data source and its database.
                ident, fetch = parent.get("database_id") or parent.get(kind), client.databases.retrieve
                principal = f"database:{ident}"
            elif kind == "page_id":
                ident, fetch, principal = parent.get("page_id"), client.pages.retrieve, f"page:{parent.get('page_id')}"
            elif kind == "block_id":  # inside a block of a page (a column, a toggle): the page is the place
                ident, fetch, principal = parent.get("block_id"), client.blocks.retrieve, None
            else:
                break
            node = listed.get(ident) or self._parent(ident, kind, fetch, parents)
            if isinstance(node, str):
                return Access(place=set(chain), unreadable=node if mapping.groups else None)
        return Access(place=set(chain))

    def _parent(self, ident: str, kind: str, fetch: Any, parents: dict[str, dict[str, Any] | str]
                ) -> dict[str, Any] | str:
        """A parent not listed, asked for once a run; or why it could not be read."""
        from notion_client.errors import APIResponseError, HTTPResponseError

        if ident not in parents:
            try:
                parents[ident] = fetch(ident)
            except (APIResponseError, HTTPResponseError) as exc:
                parents[ident] = f"the {kind.removesuffix('_id')} above it, {ident}: {_said(exc)}"
        return parents[ident]

    def _blocks(self, client: Any, block_id: str, depth: int) -> list[str]:
        lines: list[str] = []
        cursor = None
        while True:
            answer = client.blocks.children.list(block_id=block_id, page_size=PAGE,
                                                 **({"start_cursor": cursor} if cursor else {}))
            for block in answer.get("results", []):
                kind = block.get("type", "")
                if kind in TEXT_BLOCKS:
                    text = "".join(t.get("plain_text", "") for t in block.get(kind, {}).get("rich_text", []))
                    lines.append(f"{'  ' * depth}{PREFIX.get(kind, '')}{text}")
                elif kind == "child_page":
                    lines.append(f"{'  ' * depth}[{block.get('child_page', {}).get('title', '')}]")
                if block.get("has_children") and kind != "child_page" and depth < MAX_DEPTH:
                    lines.extend(self._blocks(client, block["id"], depth + 1))
            cursor = answer.get("next_cursor") if answer.get("has_more") else None
            if not cursor:
                return lines


def _title(page: dict[str, Any]) -> str:
    for prop in page.get("properties", {}).values():
        if prop.get("type") == "title":
            return "".join(t.get("plain_text", "") for t in prop.get("title", []))
    return ""


def _said(exc: Any) -> str:
    code = getattr(exc, "code", "")
    code = getattr(code, "value", code)  # the client's APIErrorCode enum: Notion's own code string
    status = getattr(exc, "status", "")
    return f"HTTP {status} {code}: {exc}".strip() if code else f"{type(exc).__name__}: {exc}"
