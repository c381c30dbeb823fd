"""A web page's main content, one part per run of text under one heading path (``{"section": "Setup > Linux"}``).

Read with selectolax (lexbor, an HTML5 parser in C) by rules, chosen over trafilatura's main-content extraction by
measurement on 80 pages of the Rust documentation (mdBook and rustdoc) and composed pages (a documentation page, a
news article without semantic markup, a results page with a table, a blog post): both kept the main text and left
out the boilerplate of the composed pages, but trafilatura left out most code listings of the mdBook pages (50 of
112 ``fn main()`` lines kept, against 110), every rustdoc page's level-1 heading and the news article's, and read
8 to 20 pages/s against 50 to 100 for these rules (one process, the same pages); its lxml tree also loses the text
nested more than 256 elements deep.

The rules:

- the main content is the page's one ``<main>`` (or ``role=main``), else its one ``<article>``, else its body;
- left out: scripts, styles, forms' controls, embedded objects; navigation, sidebars, footers and headers outside an
  article (the elements and their ARIA roles); dialogs and hidden elements; blocks whose class or id names them as
  cookie or consent banners, menus, breadcrumbs, share buttons, related links, newsletters, comments or ads. An
  element holding the main content or a level-1 heading is never left out;
- headings (``h1`` to ``h6``) give the section path; paragraphs, list items and other blocks are blocks of text; a
  table's rows are lines of cells joined by `` | `` (a table used for layout, holding headings or tables, is read as
  blocks); ``<pre>`` keeps its lines and indentation.

The title is the page's ``og:title`` (the article's own title), else its ``<title>``. The encoding is the byte-order
mark's, else the one a ``<meta>`` declares, else ``decode_text``'s guess. A page of no text (all script or markup)
is refused.

HTML nesting costs the parser time in the square of its depth (100,000 nested ``<div>`` take lexbor minutes), so a
linear pass first (``agentsearch.pipeline.parsing.formats.html_nesting``) drops the tags nested deeper than
``MAX_DEPTH`` (their text stays, as the text of the element they are in) and the reading says so in its notes. The walk
over the tree is a loop, not recursion.

``read_page`` reads HTML already decoded (an e-mail's HTML body).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsearch.pipeline.parsing.formats.html_nesting import BLOCKS, HEADINGS, flatten_deep
from agentsearch.pipeline.parsing.formats.markdown import Sections
from agentsearch.pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused, Part
from agentsearch.pipeline.parsing.text_encoding import decode_text

NO_TEXT = "the page has no readable text (it is all script or markup)"
# As deep as browsers build a page's tree (Blink's parser stops nesting at 512).
MAX_DEPTH = 512

_SKIPPED = {"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "frame", "object", "embed",
            "video", "audio", "map", "head", "title", "meta", "link", "base", "button", "input", "select", "option",
            "textarea", "datalist", "img", "picture"}
# Left out unless they hold the main content or a level-1 heading.
_BOILERPLATE_TAGS = {"nav", "aside", "footer", "dialog", "menu"}
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog",
                      "menu", "menubar", "toolbar"}
# Words of a class or id that name boilerplate; the first set also inside a word ("cookieBanner", "site-sidebar").
_BOILERPLATE_STEMS = ("cookie", "consent", "gdpr", "newsletter", "sidebar", "breadcrumb", "advert", "navbar",
                      "navigation", "paywall", "skiplink", "topbar", "related", "widget")
_BOILERPLATE_WORDS = {"nav", "menu", "share", "sharing", "social", "related", "footer", "comments", "comment", "ad",
                      "ads", "promo", "popup", "modal", "skip", "toc", "pagination", "pager", "rail", "feedback",
                      "masthead", "sponsor", "sponsored", "subscribe", "signup"}
# Elements whose class or id are looked at (not inline ones: a highlighted code comment is <span class="comment">).
_CONTAINERS = {"div", "section", "ul", "ol", "dl", "table", "form", "header", "p", "details", "aside", "figure"}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_WORD = re.compile(r"[^a-z0-9]+")

_META_CHARSET = re.compile(rb"""<meta\b[^<>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# What the HTML standard reads these labels as.
_CHARSET_ALIASES = {"iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "us-ascii": "cp1252",
                    "ascii": "cp1252", "iso8859-1": "cp1252"}

# A container whose links hold this share of its text is a list of links (see ``_link_lists``).
_LINK_SHARE = 0.6


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    page = read_page(decode_html(path.read_bytes()), limits)
    if not page.parts:
        raise ParseRefused(NO_TEXT)
    return page


def decode_html(data: bytes, declared: str | None = None) -> str:
    """The text of an HTML page's bytes: a byte-order mark decides, then strict UTF-8 (no other encoding passes it
    by accident, and a page or an e-mail part that declares ASCII or Latin-1 is often UTF-8), then ``declared`` (an
    e-mail part's charset), then the page's ``<meta>`` charset, then ``decode_text``'s guess."""
    if data.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return decode_text(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    match = _META_CHARSET.search(data[:4096])
    for label in (declared, match.group(1).decode("ascii") if match else None):
        encoding = _codec(label)
        if encoding is None:
            continue
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue  # declared wrong: guess
    return decode_text(data)


def read_page(markup: str, limits: ParseLimits) -> ParsedFile:
    """The title and main content of an HTML page, as parts by heading path."""
    from selectolax.lexbor import LexborHTMLParser

    markup, flattened = flatten_deep(markup, MAX_DEPTH)
    tree = LexborHTMLParser(markup)
    parts: list[Part] = []
    body = tree.body
    if body is not None:
        root, protected = _main_content(body), _protected(body)
        # A page without a <main> or <article> says nothing of what its content is: its link lists go too, unless
        # they are all it holds (a list of bookmarks).
        for skipped in ([_link_lists(body), set()] if root is body else [set()]):
            sections = Sections(limits)
            _Walk(sections, protected, skipped).run(root)
            parts = sections.finish()
            if parts:
                break
    notes = [f"parts of the page nested more than {MAX_DEPTH} elements deep were read without their structure"]
    return ParsedFile(title=_title(tree), parts=parts, notes=notes if flattened else [])


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = _CHARSET_ALIASES.get(label.lower(), label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # A page that says UTF-16 in its markup is not UTF-16 (a mark would have said so): the standard reads UTF-8.
    return "utf-8" if name.startswith("utf-16") else name


def _title(tree: Any) -> str | None:
    for selector, attribute in (('meta[property="og:title"]', "content"), ('meta[name="og:title"]', "content"),
                                ("head title", None)):
        node = tree.css_first(selector)
        if node is None:
            continue
        text = " ".join(((node.attributes.get(attribute) if attribute else node.text()) or "").split())
        if text:
            return text[:500]
    return None


def _main_content(body: Any) -> Any:
    """The page's one ``<main>`` (or ``role=main``), else its one ``<article>``, else ``body``; an element that holds
    less than a third of the page's text is not taken for its main content."""
    whole = _text_length(body)
    for selector, tags in (("main, [role=main]", ("main",)), ("article", ("article",))):
        found = [node for node in body.css(selector) if not _inside(node, tags)]
        if len(found) == 1 and 3 * _text_length(found[0]) >= whole:
            return found[0]
    return body


def _text_length(node: Any) -> int:
    """About how much text an element shows: its text but that of its scripts and styles."""
    hidden = sum(len(inner.text()) for inner in node.css("script, style, noscript, template"))
    return len(node.text()) - hidden


def _inside(node: Any, tags: tuple[str, ...]) -> bool:
    """Whether ``node`` is inside an element of ``tags`` (or of ``role=main`` when ``tags`` holds "main")."""
    parent = node.parent
    while parent is not None:
        if parent.tag in tags or ("main" in tags and (parent.attributes.get("role") or "").lower() == "main"):
            return True
        parent = parent.parent
    return False


def _protected(body: Any) -> set[int]:
    """The elements that hold the main content or a level-1 heading (each with its ancestors), never left out. Not
    an ``<article>``: a page of several holds some in its sidebars."""
    kept: set[int] = set()
    for node in body.css("main, [role=main], h1"):
        while node is not None and node.mem_id not in kept:
            kept.add(node.mem_id)
            node = node.parent
    return kept


def _link_lists(root: Any) -> set[int]:
    """The containers (``_CONTAINERS``) whose text is mostly that of two or more links: menus, lists of related
    pages, archives. One pass over the tree with a stack, summing each element's characters, link characters and
    links into its parent's as it is left."""
    found: set[int] = set()
    sums: dict[int, list[int]] = {0: [0, 0, 0]}  # characters, characters in links, links
    stack: list[tuple[Any, int, bool]] = [(root, 0, False)]
    while stack:
        node, parent, leaving = stack.pop()
        if leaving:
            chars, link_chars, links = sums.pop(node.mem_id)
            if node.tag == "a":
                link_chars, links = chars, links + 1
            if node.tag in _CONTAINERS and links >= 2 and link_chars >= _LINK_SHARE * chars:
                found.add(node.mem_id)
            total = sums[parent]
            total[0], total[1], total[2] = total[0] + chars, total[1] + link_chars, total[2] + links
        elif node.tag == "-text":
            sums[parent][0] += len((node.text_content or "").strip())
        elif node.is_element_node and node.tag not in _SKIPPED:
            sums[node.mem_id] = [0, 0, 0]
            stack.append((node, parent, True))
            stack.extend((child, node.mem_id, False) for child in reversed(list(node.iter(include_text=True))))
    return found


def _is_boilerplate(tag: str, attributes: dict[str, str | None], in_article: bool) -> bool:
    if tag in _SKIPPED:
        return True
    if "hidden" in attributes or (attributes.get("aria-hidden") or "").lower() == "true":
        return True
    if _HIDDEN_STYLE.search(attributes.get("style") or ""):
        return True
    if tag in _BOILERPLATE_TAGS or (tag == "header" and not in_article):
        return True
    if (attributes.get("role") or "").lower() in _BOILERPLATE_ROLES:
        return True
    if tag not in _CONTAINERS:
        return False
    names = f"{attributes.get('class') or ''} {attributes.get('id') or ''}".lower()
    compact = names.replace("-", "").replace("_", "")
    if any(stem in compact for stem in _BOILERPLATE_STEMS):
        return True
    return not _BOILERPLATE_WORDS.isdisjoint(_WORD.split(names))


class _Walk:
    """One pass over the main content's elements, in document order, with a stack (no recursion): text goes to the
    line being built (a paragraph), the heading or the table cell being read; a block's start or end ends a line."""

    def __init__(self, sections: Sections, protected: set[int], skipped: set[int]) -> None:
        self.sections = sections
        self.protected = protected
        self.skipped = skipped
        self.line: list[str | None] = []  # text, None for a line break
        self.heading: list[str] | None = None
        self.level = 0
        self.row: list[str] | None = None
        self.rows: list[str] = []  # the rows of the data table being read, one block at its end
        self.cell: list[str] | None = None
        self.tables: list[bool] = []  # for each open table: whether it holds data (not layout)
        self.pre = 0
        self.articles = 0  # open <article>, <main> or <section> elements: a <header> inside one is content

    def run(self, root: Any) -> None:
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, leaving = stack.pop()
            if leaving:
                self._leave(node.tag)
                continue
            tag = node.tag
            if tag == "-text":
                self._text(node.text_content or "")
                continue
            if not node.is_element_node:
                continue
            if node is not root and node.mem_id not in self.protected and (
                    node.mem_id in self.skipped or _is_boilerplate(tag, node.attributes, self.articles > 0)):
                continue
            self._enter(tag, node)
            stack.append((node, True))
            children = list(node.iter(include_text=True))
            stack.extend((child, False) for child in reversed(children))
        self._end_line()

    def _sink(self) -> list[Any]:
        if self.heading is not None:
            return self.heading
        if self.cell is not None:
            return self.cell
        return self.line

    def _text(self, text: str) -> None:
        self._sink().append(text)

    def _in_data_table(self) -> bool:
        return bool(self.tables) and self.tables[-1]

    def _enter(self, tag: str, node: Any) -> None:
        if tag in ("article", "main", "section"):
            self.articles += 1
        if tag == "br":
            self._sink().append("\n" if self.pre else " " if self._sink() is not self.line else None)
        elif tag == "table":
            self._end_line()
            self.tables.append(_holds_data(node))
        elif self.heading is not None or self.cell is not None:
            if tag in BLOCKS:
                self._sink().append(" ")
        elif tag in HEADINGS and not self.pre:
            self._end_line()
            self.heading, self.level = [], HEADINGS[tag]
        elif tag == "pre":
            self._end_line()
            self.pre += 1
        elif self._in_data_table() and tag == "tr":
            self._end_line()
            self.row = []
        elif self._in_data_table() and tag in ("td", "th") and self.row is not None:
            self.cell = []
        elif tag in BLOCKS and not self.pre:
            self._end_line()

    def _leave(self, tag: str) -> None:
        if tag in ("article", "main", "section"):
            self.articles -= 1
        if tag in HEADINGS and self.heading is not None and self.level == HEADINGS[tag]:
            text, self.heading = "".join(self.heading), None
            self.sections.heading(self.level, text)
        elif tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if any(self.row):
                self.rows.append(" | ".join(self.row))
            self.row = None
        elif tag == "table":
            self._end_line()
            if self.tables and self.tables.pop():
                self.sections.add("\n".join(self.rows))
                self.rows = []
        elif tag == "pre":
            self._end_line()
            self.pre = max(self.pre - 1, 0)
        elif tag in BLOCKS and not self.pre and self.heading is None and self.cell is None:
            self._end_line()

    def _end_line(self) -> None:
        if not self.line:
            return
        if self.pre:
            text = "".join(piece for piece in self.line if piece is not None)
        else:
            lines: list[str] = []
            current: list[str] = []
            for piece in [*self.line, None]:
                if piece is None:
                    lines.append(" ".join("".join(current).split()))
                    current = []
                else:
                    current.append(piece)
            text = "\n".join(line for line in lines if line)
        self.line = []
        self.sections.add(text)


def _holds_data(table: Any) -> bool:
    """Whether a table holds data (rows of cells), not a page's layout: no headings or tables inside it."""
    role = (table.attributes.get("role") or "").lower()
    # A node's css() finds the node itself too: the table is one of its tables.
    return role not in ("presentation", "none") and not table.css("h1, h2, h3, h4, h5, h6") and len(
        table.css("table")) == 1
