"""A news feed a test serves from ``SiteServer`` (``tests/support/source_servers.py``) and changes between runs: an
Atom document listing entries, each linking to a page of its own.

Usage::

    with SiteServer(tmp_path / "site") as site:
        publish(site, [Story("solar", "Solar farm opens", "The farm by the river ...", day=1)])
        site.url(FEED_PATH)                           # the feed's URL, for a feed source
        publish(site, [...], "/markets/feed.atom")    # another feed of the same site
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

FEED_PATH = "/news/feed.atom"
ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>News</title><id>urn:news</id><updated>2026-11-{day:02d}T06:00:00Z</updated>
{entries}</feed>"""
ENTRY = ('<entry><title>{title}</title><id>urn:news:{slug}</id><updated>2026-11-{day:02d}T06:00:00Z</updated>'
         '<link href="{link}"/><summary>{summary}</summary></entry>')


@dataclass(frozen=True)
class Story:
    slug: str
    title: str
    text: str
    day: int = 1

    @property
    def path(self) -> str:
        return f"/news/{self.slug}.html"


def publish(site, stories: list[Story], feed_path: str = FEED_PATH) -> None:
    """Each story's page written, and the feed at ``feed_path`` listing them all, newest first."""
    for story in stories:
        site.write(story.path, f"<html><head><title>{escape(story.title)}</title></head><body><h1>"
                               f"{escape(story.title)}</h1><p>{escape(story.text)}</p></body></html>")
    entries = "".join(ENTRY.format(title=escape(s.title), slug=s.slug, day=s.day, link=site.url(s.path),
                                   summary=escape(s.text[:120]))
                      for s in sorted(stories, key=lambda s: -s.day))
    site.write(feed_path, ATOM.format(day=max(s.day for s in stories), entries=entries))
