"""Markdown, one part per run of text under one heading path (``{"section": "Install > On Linux"}``; the text
before the first heading ``{}``), read by markdown-it-py (CommonMark with tables), not by rules on lines.

What is kept: the text of headings, paragraphs, list items, block quotes, table rows (cells joined by `` | ``) and
code (as written, indentation kept); the text of links, the alt text of images. What is left out: markup, the tags
of HTML (the text between them stays, scripts and styles go), front matter (a YAML block between ``---`` lines at the
top). The title is the first level-1 heading, if any. Lines nested deeper than ``limits.max_depth`` in quotes or
lists are left out, and the notes say so.

``Sections`` builds such parts for the HTML and e-mail readers too: each part begins with its heading's text, so a
chunk of it says what it is about; a heading with no text under it gives no part of its own (its path is in its
subsections' locations).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentsearch.pipeline.parsing.formats.plain import clean_text, too_long
from agentsearch.pipeline.parsing.parsed import Location, ParsedFile, ParseLimits, ParseRefused, Part
from agentsearch.pipeline.parsing.text_encoding import decode_text

_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_SCRIPT_OR_STYLE = re.compile(r"<(script|style)\b.*?(?:</\1\s*>|\Z)|<!--.*?(?:-->|\Z)", re.DOTALL | re.IGNORECASE)
_CONTAINER_MARKER = re.compile(r">|[-+*](?=[ \t])|\d{1,9}[.)](?=[ \t])")
_CONTAINER_PREFIX = re.compile(r"^(?:[ \t]*(?:>|[-+*][ \t]|\d{1,9}[.)][ \t]))+", re.MULTILINE)
_SCRIPT_OR_STYLE_TAG = re.compile(r"</?(script|style)\b", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>")
_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
# A heading longer than this is cut in the section path (a page that marks whole paragraphs as headings).
_MAX_HEADING_CHARS = 200


class Sections:
    """Parts by heading path: ``heading(level, text)`` opens a section (closing those of its level and deeper),
    ``add(text)`` puts a block of text (a paragraph, a list item, a table row, code) under the open one, ``finish()``
    gives the parts. The text of all parts together is held to ``limits.max_chars`` as it grows."""

    def __init__(self, limits: ParseLimits) -> None:
        self._limits = limits
        self._parts: list[Part] = []
        self._path: list[tuple[int, str]] = []
        self._blocks: list[str] = []
        self._chars = 0

    def heading(self, level: int, text: str) -> None:
        text = " ".join(clean_text(text).split())
        if not text:
            return
        if len(text) > _MAX_HEADING_CHARS:
            text = text[:_MAX_HEADING_CHARS - 1].rstrip() + "…"
        self._close()
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, text))

    def add(self, text: str) -> None:
        text = clean_text(text).strip("\n").rstrip()
        if not text.strip():
            return
        if not self._blocks and self._path:
            self._keep(self._path[-1][1])
        self._keep(text)

    def finish(self) -> list[Part]:
        self._close()
        return self._parts

    @property
    def location(self) -> Location:
        return {"section": " > ".join(text for _, text in self._path)} if self._path else {}

    def _keep(self, text: str) -> None:
        self._chars += len(text) + 2
        if self._chars > self._limits.max_chars:
            raise too_long(self._limits)
        self._blocks.append(text)

    def _close(self) -> None:
        if self._blocks:
            self._parts.append(Part("\n\n".join(self._blocks), self.location))
        self._blocks = []


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    from markdown_it import MarkdownIt

    source = _FRONT_MATTER.sub("", decode_text(path.read_bytes()), count=1)
    # markdown-it-py stops reading what is nested deeper than its maxNesting (20 unless told): at the limit's depth
    # a real document loses nothing, and an absurd one costs no more time than its length.
    tokens = MarkdownIt("commonmark", {"maxNesting": limits.max_depth}).enable("table").parse(source)
    notes = []
    if _deepest_line(source) > limits.max_depth:
        notes.append(f"lines nested more than {limits.max_depth} deep in quotes or lists were left out")
    sections, title = Sections(limits), None
    row: list[str] | None = None
    # The lines of the list or table being read (one block, a line per item or row); its depth of nesting.
    lines: list[str] = []
    nested = 0
    level = 0  # the level of the heading being read, 0 outside one

    def add(text: str) -> None:
        if nested:
            lines.append(text)
        else:
            sections.add(text)

    for token in tokens:
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open", "table_open"):
            nested += 1
        elif kind in ("bullet_list_close", "ordered_list_close", "table_close"):
            nested -= 1
            if not nested:
                sections.add("\n".join(line for line in lines if line.strip()))
                lines.clear()
        elif kind == "heading_open":
            level = int(token.tag[1:])
        elif kind == "heading_close":
            level = 0
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close" and row is not None:
            add(" | ".join(row) if any(row) else "")
            row = None
        elif kind == "inline":
            text = _inline_text(token.children or [])
            if level:
                sections.heading(level, text)
                if level == 1 and title is None and text.strip():
                    title = " ".join(text.split())
            elif row is not None:
                row.append(" ".join(text.split()))
            else:
                add(text)
        elif kind in ("fence", "code_block"):
            add(token.content.rstrip())
        elif kind == "html_block":
            add(strip_tags(token.content))
    parts = sections.finish()
    if not parts:
        raise ParseRefused(f"the file has no text but {notes[0]}" if notes else "the file has no text")
    return ParsedFile(title=title, parts=parts, notes=notes)


def _deepest_line(source: str) -> int:
    """The deepest nesting a line opens by its own quote and list markers (a list and its item are two levels)."""
    deepest = 0
    for prefix in _CONTAINER_PREFIX.finditer(source):
        markers = _CONTAINER_MARKER.findall(prefix.group())
        deepest = max(deepest, sum(1 if marker == ">" else 2 for marker in markers))
    return deepest


def strip_tags(markup: str) -> str:
    """The text of a piece of HTML: tags, comments, scripts and styles left out, entities read."""
    text = html.unescape(_TAG.sub("", _BREAK_TAG.sub("\n", _SCRIPT_OR_STYLE.sub(" ", markup))))
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def _inline_text(tokens: Sequence[Any]) -> str:
    """The text of a paragraph's inline tokens: link text kept, images by their alt text, HTML tags left out."""
    pieces: list[str] = []
    hidden = False  # between an inline <script> or <style> tag and its end
    for token in tokens:
        kind = token.type
        if kind == "html_inline" and _SCRIPT_OR_STYLE_TAG.match(token.content):
            hidden = not token.content.startswith("</")
        elif hidden:
            continue
        elif kind in ("text", "code_inline"):
            pieces.append(token.content)
        elif kind == "softbreak":
            pieces.append(" ")
        elif kind == "hardbreak":
            pieces.append("\n")
        elif kind == "image":
            pieces.append(_inline_text(token.children or []))
        elif kind == "html_inline" and _BREAK_TAG.fullmatch(token.content.strip()):
            pieces.append("\n")
    return "".join(pieces)
