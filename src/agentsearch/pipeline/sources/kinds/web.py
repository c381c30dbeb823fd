"""A web site: from a start page or a sitemap, within the start URL's host and path prefix, honouring robots.txt,
to a page and depth limit.

Each page is asked for with the ETag and Last-Modified the last run kept (``If-None-Match``/``If-Modified-Since``):
a page answered 304 is unchanged, read nothing, and its links are the ones kept. A page answered with a body is
versioned by its ETag, else by its content's hash, so a server without validators costs a read but no re-indexing.
The start URL that cannot be read fails the listing (nothing is removed); another page that cannot be read is a
failed item whose document stays; a page answered 404 or 410 is gone.

Usage::

    Web().items(WebConfig(url="https://example.org/docs/", max_pages=200, max_depth=3), ctx)   # Items, pages first
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import ClassVar
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.sources.fetch import USER_AGENT, Fetched, Fetcher, FetchFailed
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, http_url

MAX_LINKS_KEPT = 500
_LOC = re.compile(rb"<loc>\s*([^<\s]+)\s*</loc>", re.IGNORECASE)
GONE = (404, 410)


class WebConfig(SourceConfig):
    url: str = Field(description="The start page, or a sitemap (sitemap.xml).", max_length=2000)
    max_pages: int = Field(100, ge=1, le=10_000, description="Pages read at most per run.")
    max_depth: int = Field(3, ge=0, le=20, description="Links followed from the start page, at most.")
    username: str | None = Field(None, max_length=200, description="HTTP basic auth's user, when the site asks.")
    password: SecretStr | None = Field(None, description="HTTP basic auth's password (write-only).")

    _http = field_validator("url")(http_url)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.extend(v for k, v in attrs if k == "href" and v)
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False if tag == "title" else self._in_title

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


class Scope:
    """The start URL's host and the folder of its path: what the crawl may read."""

    def __init__(self, start: str) -> None:
        parts = urlsplit(start)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path or "/"
        self.prefix = path if path.endswith("/") else path.rsplit("/", 1)[0] + "/"

    def holds(self, url: str) -> bool:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}" == self.origin and (parts.path or "/").startswith(self.prefix)


def robots(fetcher: Fetcher, origin: str) -> RobotFileParser:
    """The site's robots.txt; missing (4xx), every page may be read; unreadable otherwise, none may."""
    parser = RobotFileParser()
    try:
        parser.parse(fetcher.get(f"{origin}/robots.txt").data.decode("utf-8", "replace").splitlines())
    except FetchFailed as exc:
        everything = exc.status is not None and 400 <= exc.status < 500
        parser.parse(["User-agent: *", "Disallow:" if everything else "Disallow: /"])
    return parser


def page_name(url: str, content_type: str) -> str:
    """A file name for the page whose extension tells the parsers its format (``index.html`` for a folder)."""
    name = PurePosixPath(urlsplit(url).path).name
    if "html" in content_type or not name:
        return (PurePosixPath(name).stem or "index") + ".html"
    return name


class Web:
    name: ClassVar[str] = "web"
    config_model: ClassVar[type[SourceConfig]] = WebConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: WebConfig, ctx: Context) -> Iterator[Item]:
        scope, fetcher = Scope(config.url), ctx.fetcher
        # A sitemap is read whole every run (its pages are asked for with their validators); a start page with its.
        previous = ctx.previous.get(config.url)
        try:
            first = fetcher.get(config.url, **_validators(previous if ctx.cursor.get("sitemap") is None else None))
        except FetchFailed as exc:
            raise ListingFailed(str(exc)) from exc
        allowed = robots(fetcher, scope.origin)
        ctx.cursor["sitemap"] = config.url if _is_sitemap(first) else None
        if ctx.cursor["sitemap"]:
            yield from self._sitemap(first, config, ctx, scope, allowed)
            return
        queue: deque[tuple[str, int, Fetched | None]] = deque([(config.url, 0, first)])
        seen = {config.url}
        read = 0
        while queue and read < config.max_pages:
            url, depth, fetched = queue.popleft()
            if not allowed.can_fetch(USER_AGENT, url):
                continue
            read += 1
            item = self._page(url, fetched, ctx)
            if item is None:
                continue
            yield item
            if depth < config.max_depth:
                for link in item.memo.get("links", []):
                    if link not in seen and scope.holds(link):
                        seen.add(link)
                        queue.append((link, depth + 1, None))

    def _sitemap(self, sitemap: Fetched, config: WebConfig, ctx: Context, scope: Scope,
                 allowed: RobotFileParser) -> Iterator[Item]:
        urls = [u.decode("utf-8", "replace") for u in _LOC.findall(sitemap.data)]
        taken = [u for u in dict.fromkeys(urls) if scope.holds(u) and allowed.can_fetch(USER_AGENT, u)]
        for url in taken[:config.max_pages]:
            item = self._page(url, None, ctx)
            if item is not None:
                yield item

    def _page(self, url: str, fetched: Fetched | None, ctx: Context) -> Item | None:
        previous = ctx.previous.get(url)
        try:
            page = fetched or ctx.fetcher.get(url, **_validators(previous))
        except FetchFailed as exc:
            return None if exc.status in GONE else Item(url, "", error=str(exc))
        if page.status == 304 and previous is not None:
            return Item(url, previous["version"], memo=previous.get("memo", {}))
        version = page.etag or hashlib.sha256(page.data).hexdigest()
        memo: dict = {"etag": page.etag, "last_modified": page.last_modified}
        title = ""
        if "html" in page.content_type:
            parser = _Links()
            parser.feed(page.data.decode("utf-8", "replace"))
            title = " ".join(parser.title.split())
            links = (urldefrag(urljoin(page.url, link))[0] for link in parser.links)
            memo["links"] = list(dict.fromkeys(links))[:MAX_LINKS_KEPT]
        return Item(url, version, Content(page_name(url, page.content_type), page.data, title), memo=memo)


def _validators(previous: dict | None) -> dict[str, str | None]:
    memo = (previous or {}).get("memo", {})
    return {"etag": memo.get("etag"), "last_modified": memo.get("last_modified")}


def _is_sitemap(page: Fetched) -> bool:
    head = page.data[:2000].lstrip()
    return head.startswith(b"<?xml") and (b"<urlset" in head or b"<sitemapindex" in head)
