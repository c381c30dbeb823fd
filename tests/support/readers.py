"""Independent readers used by tests to check artifacts."""

from __future__ import annotations

from html.parser import HTMLParser


class HtmlReader(HTMLParser):
    """Collects start tags and text of an HTML document (the standard library's parser, not ours)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)

    def handle_data(self, data) -> None:
        self.text.append(data)
