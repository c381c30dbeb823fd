"""The metadata filters users write most, answered from two plain Milvus fields instead of each row's JSON.

Milvus Lite (3.x) evaluates a clause on a JSON key (``metadata["region"] == "emea"``) row by row, parsing every
row's metadata for every search (35 times an unfiltered hybrid search at 10,000 chunks, past the read deadline at
100,000), while ``like``, ``==`` and comparisons on a plain VARCHAR or integer field run over the whole column at
once. Collections made since these fields exist carry, per chunk, written from its metadata at every upsert:

- ``TERMS_FIELD`` (VARCHAR): one 32-hex-digit digest between bars for each fact a filter asks about: the key is
  present (not null), the key holds this string, the key's list holds this string. ``eq``, ``ne``, ``in`` with
  string values and ``exists`` become ``like "%|<digest>|%"`` clauses (a digest is hex: no ``like`` wildcard can be
  in it, and the bars keep one digest from matching inside another).
- ``DAY_FIELD`` (INT64): the publication date (``published``, else ``published_date``, else ``date``: the key
  ``published`` of the filter language) as a number ordered as the stored string is against ``YYYY-MM-DD``
  bounds, so a date ``range`` on ``published`` is two integer comparisons with the same result as the JSON's string
  comparison; ``NO_DAY`` when there is no string to compare.

A missing key makes a JSON clause unknown and ``not`` of unknown stays unknown; a plain field is never unknown.
Each clause is therefore written for its polarity (how many ``not`` stand above it): under an even number it is
true only when the JSON clause is true, under an odd number false only when the JSON clause is false. Milvus keeps a
row when the whole expression is true, which that makes the same rows as the JSON expression (Kleene's logic: a
result that is true with a clause unknown is true whatever the clause is).

Usage::

    terms_value({"region": "emea", "tags": ["solar"]})     # '|0c1f...|5be2...|...|' (sorted digests)
    day_value({"published": "2024-03-01T10:00:00Z"})       # 40480603 (2 * 20240301 + 1)
    term_clause("eq", "region", ["emea"], positive=True)   # 'metadata_terms like "%|<digest>|%"'
    day_clause([(">=", "2024-01-01")], positive=True)      # '(published_day != -9 and published_day >= 40480202)'
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

TERMS_FIELD = "metadata_terms"
TERMS_FIELD_CHARS = 65535
DAY_FIELD = "published_day"
INDEXED_FIELDS = frozenset({TERMS_FIELD, DAY_FIELD})
NO_DAY = -9  # below every day value (the smallest is -1): a chunk without a date string to compare
# Where a document's publication date is kept, in the order recency scoring reads them.
PUBLISHED_KEYS = ("published", "published_date", "date")
_DIGEST_BYTES = 16
_TERM_CHARS = 2 * _DIGEST_BYTES + 1
_SHAPE = "dddd-dd-dd"  # a date bound's shape: the day value orders strings against every string of it


def _digest(kind: str, key: str, value: str = "") -> str:
    # NUL cannot be in a filter's key or value: the three parts cannot run into one another.
    return hashlib.blake2b(f"{kind}\x00{key}\x00{value}".encode(), digest_size=_DIGEST_BYTES).hexdigest()


def _present(key: str) -> str:
    return _digest("?", key)


def _equal(key: str, value: str) -> str:
    return _digest("=", key, value)


def _element(key: str, value: str) -> str:
    return _digest("[", key, value)


def published_value(metadata: Mapping[str, Any]) -> Any:
    """The publication date as the filter language's ``published`` reads it: the first of ``PUBLISHED_KEYS`` set."""
    return next((metadata[k] for k in PUBLISHED_KEYS if metadata.get(k) is not None), None)


