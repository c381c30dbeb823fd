"""Where a passage stands in its file, in the words a reader sees beside its source: "p. 3", "slide 2",
"Q4, row 7", "Q4, rows 7–12", "Results > Revenue".

A location is what parsing gave the passage's part (``agentsearch.pipeline.parsing.parsed``): ``{"page": k}``,
``{"slide": k}``, ``{"sheet": name, "row": r}`` or ``{"sheet": name, "rows": [first, last]}``, ``{"section": "A > B"}``;
a document sent as text has none (None or ``{}``), and is described by nothing. The PDF report and the email draft print
these words; the web console writes the same ones (``describeLocation`` in src/agentsearch/api/console/locations.js).

Usage::

    describe_location({"page": 3})                        # "p. 3"
    describe_location({"sheet": "Q4", "rows": [7, 12]})   # "Q4, rows 7–12"
    describe_location(None)                               # ""
    f"{title}, {where}" if (where := describe_location(source.location)) else title    # "Q4 report, p. 3"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Between the first and the last row of a range: an en dash, as a printed range is written.
RANGE_DASH = "\u2013"


def _number(value: Any) -> str | None:
    """A page, slide or row number as written; None for what is not one (a bool, a list, an empty string)."""
    if isinstance(value, bool) or value is None or isinstance(value, (list, tuple, dict)):
        return None
    text = str(value).strip()
    return text or None


def _rows(value: Any) -> str | None:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    first, last = (_number(v) for v in value)
    if first is None or last is None:
        return None
    return f"row {first}" if first == last else f"rows {first}{RANGE_DASH}{last}"


def describe_location(location: Mapping[str, Any] | None) -> str:
    """The location in words: its page, slide, sheet and row(s), section, in that order, joined by ", "; "" for
    None, ``{}`` or a location of nothing this knows."""
    if not isinstance(location, Mapping):
        return ""
    pieces: list[str | None] = []
    page, slide = _number(location.get("page")), _number(location.get("slide"))
    pieces.append(f"p. {page}" if page else None)
    pieces.append(f"slide {slide}" if slide else None)
    sheet = location.get("sheet")
    pieces.append(sheet.strip() if isinstance(sheet, str) else None)
    row = _number(location.get("row"))
    pieces.append(f"row {row}" if row else _rows(location.get("rows")))
    section = location.get("section")
    pieces.append(section.strip() if isinstance(section, str) else None)
    return ", ".join(piece for piece in pieces if piece)

