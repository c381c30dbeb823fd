"""A Notion page's properties (a database row's columns) as lines of its document's text and as its metadata.

Each property of a type read here is a line under the title (``- **Status**: Done``), in the order of their names,
and a metadata key that search filters can name (``{"eq": {"key": "status", "value": "Done"}}``): the name
lowercased, each run of characters other than ASCII letters, digits, ``_`` and ``-`` made one ``_`` (``Due date``
is ``due_date``; ``2027 goal``, not starting with a letter, is ``p_2027_goal``). Values: ``select`` and ``status``
their option's name; ``multi_select`` the names (a list in the metadata); ``date`` its start (``start → end`` in
the text); ``people`` each person's name (else their ID); ``number``, ``checkbox``, ``url``, ``email``,
``phone_number`` as they are; ``rich_text`` its plain text; ``formula`` its result. Empty values, the title (the
document's title), and the types that name other pages or change by themselves (``relation``, ``rollup``,
``created_*``, ``last_edited_*``, ``files``) are left out.

Usage::

    lines, metadata = properties(page["properties"])
    # ["- **Due date**: 2026-12-01", "- **Tags**: harvest, silo"], {"due_date": "2026-12-01", "tags": [...]}
"""

from __future__ import annotations

import re
from typing import Any

MAX_KEY = 64
MAX_VALUE = 2000
NOT_KEY = re.compile(r"[^a-z0-9_-]+")


def properties(props: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    lines: list[str] = []
    metadata: dict[str, Any] = {}
    for name in sorted(props):
        shown, value = _value(props[name])
        if value in (None, "", []):
            continue
        lines.append(f"- **{name}**: {shown}")
        key = _key(name)
        if key and key not in metadata:
            metadata[key] = value
    return lines, metadata


def _key(name: str) -> str:
    """A filter's key (``[A-Za-z_][A-Za-z0-9_-]*``), starting with a letter: a name starting otherwise takes ``p_``
    (never ``_``, the project's own keys' mark)."""
    key = NOT_KEY.sub("_", name.strip().lower()).strip("_")
    return (key if key[:1].isalpha() else f"p_{key}")[:MAX_KEY] if key else ""


def _plain(rich: list[dict[str, Any]] | None) -> str:
    return "".join(t.get("plain_text", "") for t in rich or [])[:MAX_VALUE]


def _value(prop: dict[str, Any]) -> tuple[str, Any]:
    """What the text shows of the property, and its metadata value (None: left out)."""
    kind = prop.get("type", "")
    raw = prop.get(kind)
    if kind in ("select", "status"):
        name = (raw or {}).get("name")
        return str(name), name
    if kind == "multi_select":
        names = [o.get("name", "") for o in raw or [] if o.get("name")]
        return ", ".join(names), names
    if kind == "date":
        if not raw or not raw.get("start"):
            return "", None
        end = f" → {raw['end']}" if raw.get("end") else ""
        return f"{raw['start']}{end}", raw["start"]
    if kind == "people":
        names = [p.get("name") or p.get("id", "") for p in raw or []]
        return ", ".join(names), names
    if kind in ("number", "checkbox"):
        return str(raw).lower() if isinstance(raw, bool) else str(raw), raw
    if kind in ("url", "email", "phone_number"):
        return str(raw or ""), raw
    if kind == "rich_text":
        text = _plain(raw)
        return text, text
    if kind == "formula" and isinstance(raw, dict):
        result = raw.get(raw.get("type", ""))
        if isinstance(result, dict):  # a date
            result = result.get("start")
        return ("" if result is None else str(result)), result
    return "", None