def terms_value(metadata: Mapping[str, Any]) -> str:
    """The ``TERMS_FIELD`` value of a chunk with this metadata. Presence and string values first, list elements
    last: a chunk whose metadata would pass the field's size keeps its first list elements only (about 1,900 facts,
    far past what ingestion writes)."""
    keyed = {k: v for k, v in metadata.items() if isinstance(k, str) and k != PUBLISHED_KEYS[0]}
    keyed[PUBLISHED_KEYS[0]] = published_value(metadata)
    facts: list[str] = []
    elements: list[str] = []
    for key, value in keyed.items():
        if value is None:
            continue
        facts.append(_present(key))
        if isinstance(value, str):
            facts.append(_equal(key, value))
        elif isinstance(value, list):
            elements.extend(_element(key, v) for v in value if isinstance(v, str))
    digests = list(dict.fromkeys(facts + sorted(set(elements))))
    digests = digests[: (TERMS_FIELD_CHARS - 1) // _TERM_CHARS]
    return "|" + "|".join(sorted(digests)) + "|" if digests else ""


def date_key(text: str) -> int:
    """A number ordered against ``date_key(bound)`` of every ``YYYY-MM-DD`` bound as ``text`` is against the bound
    as a string: ``2 * YYYYMMDD`` of the greatest date-shaped string at or below ``text``, plus one when ``text`` is
    past it (``2024-03-01T10:00`` sorts after ``2024-03-01`` and before ``2024-03-02``). -1 below them all."""
    digits = ""
    for i, kind in enumerate(_SHAPE):
        c = text[i] if i < len(text) else ""
        lowest, highest = ("0", "9") if kind == "d" else ("-", "-")
        if c and lowest <= c <= highest:
            digits += c if kind == "d" else ""
            continue
        # text leaves the shape here: it sorts just after every date-shaped string before this prefix's first
        # completion, or after every completion of the prefix.
        span, base = 10 ** (8 - len(digits)), int(digits or "0")
        upper = (base + 1) * span - 1 if c > highest else base * span - 1
        return 2 * upper + 1
    return 2 * int(digits) + (1 if len(text) > len(_SHAPE) else 0)


def day_value(metadata: Mapping[str, Any]) -> int:
    """The ``DAY_FIELD`` value: ``date_key`` of the publication date when it is a string, else ``NO_DAY`` (a date
    range is unknown for a number, a list or no date at all)."""
    value = published_value(metadata)
    return date_key(value) if isinstance(value, str) else NO_DAY


def _has(digest: str) -> str:
    return f'{TERMS_FIELD} like "%|{digest}|%"'


def term_clause(op: str, key: str, values: list[Any] | None, positive: bool) -> str | None:
    """The clause on ``TERMS_FIELD`` for ``op`` (``eq``/``ne``: one value, ``in``: the values, ``exists``: none) on a
    metadata key, written for its polarity; None when the field cannot say it (a value that is not a string)."""
    if op == "exists":
        return _has(_present(key))
    if not values or not all(isinstance(v, str) for v in values):
        return None
    absent = f"not {_has(_present(key))}"
    if op == "ne":
        differs = f"not {_has(_equal(key, values[0]))}"
        return f"({_has(_present(key))} and {differs})" if positive else differs
    if op == "eq":
        held = _has(_equal(key, values[0]))
    elif op == "in":
        unique = list(dict.fromkeys(values))
        held = "(" + " or ".join([_has(_equal(key, v)) for v in unique]
                                 + [_has(_element(key, v)) for v in unique]) + ")"
    else:
        return None
    return held if positive else f"({held} or {absent})"


def day_clause(parts: list[tuple[str, Any]], positive: bool) -> str | None:
    """The clause on ``DAY_FIELD`` for a date range on ``published`` given as ``(">=" or "<", "YYYY-MM-DD")``
    comparisons; None for numeric bounds (those read the JSON)."""
    if not parts or not all(isinstance(v, str) and s in (">=", "<") for s, v in parts):
        return None
    compared = " and ".join(f"{DAY_FIELD} {s} {date_key(v)}" for s, v in parts)
    return f"({DAY_FIELD} != {NO_DAY} and {compared})" if positive else f"({DAY_FIELD} == {NO_DAY} or ({compared}))"


def derived_values(metadata: Mapping[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    """The indexed fields' values of a chunk with this metadata, for the fields the collection has."""
    values: dict[str, Any] = {}
    if TERMS_FIELD in fields:
        values[TERMS_FIELD] = terms_value(metadata)
    if DAY_FIELD in fields:
        values[DAY_FIELD] = day_value(metadata)
    return values
