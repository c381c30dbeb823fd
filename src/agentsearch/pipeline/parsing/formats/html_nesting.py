"""An HTML page's nesting, measured and bounded before it is parsed (``agentsearch.pipeline.parsing.formats.html``): a
linear pass over the tags drops the ones nested deeper than a bound, their text kept, so the parser's tree and the walk
over it stay within the bound whatever the page.

Usage::

    markup, flattened = flatten_deep(markup, max_depth=512)   # flattened: whether any tag was dropped
"""

from __future__ import annotations

import re

# The elements an open <p> ends at, and the headings (their level).
BLOCKS = {"address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "dir",
          "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr", "html",
          "legend", "li", "main", "menu", "nav", "ol", "p", "section", "summary", "table", "tbody", "td", "tfoot",
          "th", "thead", "tr", "ul"}
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# For the depth pass: comments, raw text elements (their content is no markup) and tags.
_TOKEN = re.compile(r"<!--.*?(?:-->|\Z)|<(script|style|textarea|title|xmp|noembed|noframes|plaintext)\b[^<>]*>"
                    r".*?(?:</\1\s*>|\Z)|<(/?)([A-Za-z][^\s/<>]*)([^<>]*)>", re.DOTALL | re.IGNORECASE)
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
         "wbr", "keygen", "frame", "basefont", "bgsound", "image"}
# A start tag of one of these ends an open element of the same group (an unclosed <li> before the next one).
_PEERS = {"p": "p", "li": "li", "dt": "d", "dd": "d", "tr": "tr", "td": "cell", "th": "cell", "option": "option"}
_PEER_SCOPE = {"ul", "ol", "dl", "table", "tbody", "thead", "tfoot", "select", "div", "body", "html"}
_CLOSE_SEARCH = 64  # how far down the open elements an end tag looks for its start


def flatten_deep(markup: str, max_depth: int) -> tuple[str, bool]:
    """``markup`` without the tags of elements nested more than ``max_depth`` deep (their text stays), and whether
    there were any. One pass over the tags with a stack of the open ones, closing what HTML closes without an end tag
    (a ``<p>`` or ``<li>`` before the next); an approximation of the parser's tree, good enough to bound its depth."""
    if _most_open(markup) <= max_depth:
        return markup, False
    open_tags: list[str] = []
    dropped = 0  # start tags dropped and not yet ended: the next end tags are theirs
    cuts: list[tuple[int, int]] = []
    foreign = 0  # depth inside <svg> or <math>, where "/>" ends an element
    for token in _TOKEN.finditer(markup):
        name = token.group(3)
        if name is None:
            continue
        name = name.lower()
        if token.group(2):  # an end tag
            if dropped:
                dropped -= 1
                cuts.append(token.span())
                continue
            for index in range(len(open_tags) - 1, max(len(open_tags) - _CLOSE_SEARCH, 0) - 1, -1):
                if open_tags[index] == name:
                    del open_tags[index:]
                    break
            if name in ("svg", "math"):
                foreign = max(foreign - 1, 0)
            continue
        if name in _VOID or (foreign and token.group(4).rstrip().endswith("/")):
            continue
        _end_peer(open_tags, name)
        if len(open_tags) >= max_depth:
            dropped += 1
            cuts.append(token.span())
            continue
        open_tags.append(name)
        if name in ("svg", "math"):
            foreign += 1
    if not cuts:
        return markup, False
    pieces, last = [], 0
    for start, end in cuts:
        pieces.append(markup[last:start])
        pieces.append(" ")
        last = end
    pieces.append(markup[last:])
    return "".join(pieces), True


def _most_open(markup: str) -> int:
    """At least the depth of the parser's tree: the most elements open at once, counting an end tag only when an
    element of its name is open (a stray ``</span>`` does not hide a ``<div>``) and as if it ended that one alone. A
    quicker pass than ``flatten_deep``'s, enough for most pages, which are far from ``MAX_DEPTH``."""
    open_by_name: dict[str, int] = {}
    depth = most = 0
    for _, end, name, _ in _TOKEN.findall(markup):
        name = name.lower()
        if not name or name in _VOID:
            continue
        if not end:
            open_by_name[name] = open_by_name.get(name, 0) + 1
            depth += 1
            most = max(most, depth)
        elif open_by_name.get(name):
            open_by_name[name] -= 1
            depth -= 1
    return most


def _end_peer(open_tags: list[str], name: str) -> None:
    """Close the open element a start tag ``name`` ends without an end tag: an open ``<p>`` at a block's start, an
    open ``<li>`` (``<dt>``, ``<td>``, ...) at the next of its group within the same list (or table)."""
    if open_tags and open_tags[-1] == "p" and (name in BLOCKS or name in HEADINGS or name == "pre"):
        open_tags.pop()
    group = _PEERS.get(name)
    if group is None:
        return
    for index in range(len(open_tags) - 1, max(len(open_tags) - _CLOSE_SEARCH, 0) - 1, -1):
        if _PEERS.get(open_tags[index]) == group:
            del open_tags[index:]
            return
        if open_tags[index] in _PEER_SCOPE:
            return
