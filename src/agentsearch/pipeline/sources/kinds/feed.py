"""A news feed, RSS or Atom (``feedparser``): each entry's linked page read as a document.

An entry is known by its id (its link when it has none) and versioned by its date (``updated``, else
``published``): an entry seen before with the same date is not read again. The feed itself is read every run (with
its ETag and Last-Modified: a 304 reads nothing). A feed shows its latest entries only, so an entry that leaves it
keeps its document (``keeps_missing``). An entry without a link is read from its own summary or content.

Usage::

    Feed().items(FeedConfig(url="https://example.org/news.atom"), ctx)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import Field, field_validator

from agentsearch.pipeline.sources.fetch import FetchFailed
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig
from agentsearch.pipeline.sources.kinds.web import WebConfig, page_name

MAX_ENTRIES = 1000


class FeedConfig(SourceConfig):
    url: str = Field(description="The feed's URL (RSS or Atom).", max_length=2000)
    max_entries: int = Field(200, ge=1, le=MAX_ENTRIES, description="Entries read at most per run.")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        return WebConfig.model_validate({"url": value}).url


class Feed:
    name: ClassVar[str] = "feed"
    config_model: ClassVar[type[SourceConfig]] = FeedConfig
    keeps_missing: ClassVar[bool] = True

    def items(self, config: FeedConfig, ctx: Context) -> Iterator[Item]:
        try:
            fetched = ctx.fetcher.get(config.url, ctx.cursor.get("etag"), ctx.cursor.get("last_modified"))
        except FetchFailed as exc:
            raise ListingFailed(str(exc)) from exc
        if fetched.status == 304:
            return  # nothing new: every entry kept (keeps_missing)
        # Here, not at the top: the API lists every kind of source, and importing feedparser for nothing cost its
        # cold start about 0.1 CPU seconds.
        import feedparser

        parsed = feedparser.parse(fetched.data)
        if parsed.bozo and not parsed.entries:
            raise ListingFailed(f"{config.url}: not a feed ({parsed.get('bozo_exception')})")
        ctx.cursor.update(etag=fetched.etag, last_modified=fetched.last_modified)
        for entry in parsed.entries[:config.max_entries]:
            item = self._entry(entry, ctx)
            if item is not None:
                yield item

    def _entry(self, entry: Any, ctx: Context) -> Item | None:
        link = str(entry.get("link") or "")
        key = str(entry.get("id") or link)
        if not key:
            return None
        version = str(entry.get("updated") or entry.get("published") or "seen")
        previous = ctx.previous.get(key)
        if previous is not None and previous.get("version") == version:
            return Item(key, version, url=link)
        title = str(entry.get("title") or "")
        if not link:
            body = (entry.get("content") or [{}])[0].get("value") or entry.get("summary") or ""
            if not str(body).strip():
                return Item(key, version, error=f"entry {key}: no link and no text")
            return Item(key, version, Content("entry.html", str(body).encode(), title), url=key)
        try:
            page = ctx.fetcher.get(link)
        except FetchFailed as exc:
            return Item(key, version, url=link, error=str(exc))
        return Item(key, version, Content(page_name(page.url, page.content_type), page.data, title), url=link)
